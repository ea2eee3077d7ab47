"""ListOffsets for a timestamp without a broker: the first tiered offset whose record has a
timestamp at or after it, found the way Kafka's broker finds it in remote storage
(``RemoteLogManager.findOffsetByTimestamp`` / ``lookupTimestamp``):

1. the segments in offset order, skipping those whose max timestamp is below the target (known
   from the Aiven manifest's ``remoteLogSegmentMetadata``, the metadata topic or a KIP-1248
   answer; a segment whose max timestamp is not known is searched);
2. in the first other segment, the time index gives the largest entry at or below the target
   (``TimeIndex.lookup``), the offset index the byte position of that offset
   (``OffsetIndex.lookup``, Kafka looks up ``max(entry offset, starting offset)``);
3. from there, the first batch whose ``maxTimestamp`` is at or after the target, and in it the
   first record (control records count, as in Kafka) with such a timestamp and an offset at or
   after the starting offset.  None in this segment: on to the next.

So every record before the answer has an earlier timestamp, which is what lets a pushed-down
``timestamp >=`` bound start the read there.  The answer is -1 when no tiered record qualifies
(a broker would go on into its local log; without one the tiered range is all there is).

Costs per partition asked: the time index and offset index of the segment searched (one GET
each; the Aiven fetcher reads both out of the segment's ``.indexes`` object) and the log bytes
from the indexed position to the first matching batch, read in 256 KiB steps.
"""
from __future__ import annotations

import logging

from ..errors import SegmentFormatError
from ..records.header import iter_headers
from ..records.timestamps import record_timestamps
from ..storage.indexes import lookup_position, lookup_time, parse_offset_index, parse_time_index
from ..storage.segment import RemoteSegment

log = logging.getLogger(__name__)

_STEP = 256 * 1024


class TimestampSearch:
    """Offsets for timestamps over the tiered segments of partitions.  ``fetcher`` is a
    :class:`~kafka_tiered_source.storage.protocols.SegmentCatalog`; ``offset_index(segment)``
    returns a segment's offset index bytes (the caller's cache, so a plan GETs each once)."""

    def __init__(self, fetcher, offset_index=None):
        self.fetcher = fetcher
        self.offset_index = offset_index or (lambda seg: fetcher.fetch_index(seg, "offset") or b"")
        self._time_indexes: dict = {}

    def time_index(self, seg: RemoteSegment) -> list[tuple[int, int]]:
        if seg.segment_id not in self._time_indexes:
            self._time_indexes[seg.segment_id] = parse_time_index(
                self.fetcher.fetch_index(seg, "timestamp") or b"")
        return self._time_indexes[seg.segment_id]

    def offset_for(self, segments, ts: int, starting_offset: int = 0) -> tuple[int, int]:
        """``(offset, timestamp)`` of the first record of ``segments`` (offset order) with a
        timestamp >= ``ts`` and an offset >= ``starting_offset``; ``(-1, -1)`` when none."""
        for seg in segments:
            if seg.end_offset < starting_offset:
                continue
            top = getattr(seg, "max_timestamp", None)
            if top is not None and top < ts:
                continue
            found = self._search(seg, ts, starting_offset)
            if found is not None:
                return found
        return -1, -1

    def _search(self, seg: RemoteSegment, ts: int, starting_offset: int):
        entry_offset = lookup_time(self.time_index(seg), seg.base_offset, ts)
        index = parse_offset_index(self.offset_index(seg) or b"")
        pos = lookup_position(index, seg.base_offset, max(entry_offset, starting_offset))
        for batch, at in self._batches(seg, pos):
            h = next(iter_headers(batch))
            if h.max_timestamp >= ts and h.last_offset >= starting_offset:
                for offset, rts in record_timestamps(batch, at):
                    if rts >= ts and offset >= starting_offset:
                        return offset, rts
        return None

    def _batches(self, seg: RemoteSegment, pos: int):
        """``(batch bytes, position)`` of every batch from ``pos`` to the end of the segment,
        read in steps (a batch larger than a step makes the next read longer)."""
        size = seg.size_bytes
        buf = b""
        at = pos                    # segment position of buf[0]
        step = _STEP
        while size is None or at + len(buf) < size:
            first = at + len(buf)   # the next byte to read
            end = first + step if size is None else min(size, first + step)
            data = bytes(self.fetcher.fetch_log_segment(seg, first, end))
            if not data:
                break
            buf += data
            used = 0
            try:
                for h in iter_headers(buf):
                    yield buf[h.position:h.end], at + h.position
                    used = h.end
            except ValueError as exc:
                raise SegmentFormatError(f"{exc} (searching for a timestamp from byte position "
                                         f"{at})", location=f"{seg.topic}-{seg.partition} segment "
                                                            f"{seg.segment_id}") from None
            buf, at = buf[used:], at + used
            if size is None and len(data) < end - first:
                break               # the end of the object
            # a batch longer than what is buffered: read at least the rest of it next time
            step = max(_STEP, _batch_length(buf) - len(buf))


def _batch_length(buf) -> int:
    if len(buf) < 12:
        return 0
    return int.from_bytes(buf[8:12], "big", signed=True) + 12
