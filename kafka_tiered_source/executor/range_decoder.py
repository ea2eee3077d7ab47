"""One tiered range's bytes, part by part as the prefetcher hands them over, into Arrow batches
of the size Spark takes best.

A part (a GET, 16 MiB by default) is decoded :data:`DECODE_UNIT` bytes at a time, each unit
ending where a record batch ends, so Arrow batches go out while the rest of the part is still
being decoded (Spark takes a batch only once it is whole).  One :class:`~..records.Batcher`
serves the whole range: its rows go out in batches of about
:data:`~..records.decoder.BATCH_ROWS` however the parts and units cut the log, and a record
batch cut by a part's end joins the same Arrow batch as the records around it.  Only that cut
batch is copied (its head from the part before, its tail from this one), never a part.

Each unit's batch headers are checked against the plan (:class:`~.slices.SliceCheck`) before
any of its rows go out: a mismatch keeps back the unit's rows and hands out the ones decoded
before it (:attr:`RangeDecoder.checked`), which the reader yields before it falls back.
"""
from __future__ import annotations

from typing import Callable, Iterator

from ..errors import SliceMismatchError
from .slices import SliceCheck

# Bytes of a fetched part decoded at a time.  A part is a GET (16 MiB); decoded in one go, its
# rows would all wait for its last record before Spark got any of them: the JVM would idle
# while the Python worker decodes, instead of converting the previous batch meanwhile.
DECODE_UNIT = 4 * 1024 * 1024


class RangeDecoder:
    """Decodes the parts of one :class:`~kafka_tiered_source.planning.tasks.RemoteRange`, in
    order.  ``reached``: every record below it has been decoded (and handed out, once
    :meth:`finish` has been); ``done``: the range's end (or the LSO) was met."""

    def __init__(self, r, check: SliceCheck, flt, include_headers: bool, count: Callable[..., object],
                 rows: int | None = None):
        from ..records import BATCH_ROWS, Batcher
        self.r = r
        self.check = check
        self.flt = flt
        self.count = count
        self.batcher = Batcher(rows or BATCH_ROWS, include_headers=include_headers)
        self.reached = r.offset_start     # every record below this has been decoded
        self.pos = r.byte_start           # segment position of the first byte not yet decoded
        self.carry = b""                  # the head of a record batch cut by the last part's end
        self.done = False
        self.checked: list = []           # after a mismatch: the rows decoded before it

    def feed(self, part) -> Iterator:
        """Decode ``part`` (the range's next bytes); yields the Arrow batches it fills."""
        mv = memoryview(part)
        n, at = len(mv), 0
        if self.carry:
            joined, at = _stitched(self.carry, mv)
            self.carry = b""
            consumed = yield from self._decode(joined)
            if self.done:
                return
            if consumed < len(joined):        # still cut: the batch runs past this part too
                self.carry = b"".join((joined[consumed:], mv[at:]))
                return
        while at < n:
            end = min(n, at + DECODE_UNIT)
            consumed = yield from self._decode(mv[at:end])
            if self.done:
                return
            if consumed == 0 and end < n:     # one record batch longer than a unit
                end = n
                consumed = yield from self._decode(mv[at:end])
                if self.done:
                    return
            at += consumed
            if end == n:
                break
        self.carry = bytes(mv[at:])

    def finish(self) -> list:
        """The rows decoded and not yet handed out, as at most one batch."""
        seg = self.r.segment
        last = self.batcher.finish(seg.topic, seg.partition)
        return [last] if last is not None else []

    @property
    def whole(self) -> bool:
        """No record batch is left cut: every byte fed was decoded."""
        return not self.carry

    def _decode(self, buf):
        from ..records import decode_batches
        r, seg = self.r, self.r.segment
        before = self.batcher.pending
        res = decode_batches(buf, topic=seg.topic, partition=seg.partition, start_offset=r.offset_start,
                             end_offset=r.offset_end, filter=self.flt, position=self.pos,
                             batcher=self.batcher, leftover=False)
        try:
            # the batches must be where the plan put them before any row goes out
            wanted = self.check.walk(buf, res.consumed, res.done)
        except SliceMismatchError:
            self.checked = _head([*res.batches, *self.finish()], before)
            raise
        self.count(broker_equivalent_bytes=wanted)
        yield from res.batches
        if res.next_offset is not None:
            self.reached = max(self.reached, res.next_offset)
        self.pos += res.consumed
        self.done = res.done
        return res.consumed


def _head(batches: list, rows: int) -> list:
    """The first ``rows`` rows of ``batches``."""
    out = []
    for b in batches:
        if rows <= 0:
            break
        out.append(b if b.num_rows <= rows else b.slice(0, rows))
        rows -= b.num_rows
    return out


def _stitched(carry: bytes, mv: memoryview) -> tuple[bytes, int]:
    """The record batch the previous part's end cut (``carry``, its first bytes) made whole from
    the head of ``mv``, and where the rest of ``mv`` starts.  Only that batch is joined, not the
    part.  When the cut batch's length cannot be read or it runs past ``mv``, all of ``mv`` is
    joined."""
    head = carry if len(carry) >= 12 else b"".join((carry, mv[:12 - len(carry)]))
    if len(head) >= 12:
        rest = 12 + int.from_bytes(head[8:12], "big", signed=True) - len(carry)
        if 0 < rest <= len(mv):
            return b"".join((carry, mv[:rest])), rest
    return b"".join((carry, mv)), len(mv)
