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
   plus a walk of the batch headers of the tail (one ranged GET of the tail), and then, as Kafka
   ends its copies, at the next copy's base - 1 (a compacted tail holds no records; a reader of
   a range that ends past the last batch reads the segment to its last byte).  Sizes: the
   manifest's chunk index (Aiven), the listed ``.log`` size (kafka-local-tiered).  Aiven: what the reader needs of each manifest (size, chunk table)
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
  A copy whose end offset no manifest gives ends where the next copy starts, as Kafka's copies
  do (the next local segment's base - 1): the offsets past its last batch were compacted away —
  unless an incomplete copy starts in between, which is refused naming the offsets.
* **A topic deleted and re-created** leaves two topic ids under one name: refused, naming both
  (the objects of the deleted one are due for deletion by the broker; offline we cannot tell
  which one is current).
* **Transactions still open at the end of the tiered range.**  Their markers are in segments that
  are not tiered (maybe not even written): whether they abort is unknown.  read_committed
  therefore stops at the first offset of the earliest such transaction — the offline
  counterpart of the last stable offset.  Kafka uploads each segment with the producer state
  snapshot taken at the next segment's base offset; the last segment's snapshot lists exactly
  the transactions ongoing there (``currentTxnFirstOffset``), one small GET.  That end is what
  makes the markers of every transaction with records below it lie in the tiered range, where
  the read finds those past its own end (:mod:`.txn_ends`) as a read with a broker does.  When that snapshot
  is empty or unreadable, batch headers are walked from the last point the transaction indexes
  prove stable (the largest ``lastStableOffset`` of their entries) to the end of the tiered
  range; that walk reads those segments' data (the whole tiered range when no transaction was
  ever aborted).  ``latest`` is that offset; an ``endingOffsets`` past it is an error naming the
  producer and the transaction's first offset.
* **Timestamps.**  ``startingTimestamp`` / ``endingTimestamp`` / ``*OffsetsByTimestamp`` are
  resolved as ListOffsets would resolve them, from the tiered segments' max timestamps and
  time indexes (:mod:`.timestamps`).  A timestamp past every tiered record finds nothing, as
  ListOffsets finds nothing past the log: a starting one follows
  ``startingOffsetsByTimestampStrategy``, an ending one ends at the offline ``latest``.
"""
from __future__ import annotations

import logging

from ..errors import ConfigError, OfflinePlanningError
from ..model import Assign, SubscribePattern
from .bounds import TIERED, check_range, resolve_bounds
from .filters import narrow_ranges, restrict_partitions
from .listing import StoreListing
from .packing import plan_read_tasks
from .plan import PartitionRange, Plan
from .txn import with_txn_all
from .works import checked_works

log = logging.getLogger(__name__)

_SHOWN_TOPICS = 20


class OfflinePlanner:
    """Plans a read from remote storage alone.  ``fetcher`` must be able to list objects."""

    def __init__(self, options, fetcher, row_filter=None):
        self.options = options
        self.row_filter = row_filter
        self.listing = StoreListing(options, fetcher)
        self._tiered: dict = {}
        self._latest: dict = {}

    # -- topics and partitions -----------------------------------------------------------------
    def topic_partitions(self, catalog: dict) -> list[tuple[str, int, str]]:
        strategy = self.options.strategy
        found = sorted(catalog)
        shown = ", ".join(found[:_SHOWN_TOPICS]) + (" ..." if len(found) > _SHOWN_TOPICS else "")
        where = self.listing.where()
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
                    everything = sorted(self.listing.catalog(everything=True))
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


    # -- everything ----------------------------------------------------------------------------
    def plan(self) -> Plan:
        listing = self.listing
        catalog = listing.catalog()
        tps = restrict_partitions(self.topic_partitions(catalog), self.row_filter)
        committed = self.options.read_committed
        tiered, latest, why = {}, {}, {}
        for topic, p, tid in tps:
            tp = tiered[(topic, p)] = listing.partition(topic, p, tid, catalog[topic][tid][p])
            key = (topic, p)
            latest[key] = tp.last_offset + 1
            why[key] = f"the last tiered offset is {tp.last_offset}"
            if committed:
                open_txns = listing.open_transactions(tp, listing.aborted(tp))
                if open_txns:
                    pid, first = min(open_txns.items(), key=lambda kv: kv[1])
                    latest[key] = max(first, tp.earliest)   # begun before the tiered range: nothing
                    why[key] = (f"the transaction of producer {pid} from offset {first} has no "
                                f"marker in the tiered range (last tiered offset {tp.last_offset}), "
                                f"so whether it aborted cannot be known without a broker")
                    log.warning("%s-%d: read_committed stops at offset %d offline: %s", topic, p,
                                first, why[key])
        keys = list(tiered)
        earliest = {k: tp.earliest for k, tp in tiered.items()}
        self._tiered, self._latest = tiered, latest
        bounds = resolve_bounds(self.options, keys, earliest, latest,
                                offsets_for_times=self.offsets_for_times)
        ranges, located = [], {}
        segments = 0
        for key, tp in tiered.items():
            s, e = check_range(f"{tp.topic}-{tp.partition}", *bounds[key], tp.earliest, latest[key],
                               limits=TIERED, fail_on_data_loss=self.options.fail_on_data_loss,
                               why=why[key])
            ranges.append(PartitionRange(tp.topic, tp.partition, tp.topic_id, s, e, tp.earliest, latest[key]))
        ranges = narrow_ranges(ranges, self.row_filter, offsets_for_times=self.offsets_for_times)
        for pr in ranges:
            loc = located[(pr.topic, pr.partition)] = listing.locate(pr)
            segments += loc.segments
        works = checked_works(ranges, located, row_filter=self.row_filter, read_committed=committed)
        o = self.options
        tasks = plan_read_tasks(works, target_bytes=o.partition_target_bytes,
                                min_partitions=o.min_partitions,
                                max_records_per_partition=o.max_records_per_partition)
        costs: dict = {}
        if committed:
            tasks, costs = with_txn_all(tasks, ranges, located)
        keys = [(r.topic, r.partition) for r in ranges]
        return Plan(tasks, ranges, segments, dict.fromkeys(keys, listing.name), marker_costs=costs)


    def offsets_for_times(self, stamps: dict) -> dict:
        """ListOffsets for timestamps over the tiered segments (:mod:`.timestamps`):
        ``{(topic, partition): ms}`` -> ``{(topic, partition): offset}``, -1 where no readable
        tiered record has a timestamp at or after it (read_committed: none before the offline
        end of the stable range, as a broker answers none at or past the LSO)."""
        from .timestamps import TimestampSearch
        search = TimestampSearch(self.listing.fetcher, self.listing.offset_index)
        keys = list(stamps)

        def one(key):
            tp = self._tiered[key]
            off = search.offset_for(tp.segments, stamps[key], tp.earliest)[0]
            return off if off < self._latest[key] else -1
        return dict(zip(keys, self.listing.map_concurrently(one, keys), strict=True))


def plan_offline(options, row_filter=None) -> Plan:
    """Plan a read from remote storage alone (``options.offline``)."""
    from ..storage.observer import CountingObserver
    from ..storage.registry import create_fetcher
    fetcher = create_fetcher(options.storage, observer=CountingObserver())
    if options.storage.layout == "aiven" and not fetcher.layout.reads_manifests:
        fetcher.close()
        raise ConfigError(f"fetcher {type(fetcher).__name__} cannot read Aiven manifests, which "
                          f"offline planning needs; use an ObjectStoreFetcher subclass",
                          option="remote.storage.fetcher.class")
    try:
        return OfflinePlanner(options, fetcher, row_filter).plan()
    finally:
        fetcher.close()
