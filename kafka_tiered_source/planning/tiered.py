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
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from ..storage.indexes import lookup_position, parse_offset_index, parse_txn_index
from ..storage.segment import RemoteSegment
from .locate import Located, broker_range
from .packing import SegmentSlice
from .plan import PartitionRange
from .tasks import AbortedTransaction, RemoteRange
from .txn import aborted_in

# (start, end exclusive, the segment serving it or None for the broker)
SegmentSpan = tuple[int, int, Optional[RemoteSegment]]


def located_spans(pr: PartitionRange, spans: Sequence[SegmentSpan], *,
                  offset_index: Callable[[RemoteSegment], bytes | None], fetcher, client,
                  isolation_level: int, txn_index_empty: Callable[[RemoteSegment], bool] = lambda s: False
                  ) -> Located:
    """The pieces of ``pr`` from its served ``spans`` (contiguous, covering the range)."""
    pieces: list = []
    remote_bytes = remote_offsets = 0
    served: list[SegmentSpan] = []
    for s, e, seg in spans:
        if seg is None:
            continue
        start_pos = 0
        if s > seg.base_offset:
            start_pos = lookup_position(parse_offset_index(offset_index(seg) or b""), seg.base_offset, s)
        pieces.append(SegmentSlice(seg, s, e, ((s, start_pos),)))
        served.append((s, e, seg))
        remote_bytes += (seg.size_bytes or 0) - start_pos
        remote_offsets += e - s
    # broker spans sized from what the tiered part costs per offset (the same producers)
    out: list = []
    tiered = iter(pieces)
    for s, e, seg in spans:
        out.append(next(tiered) if seg is not None else broker_range(pr, s, e, remote_bytes, remote_offsets))
    holes = [s for s, _, seg in spans if seg is None]
    located = Located(out, _aborted_for(pr, served, holes, fetcher, client, isolation_level, txn_index_empty))
    located.coverage = tuple(spans)
    return located


def _aborted_for(pr, served, holes, fetcher, client, isolation_level, txn_index_empty):
    cache: dict = {}

    def tiered_entries():
        # read once per partition, and only when a read_committed task asks
        if "tiered" not in cache:
            found: list = []
            entries_of: dict = {}
            for s, e, seg in served:
                if txn_index_empty(seg):
                    continue
                if seg.segment_id not in entries_of:
                    data = fetcher.fetch_index(seg, "transaction")
                    entries_of[seg.segment_id] = (parse_txn_index(data, location=f"{seg.topic}-{seg.partition} "
                                                                                f"segment {seg.segment_id}")
                                                  if data else [])
                found += [x for x in entries_of[seg.segment_id] if s <= x.last_offset < e]
            cache["tiered"] = found
        return cache["tiered"]

    def at(offset):
        """The aborted transactions still open at ``offset`` whose markers the broker holds."""
        if offset not in cache:
            got: list = []
            if offset < pr.latest:
                res = client.fetch(pr.topic, pr.partition, offset, max_bytes=1, partition_max_bytes=1,
                                   max_wait_ms=0, min_bytes=0, isolation_level=isolation_level)
                got = [AbortedTransaction(a.producer_id, a.first_offset)
                       for a in (res.partition.aborted_transactions or ())]
            cache[offset] = got
        return cache[offset]

    def aborted_for(topic, p, first, end, first_range):
        if not isinstance(first_range, RemoteRange):   # broker answers carry their own lists
            return ()
        later = [a for h in holes if h > first for a in at(h) if a.first_offset < end]
        return [*aborted_in(tiered_entries(), first, end), *later]

    return aborted_for
