"""What one reader (one Spark task) did and cost: remote GETs and bytes (from the fetcher's
observer hook), broker fetches and bytes, fallbacks, rows.  Plain counters that add up, so a
driver can total the tasks of a job."""
from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field, fields

from ..storage.observer import CountingObserver


@dataclass
class ReadStats:
    remote_requests: int = 0          # GET attempts, failed ones included
    remote_bytes: int = 0             # bytes received from the object store
    remote_errors: Counter = field(default_factory=Counter)   # error type -> count
    remote_latency_s: float = 0.0
    throttled_s: float = 0.0
    broker_fetches: int = 0           # Fetch requests that returned records
    broker_bytes: int = 0             # record bytes that came through brokers
    fallbacks: int = 0                # direct reads that fell back to broker fetch
    fallback_bytes: int = 0           # broker bytes fetched because of a fallback
    records: int = 0                  # rows produced
    ranges_remote: int = 0
    ranges_broker: int = 0

    def add(self, other: "ReadStats") -> "ReadStats":
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            setattr(self, f.name, a + b if not isinstance(a, Counter) else a + b)
        return self

    def as_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["remote_errors"] = dict(d["remote_errors"])
        return d


class ReaderMetrics(CountingObserver):
    """The fetcher observer of one reader plus the reader's own counters."""

    def __init__(self):
        super().__init__()
        self._own = ReadStats()
        self._own_lock = threading.Lock()

    def count(self, **deltas) -> None:
        with self._own_lock:
            for name, delta in deltas.items():
                setattr(self._own, name, getattr(self._own, name) + delta)

    def snapshot(self) -> ReadStats:
        with self._lock, self._own_lock:
            s = ReadStats(**{f.name: getattr(self._own, f.name) for f in fields(ReadStats)})
            s.remote_errors = Counter(self.errors)
            s.remote_requests = self.requests
            s.remote_bytes = self.bytes
            s.remote_latency_s = self.latency_s
            s.throttled_s = self.throttled_s
            return s
