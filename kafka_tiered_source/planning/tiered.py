"""A partition's range as the coverage map says it is served (:mod:`.coverage`): what the
``metadata-topic`` and online ``listing`` locators share.

* Each span a tiered copy serves becomes a slice of that copy, read directly; that includes
  offsets still held in the local log too, which then cost the broker nothing.  A slice's byte
  start is 0 unless it enters the copy mid-way (a range starting inside it, or an overlapping
  copy serving the offsets before); then the copy's remote offset index says where (one GET).
* Each span no copy serves (a hole between copies, everything past the last one) becomes a
  broker range: the broker serves it or says why.
* read_committed: a reader of a tiered slice applies the aborted transactions whose markers lie
  in spans served by tiered copies — from each copy's ``.txnindex``, only the entries whose
  marker lies in a span that copy serves (a copy's records past the lineage were truncated away,
  and so were their markers) — plus those whose markers lie in broker spans after its first
  offset.  One Fetch at the start of each such broker span returns the latter: the broker lists
  every aborted transaction still open there (Kafka's ``collectAbortedTxns`` for that offset).
  The markers past the range's end are found from the spans served after it (``after``, the
  coverage map from the end to the LSO) by :class:`~.txn_ends.PastEnd`.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from ..records.backend import slots_maker
from ..storage.indexes import lookup_position, parse_offset_index
from ..storage.segment import RemoteSegment
from .locate import Located, broker_range
from .packing import SegmentSlice
from .plan import PartitionRange
from .tasks import RemoteRange
from .txn import aborted_in
from .txn_ends import PastEnd, TxnIndexes, broker_aborted, piece_headers

# (start, end exclusive, the segment serving it or None for the broker)
SegmentSpan = tuple[int, int, Optional[RemoteSegment]]


def located_spans(pr: PartitionRange, spans: Sequence[SegmentSpan], *,
                  offset_index: Callable[[RemoteSegment], bytes | None], fetcher, client,
                  isolation_level: int, txn_index_empty: Callable[[RemoteSegment], bool] = lambda s: False,
                  after: Sequence[SegmentSpan] = (), ask_on_storage_fault: bool = True) -> Located:
    """The pieces of ``pr`` from its served ``spans`` (contiguous, covering the range);
    read_committed (``isolation_level`` 1): ``after``, the spans served from ``pr.end`` to the
    LSO, where the markers past the end are looked for (:class:`~.txn_ends.PastEnd`)."""
    pieces: list = []
    make_slice = slots_maker(SegmentSlice)
    remote_bytes = remote_offsets = 0
    served: list[SegmentSpan] = []
    for s, e, seg in spans:
        if seg is None:
            continue
        start_pos = 0
        if s > seg.base_offset:
            start_pos = lookup_position(parse_offset_index(offset_index(seg) or b""), seg.base_offset, s)
        pieces.append(make_slice(seg, s, e, ((s, start_pos),)))
        served.append((s, e, seg))
        remote_bytes += (seg.size_bytes or 0) - start_pos
        remote_offsets += e - s
    # broker spans sized from what the tiered part costs per offset (the same producers)
    out: list = []
    tiered = iter(pieces)
    for s, e, seg in spans:
        out.append(next(tiered) if seg is not None else broker_range(pr, s, e, remote_bytes, remote_offsets))
    holes = [s for s, _, seg in spans if seg is None]
    indexes = TxnIndexes(fetcher)
    tiered_entries = _tiered_entries(served, indexes, txn_index_empty)
    located = Located(out, _aborted_for(pr, tiered_entries, holes, client, isolation_level))
    located.coverage = tuple(spans)
    if isolation_level == 1:
        located.past_end = PastEnd(pr, after, indexes, empty=txn_index_empty, known=tiered_entries, client=client,
                                   isolation_level=isolation_level, ask_on_storage_fault=ask_on_storage_fault,
                                   headers=piece_headers(out, fetcher, client))
    return located


def _tiered_entries(served, indexes: TxnIndexes, txn_index_empty) -> Callable[[], list]:
    """The ``.txnindex`` entries whose markers lie in the spans the copies serve, read once per
    partition, and only when a read_committed task asks."""
    cache: list = []

    def tiered_entries():
        if not cache:
            found: list = []
            for s, e, seg in served:
                if not txn_index_empty(seg):
                    found += [x for x in indexes.entries(seg) if s <= x.last_offset < e]
            cache.append(found)
        return cache[0]
    return tiered_entries


def _aborted_for(pr, tiered_entries, holes, client, isolation_level):
    cache: dict = {}

    def at(offset):
        """The aborted transactions still open at ``offset`` whose markers the broker holds."""
        if offset not in cache:
            cache[offset] = broker_aborted(client, pr, offset, isolation_level) if offset < pr.latest else []
        return cache[offset]

    def aborted_for(topic, p, first, end, first_range):
        if not isinstance(first_range, RemoteRange):   # broker answers carry their own lists
            return ()
        later = [a for h in holes if h > first for a in at(h) if a.first_offset < end]
        return [*aborted_in(tiered_entries(), first, end), *later]

    return aborted_for
