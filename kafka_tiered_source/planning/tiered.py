"""A partition's range over the tiered segments a locator found, then the broker: what the
``metadata-topic`` and online ``listing`` locators share.

* Tiered segments are read directly from their first wanted offset up to the last tiered one;
  that includes offsets still held in the local log too, which then cost the broker nothing.
  A slice's byte start is 0 unless the range enters the segment mid-way; then the segment's
  remote offset index says where (one GET).  A hole in the tiered range (copies already
  deleted) ends the direct part.
* Everything past the last tiered offset is one broker range.
* read_committed: a reader of a tiered slice applies the aborted transactions of the
  ``.txnindex`` of the tiered segments from the slice on (markers sit with the segment that
  holds them) plus those whose markers lie in the local log.  One Fetch at the first untiered
  offset returns the latter: the broker lists every aborted transaction that was still open
  there (Kafka's ``collectAbortedTxns`` for that offset).
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..storage.indexes import lookup_position, parse_offset_index, parse_txn_index
from ..storage.segment import RemoteSegment
from .locate import Located, broker_tail
from .packing import SegmentSlice
from .plan import PartitionRange
from .tasks import AbortedTransaction, RemoteRange
from .txn import aborted_in


def locate_tiered(pr: PartitionRange, segments: Sequence[RemoteSegment], *,
                  offset_index: Callable[[RemoteSegment], bytes | None], fetcher, client,
                  isolation_level: int, txn_index_empty: Callable[[RemoteSegment], bool] = lambda s: False
                  ) -> Located:
    """The pieces of ``pr`` over ``segments`` (in offset order, not overlapping), then the broker."""
    pieces: list = []
    offset = pr.start
    remote_bytes = remote_offsets = 0
    tiered: list[RemoteSegment] = []
    for seg in segments:
        if seg.end_offset < offset or seg.base_offset >= pr.end:
            continue
        # A gap before the segment holds no records: compaction removed them (RemoteLogManager
        # moves on to the next segment too).  Copies are made in offset order, so a finished
        # copy past a missing one does not happen.
        offset = max(offset, seg.base_offset)
        end = min(pr.end, seg.end_offset + 1)
        start_pos = 0
        if offset > seg.base_offset:
            start_pos = lookup_position(parse_offset_index(offset_index(seg) or b""), seg.base_offset, offset)
        pieces.append(SegmentSlice(seg, offset, end, ((offset, start_pos),)))
        tiered.append(seg)
        remote_bytes += (seg.size_bytes or 0) - start_pos
        remote_offsets += end - offset
        offset = end
        if offset >= pr.end:
            break
    if offset < pr.end:
        pieces.append(broker_tail(pr, offset, remote_bytes, remote_offsets))
    untiered_from = tiered[-1].end_offset + 1 if tiered else pr.start
    return Located(pieces, _aborted_for(pr, tiered, untiered_from, fetcher, client, isolation_level,
                                        txn_index_empty))


def _aborted_for(pr, tiered, untiered_from, fetcher, client, isolation_level, txn_index_empty):
    cache: dict = {}

    def entries():
        # read once per partition, and only when a read_committed task asks
        if "entries" not in cache:
            found = []
            for seg in tiered:
                if txn_index_empty(seg):
                    continue
                data = fetcher.fetch_index(seg, "transaction")
                if data:
                    found += parse_txn_index(data, location=f"{seg.topic}-{seg.partition} segment "
                                                            f"{seg.segment_id}")
            local = []
            if untiered_from < pr.latest:
                res = client.fetch(pr.topic, pr.partition, untiered_from, max_bytes=1, partition_max_bytes=1,
                                   max_wait_ms=0, min_bytes=0, isolation_level=isolation_level)
                local = [AbortedTransaction(a.producer_id, a.first_offset)
                         for a in (res.partition.aborted_transactions or ())]
            cache["entries"] = (found, local)
        return cache["entries"]

    def aborted_for(topic, p, first, end, first_range):
        if not isinstance(first_range, RemoteRange):   # broker answers carry their own lists
            return ()
        found, local = entries()
        # a marker in the local log lies past every tiered offset, so past ``first``
        return [*aborted_in(found, first, end), *(a for a in local if a.first_offset < end)]

    return aborted_for
