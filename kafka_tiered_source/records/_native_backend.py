"""Adapter from ``_native.Builder``'s raw buffers to a ``pyarrow.RecordBatch`` (no copy:
``pa.py_buffer`` wraps the C-owned memory, which lives as long as the Arrow arrays do)."""
from __future__ import annotations

import pyarrow as pa

from .. import _native
from .schema import HEADER_TYPE, TIMESTAMP_TYPE, kafka_schema

RecordFormatError = _native.RecordFormatError
check_batch = _native.check_batch
crc32c = _native.crc32c
_fill_constant_columns = _native.fill_constant_columns

_STRUCT_TYPE = HEADER_TYPE.value_type


def _validity(nulls, buf):
    return pa.py_buffer(buf) if nulls else None


def _constant_columns(n, topic, partition):
    """Buffers of the topic and partition columns (one value on every row), from Arrow's pool."""
    name = topic.encode()
    alloc = pa.allocate_buffer
    c = (alloc(4 * (n + 1)), alloc(n * len(name)), alloc(4 * n))
    _fill_constant_columns(name, partition, *c)
    return c


class Builder:
    __slots__ = ("_b", "include_headers", "append", "append_lz4")

    def __init__(self, include_headers: bool = True, max_bytes: int = 2**31 - 1):
        self._b = _native.Builder(include_headers, max_bytes)
        self.include_headers = include_headers
        self.append = self._b.append
        self.append_lz4 = self._b.append_lz4

    @property
    def rows(self) -> int:
        return self._b.rows

    def finish(self, topic: str, partition: int) -> pa.RecordBatch:
        t = self._b.finish()
        n = t[0]
        buf = pa.py_buffer
        c = _constant_columns(n, topic, partition)
        arrays = [
            pa.Array.from_buffers(pa.binary(), n, [_validity(t[1], t[2]), buf(t[3]), buf(t[4])],
                                  null_count=t[1]),
            pa.Array.from_buffers(pa.binary(), n, [_validity(t[5], t[6]), buf(t[7]), buf(t[8])],
                                  null_count=t[5]),
            pa.Array.from_buffers(pa.string(), n, [None, c[0], c[1]], null_count=0),
            pa.Array.from_buffers(pa.int32(), n, [None, c[2]], null_count=0),
            pa.Array.from_buffers(pa.int64(), n, [None, buf(t[9])], null_count=0),
            pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, buf(t[10])], null_count=0),
            pa.Array.from_buffers(pa.int32(), n, [None, buf(t[11])], null_count=0),
        ]
        if self.include_headers:
            hdr_nulls, nh, hv_nulls = t[12], t[15], t[18]
            hkeys = pa.Array.from_buffers(pa.string(), nh, [None, buf(t[16]), buf(t[17])],
                                          null_count=0)
            hvals = pa.Array.from_buffers(pa.binary(), nh,
                                          [_validity(hv_nulls, t[19]), buf(t[20]), buf(t[21])],
                                          null_count=hv_nulls)
            structs = pa.StructArray.from_arrays([hkeys, hvals], fields=list(_STRUCT_TYPE))
            arrays.append(pa.Array.from_buffers(HEADER_TYPE, n,
                                                [_validity(hdr_nulls, t[13]), buf(t[14])],
                                                null_count=hdr_nulls, children=[structs]))
        return pa.RecordBatch.from_arrays(arrays, schema=kafka_schema(self.include_headers))
