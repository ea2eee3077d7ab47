"""Adapter from ``_native.Builder``'s raw buffers to a ``pyarrow.RecordBatch`` (no copy:
``pa.py_buffer`` wraps the C-owned memory, which lives as long as the Arrow arrays do)."""
from __future__ import annotations

import pyarrow as pa

from .._native import Builder as _NativeBuilder
from .._native import RecordFormatError, check_batch, crc32c
from .._native import fill_constant_columns as _fill_constant_columns
from .schema import HEADER_TYPE, TIMESTAMP_TYPE, kafka_schema

__all__ = ["Builder", "RecordFormatError", "check_batch", "crc32c"]   # what records/decoder.py takes

_STRUCT_TYPE = HEADER_TYPE.value_type


def _validity(nulls, buf):
    return pa.py_buffer(buf) if nulls else None


def _filled(n, name, partition):
    alloc = pa.allocate_buffer
    c = (alloc(4 * (n + 1)), alloc(n * len(name)), alloc(4 * n))
    _fill_constant_columns(name, partition, *c)
    return c


#: The last partition's constant-column buffers, for up to this many rows (a task reads one
#: partition after another: one entry is enough); 65,536-row batches of a 20-byte topic name
#: hold ~1.8 MB.
_CONSTANT_ROWS = 1 << 17
_constant: dict = {}


def _constant_columns(n, topic, partition):
    """Buffers of the topic and partition columns (one value on every row), from Arrow's pool.
    Their first rows are the same whatever the batch's size, and Arrow never writes to a
    buffer it was given, so the batches of a partition share one filled set, sliced to their
    rows (filling them for every batch cost ~4 % of decoding uncompressed data, and its memory
    traffic)."""
    name = topic.encode()
    key = (name, partition)
    c = _constant.get(key)
    if c is None or c[0] < n:
        if n > _CONSTANT_ROWS:
            return _filled(n, name, partition)
        _constant.clear()
        rows = max(n, min(_CONSTANT_ROWS, 2 * n))
        c = _constant[key] = (rows, _filled(rows, name, partition))
    offsets, data, values = c[1]
    return offsets.slice(0, 4 * (n + 1)), data.slice(0, n * len(name)), values.slice(0, 4 * n)


class Builder:
    """The native builder behind the :class:`~.builder.RecordBuilder` interface."""

    __slots__ = ("_b", "include_headers", "append", "append_lz4", "append_snappy",
                 "append_stream")
    #: lz4 batches go through the C decoder's own frame reader (``append_lz4``)
    fused_lz4 = True
    #: snappy batches go through its own snappy reader (``append_snappy``), zstd batches are
    #: pulled from python-zstandard a piece at a time (``append_stream``)
    fused_streams = True

    def __init__(self, include_headers: bool = True, max_bytes: int = 2**31 - 1):
        self._b = _NativeBuilder(include_headers, max_bytes)
        self.include_headers = include_headers
        self.append = self._b.append
        self.append_lz4 = self._b.append_lz4
        self.append_snappy = self._b.append_snappy
        self.append_stream = self._b.append_stream

    @property
    def rows(self) -> int:
        return self._b.rows

    def finish(self, topic: str, partition: int) -> pa.RecordBatch:
        c = self._b.finish()        # a _native.Columns: the buffers by name
        n = c.rows
        buf = pa.py_buffer
        const = _constant_columns(n, topic, partition)
        arrays = [
            pa.Array.from_buffers(pa.binary(), n, [_validity(c.key_nulls, c.key_validity),
                                                   buf(c.key_offsets), buf(c.key_data)],
                                  null_count=c.key_nulls),
            pa.Array.from_buffers(pa.binary(), n, [_validity(c.value_nulls, c.value_validity),
                                                   buf(c.value_offsets), buf(c.value_data)],
                                  null_count=c.value_nulls),
            pa.Array.from_buffers(pa.string(), n, [None, const[0], const[1]], null_count=0),
            pa.Array.from_buffers(pa.int32(), n, [None, const[2]], null_count=0),
            pa.Array.from_buffers(pa.int64(), n, [None, buf(c.offsets)], null_count=0),
            pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, buf(c.timestamps)], null_count=0),
            pa.Array.from_buffers(pa.int32(), n, [None, buf(c.timestamp_types)], null_count=0),
        ]
        if self.include_headers:
            nh = c.header_count
            hkeys = pa.Array.from_buffers(pa.string(), nh, [None, buf(c.header_key_offsets),
                                                            buf(c.header_key_data)], null_count=0)
            hvals = pa.Array.from_buffers(pa.binary(), nh,
                                          [_validity(c.header_value_nulls, c.header_value_validity),
                                           buf(c.header_value_offsets), buf(c.header_value_data)],
                                          null_count=c.header_value_nulls)
            structs = pa.StructArray.from_arrays([hkeys, hvals], fields=list(_STRUCT_TYPE))
            arrays.append(pa.Array.from_buffers(HEADER_TYPE, n,
                                                [_validity(c.header_nulls, c.header_validity),
                                                 buf(c.header_offsets)],
                                                null_count=c.header_nulls, children=[structs]))
        return pa.RecordBatch.from_arrays(arrays, schema=kafka_schema(self.include_headers))
