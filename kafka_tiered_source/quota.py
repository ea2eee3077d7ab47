"""Client-side quotas on remote storage reads, in the spirit of Kafka's KIP-13 client quotas.

A Kafka broker keeps a client within its byte rate by delaying its answers; a reader that goes
to object storage itself has no broker to do that, so it throttles itself: a token bucket per
reader for bytes/s and one for GETs/s.  A GET takes its request token before it starts (the
fetcher's ``before_request`` hook), so concurrent GETs start at most the rate apart; the byte
bucket is charged after each GET (the ``on_request`` hook, in the thread that issued the GET),
and the thread sleeps off any debt before it can issue its next GET.  Long-run throughput is
therefore bounded by the rate whatever the GET sizes; a GET is never split or refused.

Options (all per second, unset = unlimited):

* ``quota.remote.bytes.per.second`` / ``quota.remote.requests.per.second``: per reader (one
  Spark task);
* ``quota.job.remote.bytes.per.second`` / ``quota.job.remote.requests.per.second``: for the
  whole read, split evenly over the tasks planned (a task gets ``job rate / tasks``).  When
  both a per-reader and a job limit are set, the lower one applies.

Buckets start empty at the first GET and hold at most one second of tokens: a reader earns
burst credit only while it is not fetching (decoding), never up front.  With a byte quota the
reader's fetcher fetches the parts of a range one at a time (``fetch.remote.concurrency`` is
not used): parallel parts would all be in flight before the first is charged.
"""
from __future__ import annotations

import threading
import time

from .options.quotas import QuotaConfig

__all__ = ["QuotaConfig", "ReaderQuota", "TokenBucket"]


class TokenBucket:
    """``rate`` tokens per second, at most ``capacity`` banked (default: one second's worth).

    :meth:`charge` takes ``amount`` tokens, going into debt if needed, and sleeps until the
    debt is paid; concurrent callers queue behind each other's debt, so together they stay
    within the rate.  Returns the seconds slept."""

    def __init__(self, rate: float, capacity: float | None = None, *, initial: float = 0.0,
                 clock=time.monotonic, sleep=time.sleep):
        if not rate > 0:
            raise ValueError(f"rate must be > 0, got {rate!r}")
        self.rate = float(rate)
        self.capacity = float(capacity) if capacity is not None else self.rate
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(initial)
        self._at = None     # the bucket starts filling at its first charge, not when built

    def charge(self, amount: float) -> float:
        if amount <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            if self._at is not None:
                self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= amount
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait


class ReaderQuota:
    """The buckets of one reader.  Picklable: rebuilt (empty, on the real clock) from its rates.
    ``clock``/``sleep`` replace the real ones (a test counts what the buckets charge)."""

    def __init__(self, bytes_per_second: float | None = None, requests_per_second: float | None = None, *,
                 clock=time.monotonic, sleep=time.sleep):
        self.bytes_per_second = bytes_per_second
        self.requests_per_second = requests_per_second
        self._bytes = TokenBucket(bytes_per_second, clock=clock, sleep=sleep) if bytes_per_second else None
        # GETs take their token before they start (one in hand for the first), so the GETs of
        # concurrent threads start at most `requests_per_second` apart
        self._requests = (TokenBucket(requests_per_second, initial=1, clock=clock, sleep=sleep)
                          if requests_per_second else None)

    @classmethod
    def for_task(cls, config: QuotaConfig | None, tasks: int) -> "ReaderQuota | None":
        if config is None or not config.enabled:
            return None
        b, r = config.per_reader(tasks)
        return cls(b, r)

    def __reduce__(self):
        return (self.__class__, (self.bytes_per_second, self.requests_per_second))

    def before_get(self) -> float:
        """A GET is about to start: take its request token, sleeping until the request quota
        allows it; returns the seconds slept."""
        return self._requests.charge(1) if self._requests is not None else 0.0

    def charge(self, nbytes: int) -> float:
        """One GET finished having received ``nbytes``: sleep as the byte quota requires (the
        size is known only now); returns the seconds slept."""
        return self._bytes.charge(nbytes) if self._bytes is not None else 0.0

    def __repr__(self) -> str:
        return f"ReaderQuota(bytes/s={self.bytes_per_second}, requests/s={self.requests_per_second})"
