"""What one reader (one Spark task) did and cost, tagged by client id, topic, partition and
storage backend.

* :class:`ReaderMetrics` is the fetcher's observer (every GET attempt, failed ones included)
  plus the reader's own counters (broker fetches and bytes, fallbacks, rows, the bytes a
  broker would have sent for the same offsets).  It also applies the client-side quotas: the
  observer hook runs after each GET, so a reader over its byte or request rate sleeps there
  before its next GET (see :mod:`kafka_tiered_source.quota`).
* :class:`ReadStats` holds the counters of one tag set; :class:`ReadTotals` maps tag sets to
  stats and is what travels: it is the value of the driver's Spark accumulator, the line
  written per task to ``metrics.jsonl.path``, and the input of
  :func:`kafka_tiered_source.cost_report` and of the Prometheus / OTLP exporters.

Everything here adds up exactly across tasks: counters are sums and the latency histogram has
fixed bucket bounds, so merging two histograms is adding their bucket counts.
"""
from __future__ import annotations

import bisect
import contextvars
import threading
import time
from collections import Counter

from ..dataclass import dataclass, field

#: The topic-partition a GET is made for, set by whoever starts it (the prefetcher, which runs
#: ahead of the reader into later partitions); when unset, the reader's current scope counts.
fetch_scope: contextvars.ContextVar = contextvars.ContextVar("kafka_tiered_fetch_scope", default=None)

# Upper bounds (seconds) of the GET latency buckets; one more bucket (+Inf) holds the rest.
# Fixed, so histograms of different tasks merge by adding counts.
LATENCY_BOUNDS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                    30.0, 60.0)

#: Tag names, in the order of a tag tuple.
TAG_NAMES = ("client_id", "topic", "partition", "backend")


class LatencyHistogram:
    """A fixed-bucket histogram of GET latencies (seconds) that merges across tasks."""

    __slots__ = ("counts", "sum")

    def __init__(self, counts=None, total: float = 0.0):
        self.counts = list(counts) if counts is not None else [0] * (len(LATENCY_BOUNDS_S) + 1)
        if len(self.counts) != len(LATENCY_BOUNDS_S) + 1:
            raise ValueError(f"a latency histogram has {len(LATENCY_BOUNDS_S) + 1} buckets, "
                             f"got {len(self.counts)}")
        self.sum = float(total)

    @property
    def count(self) -> int:
        return sum(self.counts)

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BOUNDS_S, seconds)] += 1
        self.sum += seconds

    def merge(self, other: "LatencyHistogram") -> "LatencyHistogram":
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.sum += other.sum
        return self

    def copy(self) -> "LatencyHistogram":
        return LatencyHistogram(self.counts, self.sum)

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile, interpolated linearly inside its bucket (as Prometheus'
        ``histogram_quantile``); None when empty.  Past the last bound it is that bound."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {q}")
        n = self.count
        if n == 0:
            return None
        rank = q * n
        seen = 0
        for i, c in enumerate(self.counts):
            if c and seen + c >= rank:
                if i == len(LATENCY_BOUNDS_S):
                    return LATENCY_BOUNDS_S[-1]
                lo = LATENCY_BOUNDS_S[i - 1] if i else 0.0
                return lo + (LATENCY_BOUNDS_S[i] - lo) * max(rank - seen, 0.0) / c
            seen += c
        return LATENCY_BOUNDS_S[-1]

    def as_dict(self) -> dict:
        return {"bounds_s": list(LATENCY_BOUNDS_S), "counts": list(self.counts), "sum_s": self.sum,
                "p50_s": self.quantile(0.5), "p95_s": self.quantile(0.95), "p99_s": self.quantile(0.99)}

    def __eq__(self, other):
        return isinstance(other, LatencyHistogram) and self.counts == other.counts and \
            abs(self.sum - other.sum) < 1e-9

    def __repr__(self) -> str:
        return f"LatencyHistogram(count={self.count}, p50={self.quantile(0.5)}, p99={self.quantile(0.99)})"


@dataclass
class ReadStats:
    """The counters of one tag set (client id, topic, partition, backend)."""
    remote_requests: int = 0          # GET attempts, failed ones included
    remote_bytes: int = 0             # bytes received from the object store
    remote_errors: Counter = field(default_factory=Counter)   # error type -> failed GETs
    remote_latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    storage_throttled_s: float = 0.0  # back-off slept because the storage throttled (429/503)
    quota_throttled_s: float = 0.0    # slept to stay within the client-side quotas
    broker_throttled_s: float = 0.0   # throttle_time_ms brokers asked for (KIP-13/219), waited out
    broker_fetches: int = 0           # Fetch requests that returned records
    broker_bytes: int = 0             # record bytes that came through brokers
    fallbacks: int = 0                # direct reads that fell back to broker fetch
    fallback_bytes: int = 0           # broker bytes fetched because of a fallback
    fallback_reasons: Counter = field(default_factory=Counter)   # why -> ranges that fell back
    records: int = 0                  # rows produced
    broker_equivalent_bytes: int = 0  # record-batch bytes a broker would have sent instead
    ranges_remote: int = 0
    ranges_broker: int = 0
    remote_wait_s: float = 0.0        # the reader waited for fetched parts: storage latency and
                                      # bandwidth that fetching ahead did not hide

    @property
    def throttled_s(self) -> float:
        return self.storage_throttled_s + self.quota_throttled_s + self.broker_throttled_s

    @property
    def remote_failed(self) -> int:
        return sum(self.remote_errors.values())

    def add(self, other: "ReadStats") -> "ReadStats":
        from dataclasses import fields   # here, not at import: it imports inspect (a plan's cold start)
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, LatencyHistogram):
                a.merge(b)
            elif isinstance(a, Counter):
                a.update(b)
            else:
                setattr(self, f.name, a + b)
        return self

    def copy(self) -> "ReadStats":
        return ReadStats().add(self)

    def as_dict(self) -> dict:
        from dataclasses import fields
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["remote_errors"] = dict(d["remote_errors"])
        d["fallback_reasons"] = dict(d["fallback_reasons"])
        d["remote_latency"] = self.remote_latency.as_dict()
        d["throttled_s"] = self.throttled_s
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ReadStats":
        from dataclasses import fields
        kw = {f.name: d[f.name] for f in fields(cls) if f.name in d}
        kw["remote_errors"] = Counter(d.get("remote_errors") or {})
        kw["fallback_reasons"] = Counter(d.get("fallback_reasons") or {})
        lat = d.get("remote_latency") or {}
        kw["remote_latency"] = LatencyHistogram(lat.get("counts"), lat.get("sum_s", 0.0))
        return cls(**kw)


class ReadTotals:
    """Stats by tag tuple ``(client_id, topic, partition, backend)`` for one read (or several),
    plus the tasks counted and, when known, the read's id and cost model.

    The value of the driver-side accumulator and what :func:`~kafka_tiered_source.cost_report`
    takes.  Merging is exact (sums, fixed-bucket histograms)."""

    def __init__(self, by_tags: dict | None = None, tasks: int = 0, read_id: str | None = None,
                 cost=None, app_id: str | None = None, tasks_planned: int = 0):
        self.by_tags: dict[tuple, ReadStats] = dict(by_tags or {})
        self.tasks = tasks
        # the tasks the read was planned into (0: unknown): fewer ``tasks`` than this means
        # some tasks have not reported (yet), or reported where this channel cannot see
        self.tasks_planned = tasks_planned or 0
        self.read_id = read_id
        self.cost = cost          # a kafka_tiered_source.cost.CostModel, from the read's options
        self.app_id = app_id

    def stats(self, tags: tuple) -> ReadStats:
        s = self.by_tags.get(tags)
        if s is None:
            s = self.by_tags[tags] = ReadStats()
        return s

    def merge(self, other: "ReadTotals") -> "ReadTotals":
        for tags, s in other.by_tags.items():
            self.stats(tags).add(s)
        self.tasks += other.tasks
        self.tasks_planned = max(self.tasks_planned, getattr(other, "tasks_planned", 0) or 0)
        self.read_id = self.read_id or other.read_id
        self.cost = self.cost if self.cost is not None else other.cost
        self.app_id = self.app_id or other.app_id
        return self

    def total(self, **match) -> ReadStats:
        """The sum over tag sets, optionally only those matching ``client_id=``, ``topic=``,
        ``partition=``, ``backend=``."""
        for k in match:
            if k not in TAG_NAMES:
                raise TypeError(f"unknown tag {k!r}; tags are {', '.join(TAG_NAMES)}")
        out = ReadStats()
        for tags, s in self.by_tags.items():
            named = dict(zip(TAG_NAMES, tags, strict=True))
            if all(named[k] == v for k, v in match.items()):
                out.add(s)
        return out

    def grouped(self, *names: str) -> dict[tuple, ReadStats]:
        """Stats summed by the given tag names (e.g. ``grouped("client_id", "topic")``)."""
        idx = [TAG_NAMES.index(n) for n in names]
        out: dict[tuple, ReadStats] = {}
        for tags, s in sorted(self.by_tags.items(), key=lambda kv: tuple(map(str, kv[0]))):
            key = tuple(tags[i] for i in idx)
            out.setdefault(key, ReadStats()).add(s)
        return out

    def fallback_line(self) -> str | None:
        """One line on what came through the brokers because direct reads failed or
        ``fetch.remote.fallback=always`` sent it there: ranges, bytes and why; None when
        nothing did."""
        t = self.total()
        if not t.fallbacks:
            return None
        why = "; ".join(f"{reason} (x{n})" for reason, n in t.fallback_reasons.most_common()) or "unknown"
        return (f"kafka-tiered: {t.fallbacks} tiered ranges went through the brokers instead of remote "
                f"storage, {t.fallback_bytes / 1e6:,.2f} MB: {why}")

    def as_dict(self) -> dict:
        return {"read_id": self.read_id, "app_id": self.app_id, "tasks": self.tasks,
                "tasks_planned": self.tasks_planned,
                "stats": [{**dict(zip(TAG_NAMES, tags, strict=True)), **s.as_dict()}
                          for tags, s in sorted(self.by_tags.items(), key=lambda kv: tuple(map(str, kv[0])))]}

    @classmethod
    def from_dict(cls, d: dict) -> "ReadTotals":
        by_tags = {}
        for row in d.get("stats", ()):
            tags = tuple(row[n] for n in TAG_NAMES)
            by_tags[tags] = ReadStats.from_dict(row)
        return cls(by_tags, d.get("tasks", 0), d.get("read_id"), app_id=d.get("app_id"),
                   tasks_planned=d.get("tasks_planned", 0))

    def __repr__(self) -> str:
        t = self.total()
        return (f"ReadTotals(read_id={self.read_id!r}, tasks={self.tasks}, "
                f"remote_requests={t.remote_requests}, remote_bytes={t.remote_bytes}, "
                f"broker_bytes={t.broker_bytes}, records={t.records})")


class ReaderMetrics:
    """The fetcher observer of one reader plus the reader's own counters, tagged.

    The reader names the topic-partition it is working on with :meth:`scope` before each
    range; GETs are counted under it unless made under a :data:`fetch_scope` of their own (the
    prefetcher's, which fetches ahead into later partitions).  ``quota`` (a :class:`~kafka_tiered_source.quota.ReaderQuota` or None) is charged after
    every GET; the time it makes the GET's thread sleep is counted as ``quota_throttled_s``.
    Picklable: it travels as its tags and quota settings, with empty counters.
    """

    def __init__(self, client_id: str = "kafka-tiered", backend: str = "none", quota=None):
        self.client_id = client_id
        self.backend = backend
        self.quota = quota
        self._lock = threading.Lock()
        self._totals = ReadTotals()
        self._scope: tuple[str, int] = ("", -1)
        self.started = time.time()

    def __reduce__(self):
        return (self.__class__, (self.client_id, self.backend, self.quota))

    def scope(self, topic: str, partition: int) -> None:
        self._scope = (topic, partition)

    def _stats(self, backend: str | None = None) -> ReadStats:
        topic, partition = fetch_scope.get() or self._scope
        return self._totals.stats((self.client_id, topic, partition, backend or self.backend))

    # -- FetchObserver ---------------------------------------------------------------------
    def before_request(self) -> float:
        slept = self.quota.before_get() if self.quota is not None else 0.0
        if slept:
            with self._lock:
                self._stats().quota_throttled_s += slept
        return slept

    def on_request(self, backend, location, bytes_received, latency_s, error_type, throttled_s):
        slept = self.quota.charge(bytes_received) if self.quota is not None else 0.0
        with self._lock:
            s = self._stats(backend)
            s.remote_requests += 1
            s.remote_bytes += bytes_received
            s.remote_latency.observe(latency_s)
            s.storage_throttled_s += throttled_s
            s.quota_throttled_s += slept
            if error_type is not None:
                s.remote_errors[error_type] += 1

    # -- the reader's own counters ---------------------------------------------------------
    def count(self, **deltas) -> None:
        with self._lock:
            s = self._stats()
            for name, delta in deltas.items():
                setattr(s, name, getattr(s, name) + delta)

    def absorb(self, totals: "ReadTotals") -> None:
        """Count what ``totals`` hold as this reader's (the driver's storage check, made before
        any task, travels with the first task)."""
        with self._lock:
            for tags, s in totals.by_tags.items():
                self._totals.stats(tags).add(s)

    def fell_back(self, reason: str) -> None:
        """One range went through the brokers instead, for ``reason``."""
        with self._lock:
            s = self._stats()
            s.fallbacks += 1
            s.fallback_reasons[reason] += 1

    def snapshot(self) -> ReadTotals:
        """A copy of the totals so far (one task)."""
        with self._lock:
            out = ReadTotals(tasks=1, tasks_planned=getattr(self, "tasks_planned", 0))
            for tags, s in self._totals.by_tags.items():
                out.by_tags[tags] = s.copy()
            return out

    def total(self) -> ReadStats:
        return self.snapshot().total()


class ReadHistory:
    """The totals of each read of a session, by read id, oldest first: the value of the
    driver's accumulator (each task adds its :class:`ReadTotals`)."""

    def __init__(self, reads: dict | None = None):
        self.reads: dict[str, ReadTotals] = dict(reads or {})

    def add(self, item) -> "ReadHistory":
        if isinstance(item, ReadHistory):
            # The driver merging what a task sent: once every planned task of a read is in,
            # a read that went through the brokers says so, in one line.
            for totals in item.reads.values():
                self.add(totals)
                merged = self.reads[totals.read_id or "-"]
                if merged.tasks_planned and merged.tasks == merged.tasks_planned:
                    line = merged.fallback_line()
                    if line:
                        import logging
                        logging.getLogger("kafka_tiered_source").warning("%s", line)
            return self
        key = item.read_id or "-"
        if key in self.reads:
            self.reads[key].merge(item)
        else:
            self.reads[key] = ReadTotals().merge(item)
        return self

    def last(self) -> ReadTotals | None:
        return next(reversed(self.reads.values()), None) if self.reads else None

    def __len__(self) -> int:
        return len(self.reads)

    def __repr__(self) -> str:
        return f"ReadHistory({list(self.reads)})"
