"""Offsets and timestamps of every record of a batch, control records included: what Kafka's
ListOffsets looks at when it searches a segment for a timestamp (``FileRecords
.searchForTimestamp`` and ``RemoteLogManager.lookupTimestamp`` iterate ``for (Record record :
batch)``, which yields a control batch's record too).

Only the fixed part of each record is read (length, attributes, timestamp delta, offset delta);
keys, values and headers are skipped.  With LogAppendTime every record's timestamp is the
batch's ``maxTimestamp``, as in Kafka's ``DefaultRecordBatch``.
"""
from __future__ import annotations

from ..errors import CorruptRecordError
from .codecs import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress
from .header import CODEC_NONE, HEADER_SIZE, read_header


def _varint(buf, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    v = 0
    for i in range(max_bytes):
        if pos >= end:
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return (v >> 1) ^ -(v & 1), pos
    raise ValueError("varint too long")


def record_timestamps(batch, position: int = 0,
                      max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> list[tuple[int, int]]:
    """``[(offset, timestamp ms), ...]`` of the records of the one complete batch ``batch``
    (bytes of exactly one v2 batch); ``position`` places errors in the segment."""
    mv = memoryview(batch)
    h = read_header(mv, 0)
    body = mv[HEADER_SIZE:h.size]
    if h.codec != CODEC_NONE:
        body = memoryview(decompress(h.codec, body, max_decompressed_bytes, position=position,
                                     base_offset=h.base_offset))
    out = []
    pos, end = 0, len(body)
    try:
        for _ in range(h.record_count):
            length, pos = _varint(body, pos, end, 5)
            start = pos
            if length < 0 or start + length > end:
                raise ValueError(f"record length {length} past the end of the records")
            pos += 1                                             # attributes
            ts_delta, pos = _varint(body, pos, end, 10)
            off_delta, pos = _varint(body, pos, end, 5)
            ts = h.max_timestamp if h.log_append_time else h.base_timestamp + ts_delta
            out.append((h.base_offset + off_delta, ts))
            pos = start + length
    except ValueError as exc:
        raise CorruptRecordError(f"cannot read record timestamps: {exc}", position=position,
                                 base_offset=h.base_offset) from None
    return out
