"""The pure-Python Avro decoder: the reference the C decoder (native/avro.c) is held to.

It interprets the same compiled resolution (:mod:`._avro_resolve`) with the same rules and the
same error messages and offsets, builds a Python value per datum, and turns the values into one
Arrow array of the reader's type.  Used when ``KAFKA_TIERED_NO_EXTENSIONS=1``, and by the tests
and the fuzz harness as the twin the native path must agree with.
"""
from __future__ import annotations

import decimal
import struct
import uuid
from typing import Callable

import pyarrow as pa

from . import _avro_resolve as R

_F32 = struct.Struct("<f").unpack_from
_F64 = struct.Struct("<d").unpack_from
_CTX = decimal.Context(prec=80)
_I64 = 1 << 63


class Bad(Exception):
    """A malformed datum: offset within it, and why."""

    def __init__(self, offset: int, reason: str):
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


class Cursor:
    __slots__ = ("buf", "pos", "end", "base", "depth", "budget")

    def __init__(self, buf: bytes, value_bytes: int):
        self.buf = buf
        self.pos = self.end = self.base = self.depth = 0
        self.budget = R.ZERO_WIDTH_BUDGET + 8 * value_bytes

    def fail(self, at: int, reason: str) -> Bad:
        return Bad(at - self.base, reason)

    def need(self, n: int, what: str) -> None:
        left = self.end - self.pos
        if left < n:
            raise self.fail(self.pos, f"truncated {what}: needs {n} bytes, {left} left")

    def read_int(self) -> int:
        buf, p, start = self.buf, self.pos, self.pos
        v = 0
        for i in range(5):
            if p >= self.end:
                raise self.fail(start, "truncated int")
            b = buf[p]
            p += 1
            if i == 4 and b & 0xF0:
                raise self.fail(start, "invalid int encoding")
            v |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                break
        self.pos = p
        return (v >> 1) ^ -(v & 1)

    def read_long(self) -> int:
        buf, p, start = self.buf, self.pos, self.pos
        v = 0
        for i in range(10):
            if p >= self.end:
                raise self.fail(start, "truncated long")
            b = buf[p]
            p += 1
            if i == 9 and b & 0xFE:
                raise self.fail(start, "invalid long encoding")
            v |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                break
        self.pos = p
        return (v >> 1) ^ -(v & 1)

    def read_bytes(self, what: str) -> tuple[int, bytes]:
        at = self.pos
        n = self.read_long()
        if n < 0:
            raise self.fail(at, f"negative {what} length {n}")
        self.need(n, what)
        start = self.pos
        self.pos += n
        return start, self.buf[start:self.pos]

    def read_string(self) -> str:
        start, data = self.read_bytes("string")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(start, "invalid UTF-8 in string") from None

    def read_fixed(self, n: int) -> bytes:
        self.need(n, "fixed")
        self.pos += n
        return self.buf[self.pos - n:self.pos]

    def block(self, what: str, minsize: int) -> int:
        at = self.pos
        n = self.read_long()
        if n < 0:
            if n == -_I64:
                raise self.fail(at, f"{what} block count {n} out of range")
            n = -n
            self.read_long()                  # the block's byte size: not needed to read it
        left = self.end - self.pos
        if minsize > 0:
            if n > left // minsize:
                raise self.fail(at, f"{what} block of {n} items exceeds the {left} bytes left")
        elif n > 0:
            if n > self.budget:
                raise self.fail(at, "zero-width items exceed the call's budget (2^16 and 8 per byte of the values)")
            self.budget -= n
        return n

    def enter(self) -> None:
        if self.depth >= R.DATA_DEPTH:
            raise self.fail(self.pos, f"nesting deeper than {R.DATA_DEPTH} levels")
        self.depth += 1


def _decimal(c: Cursor, at: int, data: bytes, precision: int, scale: int) -> decimal.Decimal:
    v = int.from_bytes(data, "big", signed=True)
    if abs(v) >= 10 ** precision:
        raise c.fail(at, f"decimal does not fit precision {precision}")
    return decimal.Decimal(v).scaleb(-scale, _CTX)


Fn = Callable[[Cursor], object]


def compile_program(prog: R.Program) -> Fn:
    """The program as Python closures; returns the root's."""
    fns: list[Fn] = []
    table, consts, cols = prog.table, prog.consts, prog.columns

    def call(i: int) -> Fn:
        return lambda c: fns[i](c)       # late bound: skip programs may loop

    for kind, col, a, b, _ in prog.ops:
        fns.append(_build(kind, col, a, b, prog, call, table, consts, cols))
    return fns[prog.root]


def _build(kind, col, a, b, prog, call, table, consts, cols) -> Fn:   # noqa: C901
    if kind == R.NOP:
        return lambda c: None
    if kind == R.NULL:
        return lambda c: None
    if kind in (R.BOOL, R.SKIP_BOOL):
        def boolean(c: Cursor):
            c.need(1, "boolean")
            v = c.buf[c.pos]
            if v > 1:
                raise c.fail(c.pos, f"invalid boolean byte {v}")
            c.pos += 1
            return v == 1
        return boolean
    if kind in (R.INT_I32, R.INT_I64, R.SKIP_INT):
        return Cursor.read_int
    if kind in (R.INT_F32, R.INT_F64):
        return lambda c: float(c.read_int())
    if kind == R.INT_US:
        return lambda c: c.read_int() * 1000
    if kind in (R.LONG_I64, R.SKIP_LONG):
        return Cursor.read_long
    if kind in (R.LONG_F32, R.LONG_F64):
        return lambda c: float(c.read_long())
    if kind == R.LONG_US:
        def millis(c: Cursor):
            at = c.pos
            v = c.read_long()
            if not -_I64 <= v * 1000 < _I64:
                raise c.fail(at, f"timestamp {v} ms is out of range")
            return v * 1000
        return millis
    if kind in (R.FLOAT_F32, R.FLOAT_F64, R.SKIP_FLOAT):
        def f32(c: Cursor):
            c.need(4, "float")
            c.pos += 4
            return _F32(c.buf, c.pos - 4)[0]
        return f32
    if kind in (R.DOUBLE_F64, R.SKIP_DOUBLE):
        def f64(c: Cursor):
            c.need(8, "double")
            c.pos += 8
            return _F64(c.buf, c.pos - 8)[0]
        return f64
    if kind in (R.BYTES, R.SKIP_BYTES):
        return lambda c: c.read_bytes("bytes")[1]
    if kind == R.STRING:
        return Cursor.read_string
    if kind in (R.FIXED, R.SKIP_FIXED):
        return lambda c: c.read_fixed(a)
    if kind == R.FIXED_UUID:
        return lambda c: str(uuid.UUID(bytes=c.read_fixed(16)))
    if kind == R.DEC_BYTES:
        scale = cols[col].type.scale

        def dec_bytes(c: Cursor):
            at, data = c.read_bytes("bytes")
            return _decimal(c, at, data, b, scale)
        return dec_bytes
    if kind == R.DEC_FIXED:
        scale = cols[col].type.scale

        def dec_fixed(c: Cursor):
            at = c.pos
            return _decimal(c, at, c.read_fixed(a), b, scale)
        return dec_fixed
    if kind in (R.ENUM, R.SKIP_ENUM):
        def enum(c: Cursor):
            at = c.pos
            i = c.read_int()
            if not 0 <= i < b:
                raise c.fail(at, f"enum index {i} not in [0, {b})")
            if kind == R.SKIP_ENUM:
                return None
            e = table[a + i]
            if e < 0:
                raise c.fail(at, consts[-1 - e].decode())
            return consts[e].decode()
        return enum
    if kind == R.ERROR:
        message = consts[a].decode()

        def error(c: Cursor):
            raise c.fail(c.pos, message)
        return error
    if kind == R.DEFAULT:
        data, sub = consts[a], call(b)

        def default(c: Cursor):
            saved = (c.buf, c.pos, c.end, c.base)
            c.buf, c.pos, c.end, c.base = data, 0, len(data), 0
            try:
                return sub(c)
            except Bad as exc:       # (defaults are encoded by us: never malformed)
                raise Bad(saved[1] - saved[3], exc.reason) from None
            finally:
                c.buf, c.pos, c.end, c.base = saved
        return default
    if kind == R.MEMBER:
        names = [cols[k].name for k in cols[col].children]
        chosen, sub = names[b], call(a)

        def member(c: Cursor):
            out = dict.fromkeys(names)
            out[chosen] = sub(c)
            return out
        return member
    return _container(kind, col, a, b, prog, call, table, cols)


def _container(kind, col, a, b, prog, call, table, cols) -> Fn:
    if kind in (R.RECORD, R.SKIP_RECORD):
        subs = [(call(i), cols[prog.ops[i][1]].name if prog.ops[i][1] >= 0 else None)
                for i in table[a:a + b]]

        def record(c: Cursor):
            c.enter()
            out = {}
            for fn, name in subs:
                v = fn(c)
                if name is not None:
                    out[name] = v
            c.depth -= 1
            return out
        return record
    if kind in (R.UNION, R.SKIP_UNION):
        branches = [call(i) for i in table[a:a + b]]

        def union(c: Cursor):
            c.enter()
            at = c.pos
            i = c.read_int()
            if not 0 <= i < b:
                raise c.fail(at, f"union index {i} not in [0, {b})")
            v = branches[i](c)
            c.depth -= 1
            return v
        return union
    item = call(a)
    is_map = kind in (R.MAP, R.SKIP_MAP)
    what = "map" if is_map else "array"

    def sequence(c: Cursor):
        c.enter()
        out: list = []
        while True:
            n = c.block(what, b)
            if n == 0:
                break
            for _ in range(n):
                out.append((c.read_string(), item(c)) if is_map else item(c))
        c.depth -= 1
        return out
    return sequence


def decode(prog: R.Program, root: Fn, values: pa.Array, rows: list[int] | None, skip: int,
           permissive: bool) -> tuple[pa.Array, list[tuple[int, int, str]], tuple | None]:
    """-> (array, bad, error): `error` is the first malformed datum's (row, offset, reason)
    when not permissive (the array is then None)."""
    bufs = values.buffers()
    offsets = memoryview(bufs[1]).cast("i") if bufs[1] is not None else [0]
    data = bufs[2].to_pybytes() if bufs[2] is not None else b""
    off = values.offset
    valid = values.is_valid().to_pylist() if values.null_count else None
    c = Cursor(data, offsets[off + len(values)] - offsets[off])
    out: list = []
    bad: list[tuple[int, int, str]] = []
    for i, r in enumerate(range(len(values)) if rows is None else rows):
        if not 0 <= r < len(values):
            raise ValueError("avro_decode: a row index is outside the values")
        if valid is not None and not valid[r]:
            out.append(None)
            continue
        s, e = offsets[off + r], offsets[off + r + 1]
        try:
            if e - s < skip:
                raise Bad(0, f"value of {e - s} bytes is shorter than its {skip}-byte prefix")
            c.buf, c.pos, c.end, c.base, c.depth = data, s + skip, e, s + skip, 0
            out.append(root(c))
        except Bad as exc:
            if not permissive:
                return None, [], (i, exc.offset, exc.reason)
            out.append(None)
            bad.append((i, exc.offset, exc.reason))
    try:
        array = pa.array(out, type=prog.columns[0].type)
    except (pa.ArrowCapacityError, OverflowError) as exc:
        raise OverflowError(f"decoded Avro output passes 2 GiB in one Arrow array: {exc}") from None
    if isinstance(array, pa.ChunkedArray):
        raise OverflowError("decoded Avro output passes 2 GiB in one Arrow array")
    return array, bad, None
