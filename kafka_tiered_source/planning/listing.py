"""The ``listing`` locator: find a partition's tiered segments by listing the object store.

One listing under the layout's prefix (per named topic, under ``{prefix}{topic}-``; the whole
prefix for ``subscribePattern``); every key is parsed back into (topic, topic id, partition, base
offset, segment id, suffix) with the inverse of the layout's key function
(:mod:`kafka_tiered_source.storage.layouts`).  Keys of any other shape are ignored.

Per partition, the segments in base-offset order.  End offsets come from the Aiven manifest's
``remoteLogSegmentMetadata`` when present, else from the segment's offset index's last entry plus
a walk of the batch headers of the tail (one ranged GET of the tail): the last batch's, which
a compacted tail may leave below the copy's real end offset (Kafka's: the next local segment's
base - 1; see below for what each side does with the offsets in between).  Sizes: the manifest's chunk index (Aiven), the
listed ``.log`` size (kafka-local-tiered).  Aiven: what the reader needs of each manifest (size,
chunk table) travels with the tasks as ``RemoteSegment.manifest_info``, so executors GET no
manifest.

Which copy is live is not in the objects.  A copy that is incomplete (Aiven: no
``.rsm-manifest``, which the plugin writes last; kafka-local-tiered: no ``.log`` or ``.index``) is
skipped with a warning.  With a broker (:class:`ListingLocator`), overlapping and duplicate copies
are resolved as the metadata path resolves them (:mod:`.coverage`): each copy's leader epochs
come from the leader-epoch checkpoint uploaded with it (RemoteLogManager uploads the leader's
entries up to the segment's end: Aiven's ``leaderEpoch`` index, LocalTieredStorage's
``.leader_epoch_checkpoint``), the lineage from OffsetForLeaderEpoch; what no copy serves goes
to the broker.  Without a broker (:class:`StoreListing` alone) two complete copies of the same
base offset (a re-upload after a failed copy) are refused with both segment ids, and so are
overlapping copies: picking one would be a guess.  Offline, a copy whose end offset no manifest
gives ends where the next copy starts, as Kafka's copies do (RemoteLogManager.copyLogSegment:
the next local segment's base - 1): offsets past its last batch were compacted away.  Unless an
incomplete copy starts in between: then whether records are missing cannot be known, and the
read is refused naming the offsets.

read_committed: the aborted transactions come from the ``.txnindex`` of every listed segment of
the partition.  Transactions still open at the end of the tiered range come from the last
segment's producer snapshot, or a walk of batch headers (see :meth:`StoreListing.open_transactions`).
"""
from __future__ import annotations

from itertools import pairwise
from typing import Callable, Iterable, TypeVar

from ..dataclass import dataclass, replace
from ..errors import ConfigError, OfflinePlanningError, SegmentFormatError
from ..logs import get_logger
from ..model import SubscribePattern
from ..records.header import iter_headers
from ..storage import aiven
from ..storage.indexes import AbortedTxn, parse_offset_index, parse_producer_snapshot
from ..storage.layouts import listing_prefix, parse_aiven_key, parse_local_tiered_key
from ..storage.protocols import SegmentCatalog
from ..storage.segment import RemoteSegment
from .coverage import serving_all, split_at
from .lineage import epochs_in_range, parse_checkpoint
from .locate import Located
from .packing import SegmentSlice, index_checkpoints
from .tasks import BrokerRange
from .plan import PartitionRange
from .remote_log_state import FINISHED, CopyMeta, PartitionState
from .tiered import located_spans
from .txn import aborted_in
from .txn_ends import PastEnd, TxnIndexes, piece_headers

T = TypeVar("T")
R = TypeVar("R")

log = get_logger(__name__)

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
        self._indexes: dict[str, bytes] = {}   # segment id -> offset index (b"": none)
        self._partitions: dict = {}                   # (topic, partition) -> TieredPartition
        self._aborted: dict = {}                      # (topic, partition) -> [AbortedTxn]
        self.txn = TxnIndexes(fetcher)                # every copy's .txnindex, read once
        self._txn_empty: set[str] = set()             # copies whose .txnindex is known empty

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
    def complete_copies(self, topic: str, partition: int, topic_id: str, copies: dict
                        ) -> tuple[list[RemoteSegment], list[int]]:
        """The complete copies of a partition (by base offset, then segment id) with sizes and
        end offsets (the manifest's, else the last batch's), and the base offsets of the
        incomplete ones."""
        required = _REQUIRED[self.config.layout]
        chosen, incomplete = [], []
        for (base, seg_id), objects in sorted(copies.items()):
            missing = required - set(objects)
            if missing:
                log.warning("%s-%d: segment %s at offset %d is incomplete (no %s object), skipped: "
                            "an upload that did not finish is never read", topic, partition, seg_id,
                            base, ", ".join(sorted(missing)))
                incomplete.append(base)
                continue
            chosen.append((base, seg_id, objects))
        segments = self.map_concurrently(lambda c: self._segment(topic, partition, topic_id, *c), chosen)
        # End offsets the manifests did not give: walk the tail of each such segment.  An empty
        # object (a segment compaction emptied, which Kafka copies all the same) holds no batch:
        # it ends where the next copy starts (_contiguous), and a last one holds nothing to read.
        unknown = [i for i, seg in enumerate(segments) if seg.end_offset < seg.base_offset and seg.size_bytes]
        for i, end in zip(unknown, self.map_concurrently(lambda i: self._last_offset(segments[i]), unknown), strict=True):
            segments[i] = _with_end(segments[i], end)
        while segments and segments[-1].end_offset < segments[-1].base_offset:
            segments.pop()
        return segments, incomplete

    def tiered_partition(self, topic: str, partition: int, topic_id: str, copies: dict) -> TieredPartition:
        """Without a broker: the partition's copies, refused when two hold the same offsets."""
        where = f"{topic}-{partition}"
        by_base: dict[int, list[str]] = {}
        required = _REQUIRED[self.config.layout]
        for (base, seg_id), objects in copies.items():
            if not required - set(objects):
                by_base.setdefault(base, []).append(seg_id)
        for base, ids in sorted(by_base.items()):
            if len(ids) > 1:
                raise OfflinePlanningError(
                    f"{where}: {len(ids)} complete copies of the segment at offset {base} "
                    f"(segment ids {', '.join(sorted(ids))}); the broker's "
                    f"metadata says which one is COPY_FINISHED, remote storage alone does not: "
                    f"read with kafka.bootstrap.servers, or remove the stale copy")
        segments, incomplete = self.complete_copies(topic, partition, topic_id, copies)
        if not segments:
            raise OfflinePlanningError(f"{where}: no complete tiered segment in {self.where()}")
        for seg, nxt in pairwise(segments):
            if seg.end_offset >= nxt.base_offset:
                raise OfflinePlanningError(
                    f"{where}: segments {seg.segment_id} [{seg.base_offset}, {seg.end_offset}] "
                    f"and {nxt.segment_id} (from {nxt.base_offset}) overlap; remote storage "
                    f"alone cannot tell which one the broker serves")
        return TieredPartition(topic, partition, topic_id, _contiguous(where, segments, incomplete))

    def map_concurrently(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
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
            if not objects.get("txnindex"):    # no .txnindex object, or an empty one
                self._txn_empty.add(seg_id)
            return seg
        m = self.fetcher.layout.manifest(seg)
        txn = m.segment_indexes.get("transaction")
        if txn is None or not txn.size:
            self._txn_empty.add(seg_id)
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
    def txn_index_empty(self, seg: RemoteSegment) -> bool:
        """Whether the listing (or the copy's Aiven manifest) shows an empty ``.txnindex``."""
        return seg.segment_id in self._txn_empty

    def aborted_entries(self, tp: TieredPartition) -> list[AbortedTxn]:
        out = []
        for seg in tp.segments:
            if not self.txn_index_empty(seg):
                out += self.txn.entries(seg)
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
        """Offline: the range's slices; read_committed's aborted transactions from the entries
        :meth:`aborted` read, those whose markers lie past the range's end found as online
        (:class:`~.txn_ends.PastEnd`) over the copies after it, to the end of the tiered range,
        which the offline end of the range (:meth:`open_transactions`) makes complete."""
        tp = self._partitions[(pr.topic, pr.partition)]
        pieces: list[SegmentSlice | BrokerRange] = []
        for seg in tp.segments:
            first, end = max(pr.start, seg.base_offset), min(pr.end, seg.end_offset + 1)
            if first < end:
                pieces.append(SegmentSlice(seg, first, end, self._checkpoints(seg, first)))
        entries = [e for e in self._aborted.get((pr.topic, pr.partition), ()) if e.last_offset < pr.end]
        located = Located(pieces, lambda topic, p, first, end, _: aborted_in(entries, first, end))
        located.coverage = tuple((p.offset_start, p.offset_end, p.segment) for p in pieces
                                 if isinstance(p, SegmentSlice))
        if (pr.topic, pr.partition) in self._aborted:
            after = [(max(pr.end, seg.base_offset), seg.end_offset + 1, seg) for seg in tp.segments
                     if seg.end_offset >= pr.end]
            located.past_end = PastEnd(pr, after, self.txn, empty=self.txn_index_empty,
                                       known=lambda: [e for e in entries if e.last_offset >= pr.start],
                                       headers=piece_headers(pieces, self.fetcher))
        return located


def _contiguous(where: str, segments: list[RemoteSegment], incomplete: list[int]) -> list[RemoteSegment]:
    """Offline: each copy ends where the next one starts (Kafka's copies end at the next local
    segment's base - 1; a copy whose last batch ends earlier lost its tail to compaction), unless
    an incomplete copy starts in between, which may have held records: refused, naming them."""
    out = list(segments)
    for i, (seg, nxt) in enumerate(pairwise(segments)):
        if seg.end_offset + 1 >= nxt.base_offset:
            continue
        lost = [b for b in incomplete if seg.end_offset < b < nxt.base_offset]
        if lost:
            raise OfflinePlanningError(
                f"{where}: offsets [{seg.end_offset + 1}, {nxt.base_offset}) are in no complete tiered "
                f"copy, and an incomplete copy starts at offset {lost[0]}: whether records are missing "
                f"there cannot be known without a broker; read with kafka.bootstrap.servers")
        out[i] = _with_end(seg, nxt.base_offset - 1)
    return out


def _name(seg: RemoteSegment) -> str:
    return f"{seg.topic}-{seg.partition} segment {seg.segment_id} (base offset {seg.base_offset})"

def _with_end(seg: RemoteSegment, end: int, size: int | None = None) -> RemoteSegment:
    return replace(seg, end_offset=end, size_bytes=seg.size_bytes if size is None else size)


class ListingLocator:
    """The ``listing`` locator with a broker: the store's listing finds the tiered copies, each
    copy's leader-epoch checkpoint and OffsetForLeaderEpoch say which copy serves each offset
    (:mod:`.coverage`), the broker supplies the bounds and serves what no copy does."""

    name = "listing"

    def __init__(self, options, fetcher: SegmentCatalog, client, *, isolation_level: int, offset_index):
        self.listing = StoreListing(options, fetcher)
        self.client = client
        self.iso = isolation_level
        # read_committed: a later copy's transaction index that cannot be read is asked of the
        # broker when fetch.remote.fallback allows it, else the read fails naming the transaction
        self.ask_on_storage_fault = options.fetch_remote_fallback != "never"
        self.offset_index = offset_index
        self._catalog: dict | None = None
        self._segments: dict[str, RemoteSegment] = {}

    def refusal(self, pr: PartitionRange) -> str | None:
        return None

    def copies(self, pr: PartitionRange) -> PartitionState:
        """The partition's complete copies with their leader epochs, as finished copies of a
        replayed state, in the order copies finish on a healthy cluster (by end offset)."""
        if self._catalog is None:
            self._catalog = self.listing.catalog()
        listed = self._catalog.get(pr.topic, {}).get(pr.topic_id, {}).get(pr.partition)
        state = PartitionState()
        if not listed:
            return state
        segments, _ = self.listing.complete_copies(pr.topic, pr.partition, pr.topic_id, listed)
        epochs = self.listing.map_concurrently(self._epochs, segments)
        for n, (seg, eps) in enumerate(sorted(zip(segments, epochs, strict=True), key=lambda t: (t[0].end_offset, t[0].base_offset))):
            state.add(CopyMeta(
                segment_id=seg.segment_id, topic=seg.topic, topic_id=seg.topic_id, partition=seg.partition,
                start_offset=seg.base_offset, end_offset=seg.end_offset, size_bytes=seg.size_bytes or 0,
                max_timestamp_ms=seg.max_timestamp if seg.max_timestamp is not None else -1,
                leader_epochs=eps, custom_metadata=seg.custom_metadata, state=FINISHED, order=(n,)))
            self._segments[seg.segment_id] = seg
        return state

    def _epochs(self, seg: RemoteSegment) -> tuple[tuple[int, int], ...]:
        data = self.listing.fetcher.fetch_index(seg, "leader_epoch")
        if not data:
            raise SegmentFormatError("no leader-epoch checkpoint, which says which leader wrote the "
                                     "copy; the listing cannot tell overlapping copies apart without it",
                                     location=_name(seg))
        entries = parse_checkpoint(data, where=_name(seg))
        return epochs_in_range(entries, seg.base_offset, seg.end_offset + 1)

    def locate_all(self, prs) -> dict:
        states = {(pr.topic, pr.partition): self.copies(pr) for pr in prs}
        served = serving_all(self.client, prs, states, past_end=self.iso == 1)
        out = {}
        for pr in prs:
            spans, after = split_at([(s, e, self._segments[c.segment_id] if c is not None else None)
                                     for s, e, c in served[(pr.topic, pr.partition)]], pr.end)
            out[(pr.topic, pr.partition)] = located_spans(
                pr, spans, offset_index=self.offset_index, fetcher=self.listing.fetcher, client=self.client,
                isolation_level=self.iso, txn_index_empty=self.listing.txn_index_empty, after=after,
                ask_on_storage_fault=self.ask_on_storage_fault)
        return out
