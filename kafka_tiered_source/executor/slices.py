"""The read-time check of a tiered slice: the bytes must hold the offsets the plan gave them.

A plan puts offsets ``[offset_start, offset_end)`` at bytes ``[byte_start, byte_end)`` of a copy
it says holds ``[base_offset, end_offset]``.  Where that came from — ``__remote_log_metadata``,
a catalog snapshot in a directory other processes write (docs/catalog-trust.md), a listing, a
broker's answer — the bytes are the truth, so the reader checks, from the batch headers it walks
anyway, that:

* every batch lies inside the copy's offsets (a batch outside them is in another object, or
  the plan has the copy's offsets wrong);
* the slice's first batch begins at or before the planned start.  A slice starting at an
  offset-index position may begin with batches before it (they are skipped); one starting at
  the copy's first byte is exempt, since compaction may have removed the head of a copy (its
  first batch then begins after the copy's base offset), and so is one a KIP-1248 broker
  positioned (``RemoteSegment.broker_positions``: the batch holding the offset or, past a
  compaction gap, the next one; the broker is the authority there, no snapshot is involved);
* the slice reaches the planned end, or the copy's end: it was read to the object's last byte
  (a compacted tail: the last batch may end before the copy's end offset, and the offsets
  between hold no record).

Compaction leaves offset gaps inside and between batches: nothing here asks for every offset,
only that the batches are where the plan says.  A mismatch is a :class:`SliceMismatchError`
naming the object and the offsets, which the reader handles as any failed direct read.
"""
from __future__ import annotations

import struct

from ..errors import SliceMismatchError

_BASE_AND_LENGTH = struct.Struct(">qi")      # baseOffset int64, batchLength int32
_LAST_DELTA = struct.Struct(">i")            # lastOffsetDelta int32, at byte 23
_LAST_DELTA_AT = 23
_OVERHEAD = 12                               # baseOffset + batchLength


class SliceCheck:
    """Checks one :class:`~kafka_tiered_source.planning.tasks.RemoteRange` as its bytes are
    decoded; ``location`` names its object in errors."""

    __slots__ = ("r", "location", "backend", "first", "last")

    def __init__(self, r, location: str | None = None, backend: str | None = None):
        self.r = r
        self.location = location
        self.backend = backend
        self.first: int | None = None      # base offset of the slice's first batch
        self.last: int | None = None       # last offset of the last batch seen

    def walk(self, buf, consumed: int, stopped: bool) -> int:
        """Check the complete batches in ``buf[:consumed]`` (and, when the decoder ``stopped``
        at a batch past the planned end, that batch's header); returns the bytes of the batches
        holding offsets of the slice (what a broker would send for them)."""
        r = self.r
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        pos = 0
        wanted = 0
        while pos < consumed:
            base, length = _BASE_AND_LENGTH.unpack_from(mv, pos)
            last = base + _LAST_DELTA.unpack_from(mv, pos + _LAST_DELTA_AT)[0]
            self._batch(base, last)
            if last >= r.offset_start and base < r.offset_end:
                wanted += length + _OVERHEAD
            pos += length + _OVERHEAD
        if stopped and len(mv) - consumed >= _LAST_DELTA_AT + 4:
            base = _BASE_AND_LENGTH.unpack_from(mv, consumed)[0]
            self._batch(base, base + _LAST_DELTA.unpack_from(mv, consumed + _LAST_DELTA_AT)[0])
        return wanted

    def _batch(self, base: int, last: int) -> None:
        r, seg = self.r, self.r.segment
        if self.first is None:
            self.first = base
            if r.byte_start > 0 and base > r.offset_start and not seg.broker_positions:
                raise self._error(f"its first batch, at byte {r.byte_start}, starts at offset {base}, after the "
                                  f"planned start {r.offset_start}", (base, last))
        end = seg.end_offset if seg.end_offset is not None and seg.end_offset >= 0 else None
        if base < seg.base_offset or (end is not None and last > end):
            raise self._error(f"it holds a batch of offsets [{base}, {last}], outside the copy's "
                              f"[{seg.base_offset}, {seg.end_offset}]", (base, last))
        self.last = last

    def short(self, reached: int, received: int) -> SliceMismatchError:
        """The error of a slice whose bytes ended before the planned end and the copy's end."""
        r = self.r
        return self._error(f"bytes [{r.byte_start}, {r.byte_end}) ended at offset {reached}, before the planned "
                           f"end {r.offset_end} and the copy's end (got {received} bytes)", None)

    def _error(self, what: str, found: tuple[int, int] | None) -> SliceMismatchError:
        r, seg = self.r, self.r.segment
        return SliceMismatchError(
            f"{seg.topic}-{seg.partition}: the slice [{r.offset_start}, {r.offset_end}) of tiered copy "
            f"{seg.segment_id} [{seg.base_offset}, {seg.end_offset}] does not hold the offsets planned: {what}",
            planned=(r.offset_start, r.offset_end), copy=(seg.base_offset, seg.end_offset), found=found,
            location=self.location, backend=self.backend)
