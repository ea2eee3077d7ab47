"""The pure-Python reference backend (``KAFKA_TIERED_NO_EXTENSIONS=1``).

It mirrors native/records.c and native/batch.c rule for rule — the same checks, in the same
order, with the same byte positions — so the two backends return the same rows, the same
errors and the same leftovers.  It is the readable statement of what the C code does.
"""
from __future__ import annotations

import struct

import pyarrow as pa

from .cursor import Cursor, RecordFormatError  # noqa: F401  (the backend interface: be.RecordFormatError)
from .header import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE
from .schema import HEADER_TYPE, TIMESTAMP_TYPE

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def crc32c(data, start: int = 0, end: int | None = None) -> int:
    import crc32c as _crc   # the crc32c package: a dependency, not this project's extension

    return _crc.crc32c(memoryview(data)[start:end])


def check_batch(data, pos: int, size: int, origin: int, verify_crc: bool) -> None:
    c = Cursor(data, pos, len(data), origin, False)
    c.need(size, "record batch")
    c.need(HEADER_SIZE, "batch header")
    magic = data[pos + 16]
    if magic != 2:
        raise c.fail(pos + 16, f"unsupported record batch magic {magic} (only v2 is readable)")
    if verify_crc:
        (stored,) = struct.unpack_from(">I", data, pos + CRC_OFFSET)
        computed = crc32c(data, pos + ATTRIBUTES_OFFSET, pos + size)
        if stored != computed:
            raise c.fail(pos + CRC_OFFSET,
                         f"CRC-32C mismatch: stored 0x{stored:08x}, computed 0x{computed:08x}")


class Builder:
    """Python twin of ``_native.Builder``: rows accumulate in lists until ``finish``."""

    #: lz4 batches arrive decompressed (python-lz4), through ``append``
    fused_lz4 = False
    fused_streams = False

    def __init__(self, include_headers: bool = True, max_bytes: int = INT32_MAX):
        if not 1 <= max_bytes <= INT32_MAX:
            raise ValueError("max_bytes must be in [1, 2**31 - 1]")
        self.include_headers = include_headers
        self.max_bytes = max_bytes
        self._reset()

    def _reset(self):
        self.keys, self.values, self.offsets, self.timestamps, self.ts_types = [], [], [], [], []
        self.headers = []
        self.sizes = [0, 0, 0, 0]   # key, value, header key, header value bytes

    @property
    def rows(self) -> int:
        return len(self.offsets)

    def _too_big(self, have: int, add: int) -> bool:
        return add > self.max_bytes - have

    def append(self, data, pos, end, remaining, base_offset, base_timestamp, max_timestamp,
               log_append, min_offset, max_offset, origin, decompressed):
        c = Cursor(data, pos, end, origin, decompressed)
        while remaining > 0:
            if not self._record(c, base_offset, base_timestamp, max_timestamp, log_append,
                                min_offset, max_offset):
                return c.pos, remaining
            remaining -= 1
        if c.pos != c.end:
            raise c.fail(c.pos, f"{c.end - c.pos} bytes left after the batch's last record")
        return c.pos, remaining

    def _record(self, c, base_offset, base_timestamp, max_timestamp, log_append,
                min_offset, max_offset) -> bool:
        buf = c.buf
        start = c.pos
        length = c.varint("record length")
        if length < 6:
            raise c.fail(start, f"invalid record length {length}")
        c.need(length, "record")
        body = c.pos
        r = Cursor(buf, body, body + length, c.origin, c.decompressed)
        r.pos += 1   # attributes: unused in v2
        ts_delta = r.varlong("timestamp delta")
        off_delta = r.varint("offset delta")
        key, klen = r.nullable_bytes("key", "record key")
        value, vlen = r.nullable_bytes("value", "record value")
        hcount = r.varint("header count")
        if hcount < 0:
            raise r.fail(r.pos - 1, f"invalid header count {hcount}")
        if hcount > (r.end - r.pos) // 2:
            raise r.fail(r.pos - 1, f"header count {hcount} does not fit in the record")
        headers = []
        hk_bytes = hv_bytes = 0
        for _ in range(hcount):
            hklen = r.varint("header key length")
            if hklen < 0:
                raise r.fail(r.pos - 1, f"invalid header key length {hklen}")
            r.need(hklen, "header key")
            try:
                hkey = bytes(buf[r.pos:r.pos + hklen]).decode("utf-8")
            except UnicodeDecodeError:
                raise r.fail(r.pos, "header key is not valid UTF-8") from None
            r.pos += hklen
            hval, hvlen = r.nullable_bytes("header value", "header value")
            headers.append({"key": hkey, "value": hval})
            hk_bytes += hklen
            hv_bytes += max(hvlen, 0)
        if r.pos != r.end:
            raise r.fail(r.pos, f"record length {length} does not match its fields "
                                f"({r.pos - body} bytes)")
        offset = base_offset + off_delta
        if not INT64_MIN <= offset <= INT64_MAX:
            raise c.fail(start, "record offset overflows")
        if log_append:
            ts = max_timestamp
        else:
            ts = base_timestamp + ts_delta
            if not INT64_MIN <= ts <= INT64_MAX:
                raise c.fail(start, "record timestamp overflows")
        ts_us = ts * 1000
        if not INT64_MIN <= ts_us <= INT64_MAX:
            raise c.fail(start, f"record timestamp {ts} ms is out of range")
        if offset < min_offset or offset >= max_offset:
            c.pos = r.end
            return True
        kadd, vadd = max(klen, 0), max(vlen, 0)
        with_headers = self.include_headers and hcount > 0
        s = self.sizes
        if (self._too_big(s[0], kadd) or self._too_big(s[1], vadd)
                or (with_headers and (self._too_big(s[2], hk_bytes)
                                      or self._too_big(s[3], hv_bytes)))):
            if self.rows > 0:
                c.pos = start
                return False
            if max(kadd, vadd, hk_bytes, hv_bytes) > INT32_MAX:
                raise c.fail(start, "record too large for an Arrow binary column")
        self.keys.append(key)
        self.values.append(value)
        self.offsets.append(offset)
        self.timestamps.append(ts_us)
        self.ts_types.append(1 if log_append else 0)
        s[0] += kadd
        s[1] += vadd
        if self.include_headers:
            self.headers.append(headers if hcount > 0 else None)
            s[2] += hk_bytes
            s[3] += hv_bytes
        c.pos = r.end
        return True

    def finish(self, topic: str, partition: int) -> pa.RecordBatch:
        n = self.rows
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, pa.int64()).cast(TIMESTAMP_TYPE),
            pa.array(self.ts_types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, HEADER_TYPE))
        self._reset()
        from .schema import kafka_schema

        return pa.RecordBatch.from_arrays(arrays, schema=kafka_schema(self.include_headers))
