"""Driver-side planning: options → topic-partitions → offset ranges → where each range lives →
read tasks.

1. Metadata resolves the topics and partitions of ``subscribe`` / ``subscribePattern`` /
   ``assign``; ListOffsets resolves ``earliest`` / ``latest`` / timestamps into offsets.
2. Each partition's range ``[start, end)`` is walked with Fetch requests that carry the KIP-1248
   tags.  While the leader answers with a remote location, the range lies in a tiered segment
   and the answer gives the segment id, custom metadata, byte hints and (read_committed) the
   aborted transactions; the walk jumps past the segment.  The first ordinary answer means the
   rest is still on the brokers: it becomes a :class:`BrokerRange`.
3. :func:`~kafka_tiered_source.planning.partitions.plan_read_tasks` packs the pieces into
   coarse tasks by bytes.
4. read_committed: each task gets, per partition, the aborted transactions that are valid at the
   first offset it reads (a location answer for exactly that offset), because an aborted
   transaction whose marker lies before a task's first offset must not be applied again.
5. Aiven layout: a task's fetcher GETs the manifest of every segment it reads, once per segment
   per task, unless the segment carries :class:`~kafka_tiered_source.storage.aiven.ManifestInfo`.
   The planner attaches it for the manifests it has read anyway (segments it split), and reads it
   once here for any other segment that two or more tasks read (one GET instead of one per
   task).  A segment read by a single task costs one manifest GET wherever it is made, so that
   one is left to the executor, where GETs run in parallel.

The walk costs one small request per tiered segment, plus one offset-index GET for segments that
have to be split (Aiven: and their manifest).  No record bytes move through the broker while
planning, unless the broker ignores the KIP-1248 tags: then the first probe (limited to one batch)
is all it sends.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Sequence

from ..errors import BrokerError, ConfigError, DataLossError, RemoteStorageError
from ..ids import uuid_to_str
from ..model import EARLIEST, LATEST
from ..storage import aiven
from ..storage.indexes import parse_offset_index
from ..storage.segment import RemoteSegment
from .partitions import (AbortedTransaction, BrokerRange, PartitionTxnInfo, PartitionWork,
                         ReadTask, RemoteRange, SegmentSlice, plan_read_tasks)

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
# A probe asks for one byte: a broker that ignores the KIP-1248 tags then returns one batch.
_PROBE_BYTES = 1
# With no remote data to learn from, a broker offset is guessed to cost this many bytes.
_DEFAULT_BYTES_PER_OFFSET = 256


@dataclass(frozen=True)
class PartitionRange:
    """The resolved offsets of one topic-partition: read ``[start, end)``."""
    topic: str
    partition: int
    topic_id: str
    start: int
    end: int
    log_start: int
    latest: int


@dataclass
class Plan:
    """What planning found, for the reader and for estimates."""
    tasks: list[ReadTask]
    partitions: list[PartitionRange]
    remote_segments: int = 0
    direct_supported: dict = field(default_factory=dict)   # (topic, partition) -> bool

    @property
    def remote_ranges(self) -> list[RemoteRange]:
        return [r for t in self.tasks for r in t.ranges if isinstance(r, RemoteRange)]

    @property
    def broker_ranges(self) -> list[BrokerRange]:
        return [r for t in self.tasks for r in t.ranges if isinstance(r, BrokerRange)]


def client_properties(options) -> dict:
    """Kafka client properties from :class:`ReadOptions` (``kafka.*`` with the prefix stripped)."""
    props = dict(options.kafka)
    props["bootstrap.servers"] = ",".join(options.bootstrap_servers)
    props.setdefault("client.id", options.client_id)
    props["isolation.level"] = options.isolation_level
    return props


class Planner:
    """Plans one batch read.  ``client`` is a :class:`BrokerClient`; ``fetcher`` a
    :class:`RemoteStorageFetcher`, used only to read the offset index of segments that must be
    split (None: segments are never split below whole-segment granularity) and, Aiven, the
    manifests the tasks are handed (step 5)."""

    def __init__(self, options, client, fetcher=None):
        self.options = options
        self.client = client
        self.fetcher = fetcher
        self.iso = 1 if options.read_committed else 0
        storage = options.storage
        # With no fetcher configured, a segment can still be read directly when the broker
        # hands out a presigned URL for it; anything else goes through the brokers.
        self.storage_configured = bool(storage.fetcher or storage.fetcher_class)
        # Aiven: (topic, partition, segment id) -> ManifestInfo (None: not shippable) of the
        # manifests read while planning.
        self._manifest_infos: dict = {}

    # -- 1. topics and partitions --------------------------------------------------------------
    def topic_partitions(self) -> list[tuple[str, int, bytes]]:
        from ..model import Assign, Subscribe, SubscribePattern
        strategy = self.options.strategy
        out = []
        if isinstance(strategy, SubscribePattern):
            resp = self.client.metadata(None)
            names = sorted(t.name for t in resp.topics
                           if t.name and not t.error_code and strategy.matches(t.name))
            for name in names:
                info = self.client.topic(name)
                out += [(name, p, info.topic_id) for p in sorted(info.partitions)]
            return out
        topics = strategy.topics
        infos = {}
        for name in topics:
            try:
                infos[name] = self.client.topic(name)
            except BrokerError as exc:
                raise ConfigError(f"topic {name!r} does not exist or cannot be described: {exc}",
                                  option="assign" if isinstance(strategy, Assign) else "subscribe"
                                  ) from exc
        if isinstance(strategy, Subscribe):
            for name in topics:
                info = infos[name]
                out += [(name, p, info.topic_id) for p in sorted(info.partitions)]
            return out
        for tp in strategy.partitions:
            info = infos[tp.topic]
            if tp.partition not in info.partitions:
                raise ConfigError(f"assign names partition {tp.topic}-{tp.partition}, but topic "
                                  f"{tp.topic!r} has partitions {sorted(info.partitions)}",
                                  option="assign")
            out.append((tp.topic, tp.partition, info.topic_id))
        return out

    # -- 2. offsets ----------------------------------------------------------------------------
    def _list(self, tps, timestamp_of) -> dict:
        by_topic: dict = {}
        for topic, p, _ in tps:
            ts = timestamp_of(topic, p)
            if ts is not None:
                by_topic.setdefault(topic, {})[p] = ts
        out = {}
        for topic, stamps in by_topic.items():
            for p, listed in self.client.list_offsets(topic, stamps, isolation_level=self.iso).items():
                out[(topic, p)] = listed.offset
        return out

    def _resolve_bound(self, bound, tps, earliest, latest, *, starting: bool) -> dict:
        from ..model import (EarliestOffsets, GlobalTimestamp, LatestOffsets,
                                     SpecificOffsets, SpecificTimestamps, TopicPartition)
        name = "startingOffsets" if starting else "endingOffsets"
        if isinstance(bound, EarliestOffsets):
            return dict(earliest)
        if isinstance(bound, LatestOffsets):
            return dict(latest)
        if isinstance(bound, SpecificOffsets):
            given = bound.as_dict()
            out = {}
            for topic, p, _ in tps:
                off = given.get(TopicPartition(topic, p))
                if off is None:
                    raise ConfigError(f"{name} does not name partition {topic}-{p}; with specific "
                                      f"offsets every partition read must be given", option=name)
                out[(topic, p)] = earliest[(topic, p)] if off == EARLIEST else (
                    latest[(topic, p)] if off == LATEST else off)
            return out
        if isinstance(bound, (GlobalTimestamp, SpecificTimestamps)):
            if isinstance(bound, GlobalTimestamp):
                option = "startingTimestamp" if starting else "endingTimestamp"
                stamps = {(t, p): bound.timestamp_ms for t, p, _ in tps}
            else:
                option = "startingOffsetsByTimestamp" if starting else "endingOffsetsByTimestamp"
                given = bound.as_dict()
                stamps = {}
                for topic, p, _ in tps:
                    ts = given.get(TopicPartition(topic, p))
                    if ts is None:
                        raise ConfigError(f"{option} does not name partition {topic}-{p}",
                                          option=option)
                    stamps[(topic, p)] = ts
            found = self._list(tps, lambda t, p: stamps[(t, p)])
            out = {}
            for key, off in found.items():
                if off < 0:   # no record at or after the timestamp
                    if starting and bound.strategy == "error":
                        raise ConfigError(
                            f"{option}: partition {key[0]}-{key[1]} has no record with a timestamp "
                            f">= {stamps[key]}; set startingOffsetsByTimestampStrategy=latest to "
                            f"start at the latest offset instead", option=option)
                    off = latest[key]
                out[key] = off
            return out
        raise ConfigError(f"unsupported {name} {bound!r}", option=name)

    def partition_ranges(self, tps) -> list[PartitionRange]:
        earliest = self._list(tps, lambda t, p: EARLIEST)
        latest = self._list(tps, lambda t, p: LATEST)
        start = self._resolve_bound(self.options.starting_offsets, tps, earliest, latest, starting=True)
        end = self._resolve_bound(self.options.ending_offsets, tps, earliest, latest, starting=False)
        out = []
        for topic, p, tid in tps:
            key = (topic, p)
            s, e, lo, hi = start[key], end[key], earliest[key], latest[key]
            where = f"{topic}-{p}"
            if s < lo:
                if self.options.fail_on_data_loss:
                    raise DataLossError(
                        f"{where}: starting offset {s} is below the log start offset {lo} (the "
                        f"records were deleted by retention); set failOnDataLoss=false to start "
                        f"at {lo}")
                log.warning("%s: starting offset %d < log start %d; starting at %d", where, s, lo, lo)
                s = lo
            if e > hi:
                raise ConfigError(f"{where}: ending offset {e} is past the latest offset {hi}",
                                  option="endingOffsets")
            if s > e:
                raise ConfigError(f"{where}: starting offset {s} is after ending offset {e}",
                                  option="startingOffsets")
            out.append(PartitionRange(topic, p, uuid_to_str(bytes(tid)), s, e, lo, hi))
        return out

    # -- 3. where the offsets live -------------------------------------------------------------
    def _locate(self, pr: PartitionRange, offset: int, max_bytes: int):
        return self.client.fetch(pr.topic, pr.partition, offset, max_bytes=max_bytes,
                                 partition_max_bytes=max_bytes, max_wait_ms=0, min_bytes=0,
                                 isolation_level=self.iso, request_remote_location=True)

    def _checkpoints(self, piece: SegmentSlice) -> SegmentSlice:
        """The slice with the segment's offset-index entries from its start on, for splitting.

        The slice's first checkpoint is (first offset, hinted start position): the batch at the
        hinted start holds ``first``; claiming ``first`` as its last offset is safe for the
        splitter, which only relies on "records before P are <= O" and "records at the next
        entry are > O".  Costs one GET of the index (Aiven: a range of ``.indexes``)."""
        seg = piece.segment
        points = list(piece.checkpoints)
        index = self.fetcher.fetch_index(seg, "offset") if self.fetcher is not None else None
        self._keep_manifest_info(seg)
        if not index:
            return piece
        size = seg.size_bytes or 0
        for rel, pos in parse_offset_index(index):
            off = seg.base_offset + rel
            if pos > points[-1][1] and off > points[-1][0] and pos < size and off <= seg.end_offset:
                points.append((off, pos))
        return SegmentSlice(seg, piece.offset_start, piece.offset_end, tuple(points))

    def _with_indexes(self, works: list) -> list:
        """Read the offset index only of the segments that will be split: those larger than a
        task, all of them when ``maxRecordsPerPartition`` bounds offsets, and, for
        ``minPartitions``, the largest ones until there are enough pieces to split."""
        opts = self.options
        slices = [(w, i, p) for w in works for i, p in enumerate(w.pieces) if isinstance(p, SegmentSlice)]

        def span(p):
            return (p.segment.size_bytes or 0) - p.checkpoints[0][1]

        chosen = {id(p) for _, _, p in slices
                  if opts.max_records_per_partition or span(p) > opts.partition_target_bytes}
        if opts.min_partitions:
            pieces = sum(len(w.pieces) for w in works)
            missing = opts.min_partitions - pieces - len(chosen)
            for _, _, p in sorted(slices, key=lambda t: -span(t[2])):
                if missing <= 0:
                    break
                if id(p) not in chosen:
                    chosen.add(id(p))
                    missing -= 1
        if not chosen:
            return works
        out = []
        for w in works:
            pieces = tuple(self._checkpoints(p) if id(p) in chosen else p for p in w.pieces)
            out.append(PartitionWork(w.topic, w.partition, w.topic_id, pieces, w.txn))
        return out

    def partition_work(self, pr: PartitionRange, supports_direct: bool):
        pieces = []
        aborted_at: dict[int, tuple] = {}
        offset = pr.start
        remote_bytes = remote_offsets = 0
        if supports_direct and pr.start < pr.end:
            probe = self._locate(pr, offset, _PROBE_BYTES)
            answer = probe if probe.has_remote_location else None
            while answer is not None and offset < pr.end:
                part = self._locate(pr, offset, INT32_MAX).partition if answer is probe else answer.partition
                if not (part.remote_log_segment_end_position or 0) > (part.remote_log_segment_start_position or 0):
                    break   # an inconsistent hint: the broker serves the rest
                if not self.storage_configured and not part.signed_remote_log_segment_location:
                    break   # nothing to read the segment with: the broker serves the rest
                seg = RemoteSegment(
                    topic=pr.topic, topic_id=pr.topic_id, partition=pr.partition,
                    segment_id=uuid_to_str(bytes(part.remote_log_segment_id)),
                    base_offset=part.remote_log_segment_base_offset,
                    end_offset=part.remote_log_segment_end_offset,
                    size_bytes=part.remote_log_segment_end_position,
                    custom_metadata=(bytes(part.remote_log_segment_custom_metadata)
                                     if part.remote_log_segment_custom_metadata is not None else None),
                    presigned_url=part.signed_remote_log_segment_location,
                    storage_format=part.storage_format_version or "ApacheKafkaV1")
                # the broker may answer a later segment when offset fell in a gap
                first = max(offset, seg.base_offset)
                if first >= pr.end:
                    break
                seg_end = min(pr.end, seg.end_offset + 1)
                aborted_at[first] = _aborted(part)
                pieces.append(SegmentSlice(seg, first, seg_end,
                                           ((first, part.remote_log_segment_start_position),)))
                remote_bytes += seg.size_bytes - part.remote_log_segment_start_position
                remote_offsets += seg_end - first
                offset = seg.end_offset + 1
                if offset >= pr.end:
                    break
                answer = self._locate(pr, offset, INT32_MAX)
                if not answer.has_remote_location:
                    break
        if offset < pr.end:
            per_offset = remote_bytes / remote_offsets if remote_offsets else _DEFAULT_BYTES_PER_OFFSET
            pieces.append(BrokerRange(pr.topic, pr.partition, pr.topic_id, offset, pr.end,
                                      int((pr.end - offset) * per_offset)))
        return pieces, aborted_at

    # -- 4. everything -------------------------------------------------------------------------
    def plan(self) -> Plan:
        tps = self.topic_partitions()
        ranges = self.partition_ranges(tps)
        works, aborted_by_tp, direct = [], {}, {}
        segments = 0
        for pr in ranges:
            key = (pr.topic, pr.partition)
            ok = bool(self.options.fetch_remote_enabled) and self.client.supports_kip1248(pr.topic, pr.partition)
            direct[key] = ok
            pieces, aborted_at = self.partition_work(pr, ok)
            segments += sum(isinstance(p, SegmentSlice) for p in pieces)
            aborted_by_tp[key] = aborted_at
            if pieces:
                works.append(PartitionWork(pr.topic, pr.partition, pr.topic_id, tuple(pieces)))
        works = self._with_indexes(works)
        tasks = plan_read_tasks(works, target_bytes=self.options.partition_target_bytes,
                                min_partitions=self.options.min_partitions,
                                max_records_per_partition=self.options.max_records_per_partition)
        tasks = self._with_manifest_infos(tasks)
        if self.options.read_committed:
            tasks = [self._with_txn(t, aborted_by_tp, ranges) for t in tasks]
        return Plan(tasks, ranges, segments, direct)

    # -- 5. Aiven manifests ---------------------------------------------------------------------
    def _keep_manifest_info(self, seg: RemoteSegment) -> None:
        """Keep what the reader needs of a manifest the fetcher has just read (no GET)."""
        peek = getattr(self.fetcher, "cached_manifest", None)
        m = peek(seg) if peek is not None else None
        if m is not None:
            self._manifest_infos[_segment_key(seg)] = aiven.ManifestInfo.of(m)

    def _with_manifest_infos(self, tasks: list[ReadTask]) -> list[ReadTask]:
        """The tasks with ``manifest_info`` on the segments whose manifest the planner has, or
        reads now because two or more tasks read the segment (see the module's step 5)."""
        if self.options.storage.layout != "aiven" or not hasattr(self.fetcher, "manifest"):
            return tasks
        readers = Counter(key for t in tasks for key in
                          {_segment_key(r.segment) for r in t.ranges if isinstance(r, RemoteRange)})
        segments: dict = {}
        for r in (r for t in tasks for r in t.ranges if isinstance(r, RemoteRange)):
            key = _segment_key(r.segment)
            if key in segments:
                continue
            if key not in self._manifest_infos and readers[key] > 1:
                try:
                    self._manifest_infos[key] = aiven.ManifestInfo.of(self.fetcher.manifest(r.segment))
                except RemoteStorageError as exc:   # the executors try again, with their fallback
                    log.info("manifest of %r not read while planning: %s", r.segment, exc)
                    self._manifest_infos[key] = None
            info = self._manifest_infos.get(key)
            segments[key] = r.segment if info is None else replace(r.segment, manifest_info=info)
        return [ReadTask(t.index, tuple(replace(r, segment=segments[_segment_key(r.segment)])
                                        if isinstance(r, RemoteRange) else r for r in t.ranges),
                         t.txn) for t in tasks]

    def _with_txn(self, task: ReadTask, aborted_by_tp: dict, ranges: Sequence[PartitionRange]) -> ReadTask:
        """Attach, per partition, the aborted transactions a reader starting at the task's
        first offset of that partition must know: the answer for exactly that offset (so a
        transaction whose marker lies before it is not applied again), plus the answers of the
        segments that start later inside the task.  For contiguous ranges this is what a broker
        answers for one fetch over the whole span (Kafka's collectAbortedTxns)."""
        lso = {(r.topic, r.partition): r.latest for r in ranges}
        infos = []
        for topic, p in task.topic_partitions:
            mine = [r for r in task.ranges if (r.topic, r.partition) == (topic, p)]
            first, end = mine[0].offset_start, max(r.offset_end for r in mine)
            aborted: dict = {}
            if isinstance(mine[0], RemoteRange):   # broker answers carry their own lists
                known = aborted_by_tp[(topic, p)]
                if first not in known:
                    pr = next(r for r in ranges if (r.topic, r.partition) == (topic, p))
                    known[first] = _aborted(self._locate(pr, first, INT32_MAX).partition)
                for start, entries in sorted(known.items()):
                    if first <= start < end:
                        aborted.update(dict.fromkeys(entries))
            infos.append(PartitionTxnInfo(topic, p, lso[(topic, p)], tuple(aborted)))
        return ReadTask(task.index, task.ranges, tuple(infos))


def _segment_key(seg: RemoteSegment) -> tuple:
    return seg.topic, seg.partition, seg.segment_id


def _aborted(part) -> tuple:
    return tuple(AbortedTransaction(a.producer_id, a.first_offset)
                 for a in (part.aborted_transactions or ()))
