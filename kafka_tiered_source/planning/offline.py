"""Planning without a broker: find the tiered segments by listing the object store.

With no ``kafka.bootstrap.servers``, ``remote.storage.uri`` (or the explicit fetcher options) and
the ``aiven`` or ``kafka-local-tiered`` layout, the store itself is the catalogue:

1. One listing under the layout's prefix (per named topic, under ``{prefix}{topic}-``; the whole
   prefix for ``subscribePattern``); every key is parsed back into (topic, topic id,
   partition, base offset, segment id, suffix) with the inverse of the layout's key function
   (:mod:`kafka_tiered_source.storage.layouts`).  Keys of any other shape are ignored.
2. ``subscribe`` / ``subscribePattern`` / ``assign`` are resolved against the topics found.
3. Per partition, the segments in base-offset order.  End offsets come from the Aiven manifest's
   ``remoteLogSegmentMetadata`` when present, else from the segment's offset index's last entry
   plus a walk of the batch headers of the tail (one ranged GET of the tail).  Not from the next
   segment's base offset: compaction leaves gaps between segments, and a range promising
   offsets that its bytes do not hold would read as a short read.  Sizes: the manifest's chunk index (Aiven), the listed ``.log`` size
   (kafka-local-tiered).  Aiven: what the reader needs of each manifest (size, chunk table)
   travels with the tasks as ``RemoteSegment.manifest_info``, so executors GET no manifest.
4. Offsets: ``earliest`` is the first tiered base offset, ``latest`` the offset after the last
   tiered one (read_committed: after the last *stable* tiered one, see below).
5. read_committed: the aborted transactions come from the ``.txnindex`` of every listed segment
   of the partition; each task gets those valid at its first offset (the marker at or after it).

What cannot be known offline, and what is done about it:

* **Records not tiered yet.**  Only what lies in remote storage is readable: an ``endingOffsets``
  past the last tiered offset is a :class:`ConfigError` naming the partition and that offset.
  Partitions with nothing tiered do not appear at all (the partition count is the broker's).
* **Which copy is the live one.**  The broker's remote log metadata (``COPY_FINISHED``) is not
  visible.  A copy that is incomplete (Aiven: no ``.rsm-manifest``, which the plugin writes
  last; kafka-local-tiered: no ``.log`` or ``.index``) is skipped with a warning.  Two complete
  copies of the same base offset (a re-upload after a failed copy) are refused with both segment
  ids: picking one would be a guess.  Overlapping segments (known from manifests) are refused too.
* **A topic deleted and re-created** leaves two topic ids under one name: refused, naming both
  (the objects of the deleted one are due for deletion by the broker; offline we cannot tell
  which one is current).
* **Transactions still open at the end of the tiered range.**  Their markers are in segments that
  are not tiered (maybe not even written): whether they abort is unknown.  read_committed
  therefore stops at the first offset of the earliest such transaction — the offline
  counterpart of the last stable offset.  Kafka uploads each segment with the producer state
  snapshot taken at the next segment's base offset; the last segment's snapshot lists exactly
  the transactions ongoing there (``currentTxnFirstOffset``), one small GET.  When that snapshot
  is empty or unreadable, batch headers are walked from the last point the transaction indexes
  prove stable (the largest ``lastStableOffset`` of their entries) to the end of the tiered
  range; that walk reads those segments' data (the whole tiered range when no transaction was
  ever aborted).  ``latest`` is that offset; an ``endingOffsets`` past it is an error naming the
  producer and the transaction's first offset.
* **Timestamps.**  ``startingTimestamp`` / ``endingTimestamp`` / ``*OffsetsByTimestamp`` are
  refused offline (by option name); they need ListOffsets.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from ..errors import ConfigError, DataLossError, OfflinePlanningError, SegmentFormatError
from ..model import EARLIEST, LATEST
from ..records.header import iter_headers
from ..storage import aiven
from ..storage.layouts import listing_prefix, parse_aiven_key, parse_local_tiered_key
from ..storage.indexes import (AbortedTxn, parse_offset_index, parse_producer_snapshot,
                               parse_txn_index)
from ..storage.segment import RemoteSegment
from .partitions import (AbortedTransaction, PartitionTxnInfo, PartitionWork, ReadTask,
                         SegmentSlice, plan_read_tasks)
from .planner import PartitionRange, Plan

log = logging.getLogger(__name__)

# Objects a segment copy must have to be complete, per layout.
_REQUIRED = {"aiven": frozenset({aiven.SUFFIX_LOG, aiven.SUFFIX_INDEXES, aiven.SUFFIX_MANIFEST}),
             "kafka-local-tiered": frozenset({"log", "index"})}
_SHOWN_TOPICS = 20




@dataclass
class TieredPartition:
    """What remote storage holds of one partition, segments in offset order."""
    topic: str
    partition: int
    topic_id: str
    segments: list[RemoteSegment]

    @property
    def earliest(self) -> int:
        return self.segments[0].base_offset

    @property
    def last_offset(self) -> int:
        return self.segments[-1].end_offset


class OfflinePlanner:
    """Plans a read from remote storage alone.  ``fetcher`` must be able to list objects."""

    def __init__(self, options, fetcher):
        self.options = options
        self.fetcher = fetcher
        self.config = options.storage
        self._indexes: dict[str, bytes | None] = {}   # segment id -> offset index

    # -- 1. the catalogue ----------------------------------------------------------------------
    def catalog(self, *, everything: bool = False) -> dict:
        """``{topic: {topic_id: {partition: {(base, segment_id): {suffix: size}}}}}``."""
        c = self.config
        prefix = listing_prefix(c.layout, c.prefix)
        if c.layout == "aiven":
            parse = lambda key: parse_aiven_key(key, c.prefix)   # noqa: E731
        elif c.layout == "kafka-local-tiered":
            parse = lambda key: parse_local_tiered_key(key, c.prefix,   # noqa: E731
                                                       padded_offsets=c.padded_offsets)
        else:
            raise ConfigError("without kafka.bootstrap.servers the layout must be aiven or "
                              "kafka-local-tiered (template keys cannot be listed back into "
                              "segments)", option="remote.storage.layout")
        from ..model import SubscribePattern
        # Named topics: list only under "{prefix}{topic}-" (both layouts start a key with it),
        # so a bucket shared by many topics is not listed whole.  Longer names sharing the stem
        # ("orders-v2") are listed too and dropped by the exact-name look-up later.
        strategy = self.options.strategy
        prefixes = ([prefix] if everything or isinstance(strategy, SubscribePattern)
                    else [f"{prefix}{t}-" for t in sorted(set(strategy.topics))])
        out: dict = {}
        ignored = 0
        for pfx in prefixes:
            for key, size in self.fetcher.list_objects(pfx):
                k = parse(key)
                if k is None:
                    ignored += 1
                    continue
                seg = (out.setdefault(k.topic, {}).setdefault(k.topic_id, {})
                       .setdefault(k.partition, {}).setdefault((k.base_offset, k.segment_id), {}))
                seg[k.suffix] = size
        if ignored:
            log.info("offline listing under %r: %d keys are not %s segment objects and were ignored",
                     prefix, ignored, c.layout)
        return out

    # -- 2. topics and partitions --------------------------------------------------------------
    def topic_partitions(self, catalog: dict) -> list[tuple[str, int, str]]:
        from ..model import Assign, SubscribePattern
        strategy = self.options.strategy
        found = sorted(catalog)
        shown = ", ".join(found[:_SHOWN_TOPICS]) + (" ..." if len(found) > _SHOWN_TOPICS else "")
        where = self._where()
        if isinstance(strategy, SubscribePattern):
            names = [t for t in found if strategy.matches(t)]
            if not names:
                raise ConfigError(f"subscribePattern matches none of the topics found in {where} "
                                  f"({shown or 'none'})", option="subscribePattern")
        else:
            option = "assign" if isinstance(strategy, Assign) else "subscribe"
            names = list(strategy.topics)
            for name in names:
                if name not in catalog:
                    # only named topics were listed: list everything once, to say what is there
                    everything = sorted(self.catalog(everything=True))
                    shown = (", ".join(everything[:_SHOWN_TOPICS])
                             + (" ..." if len(everything) > _SHOWN_TOPICS else ""))
                    raise ConfigError(f"topic {name!r} has no tiered segments in {where} (topics "
                                      f"found: {shown or 'none'}); without a broker only tiered "
                                      f"data can be read", option=option)
        out = []
        for name in names:
            ids = catalog[name]
            if len(ids) > 1:
                raise OfflinePlanningError(
                    f"topic {name!r} has segments under two or more topic ids in {where}: "
                    f"{', '.join(sorted(ids))} (the topic was deleted and re-created, and the old "
                    f"one's objects are not deleted yet); without a broker it cannot be told which "
                    f"is current: read with kafka.bootstrap.servers, or remove the stale objects")
            (topic_id, parts), = ids.items()
            if isinstance(strategy, Assign):
                wanted = [tp.partition for tp in strategy.partitions if tp.topic == name]
                for p in wanted:
                    if p not in parts:
                        raise ConfigError(f"assign names partition {name}-{p}, which has no tiered "
                                          f"segments in {where} (partitions with tiered segments: "
                                          f"{sorted(parts)})", option="assign")
            else:
                wanted = sorted(parts)
            out += [(name, p, topic_id) for p in wanted]
        return out

    def _where(self) -> str:
        c = self.config
        return f"{c.fetcher or c.fetcher_class} storage under prefix {c.prefix!r} ({c.layout} layout)"

    # -- 3. segments ---------------------------------------------------------------------------
    def tiered_partition(self, topic: str, partition: int, topic_id: str, copies: dict) -> TieredPartition:
        layout = self.config.layout
        required = _REQUIRED[layout]
        by_base: dict[int, list[tuple[str, dict]]] = {}
        for (base, seg_id), objects in copies.items():
            missing = required - set(objects)
            if missing:
                log.warning("%s-%d: segment %s at offset %d is incomplete (no %s object), skipped: "
                            "an upload that did not finish is never read", topic, partition, seg_id,
                            base, ", ".join(sorted(missing)))
                continue
            by_base.setdefault(base, []).append((seg_id, objects))
        where = f"{topic}-{partition}"
        chosen = []
        for base in sorted(by_base):
            candidates = by_base[base]
            if len(candidates) > 1:
                raise OfflinePlanningError(
                    f"{where}: {len(candidates)} complete copies of the segment at offset {base} "
                    f"(segment ids {', '.join(sorted(s for s, _ in candidates))}); the broker's "
                    f"metadata says which one is COPY_FINISHED, remote storage alone does not: "
                    f"read with kafka.bootstrap.servers, or remove the stale copy")
            chosen.append((base, *candidates[0]))
        if not chosen:
            raise OfflinePlanningError(f"{where}: no complete tiered segment in {self._where()}")
        segments = self._map(lambda c: self._segment(topic, partition, topic_id, *c), chosen)
        # End offsets the manifests did not give: walk the tail of each such segment.  Not
        # "next base - 1": compaction leaves gaps between segments, and a range that promises
        # offsets its bytes do not hold reads as a short (failed) read.
        unknown = [i for i, seg in enumerate(segments) if seg.end_offset < seg.base_offset]
        for i, end in zip(unknown, self._map(lambda i: self._last_offset(segments[i]), unknown)):
            segments[i] = _with_end(segments[i], end)
        for seg, nxt in zip(segments, segments[1:]):
            if seg.end_offset >= nxt.base_offset:
                raise OfflinePlanningError(
                    f"{where}: segments {seg.segment_id} [{seg.base_offset}, {seg.end_offset}] "
                    f"and {nxt.segment_id} (from {nxt.base_offset}) overlap; remote storage "
                    f"alone cannot tell which one the broker serves")
        return TieredPartition(topic, partition, topic_id, segments)

    def _map(self, fn, items) -> list:
        """``fn`` over ``items`` with ``fetch.remote.concurrency`` requests in flight, in order."""
        items = list(items)
        if len(items) <= 1:
            return [fn(i) for i in items]
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max(1, min(self.config.concurrency, len(items))),
                                thread_name_prefix="kts-offline-plan") as pool:
            return list(pool.map(fn, items))

    def _segment(self, topic, partition, topic_id, base, seg_id, objects) -> RemoteSegment:
        """The segment with its size; end_offset is base - 1 when still unknown."""
        seg = RemoteSegment(topic=topic, topic_id=topic_id, partition=partition, segment_id=seg_id,
                            base_offset=base, end_offset=base - 1, size_bytes=objects.get("log"))
        if self.config.layout != "aiven":
            return seg
        m = self.fetcher.manifest(seg)
        end = base - 1
        meta = m.remote_log_segment_metadata
        if isinstance(meta, dict) and isinstance(meta.get("endOffset"), int) \
                and not isinstance(meta.get("endOffset"), bool) and meta["endOffset"] >= base:
            end = meta["endOffset"]
        # What the reader needs of the manifest travels with the tasks: no executor GETs it again.
        return replace(_with_end(seg, end, m.chunk_index.original_file_size),
                       manifest_info=aiven.ManifestInfo.of(m))

    def offset_index(self, seg: RemoteSegment) -> bytes:
        if seg.segment_id not in self._indexes:
            self._indexes[seg.segment_id] = self.fetcher.fetch_index(seg, "offset") or b""
        return self._indexes[seg.segment_id]

    def _index_entries(self, seg: RemoteSegment) -> list[tuple[int, int]]:
        return [(seg.base_offset + rel, pos) for rel, pos in parse_offset_index(self.offset_index(seg))]

    def _last_offset(self, seg: RemoteSegment) -> int:
        """The last offset of a segment: from its offset index's last entry, walk the
        batch headers of the tail (one ranged GET of the tail only)."""
        entries = [(o, p) for o, p in self._index_entries(seg) if 0 <= p < (seg.size_bytes or 0)]
        start = entries[-1][1] if entries else 0
        data = self.fetcher.fetch_log_segment(seg, start, None)
        last = None
        try:
            for h in iter_headers(data):
                last = h.last_offset
        except ValueError as exc:
            raise SegmentFormatError(f"{exc} (reading the tail from byte position {start})",
                                     location=_name(seg)) from None
        if last is None:
            raise SegmentFormatError(f"no complete batch from byte position {start} of segment "
                                     f"{seg.segment_id} ({seg.topic}-{seg.partition}, base offset "
                                     f"{seg.base_offset}): cannot find its last offset",
                                     location=_name(seg))
        return last

    def _checkpoints(self, seg: RemoteSegment) -> tuple:
        o = self.options
        wants_split = ((seg.size_bytes or 0) > o.partition_target_bytes or o.min_partitions
                       or o.max_records_per_partition)
        if not wants_split:
            return ()
        points: list[tuple[int, int]] = []
        for off, pos in self._index_entries(seg):
            if points and (off <= points[-1][0] or pos <= points[-1][1]):
                continue
            if seg.base_offset <= off <= seg.end_offset and 0 <= pos < (seg.size_bytes or 0):
                points.append((off, pos))
        return tuple(points)

    # -- 4. transactions -----------------------------------------------------------------------
    def aborted_entries(self, tp: TieredPartition) -> list[AbortedTxn]:
        out = []
        for seg in tp.segments:
            data = self.fetcher.fetch_index(seg, "transaction")
            if data:
                out += parse_txn_index(data, location=f"{seg.topic}-{seg.partition} segment {seg.segment_id}")
        out.sort(key=lambda e: (e.first_offset, e.last_offset))
        return out

    def open_transactions(self, tp: TieredPartition, entries: list[AbortedTxn]) -> dict[int, int]:
        """``{producer id: first offset}`` of the transactions with records in the tiered range
        and no marker in it.

        Cheap and exact when the last segment carries its producer snapshot (Kafka uploads the
        snapshot taken at the next segment's base offset): its ongoing transactions are the
        answer.  Otherwise (an empty or unreadable snapshot) the batch headers are walked: every
        transaction that starts before a ``.txnindex`` entry's lastStableOffset had its marker
        written by that entry's marker, so the walk starts at the largest one."""
        last = tp.segments[-1]
        data = self.fetcher.fetch_index(last, "producer_snapshot")
        if data:
            try:
                return {pid: first for pid, first in parse_producer_snapshot(data, location=_name(last))
                        if first >= 0}
            except SegmentFormatError as exc:
                log.warning("%s-%d: cannot use the producer snapshot (%s); walking batch headers "
                            "instead", tp.topic, tp.partition, exc)
        stable = max((e.last_stable_offset for e in entries), default=tp.earliest)
        open_first: dict[int, int] = {}
        for seg in tp.segments:
            if seg.end_offset < stable:
                continue
            start = 0
            if seg.base_offset < stable:
                before = [p for o, p in self._index_entries(seg) if o < stable]
                start = before[-1] if before else 0
            data = self.fetcher.fetch_log_segment(seg, start, None)
            for h in iter_headers(data):
                if h.producer_id < 0:
                    continue
                if h.is_control:
                    open_first.pop(h.producer_id, None)
                elif h.is_transactional:
                    open_first.setdefault(h.producer_id, h.base_offset)
        return open_first

    # -- 5. everything -------------------------------------------------------------------------
    def plan(self) -> Plan:
        catalog = self.catalog()
        tps = self.topic_partitions(catalog)
        committed = self.options.read_committed
        ranges, works, entries_by_tp = [], [], {}
        segments = 0
        latest_why: dict = {}
        for topic, p, tid in tps:
            tp = self.tiered_partition(topic, p, tid, catalog[topic][tid][p])
            latest = tp.last_offset + 1
            why = f"the last tiered offset is {tp.last_offset}"
            if committed:
                entries = self.aborted_entries(tp)
                entries_by_tp[(topic, p)] = entries
                open_txns = self.open_transactions(tp, entries)
                if open_txns:
                    pid, first = min(open_txns.items(), key=lambda kv: kv[1])
                    latest = max(first, tp.earliest)   # begun before the tiered range: nothing
                    why = (f"the transaction of producer {pid} from offset {first} has no marker in "
                           f"the tiered range (last tiered offset {tp.last_offset}), so whether it "
                           f"aborted cannot be known without a broker")
                    log.warning("%s-%d: read_committed stops at offset %d offline: %s", topic, p,
                                first, why)
            latest_why[(topic, p)] = why
            ranges.append((tp, latest))
        bounds = self._bounds([(tp.topic, tp.partition, tp.earliest, latest) for tp, latest in ranges])
        out_ranges = []
        for (tp, latest) in ranges:
            key = (tp.topic, tp.partition)
            s, e = bounds[key]
            where = f"{tp.topic}-{tp.partition}"
            if s < tp.earliest:
                if self.options.fail_on_data_loss:
                    raise DataLossError(
                        f"{where}: starting offset {s} is below the first tiered offset "
                        f"{tp.earliest} (deleted by retention, or never tiered); set "
                        f"failOnDataLoss=false to start at {tp.earliest}")
                log.warning("%s: starting offset %d < first tiered offset %d; starting at %d",
                            where, s, tp.earliest, tp.earliest)
                s = tp.earliest
            if e > latest:
                raise ConfigError(f"{where}: ending offset {e} is past what can be read without a "
                                  f"broker (up to offset {latest - 1}): {latest_why[key]}",
                                  option="endingOffsets")
            if s > e:
                raise ConfigError(f"{where}: starting offset {s} is after ending offset {e}",
                                  option="startingOffsets")
            out_ranges.append(PartitionRange(tp.topic, tp.partition, tp.topic_id, s, e,
                                             tp.earliest, latest))
            pieces = []
            for seg in tp.segments:
                first, end = max(s, seg.base_offset), min(e, seg.end_offset + 1)
                if first < end:
                    pieces.append(SegmentSlice(seg, first, end, self._checkpoints(seg)))
            segments += len(pieces)
            if pieces:
                works.append(PartitionWork(tp.topic, tp.partition, tp.topic_id, tuple(pieces)))
        o = self.options
        tasks = plan_read_tasks(works, target_bytes=o.partition_target_bytes,
                                min_partitions=o.min_partitions,
                                max_records_per_partition=o.max_records_per_partition)
        if committed:
            lso = {(r.topic, r.partition): r.latest for r in out_ranges}
            tasks = [_with_txn(t, entries_by_tp, lso) for t in tasks]
        return Plan(tasks, out_ranges, segments, {(r.topic, r.partition): True for r in out_ranges})

    def _bounds(self, parts) -> dict:
        from ..model import (EarliestOffsets, GlobalTimestamp, LatestOffsets,
                                     SpecificOffsets, SpecificTimestamps, TopicPartition)
        out: dict = {}
        for starting in (True, False):
            bound = self.options.starting_offsets if starting else self.options.ending_offsets
            side = "starting" if starting else "ending"
            if isinstance(bound, (GlobalTimestamp, SpecificTimestamps)):
                option = (f"{side}Timestamp" if isinstance(bound, GlobalTimestamp)
                          else f"{side}OffsetsByTimestamp")
                raise ConfigError(f"{option} is not supported without kafka.bootstrap.servers: "
                                  f"offsets for timestamps come from the broker (ListOffsets); "
                                  f"give {side}Offsets instead", option=option)
            given = bound.as_dict() if isinstance(bound, SpecificOffsets) else None
            for topic, p, earliest, latest in parts:
                if isinstance(bound, EarliestOffsets):
                    off = earliest
                elif isinstance(bound, LatestOffsets):
                    off = latest
                elif given is not None:
                    off = given.get(TopicPartition(topic, p))
                    if off is None:
                        raise ConfigError(f"{side}Offsets does not name partition {topic}-{p}; with "
                                          f"specific offsets every partition read must be given",
                                          option=f"{side}Offsets")
                    off = earliest if off == EARLIEST else latest if off == LATEST else off
                else:
                    raise ConfigError(f"unsupported {side}Offsets {bound!r}", option=f"{side}Offsets")
                out.setdefault((topic, p), [None, None])[0 if starting else 1] = off
        return {k: tuple(v) for k, v in out.items()}


def _name(seg: RemoteSegment) -> str:
    return f"{seg.topic}-{seg.partition} segment {seg.segment_id} (base offset {seg.base_offset})"


def _with_end(seg: RemoteSegment, end: int, size: int | None = None) -> RemoteSegment:
    return replace(seg, end_offset=end, size_bytes=seg.size_bytes if size is None else size)


def _with_txn(task: ReadTask, entries_by_tp: dict, lso: dict) -> ReadTask:
    """Per partition of the task, the aborted transactions valid at the first offset it reads:
    those whose ABORT marker is at or after it (an earlier marker was already applied before)
    and that start before the task's end."""
    infos = []
    for topic, p in task.topic_partitions:
        mine = [r for r in task.ranges if (r.topic, r.partition) == (topic, p)]
        first, end = mine[0].offset_start, max(r.offset_end for r in mine)
        aborted = dict.fromkeys(AbortedTransaction(e.producer_id, e.first_offset)
                                for e in entries_by_tp.get((topic, p), ())
                                if e.last_offset >= first and e.first_offset < end)
        infos.append(PartitionTxnInfo(topic, p, lso[(topic, p)], tuple(aborted)))
    return ReadTask(task.index, task.ranges, tuple(infos))


def plan_offline(options) -> Plan:
    """Plan a read from remote storage alone (``options.offline``)."""
    from ..storage.registry import create_fetcher
    fetcher = create_fetcher(options.storage)
    if options.storage.layout == "aiven" and not hasattr(fetcher, "manifest"):
        fetcher.close()
        raise ConfigError(f"fetcher {type(fetcher).__name__} cannot read Aiven manifests, which "
                          f"offline planning needs; use an ObjectStoreFetcher subclass",
                          option="remote.storage.fetcher.class")
    try:
        return OfflinePlanner(options, fetcher).plan()
    finally:
        fetcher.close()
