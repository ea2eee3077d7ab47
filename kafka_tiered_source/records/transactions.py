"""read_committed filtering, as Kafka's consumer does it (Fetcher / CompletedFetch).

The filter is a small state machine fed every batch of one partition in log order.  Its state
(the aborted transactions not reached yet, and the producers currently inside an aborted
transaction) carries over from one call to the next, so an executor that decodes a partition
range by range — or segment by segment — passes the same object to every call.
"""
from __future__ import annotations

import heapq
import struct
from typing import Iterable

from ..errors import CorruptRecordError
from .header import BatchHeader

CONTROL_ABORT = 0
CONTROL_COMMIT = 1


class ReadCommittedFilter:
    """Decides which batches a read_committed consumer sees.

    ``aborted_transactions``: iterable of ``(producer_id, first_offset)`` — the broker's
    ``AbortedTransactions`` for the fetch, or the entries of the ``.txnindex`` files of this and
    later segments.  ``last_stable_offset``: nothing at or past it is returned (``None`` = no
    bound).  Pass one instance to successive ``decode_batches`` calls over consecutive ranges of
    one partition; do not share it between partitions.

    ``feeds``: another filter of the same partition that is shown every batch this one decides
    (and decides nothing here), so its state stays right across offsets this one covers: a
    task's filter of a partition across the broker ranges between its tiered ranges.
    """

    __slots__ = ("_aborted", "_aborted_pids", "last_stable_offset", "_feeds")

    def __init__(self, aborted_transactions: Iterable = (), last_stable_offset: int | None = None,
                 feeds: "ReadCommittedFilter | None" = None):
        entries = []
        for entry in aborted_transactions:
            if isinstance(entry, dict):   # the broker's JSON shape, as in meta.json
                pid, first = entry["producerId"], entry["firstOffset"]
            else:
                pid, first = entry[0], entry[1]
            entries.append((int(first), int(pid)))
        heapq.heapify(entries)
        self._aborted = entries
        self._aborted_pids: set[int] = set()
        self.last_stable_offset = None if last_stable_offset is None else int(last_stable_offset)
        self._feeds = feeds

    def __repr__(self):
        return (f"ReadCommittedFilter(pending_aborted={len(self._aborted)}, "
                f"aborted_pids={sorted(self._aborted_pids)}, "
                f"last_stable_offset={self.last_stable_offset})")

    def keep(self, header: BatchHeader, control_type: int | None = None) -> bool:
        """Feed one batch (in log order); True when its records are to be returned.

        ``control_type`` is the type of a control batch's first record (0 ABORT, 1 COMMIT) or
        None when the batch is not a control batch or has no record.  Control batches are never
        kept."""
        if self._feeds is not None:
            self._feeds.keep(header, control_type)
        pid = header.producer_id
        if pid >= 0:
            last = header.last_offset
            aborted = self._aborted
            while aborted and aborted[0][0] <= last:
                self._aborted_pids.add(heapq.heappop(aborted)[1])
            if header.is_control:
                if control_type == CONTROL_ABORT:
                    self._aborted_pids.discard(pid)
                return False
            if header.is_transactional and pid in self._aborted_pids:
                return False
        return not header.is_control


def control_type(records, header: BatchHeader, origin: int, decompressed: bool) -> int | None:
    """The type of the first control record in ``records`` (a batch's record bytes), or None
    for an empty control batch.  The key is ``version int16, type int16``."""
    from .cursor import Cursor, RecordFormatError

    if header.record_count == 0:
        return None
    c = Cursor(records, 0, len(records), origin, decompressed)
    try:
        start = c.pos
        length = c.varint("record length")
        if length < 6:
            raise c.fail(start, f"invalid record length {length}")
        c.need(length, "record")
        c.end = c.pos + length
        c.pos += 1
        c.varlong("timestamp delta")
        c.varint("offset delta")
        klen = c.varint("key length")
        if klen < 4:
            raise c.fail(c.pos - 1, f"control record key of {klen} bytes (needs 4)")
        c.need(klen, "control record key")
        (_version, ctype) = struct.unpack_from(">hh", records, c.pos)
        return ctype
    except RecordFormatError as exc:
        message, position = exc.args
        raise CorruptRecordError(message, position=position, base_offset=header.base_offset) from None
