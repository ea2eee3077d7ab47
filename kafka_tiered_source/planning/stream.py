"""Micro-batches of a stream: where each one starts and ends (Spark-free; the Spark layer's
stream reader calls this).

Offsets are Spark's Kafka JSON, ``{"topic": {"0": 42}}``: the offset each partition reads next.
A micro-batch is planned like a batch read of ``[start, end)`` (:func:`range_options`), so
KIP-1248, the metadata topic or the listing find its tiered segments, tiered offsets are read
directly and the rest through the brokers, and read_committed stops at the LSO.  Planning the
same ``(start, end)`` twice gives the same rows, which is what Spark's retry of a failed
micro-batch needs.

Rate limits follow Spark's Kafka source (``KafkaMicroBatchStream.rateLimit``): the limit is split
over the partitions in proportion to their lag (a share below one offset rounds up so no partition
starves).  ``maxBytesPerTrigger`` splits a byte budget the same way, counted in log bytes with
each partition's bytes per offset from the plan of its lag.  A partition added to a subscribed
topic, or a new topic matching ``subscribePattern``, starts from its earliest offset.
"""
from __future__ import annotations

import json
import logging
import math
import time

from ..errors import ConfigError, DataLossError
from ..model import EARLIEST, LATEST, Assign, EarliestOffsets, GlobalTimestamp, LatestOffsets, \
    SpecificOffsets, SpecificTimestamps, TopicPartition

log = logging.getLogger(__name__)

Offsets = dict   # {"topic": {"0": 42}}


def to_json_offsets(offsets: dict) -> Offsets:
    """``{(topic, partition): offset}`` -> Spark's Kafka offsets JSON (as a dict)."""
    out: dict = {}
    for (topic, p), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = int(off)
    return out


def from_json_offsets(doc, *, what: str = "offset") -> dict:
    """Spark's Kafka offsets JSON (a dict, or its text) -> ``{(topic, partition): offset}``; a
    malformed document (a corrupt checkpoint) is a ConfigError naming the partition."""
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{what} is not Kafka offsets JSON ({exc.msg} at character {exc.pos})",
                              option="startingOffsets") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{what} must be a JSON object of topic -> partition -> offset, got {doc!r:.100}",
                          option="startingOffsets")
    out = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise ConfigError(f"{what} for topic {topic!r} must map partitions to offsets, got {parts!r:.100}",
                              option="startingOffsets")
        for p, off in parts.items():
            if not str(p).isdigit() or isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST:
                raise ConfigError(f"{what} of partition {topic}-{p} is not a partition number and an offset "
                                  f"(got {p!r}: {off!r})", option="startingOffsets")
            out[(topic, int(p))] = off
    return out


def rate_limit(limit: float, start: dict, latest: dict, weight=lambda key, n: n) -> dict:
    """Spark's proportional split of ``limit`` over the partitions' lags (``weight(key, offsets)``
    converts a lag into the limit's unit, offsets by default) -> the end offset per partition."""
    sizes = {k: latest[k] - start.get(k, latest[k]) for k in latest}
    sizes = {k: n for k, n in sizes.items() if n > 0}
    weights = {k: weight(k, n) for k, n in sizes.items()}
    total = float(sum(weights.values()))
    if total < 1:
        return dict(latest)
    out = dict(latest)
    for k, n in sizes.items():
        share = limit * weights[k] / total                  # in the limit's unit
        per = weights[k] / n                                 # units per offset
        offsets = share / per if per > 0 else n
        take = math.ceil(offsets) if offsets < 1 else math.floor(offsets)
        out[k] = min(latest[k], start[k] + take)
    return out


class StreamPlanner:
    """Offsets of a stream over a broker client (``client``) for parsed streaming options."""

    def __init__(self, options, client):
        self.options = options
        self.client = client
        self.target: dict | None = None       # Trigger.AvailableNow: where the query stops
        self._last_batch = time.monotonic()

    # -- what there is
    def topic_partitions(self) -> list[tuple[str, int]]:
        from .online import Planner
        return [(t, p) for t, p, _ in Planner(self.options, self.client).topic_partitions()]

    def _list(self, keys, ts) -> dict:
        by_topic: dict = {}
        for t, p in keys:
            by_topic.setdefault(t, {})[p] = ts
        iso = 1 if self.options.read_committed else 0
        out = {}
        for t, stamps in by_topic.items():
            for p, listed in self.client.list_offsets(t, stamps, isolation_level=iso).items():
                out[(t, p)] = listed.offset
        return out

    def earliest(self, keys) -> dict:
        return self._list(keys, EARLIEST)

    def latest(self, keys) -> dict:
        """High watermarks, or the LSO for read_committed."""
        return self._list(keys, LATEST)

    # -- the stream
    def initial(self) -> dict:
        """Where a new query starts: ``startingOffsets`` (``latest`` by default, as Spark)."""
        keys = self.topic_partitions()
        bound = self.options.starting_offsets
        if isinstance(bound, EarliestOffsets):
            return self.earliest(keys)
        if isinstance(bound, LatestOffsets):
            return self.latest(keys)
        from .bounds import resolve_bound
        return resolve_bound(bound, keys, self.earliest(keys), self.latest(keys), starting=True,
                             offsets_for_times=self._offsets_for_times
                             if isinstance(bound, (GlobalTimestamp, SpecificTimestamps)) else None)

    def _offsets_for_times(self, stamps: dict) -> dict:
        out = {}
        for (t, p), ts in stamps.items():
            out.update(self._list([(t, p)], ts))
        return out

    def available(self, start: dict) -> tuple[dict, dict]:
        """``(start, latest)`` over every partition there is now: partitions not in ``start``
        (new ones) start at their earliest offset."""
        keys = self.topic_partitions()
        latest = self.latest(keys)
        new = [k for k in keys if k not in start]
        begin = {**{k: v for k, v in start.items() if k in latest}, **(self.earliest(new) if new else {})}
        for (t, p), off in list(begin.items()):
            if off > latest[(t, p)]:
                # a checkpoint from another incarnation of the topic, or a mistyped offset
                msg = (f"{t}-{p}: offset {off} is past the log end offset {latest[(t, p)]} (the topic "
                       f"was re-created, or the offset is wrong)")
                if self.options.fail_on_data_loss:
                    raise DataLossError(msg + "; set failOnDataLoss=false to go on from the log end")
                log.warning("%s; going on from the log end", msg)
                begin[(t, p)] = latest[(t, p)]
        if self.target is not None:     # Trigger.AvailableNow: nothing past what existed at its start
            latest = {k: min(v, self.target.get(k, begin.get(k, v))) for k, v in latest.items()}
        return begin, latest

    def prepare_available_now(self) -> None:
        keys = self.topic_partitions()
        self.target = self.latest(keys)

    def next_end(self, start: dict, *, limited: bool) -> dict:
        """The end of the next micro-batch from ``start``; ``start`` itself when nothing is due.
        ``limited``: apply the options' rate limits (Spark passes no limit for some triggers)."""
        begin, latest = self.available(start)
        o = self.options
        end = dict(latest)
        if limited:
            total = sum(max(0, latest[k] - begin[k]) for k in latest)
            if o.min_offsets_per_trigger and total < o.min_offsets_per_trigger and self.target is None \
                    and (time.monotonic() - self._last_batch) * 1000 < o.max_trigger_delay_ms:
                return dict(start)
            if o.max_offsets_per_trigger:
                end = rate_limit(o.max_offsets_per_trigger, begin, end)
            if o.max_bytes_per_trigger:
                per_offset = self.bytes_per_offset(begin, latest)
                end = rate_limit(o.max_bytes_per_trigger, begin, end,
                                 weight=lambda k, n: n * per_offset.get(k, 1.0))
        if end != start:
            self._last_batch = time.monotonic()
        return {**begin, **end}

    def bytes_per_offset(self, begin: dict, latest: dict) -> dict:
        """Log bytes per offset of each partition's lag, from the plan of ``[begin, latest)``."""
        from . import plan
        keys = [k for k in latest if latest[k] > begin.get(k, latest[k])]
        if not keys:
            return {}
        # sizes only: planned read_uncommitted, so no marker past the end is looked for
        planned = plan(range_options(self.options, begin, latest, keys).replace(isolation_level="read_uncommitted"))
        size: dict = {}
        for t in planned.tasks:
            for r in t.ranges:
                k = (r.topic, r.partition)
                size[k] = size.get(k, 0) + r.estimated_bytes
        return {k: size.get(k, 0) / max(1, latest[k] - begin[k]) for k in keys}


def range_options(options, start: dict, end: dict, keys=None):
    """Batch-read options of the micro-batch ``[start, end)`` over ``keys`` (default: the end's
    partitions); a partition without a start begins at its earliest offset."""
    keys = sorted(keys if keys is not None else end)
    tps = tuple(TopicPartition(t, p) for t, p in keys)
    return options.replace(strategy=Assign(tps), streaming=False,
                           starting_offsets=SpecificOffsets(tuple((TopicPartition(t, p), start.get((t, p), EARLIEST))
                                                                  for t, p in keys)),
                           ending_offsets=SpecificOffsets(tuple((TopicPartition(t, p), end[(t, p)]) for t, p in keys)))

