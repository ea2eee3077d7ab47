"""The schema registry wire format, read a batch at a time (facts.md, "Schema registry wire
format"): byte 0 the magic 0x00, bytes 1-4 the schema id (big-endian int32), then the payload;
for Protobuf the payload starts with the message indexes (a zig-zag varint count, then that many
zig-zag varints; the single byte 0x00 stands for [0]).

:func:`split` reads the magic and the id of every row from the Arrow buffers at once (numpy), so
a batch is grouped by schema id without a Python object per record.
"""
from __future__ import annotations


import numpy as np
import pyarrow as pa

from ..dataclass import dataclass

MAGIC = 0
HEADER = 5


@dataclass
class Frames:
    """Per row of a binary column: ``status`` (:data:`OK`, :data:`NULL` for a null value,
    :data:`SHORT` for fewer than 5 bytes, :data:`BAD_MAGIC`), ``schema_id`` (valid where OK)."""
    status: np.ndarray      # int8
    schema_id: np.ndarray   # int32
    starts: np.ndarray      # int32: where each value starts in the data buffer
    ends: np.ndarray        # int32


OK, NULL, SHORT, BAD_MAGIC = 0, 1, 2, 3
REASONS = {SHORT: "fewer than 5 bytes: not the schema registry's framing (magic byte, schema id)",
           BAD_MAGIC: "the first byte is not the magic byte 0 of the schema registry's framing"}


def buffers(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets of ``values``'s rows, its data) as numpy views (no copy)."""
    offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset:values.offset + len(values) + 1]
    data_buf = values.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None and data_buf.size else np.zeros(0, np.uint8)
    return offsets, data


def split(values: pa.Array) -> Frames:
    n = len(values)
    offsets, data = buffers(values)
    starts, ends = offsets[:-1], offsets[1:]
    lengths = ends - starts
    status = np.full(n, OK, np.int8)
    if values.null_count:
        valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), bool)
    else:
        valid = np.ones(n, bool)
    status[~valid] = NULL
    short = valid & (lengths < HEADER)
    status[short] = SHORT
    framed = valid & ~short
    ids = np.zeros(n, np.int32)
    if framed.any():
        at = starts[framed].astype(np.int64)
        magic = data[at]
        head = np.stack([data[at + k] for k in range(1, 5)]).astype(np.uint32)
        got = (head[0] << 24) | (head[1] << 16) | (head[2] << 8) | head[3]
        ids[framed] = got.view(np.int32)
        wrong = np.zeros(n, bool)
        wrong[framed] = magic != MAGIC
        status[wrong] = BAD_MAGIC
    return Frames(status, ids, starts, ends)


def _zigzag_varint(data: np.ndarray, pos: int, end: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("the Protobuf message indexes run past the value")
        b = int(data[pos])
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def message_indexes(values: pa.Array, rows: np.ndarray) -> tuple[np.ndarray, list[tuple[int, ...] | None],
                                                                  list[str | None]]:
    """For each of ``rows`` (all framed): where its Protobuf payload starts (bytes from the value's
    start), its message indexes, and an error (None when the indexes read)."""
    offsets, data = buffers(values)
    starts = offsets[rows].astype(np.int64)
    ends = offsets[rows + 1].astype(np.int64)
    skips = np.full(len(rows), HEADER + 1, np.int32)
    indexes: list[tuple[int, ...] | None] = [(0,)] * len(rows)
    errors: list[str | None] = [None] * len(rows)
    has_byte = ends > starts + HEADER
    first = np.zeros(len(rows), np.uint8)
    first[has_byte] = data[starts[has_byte] + HEADER]
    for i in np.nonzero(~has_byte | (first != 0))[0].tolist():
        end = int(ends[i])
        try:
            count, pos = _zigzag_varint(data, int(starts[i]) + HEADER, end)
            if count < 0 or count > 100:
                raise ValueError(f"{count} Protobuf message indexes")
            found = []
            for _ in range(count):
                index, pos = _zigzag_varint(data, pos, end)
                found.append(index)
            indexes[i] = tuple(found) or (0,)
            skips[i] = pos - int(starts[i])
        except ValueError as exc:
            indexes[i] = None
            errors[i] = str(exc)
    return skips, indexes, errors
