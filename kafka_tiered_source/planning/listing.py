"""The ``listing`` locator: find a partition's tiered segments by listing the object store.

One listing under the layout's prefix (per named topic, under ``{prefix}{topic}-``; the whole
prefix for ``subscribePattern``); every key is parsed back into (topic, topic id, partition, base
offset, segment id, suffix) with the inverse of the layout's key function
(:mod:`kafka_tiered_source.storage.layouts`).  Keys of any other shape are ignored.

Per partition, the segments in base-offset order.  End offsets come from the Aiven manifest's
``remoteLogSegmentMetadata`` when present, else from the segment's offset index's last entry plus
a walk of the batch headers of the tail (one ranged GET of the tail).  Not from the next segment's
base offset: compaction leaves gaps between segments, and a range promising offsets that its
bytes do not hold would read as a short read.  Sizes: the manifest's chunk index (Aiven), the
listed ``.log`` size (kafka-local-tiered).  Aiven: what the reader needs of each manifest (size,
chunk table) travels with the tasks as ``RemoteSegment.manifest_info``, so executors GET no
manifest.

Which copy is the live one is not visible in a listing (the broker's remote log metadata says
``COPY_SEGMENT_FINISHED``).  A copy that is incomplete (Aiven: no ``.rsm-manifest``, which the
plugin writes last; kafka-local-tiered: no ``.log`` or ``.index``) is skipped with a warning.  Two
complete copies of the same base offset (a re-upload after a failed copy) are refused with both
segment ids: picking one would be a guess.  Overlapping segments are refused too.

read_committed: the aborted transactions come from the ``.txnindex`` of every listed segment of
the partition.  Transactions still open at the end of the tiered range come from the last
segment's producer snapshot, or a walk of batch headers (see :meth:`StoreListing.open_transactions`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from itertools import pairwise

from ..errors import ConfigError, OfflinePlanningError, SegmentFormatError
from ..model import SubscribePattern
from ..records.header import iter_headers
from ..storage import aiven
from ..storage.indexes import (AbortedTxn, parse_offset_index, parse_producer_snapshot,
                               parse_txn_index)
from ..storage.layouts import listing_prefix, parse_aiven_key, parse_local_tiered_key
from ..storage.protocols import SegmentCatalog
from ..storage.segment import RemoteSegment
from .locate import Located
from .packing import SegmentSlice, index_checkpoints
from .plan import PartitionRange
from .tiered import locate_tiered
from .txn import aborted_in

log = logging.getLogger(__name__)

# Objects a segment copy must have to be complete, per layout.
_REQUIRED = {"aiven": frozenset({aiven.SUFFIX_LOG, aiven.SUFFIX_INDEXES, aiven.SUFFIX_MANIFEST}),
             "kafka-local-tiered": frozenset({"log", "index"})}


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


class StoreListing:
    """Finds tiered segments in remote storage.  ``fetcher`` must be able to list objects and,
    for the Aiven layout, read manifests."""

    name = "listing"

    def __init__(self, options, fetcher: SegmentCatalog):
        self.options = options
        self.fetcher = fetcher
        self.config = options.storage
        self._indexes: dict[str, bytes | None] = {}   # segment id -> offset index
        self._partitions: dict = {}                   # (topic, partition) -> TieredPartition
        self._aborted: dict = {}                      # (topic, partition) -> [AbortedTxn]

    # -- the catalogue -------------------------------------------------------------------------
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


    def where(self) -> str:
        c = self.config
        return f"{c.fetcher or c.fetcher_class} storage under prefix {c.prefix!r} ({c.layout} layout)"

    # -- segments ------------------------------------------------------------------------------
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
            raise OfflinePlanningError(f"{where}: no complete tiered segment in {self.where()}")
        segments = self._map(lambda c: self._segment(topic, partition, topic_id, *c), chosen)
        # End offsets the manifests did not give: walk the tail of each such segment.  Not
        # "next base - 1": compaction leaves gaps between segments, and a range that promises
        # offsets its bytes do not hold reads as a short (failed) read.
        unknown = [i for i, seg in enumerate(segments) if seg.end_offset < seg.base_offset]
        for i, end in zip(unknown, self._map(lambda i: self._last_offset(segments[i]), unknown), strict=True):
            segments[i] = _with_end(segments[i], end)
        for seg, nxt in pairwise(segments):
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
        m = self.fetcher.layout.manifest(seg)
        end = base - 1
        meta = m.remote_log_segment_metadata
        if isinstance(meta, dict) and isinstance(meta.get("endOffset"), int) \
                and not isinstance(meta.get("endOffset"), bool) and meta["endOffset"] >= base:
            end = meta["endOffset"]
        top = meta.get("maxTimestampMs") if isinstance(meta, dict) else None
        # What the reader needs of the manifest travels with the tasks: no executor GETs it again.
        return replace(_with_end(seg, end, m.chunk_index.original_file_size),
                       manifest_info=aiven.ManifestInfo.of(m),
                       max_timestamp=top if isinstance(top, int) and not isinstance(top, bool) else None)

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


    def _checkpoints(self, seg: RemoteSegment, first: int | None = None) -> tuple:
        o = self.options
        wants_split = ((seg.size_bytes or 0) > o.partition_target_bytes or o.min_partitions
                       or o.max_records_per_partition)
        # a read that starts inside the segment starts at the index entry before its offset
        mid = first is not None and first > seg.base_offset
        return index_checkpoints(seg, self._index_entries(seg)) if wants_split or mid else ()

    # -- transactions --------------------------------------------------------------------------
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


    # -- the locator ---------------------------------------------------------------------------
    def partition(self, topic: str, partition: int, topic_id: str, copies: dict) -> TieredPartition:
        """The partition's tiered segments, kept for :meth:`locate`."""
        tp = self._partitions[(topic, partition)] = self.tiered_partition(topic, partition,
                                                                          topic_id, copies)
        return tp

    def aborted(self, tp: TieredPartition) -> list[AbortedTxn]:
        """The partition's ``.txnindex`` entries, kept for :meth:`locate`."""
        entries = self._aborted[(tp.topic, tp.partition)] = self.aborted_entries(tp)
        return entries

    def locate(self, pr: PartitionRange) -> Located:
        tp = self._partitions[(pr.topic, pr.partition)]
        pieces = []
        for seg in tp.segments:
            first, end = max(pr.start, seg.base_offset), min(pr.end, seg.end_offset + 1)
            if first < end:
                pieces.append(SegmentSlice(seg, first, end, self._checkpoints(seg, first)))
        entries = self._aborted.get((pr.topic, pr.partition), ())
        return Located(pieces, lambda topic, p, first, end, _: aborted_in(entries, first, end))


def _name(seg: RemoteSegment) -> str:
    return f"{seg.topic}-{seg.partition} segment {seg.segment_id} (base offset {seg.base_offset})"

def _with_end(seg: RemoteSegment, end: int, size: int | None = None) -> RemoteSegment:
    return replace(seg, end_offset=end, size_bytes=seg.size_bytes if size is None else size)


class ListingLocator:
    """The ``listing`` locator with a broker: the store's listing finds the tiered segments,
    the broker supplies the bounds, the LSO and everything past the last tiered offset."""

    name = "listing"

    def __init__(self, options, fetcher: SegmentCatalog, client, *, isolation_level: int, offset_index):
        self.listing = StoreListing(options, fetcher)
        self.client = client
        self.iso = isolation_level
        self.offset_index = offset_index
        self._catalog: dict | None = None

    def locate(self, pr: PartitionRange) -> Located:
        if self._catalog is None:
            self._catalog = self.listing.catalog()
        copies = self._catalog.get(pr.topic, {}).get(pr.topic_id, {}).get(pr.partition)
        segments = (self.listing.tiered_partition(pr.topic, pr.partition, pr.topic_id, copies).segments
                    if copies else [])
        return locate_tiered(pr, segments, offset_index=self.offset_index, fetcher=self.listing.fetcher,
                             client=self.client, isolation_level=self.iso)
