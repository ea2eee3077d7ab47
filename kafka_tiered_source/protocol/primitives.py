"""Readers and writers for the Kafka wire primitives.

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; ``buf`` is a memoryview (or bytes) of
the frame, so the codec never copies except where a value has to become a Python object.
Writers append to a ``bytearray``.  All integers are big-endian; varints use zigzag, uvarints
do not (Kafka's ``ByteUtils``).

Bounds are checked explicitly wherever slicing would otherwise silently truncate: a short frame
raises :class:`~kafka_tiered_source.errors.ProtocolError` naming the byte position.
"""
from __future__ import annotations

import struct

from ..errors import ProtocolError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


def _short(pos: int, need: int, have: int) -> ProtocolError:
    return ProtocolError(f"frame ends at byte {have}, needed {need} more byte(s) at byte position {pos}")


def _fixed(st: struct.Struct):
    size = st.size
    unpack_from = st.unpack_from
    pack = st.pack

    def read(buf, pos):
        try:
            return unpack_from(buf, pos)[0], pos + size
        except struct.error:
            raise _short(pos, size, len(buf)) from None

    def write(out: bytearray, value) -> None:
        try:
            out += pack(value)
        except struct.error as exc:
            raise ProtocolError(f"value {value!r} does not fit: {exc}") from None

    return read, write


read_int8, write_int8 = _fixed(_I8)
read_int16, write_int16 = _fixed(_I16)
read_uint16, write_uint16 = _fixed(_U16)
read_int32, write_int32 = _fixed(_I32)
read_uint32, write_uint32 = _fixed(_U32)
read_int64, write_int64 = _fixed(_I64)
read_float64, write_float64 = _fixed(_F64)


def read_bool(buf, pos):
    if pos >= len(buf):
        raise _short(pos, 1, len(buf))
    return buf[pos] != 0, pos + 1


def write_bool(out: bytearray, value) -> None:
    out.append(1 if value else 0)


# --- varints ---------------------------------------------------------------------------------

def read_uvarint(buf, pos, max_bytes: int = 5):
    """Unsigned varint (32-bit by default; ``max_bytes=10`` for 64-bit)."""
    if 0 <= pos < len(buf) and buf[pos] < 0x80:        # one byte: most lengths, counts and tags
        return buf[pos], pos + 1
    result = 0
    shift = 0
    start = pos
    n = len(buf)
    while True:
        if pos >= n:
            raise _short(pos, 1, n)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if pos - start >= max_bytes:
            raise ProtocolError(f"varint longer than {max_bytes} bytes at byte position {start}")


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ProtocolError(f"unsigned varint cannot hold {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_varint(buf, pos):
    raw, pos = read_uvarint(buf, pos, 5)
    return (raw >> 1) ^ -(raw & 1), pos


def write_varint(out: bytearray, value: int) -> None:
    if not -(1 << 31) <= value < (1 << 31):
        raise ProtocolError(f"varint out of int32 range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def read_varlong(buf, pos):
    raw, pos = read_uvarint(buf, pos, 10)
    return (raw >> 1) ^ -(raw & 1), pos


def write_varlong(out: bytearray, value: int) -> None:
    if not -(1 << 63) <= value < (1 << 63):
        raise ProtocolError(f"varlong out of int64 range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


# --- uuid ------------------------------------------------------------------------------------

def read_uuid(buf, pos):
    end = pos + 16
    if end > len(buf):
        raise _short(pos, 16, len(buf))
    return bytes(buf[pos:end]), end


def write_uuid(out: bytearray, value) -> None:
    if value is None or len(value) != 16:
        raise ProtocolError(f"a uuid is 16 raw bytes, got {value!r}")
    out += value


# --- length-prefixed bytes/strings -----------------------------------------------------------
# Classic: int16 (strings) / int32 (bytes) length, -1 = null.  Compact: uvarint length+1, 0 = null.

def _take(buf, pos, n):
    end = pos + n
    if end > len(buf):
        raise _short(pos, n, len(buf))
    return buf[pos:end], end


def read_length(buf, pos, compact: bool, classic_int16: bool):
    if compact:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    if classic_int16:
        return read_int16(buf, pos)
    return read_int32(buf, pos)


def read_string(buf, pos, compact: bool = False):
    """Returns ``None`` for a null string (callers check nullability)."""
    start = pos
    n, pos = read_length(buf, pos, compact, True)
    if n < 0:
        return None, pos
    raw, pos = _take(buf, pos, n)
    try:
        return str(raw, "utf-8"), pos
    except UnicodeDecodeError:
        raise ProtocolError(f"string at byte position {start} is not valid UTF-8") from None


def write_string(out: bytearray, value, compact: bool = False) -> None:
    if value is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff"
        return
    raw = value.encode("utf-8")
    if compact:
        write_uvarint(out, len(raw) + 1)
    else:
        if len(raw) > 0x7FFF:
            raise ProtocolError(f"string of {len(raw)} bytes does not fit an int16 length")
        out += _I16.pack(len(raw))
    out += raw


def read_bytes_view(buf, pos, compact: bool = False):
    """A memoryview into ``buf`` (no copy), or ``None`` for null."""
    n, pos = read_length(buf, pos, compact, False)
    if n < 0:
        return None, pos
    return _take(buf, pos, n)


def read_bytes(buf, pos, compact: bool = False):
    view, pos = read_bytes_view(buf, pos, compact)
    return (None if view is None else bytes(view)), pos


def write_bytes(out: bytearray, value, compact: bool = False) -> None:
    if value is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
        return
    n = len(value) if not isinstance(value, memoryview) else value.nbytes
    if compact:
        write_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)
    out += value


def read_array_length(buf, pos, compact: bool = False):
    """Element count, or -1 for a null array."""
    start = pos
    n, pos = read_length(buf, pos, compact, False)
    if n < -1:
        raise ProtocolError(f"negative array length {n} at byte position {start}")
    # A count larger than the bytes left cannot be honest (every element is >= 1 byte except
    # empty structs in non-flexible versions, which Kafka never declares); refuse before
    # allocating.
    if n > len(buf) - pos and n > 0:
        raise ProtocolError(f"array length {n} at byte position {start} exceeds the {len(buf) - pos} bytes left")
    return n, pos


def write_array_length(out: bytearray, n, compact: bool = False) -> None:
    """``n`` None means a null array."""
    if compact:
        write_uvarint(out, 0 if n is None else n + 1)
    else:
        out += _I32.pack(-1 if n is None else n)


# --- tagged fields ---------------------------------------------------------------------------

def read_tagged_fields(buf, pos):
    """The raw tagged-field section: ``[(tag, memoryview)]`` in wire order."""
    start = pos
    count, pos = read_uvarint(buf, pos)
    out = []
    last = -1
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        if tag <= last:
            raise ProtocolError(f"tagged fields out of order (tag {tag} after {last}) in section at byte position {start}")
        last = tag
        size, pos = read_uvarint(buf, pos)
        view, pos = _take(buf, pos, size)
        out.append((tag, view))
    return out, pos


def write_tagged_fields(out: bytearray, items) -> None:
    """``items``: iterable of (tag, encoded bytes); written in ascending tag order."""
    items = sorted(items, key=lambda kv: kv[0])
    write_uvarint(out, len(items))
    for tag, data in items:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
