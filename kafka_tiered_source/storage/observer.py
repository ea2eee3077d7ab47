"""The metrics hook of the fetchers: every GET attempt, failed ones included, is reported.

Cost accounting counts requests and bytes from here, so a failed GET is still a request (with
0 bytes).  ``location`` is always redacted (no presigned-URL signature ever reaches an observer).
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Protocol, runtime_checkable


@runtime_checkable
class FetchObserver(Protocol):
    def before_request(self) -> float:
        """A GET attempt is about to start (it may sleep here, for a client-side request
        quota); returns the seconds it slept."""

    def on_request(self, backend: str, location: str, bytes_received: int, latency_s: float,
                   error_type: str | None, throttled_s: float) -> None:
        """One GET attempt finished.

        ``error_type`` is the error class name (``RemoteThrottled``, ``RemoteTimeout``, ...) or
        None on success; ``throttled_s`` is the back-off slept after this attempt because the
        storage throttled it (0 otherwise).
        """


class CountingObserver:
    """A thread-safe observer that totals what it sees (used by the benchmarks and tests; a
    handy base for cost accounting).  Picklable: it travels as empty counters."""

    def __init__(self):
        self._lock = threading.Lock()
        self.requests = 0
        self.bytes = 0
        self.errors: Counter = Counter()
        self.by_location: Counter = Counter()
        self.throttled_s = 0.0
        self.latency_s = 0.0

    def before_request(self) -> float:
        return 0.0

    def on_request(self, backend, location, bytes_received, latency_s, error_type, throttled_s):
        with self._lock:
            self.requests += 1
            self.bytes += bytes_received
            self.latency_s += latency_s
            self.throttled_s += throttled_s
            self.by_location[location] += 1
            if error_type is not None:
                self.errors[error_type] += 1

    def reset(self) -> None:
        with self._lock:
            self.requests = self.bytes = 0
            self.errors.clear()
            self.by_location.clear()
            self.throttled_s = self.latency_s = 0.0

    def __reduce__(self):
        return (self.__class__, ())

    def __repr__(self) -> str:
        return (f"CountingObserver(requests={self.requests}, bytes={self.bytes}, "
                f"errors={dict(self.errors)})")
