"""Planning with a broker: options → topic-partitions → offset ranges → where each range lives →
read tasks.

1. Metadata resolves the topics and partitions of ``subscribe`` / ``subscribePattern`` /
   ``assign``; ListOffsets resolves ``earliest`` / ``latest`` / timestamps into offsets
   (:mod:`.bounds`).
2. Each partition's range is handed to a locator (:mod:`.locate`), chosen by
   ``remote.segment.locator``.  ``auto`` takes, per partition, the first that works: the
   KIP-1248 walk when the leader advertises it, ``__remote_log_metadata`` (today's Kafka,
   :mod:`.metadata_topic`), listing the store (:mod:`.listing`), and last the KIP-1248 probe of
   old (a broker that answers without advertising; otherwise everything goes to the brokers).
   With direct reads off, the whole range goes to the brokers.
3. Segments that have to be split get their offset index read (:meth:`_with_indexes`), then
   :func:`~kafka_tiered_source.planning.packing.plan_read_tasks` packs the pieces into coarse
   tasks by bytes.
4. read_committed: each task gets, per partition, the aborted transactions that are valid at the
   first offset it reads (:mod:`.txn`).
5. Aiven layout: a task's fetcher GETs the manifest of every segment it reads, once per segment
   per task, unless the segment carries :class:`~kafka_tiered_source.storage.aiven.ManifestInfo`.
   The planner attaches it for the manifests it has read anyway (segments it split), and reads it
   once here for any other segment that two or more tasks read (one GET instead of one per
   task).  A segment read by a single task costs one manifest GET wherever it is made, so that
   one is left to the executor, where GETs run in parallel.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace

from ..errors import BrokerError, ConfigError, RemoteStorageError
from ..ids import uuid_from_str, uuid_to_str
from ..model import EARLIEST, LATEST, LATEST_TIERED, Assign, Subscribe, SubscribePattern
from ..storage import aiven
from ..storage.indexes import parse_offset_index
from ..storage.protocols import SegmentCatalog
from ..storage.segment import RemoteSegment
from .bounds import BROKER, check_range, resolve_bounds
from .filters import narrow_ranges, restrict_partitions, skip_segments
from .kip1248 import Kip1248Locator
from .listing import ListingLocator
from .locate import Located, broker_tail, no_aborted
from .metadata_topic import MetadataTopicLocator
from .packing import PartitionWork, SegmentSlice, index_checkpoints, plan_read_tasks
from .plan import PartitionRange, Plan
from .tasks import ReadTask, RemoteRange
from .txn import with_txn

log = logging.getLogger(__name__)


class Planner:
    """Plans one batch read.  ``client`` is a :class:`BrokerClient`; ``fetcher`` a
    :class:`RemoteStorageFetcher`, used only to read the offset index of segments that must be
    split (None: segments are never split below whole-segment granularity) and, Aiven, the
    manifests the tasks are handed (step 5).  ``row_filter`` (pushed-down filters,
    :mod:`.filters`) restricts the partitions, narrows the ranges and skips segments."""

    def __init__(self, options, client, fetcher: SegmentCatalog | None = None, row_filter=None):
        self.options = options
        self.row_filter = row_filter
        self.client = client
        self.fetcher = fetcher
        self.iso = 1 if options.read_committed else 0
        # With no fetcher configured, a segment can still be read directly when the broker
        # hands out a presigned URL for it; anything else goes through the brokers.
        self.locator = Kip1248Locator(client, isolation_level=self.iso,
                                      storage_configured=options.storage.configured)
        # Aiven: (topic, partition, segment id) -> ManifestInfo (None: not shippable) of the
        # manifests read while planning.
        self._manifest_infos: dict = {}
        self._indexes: dict = {}     # segment id -> offset index bytes (one GET each)
        self._storage_failed = None  # the first storage error of this plan: no more GETs after it
        self._ranges: list[PartitionRange] = []   # the plan's partitions, once resolved
        self._tiered_ends: dict = {}              # (topic, partition) -> LATEST_TIERED offset
        self.metadata = (MetadataTopicLocator(client, fetcher, topic=options.metadata_topic,
                                              isolation_level=self.iso, index_of=self.offset_index)
                         if fetcher is not None else None)
        self.listing = (ListingLocator(options, fetcher, client, isolation_level=self.iso,
                                       offset_index=self.offset_index)
                        if fetcher is not None and fetcher.can_list
                        and options.storage.layout in ("aiven", "kafka-local-tiered") else None)

    # -- 1. topics and partitions --------------------------------------------------------------
    def topic_partitions(self) -> list[tuple[str, int, bytes]]:
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
                if exc.api != "Metadata":
                    raise     # no connection (TLS, SASL, unreachable): nothing to do with the topic
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
    def _list(self, stamps: dict) -> dict:
        """ListOffsets: ``{(topic, partition): timestamp}`` -> ``{(topic, partition): offset}``."""
        by_topic: dict = {}
        for (topic, p), ts in stamps.items():
            by_topic.setdefault(topic, {})[p] = ts
        out = {}
        for topic, per_partition in by_topic.items():
            for p, listed in self.client.list_offsets(topic, per_partition, isolation_level=self.iso).items():
                out[(topic, p)] = listed.offset
        return out

    def partition_ranges(self, tps) -> list[PartitionRange]:
        tps = restrict_partitions(tps, self.row_filter)
        keys = [(topic, p) for topic, p, _ in tps]
        earliest = self._list(dict.fromkeys(keys, EARLIEST))
        latest = self._list(dict.fromkeys(keys, LATEST))
        bounds = resolve_bounds(self.options, keys, earliest, latest, offsets_for_times=self._list)
        out = []
        for topic, p, tid in tps:
            key = (topic, p)
            s, e = check_range(f"{topic}-{p}", *bounds[key], earliest[key], latest[key],
                               limits=BROKER, fail_on_data_loss=self.options.fail_on_data_loss)
            out.append(PartitionRange(topic, p, uuid_to_str(bytes(tid)), s, e, earliest[key],
                                      latest[key]))
        # pushed-down filters: after Spark's checks, which hold for the options as given
        return narrow_ranges(out, self.row_filter, offsets_for_times=self._list)

    # -- 3. where the offsets live -------------------------------------------------------------
    def _checkpoints(self, piece: SegmentSlice) -> SegmentSlice:
        """The slice with the segment's offset-index entries from its start on, for splitting.

        The slice's first checkpoint is (first offset, hinted start position): the batch at the
        hinted start holds ``first``; claiming ``first`` as its last offset is safe for the
        splitter, which only relies on "records before P are <= O" and "records at the next
        entry are > O".  Costs one GET of the index (Aiven: a range of ``.indexes``)."""
        seg = piece.segment
        if self.fetcher is None or self._storage_failed is not None:
            return piece
        try:
            index = self.offset_index(seg)
        except RemoteStorageError as exc:
            # Splitting is an optimisation: the segment stays one piece, and whether storage
            # can be read at all is the preflight's to say (one clear error, before any task).
            log.info("offset index of %r not read while planning: %s", seg, exc)
            self._storage_failed = exc
            return piece
        if not index:
            return piece
        entries = ((seg.base_offset + rel, pos) for rel, pos in parse_offset_index(index))
        return SegmentSlice(seg, piece.offset_start, piece.offset_end,
                            index_checkpoints(seg, entries, piece.checkpoints))

    def offset_index(self, seg: RemoteSegment) -> bytes | None:
        """A segment's offset index, read once per plan (Aiven: keeping what the manifest read
        on the way tells the tasks)."""
        if seg.segment_id not in self._indexes:
            self._indexes[seg.segment_id] = self.fetcher.fetch_index(seg, "offset")
            self._keep_manifest_info(seg)
        return self._indexes[seg.segment_id]

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

    def _latest_tiered(self, pr: PartitionRange) -> int | None:
        """ListOffsets LATEST_TIERED (-5): the highest tiered offset (-1: none); None when the
        broker is older than Kafka 3.9 (ListOffsets v9).  Asked once per topic for every
        partition of the plan."""
        key = (pr.topic, pr.partition)
        if key not in self._tiered_ends:
            parts = [r.partition for r in self._ranges if r.topic == pr.topic] or [pr.partition]
            try:
                listed = self.client.list_offsets(pr.topic, dict.fromkeys(parts, LATEST_TIERED))
                self._tiered_ends.update({(pr.topic, p): o.offset for p, o in listed.items()})
            except BrokerError as exc:
                if exc.error_name != "UNSUPPORTED_VERSION":
                    raise
                self._tiered_ends.update({(pr.topic, p): None for p in parts})
        return self._tiered_ends[key]

    def _auto(self, pr: PartitionRange) -> str:
        """``auto``: the first locator that can serve this partition."""
        if self.client.advertises_kip1248(pr.topic, pr.partition):
            return "kip1248"
        latest_tiered = self._latest_tiered(pr)
        if latest_tiered is not None and latest_tiered < pr.start:
            return "broker"                      # nothing of the range is tiered
        if self.metadata is not None and self.metadata.available():
            return "metadata-topic"
        if self.listing is not None:
            return "listing"
        # A broker that may answer the tags without advertising them: probe (at most one batch
        # comes back through the broker when it does not).
        return "kip1248" if self.client.supports_kip1248(pr.topic, pr.partition) else "broker"

    def _choose(self, pr: PartitionRange, direct: bool) -> str:
        """The locator of one partition, checked to be usable (``broker``: no direct reads)."""
        if not (direct and pr.start < pr.end):
            return "broker"
        name = self.options.segment_locator
        if name == "auto":
            name = self._auto(pr)
        option = "remote.segment.locator"
        where = f"{pr.topic}-{pr.partition}"
        if name == "kip1248" and not self.client.supports_kip1248(pr.topic, pr.partition):
            raise ConfigError(f"{option}=kip1248, but the leader of {where} speaks no flexible Fetch "
                              f"version (12+), which the KIP-1248 tags need", option=option)
        if name == "metadata-topic" and self.metadata is None:
            raise ConfigError(f"{option}=metadata-topic needs a remote.storage.fetcher to read the "
                              f"segments it finds", option=option)
        if name == "listing" and self.listing is None:
            raise ConfigError(f"{option}=listing needs a remote.storage.fetcher that can list objects and "
                              f"the aiven or kafka-local-tiered layout", option=option)
        return name

    def _checked_kip1248(self, pr: PartitionRange, loc: Located) -> Located:
        """A walk that found nothing although the range is tiered: the broker ignored the tags,
        which is an error when ``kip1248`` was asked for by name."""
        if self.options.segment_locator == "kip1248" and not loc.segments:
            latest_tiered = self._latest_tiered(pr)
            if latest_tiered is not None and latest_tiered >= pr.start:
                option = "remote.segment.locator"
                raise ConfigError(f"{option}=kip1248, but the broker ignores the KIP-1248 tags: "
                                  f"{pr.topic}-{pr.partition} is tiered up to offset {latest_tiered} and the "
                                  f"leader answered with records, not locations; use auto or metadata-topic",
                                  option=option)
        return loc

    def _located_by(self, pr: PartitionRange, name: str) -> Located:
        if name == "broker":
            return Located([broker_tail(pr, pr.start)] if pr.start < pr.end else [], no_aborted)
        if name == "metadata-topic":
            try:
                return self.metadata.locate(pr)
            except BrokerError as exc:
                option = "remote.segment.locator"
                raise ConfigError(f"{option}=metadata-topic: cannot read {self.metadata.topic} for "
                                  f"{pr.topic}-{pr.partition}: {exc}; the reader needs READ and DESCRIBE "
                                  f"on it", option=option) from exc
        return self.listing.locate(pr)

    # -- 4. everything -------------------------------------------------------------------------
    def plan(self) -> Plan:
        ranges = self._ranges = self.partition_ranges(self.topic_partitions())
        if self.metadata is not None:   # its scan passes over other topics' records
            self.metadata.wanted = {uuid_from_str(pr.topic_id) for pr in ranges}
        direct = {(pr.topic, pr.partition): bool(self.options.fetch_remote_enabled) for pr in ranges}
        names = {(pr.topic, pr.partition): self._choose(pr, direct[(pr.topic, pr.partition)]) for pr in ranges}
        # the KIP-1248 walk asks about every partition at once (one request per leader per round)
        walked = self.locator.locate_all([pr for pr in ranges if names[(pr.topic, pr.partition)] == "kip1248"])
        works, located, locators = [], {}, {}
        segments = 0
        for pr in ranges:
            key = (pr.topic, pr.partition)
            loc = (self._checked_kip1248(pr, walked[key]) if key in walked
                   else self._located_by(pr, names[key]))
            loc.pieces = skip_segments(loc.pieces, self.row_filter, read_committed=self.options.read_committed)
            located[key] = loc
            segments += loc.segments
            locators[key] = names[key] if loc.segments else "broker"
            if loc.pieces:
                works.append(PartitionWork(pr.topic, pr.partition, pr.topic_id, tuple(loc.pieces)))
        _log_locators(locators)
        works = self._with_indexes(works)
        tasks = plan_read_tasks(works, target_bytes=self.options.partition_target_bytes,
                                min_partitions=self.options.min_partitions,
                                max_records_per_partition=self.options.max_records_per_partition)
        tasks = self._with_manifest_infos(tasks)
        if self.options.read_committed:
            lso = {(r.topic, r.partition): r.latest for r in ranges}
            tasks = [with_txn(t, lso, lambda topic, p, *rest: located[(topic, p)].aborted_for(topic, p, *rest))
                     for t in tasks]
        return Plan(tasks, ranges, segments, direct, locators)

    # -- 5. Aiven manifests ---------------------------------------------------------------------
    def _keep_manifest_info(self, seg: RemoteSegment) -> None:
        """Keep what the reader needs of a manifest the fetcher has just read (no GET)."""
        m = self.fetcher.layout.cached_manifest(seg)
        if m is not None:
            self._manifest_infos[_segment_key(seg)] = aiven.ManifestInfo.of(m)

    def _with_manifest_infos(self, tasks: list[ReadTask]) -> list[ReadTask]:
        """The tasks with ``manifest_info`` on the segments whose manifest the planner has, or
        reads now because two or more tasks read the segment (see the module's step 5)."""
        if (self.options.storage.layout != "aiven" or self.fetcher is None
                or not self.fetcher.layout.reads_manifests):
            return tasks
        readers = Counter(key for t in tasks for key in
                          {_segment_key(r.segment) for r in t.ranges if isinstance(r, RemoteRange)})
        segments: dict = {}
        for r in (r for t in tasks for r in t.ranges if isinstance(r, RemoteRange)):
            key = _segment_key(r.segment)
            if key in segments:
                continue
            if key not in self._manifest_infos and readers[key] > 1 and self._storage_failed is None:
                try:
                    self._manifest_infos[key] = aiven.ManifestInfo.of(self.fetcher.layout.manifest(r.segment))
                except RemoteStorageError as exc:   # the executors try again, with their fallback
                    log.info("manifest of %r not read while planning: %s", r.segment, exc)
                    self._manifest_infos[key] = None
                    self._storage_failed = exc      # one failure is enough: no GET per segment
            info = self._manifest_infos.get(key)
            segments[key] = r.segment if info is None else replace(r.segment, manifest_info=info)
        return [ReadTask(t.index, tuple(replace(r, segment=segments[_segment_key(r.segment)])
                                        if isinstance(r, RemoteRange) else r for r in t.ranges),
                         t.txn) for t in tasks]


def _segment_key(seg: RemoteSegment) -> tuple:
    return seg.topic, seg.partition, seg.segment_id

def _log_locators(locators: dict) -> None:
    """Once per read, at INFO: which locator found each partition's tiered segments."""
    by_name: dict = {}
    for (topic, p), name in sorted(locators.items()):
        by_name.setdefault(name, []).append(f"{topic}-{p}")
    if by_name:
        log.info("kafka-tiered: tiered segments located by %s",
                 "; ".join(f"{name} for {', '.join(tps)}" for name, tps in sorted(by_name.items())))
