"""Planning with a broker: options → topic-partitions → offset ranges → where each range lives →
read tasks.

1. Metadata resolves the topics and partitions of ``subscribe`` / ``subscribePattern`` /
   ``assign``; ListOffsets resolves ``earliest`` / ``latest`` / timestamps into offsets
   (:mod:`.bounds`).
2. Each partition's range is handed to a locator (:mod:`.locate`), chosen by
   ``remote.segment.locator``.  ``auto`` takes, per partition, the first that works: the
   KIP-1248 walk when the leader advertises it, the brokers alone when nothing of the range is
   tiered, ``__remote_log_metadata`` (today's Kafka, :mod:`.metadata_topic`), listing the store
   (:mod:`.listing`), and last the KIP-1248 probe of old (a broker that answers without
   advertising; otherwise everything goes to the brokers).  With direct reads off, the whole
   range goes to the brokers.  Each locator is asked once, for all its partitions.
3. Every partition's pieces are checked to cover its range exactly once (:mod:`.works`).
4. Segments that have to be split get their offset index read (:mod:`.segment_reads`), then
   :func:`~kafka_tiered_source.planning.packing.plan_read_tasks` packs the pieces into coarse
   tasks by bytes.
5. read_committed: each task gets, per partition, the aborted transactions that are valid at the
   first offset it reads (:mod:`.txn`), those whose markers lie past the range's end included
   (:mod:`.txn_ends`).
6. Aiven layout: the tasks carry what they need of the manifests (:mod:`.aiven_manifests`).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..errors import BrokerError, ConfigError
from ..ids import uuid_to_str
from ..logs import get_logger
from ..model import EARLIEST, LATEST, Assign, Subscribe, SubscribePattern
from ..storage.protocols import SegmentCatalog
from . import aiven_manifests
from .bounds import BROKER, check_range, resolve_bounds
from .filters import narrow_ranges, restrict_partitions
from .kip1248 import Kip1248Locator
from .listing import ListingLocator
from .locate import BrokerLocator, Key, Located, LocatorChoice, SegmentLocator, TieredEnds, Unavailable
from .packing import plan_read_tasks
from .plan import PartitionRange, Plan
from .segment_reads import SegmentReads
from .txn import with_txn_all
from .works import checked_works

log = get_logger(__name__)


class Planner:
    """Plans one batch read.  ``client`` is a :class:`BrokerClient`; ``fetcher`` a
    :class:`RemoteStorageFetcher` (None: no locator that needs one, segments never split below
    whole segments).  ``row_filter`` (pushed-down filters, :mod:`.filters`) restricts the
    partitions, narrows the ranges and skips segments.  ``refresh``: the metadata catalog reads
    the metadata partitions this plan needs from their start (:mod:`.catalog`)."""

    def __init__(self, options, client, fetcher: SegmentCatalog | None = None, row_filter=None, *,
                 refresh: bool = False):
        self.options = options
        self.row_filter = row_filter
        self.refresh = refresh
        self.client = client
        self.fetcher = fetcher
        self.iso = 1 if options.read_committed else 0
        self.shipping = (aiven_manifests.ManifestShipping(fetcher)
                         if aiven_manifests.wanted(options, fetcher) else None)
        self.reads = SegmentReads(fetcher, options, on_index=self.shipping.keep if self.shipping else None)
        if self.shipping is not None:
            self.shipping.reads = self.reads

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
    def choice(self, ranges: list[PartitionRange]) -> LocatorChoice:
        """The plan's locators and how ``remote.segment.locator`` picks among them."""
        o, client, fetcher = self.options, self.client, self.fetcher
        tiered = TieredEnds(client, ranges)
        # Without a configured fetcher a segment can still be read directly when the broker
        # hands out a presigned URL for it; anything else goes through the brokers.
        kip: SegmentLocator = Kip1248Locator(client, isolation_level=self.iso, storage_configured=o.storage.configured,
                                             strict=o.segment_locator == "kip1248", tiered_ends=tiered)
        metadata: SegmentLocator = (
            _MetadataTopic(lambda locator, snapshots: locator(
                client, fetcher, topic=o.metadata_topic, isolation_level=self.iso, index_of=self.reads.offset_index,
                refresh=self.refresh, snapshots=snapshots(o.metadata_cache_dir),
                ask_on_storage_fault=o.fetch_remote_fallback != "never"))
            if fetcher is not None else
            Unavailable("metadata-topic", "it needs a remote.storage.fetcher to read the segments it finds"))
        listing: SegmentLocator = (
            ListingLocator(o, fetcher, client, isolation_level=self.iso, offset_index=self.reads.offset_index)
            if fetcher is not None and fetcher.can_list and o.storage.layout in ("aiven", "kafka-local-tiered")
            else Unavailable("listing", "it needs a remote.storage.fetcher that can list objects and the "
                                        "aiven or kafka-local-tiered layout"))
        broker: SegmentLocator = BrokerLocator()
        named = {"kip1248": kip, "metadata-topic": metadata, "listing": listing, "broker": broker}
        chain = [(lambda pr: client.advertises_kip1248(pr.topic, pr.partition), kip),
                 (tiered.none_in, broker)]
        available = getattr(metadata, "available", None)
        if available is not None:
            chain.append((lambda pr: available(), metadata))
        if not isinstance(listing, Unavailable):
            chain.append((lambda pr: True, listing))
        # A broker that may answer the tags without advertising them: probe (at most one batch
        # comes back through the broker when it does not).
        chain.append((lambda pr: client.supports_kip1248(pr.topic, pr.partition), kip))
        # Direct reads off: still learn which spans tiered copies serve (the metadata topic,
        # which needs no fetcher for that, else the KIP-1248 walk, whose locations then go
        # unused), so that a broker answering a compacted tail with no records is read past, not
        # waited on (executor/reader.py).
        kip_spans = Kip1248Locator(client, isolation_level=self.iso, storage_configured=False, spans_only=True)
        metadata_spans = _MetadataTopic(lambda locator, snapshots: locator(
            client, None, topic=o.metadata_topic, isolation_level=self.iso, refresh=self.refresh, spans_only=True,
            snapshots=snapshots(o.metadata_cache_dir)))
        undirected = [(tiered.none_in, broker),
                      (lambda pr: metadata_spans.available(), metadata_spans),
                      (lambda pr: client.advertises_kip1248(pr.topic, pr.partition), kip_spans)]
        return LocatorChoice(o.segment_locator, named, chain, broker, undirected)

    # -- 4. everything -------------------------------------------------------------------------
    def plan(self) -> Plan:
        ranges = self.partition_ranges(self.topic_partitions())
        direct = {(pr.topic, pr.partition): bool(self.options.fetch_remote_enabled) for pr in ranges}
        located, locators = self.choice(ranges).locate(ranges, direct)
        segments = sum(loc.segments for loc in located.values())
        _log_locators(locators)
        works = checked_works(ranges, located, row_filter=self.row_filter,
                              read_committed=self.options.read_committed)
        works = self.reads.with_indexes(works)
        tasks = plan_read_tasks(works, target_bytes=self.options.partition_target_bytes,
                                min_partitions=self.options.min_partitions,
                                max_records_per_partition=self.options.max_records_per_partition)
        if self.shipping is not None:
            tasks = self.shipping.attach(tasks)
        costs: dict = {}
        if self.options.read_committed:
            tasks, costs = with_txn_all(tasks, ranges, located)
        return Plan(tasks, ranges, segments, locators, marker_costs=costs)


class _MetadataTopic:
    """The metadata-topic locator (:mod:`.metadata_topic`), made when a plan first asks it: a plan
    whose brokers answer KIP-1248 never imports it, nor the catalog and replay under it (a new
    process's cold start, issue 36).  ``make(MetadataTopicLocator, SnapshotStore.from_option)``
    makes it."""
    name = "metadata-topic"

    def __init__(self, make: Callable[[Any, Any], Any]):
        self._make = make
        self._made: Any = None

    def _locator(self) -> Any:
        if self._made is None:
            from .catalog_snapshots import SnapshotStore
            from .metadata_topic import MetadataTopicLocator
            self._made = self._make(MetadataTopicLocator, SnapshotStore.from_option)
        return self._made

    def available(self) -> bool:
        return self._locator().available()

    def refusal(self, pr: PartitionRange) -> str | None:
        return self._locator().refusal(pr)

    def locate_all(self, prs: Sequence[PartitionRange]) -> dict[Key, Located]:
        return self._locator().locate_all(prs)


def _log_locators(locators: dict) -> None:
    """Once per read, at INFO: which locator found each partition's tiered segments."""
    by_name: dict = {}
    for (topic, p), name in sorted(locators.items()):
        by_name.setdefault(name, []).append(f"{topic}-{p}")
    if by_name:
        log.info("kafka-tiered: tiered segments located by %s",
                 "; ".join(f"{name} for {', '.join(tps)}" for name, tps in sorted(by_name.items())))
