"""Avro schema resolution (specification, "Schema Resolution"), compiled into a small program
that both decoders interpret per datum: the C loop in native/avro.c and its Python twin in
:mod:`._avro_python`.

The program is a list of instructions ``(kind, col, a, b, c)``.  Reading instructions follow
the reader's schema and write into the output columns (one per Arrow node of the reader's type,
in pre-order); skip instructions follow the writer's schema where the reader has nothing, and
may form cycles (a recursive writer type), which is why both interpreters bound the nesting.
Lists of instructions (a record's fields, a union's branches) and enum symbol maps live in one
int32 ``table``; strings (enum symbols, error messages) and reader defaults, already encoded as
Avro binary, are ``consts``.  A default is read like a datum, from its constant, by the reader's
own schema: the defaults are filled in as constants without any special case per type.

What is settled when the schemas are resolved raises AvroResolutionError here; what depends on
the data (a writer union branch no reader branch matches, an enum symbol the reader lacks and
has no default for) becomes an instruction that fails the datum, as the specification says.
"""
from __future__ import annotations

import math
import struct

import pyarrow as pa

from ._avro_schema import AvroResolutionError, Field, Node, arrow_type, non_null

# instruction kinds (native/avro.h has the same numbers)
(NOP, NULL, BOOL, INT_I32, INT_I64, INT_F32, INT_F64, INT_US, LONG_I64, LONG_F32, LONG_F64,
 LONG_US, FLOAT_F32, FLOAT_F64, DOUBLE_F64, BYTES, STRING, FIXED, FIXED_UUID, DEC_BYTES,
 DEC_FIXED, ENUM, RECORD, UNION, MEMBER, ARRAY, MAP, DEFAULT, ERROR, SKIP_BOOL, SKIP_INT,
 SKIP_LONG, SKIP_FLOAT, SKIP_DOUBLE, SKIP_BYTES, SKIP_FIXED, SKIP_ENUM, SKIP_RECORD, SKIP_UNION,
 SKIP_ARRAY, SKIP_MAP) = range(41)
# column kinds
C_NULL, C_BOOL, C_I32, C_I64, C_F32, C_F64, C_D128, C_BIN, C_STRUCT, C_LIST, C_MAP = range(11)
#: nesting of records, unions, arrays and maps a datum may reach (reached only by a recursive
#: writer type: schemas themselves nest at most MAX_DEPTH < DATA_DEPTH)
DATA_DEPTH = 128
#: items of zero width (nulls, empty records) one decode call may produce, and 8 more per byte of
#: the values: their count cannot be bounded by the bytes left, and a few bytes must not buy
#: millions of them
ZERO_WIDTH_BUDGET = 1 << 16
_MIN_CAP = 1 << 30

PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
              ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string")}
_MILLIS = ("timestamp-millis", "local-timestamp-millis")


class Column:
    __slots__ = ("kind", "type", "name", "children")

    def __init__(self, kind: int, type: pa.DataType, name: str):
        self.kind = kind
        self.type = type
        self.name = name
        self.children: list[int] = []


def _column_kind(n: Node) -> int:
    if n.logical == "decimal":
        return C_D128
    return {"null": C_NULL, "boolean": C_BOOL, "int": C_I32, "long": C_I64, "float": C_F32,
            "double": C_F64, "record": C_STRUCT, "array": C_LIST, "map": C_MAP}.get(n.kind, C_BIN)


class Program:
    """A resolution compiled: instructions, the int32 table, constants, and the columns."""

    def __init__(self) -> None:
        self.ops: list[list[int]] = []
        self.table: list[int] = []
        self.consts: list[bytes] = []
        self._const_ids: dict[bytes, int] = {}
        self.columns: list[Column] = []
        self.root = 0
        self._skips: dict[int, int] = {}
        self._min: dict[int, int] = {}

    def op(self, kind: int, col: int = -1, a: int = 0, b: int = 0, c: int = 0) -> int:
        self.ops.append([kind, col, a, b, c])
        return len(self.ops) - 1

    def const(self, data: bytes) -> int:
        if data not in self._const_ids:
            self._const_ids[data] = len(self.consts)
            self.consts.append(data)
        return self._const_ids[data]

    def listed(self, items: list[int]) -> int:
        start = len(self.table)
        self.table.extend(items)
        return start

    # -- columns: one per node of the reader's Arrow type, pre-order --

    def column(self, n: Node, name: str) -> int:
        t = arrow_type(n)
        if n.kind == "union":
            nn = non_null(n)
            if len(nn) == 1:
                return self.column(nn[0], name)
            if not nn:
                self.columns.append(Column(C_NULL, t, name))
                return len(self.columns) - 1
            i = len(self.columns)
            self.columns.append(Column(C_STRUCT, t, name))
            self.columns[i].children = [self.column(b, f"member{k}") for k, b in enumerate(nn)]
            return i
        i = len(self.columns)
        self.columns.append(Column(_column_kind(n), t, name))
        if n.kind == "record":
            self.columns[i].children = [self.column(f.type, f.name) for f in n.fields]
        elif n.kind == "array":
            self.columns[i].children = [self.column(n.items, "item")]    # type: ignore[arg-type]
        elif n.kind == "map":
            key = len(self.columns)
            self.columns.append(Column(C_BIN, pa.string(), "key"))
            self.columns[i].children = [key, self.column(n.values, "value")]  # type: ignore[arg-type]
        return i

    # -- the smallest encoding of a writer type: bounds array and map block counts --

    def min_size(self, n: Node) -> int:
        k = n.kind
        if k in ("null",):
            return 0
        if k == "float":
            return 4
        if k == "double":
            return 8
        if k == "fixed":
            return min(n.size, _MIN_CAP)
        if k == "record":
            if id(n) in self._min:
                return self._min[id(n)]
            self._min[id(n)] = 0          # a cycle counts as nothing: a looser bound is safe
            total = min(sum(self.min_size(f.type) for f in n.fields), _MIN_CAP)
            self._min[id(n)] = total
            return total
        return 1     # boolean, int, long, bytes, string, enum, array, map, union

    # -- skipping a writer type the reader does not read --

    def skip(self, n: Node) -> int:
        k = n.kind
        simple = {"null": NOP, "boolean": SKIP_BOOL, "int": SKIP_INT, "long": SKIP_LONG,
                  "float": SKIP_FLOAT, "double": SKIP_DOUBLE, "bytes": SKIP_BYTES,
                  "string": SKIP_BYTES}
        if k in simple:
            return self.op(simple[k])
        if k == "fixed":
            return self.op(SKIP_FIXED, a=n.size)
        if k == "enum":
            return self.op(SKIP_ENUM, b=len(n.symbols))
        if id(n) in self._skips:
            return self._skips[id(n)]
        i = self.op(NOP)
        self._skips[id(n)] = i            # before the children: a recursive type loops here
        if k == "record":
            subs = [self.skip(f.type) for f in n.fields]
            self.ops[i] = [SKIP_RECORD, -1, self.listed(subs), len(subs), 0]
        elif k == "union":
            subs = [self.skip(b) for b in n.branches]
            self.ops[i] = [SKIP_UNION, -1, self.listed(subs), len(subs), 0]
        elif k == "array":
            self.ops[i] = [SKIP_ARRAY, -1, self.skip(n.items), self.min_size(n.items), 0]  # type: ignore[arg-type]
        else:
            self.ops[i] = [SKIP_MAP, -1, self.skip(n.values), 1 + self.min_size(n.values), 0]  # type: ignore[arg-type]
        return i


# ---- matching (specification: "To match, one of the following must hold") ----

def names_match(w: Node, r: Node) -> bool:
    """Unqualified names match, or the reader's aliases name the writer's type (aliases are
    full names; an alias is also taken by its unqualified name, as fastavro does)."""
    if w.short == r.short or w.fullname in r.aliases:
        return True
    return any(a.rsplit(".", 1)[-1] == w.short for a in r.aliases)


def matches(w: Node, r: Node) -> bool:
    if w.kind == "union" or r.kind == "union":
        return True
    if w.kind != r.kind:
        return (w.kind, r.kind) in PROMOTIONS
    k = w.kind
    if w.logical == "decimal" and r.logical == "decimal" and (
            w.precision != r.precision or w.scale != r.scale):
        return False
    if k == "array":
        return matches(w.items, r.items)     # type: ignore[arg-type]
    if k == "map":
        return matches(w.values, r.values)   # type: ignore[arg-type]
    if k in ("record", "enum"):
        return names_match(w, r)
    if k == "fixed":
        return w.size == r.size and names_match(w, r)
    return True


# ---- resolution ----

def _fail(path: str, w: Node, r: Node, why: str) -> AvroResolutionError:
    where = path or "the datum"
    return AvroResolutionError(f"{where}: writer {w.describe()} cannot be read as reader "
                               f"{r.describe()}: {why}")


_NUMERIC = {
    ("int", "int"): INT_I32, ("int", "long"): INT_I64, ("int", "float"): INT_F32,
    ("int", "double"): INT_F64, ("long", "long"): LONG_I64, ("long", "float"): LONG_F32,
    ("long", "double"): LONG_F64, ("float", "float"): FLOAT_F32, ("float", "double"): FLOAT_F64,
    ("double", "double"): DOUBLE_F64,
}


def _message(text: str) -> bytes:
    """A datum error's text as a constant, at most 1000 bytes (the C decoder's error buffer
    holds 1024; both decoders then report the same text)."""
    data = text.encode()
    if len(data) > 1000:
        data = data[:997].decode(errors="ignore").encode() + b"..."
    return data


class _Resolver:
    def __init__(self, prog: Program):
        self.p = prog

    def resolve(self, w: Node, r: Node, col: int, path: str) -> int:
        p = self.p
        if w.kind == "union":
            branches = [self.writer_branch(b, i, w, r, col, path) for i, b in enumerate(w.branches)]
            return p.op(UNION, col, p.listed(branches), len(branches))
        if r.kind == "union":
            for i, rb in enumerate(r.branches):
                if matches(w, rb):
                    return self.into_union(w, r, i, col, path)
            raise _fail(path, w, r, "no branch of the reader's union matches")
        if not matches(w, r):
            raise _fail(path, w, r, "the types do not match")
        return self.same(w, r, col, path)

    def writer_branch(self, wb: Node, i: int, w: Node, r: Node, col: int, path: str) -> int:
        p = self.p
        if r.kind == "union":
            for k, rb in enumerate(r.branches):
                if matches(wb, rb):
                    return self.into_union(wb, r, k, col, path)
        elif matches(wb, r):
            return self.resolve(wb, r, col, path)
        msg = (f"{path or 'the datum'}: branch {i} ({wb.describe()}) of the writer's "
               f"{w.describe()} matches no branch of the reader's {r.describe()}")
        return p.op(ERROR, col, p.const(_message(msg)))

    def into_union(self, w: Node, r: Node, k: int, col: int, path: str) -> int:
        """Read `w` as branch k of the reader's union `r`, whose column is `col`."""
        p = self.p
        rb = r.branches[k]
        if rb.kind == "null":
            return p.op(NULL, col)       # the writer's branch is null too: nothing to read
        nn = non_null(r)
        if len(nn) == 1:
            return self.resolve(w, rb, col, path)
        member = nn.index(rb)
        child = self.resolve(w, rb, p.columns[col].children[member], path)
        return p.op(MEMBER, col, child, member)

    def same(self, w: Node, r: Node, col: int, path: str) -> int:
        p = self.p
        wk, rk = w.kind, r.kind
        if rk == "null":
            return p.op(NULL, col)
        if rk == "boolean":
            return p.op(BOOL, col)
        if (wk, rk) in _NUMERIC:
            kind = _NUMERIC[(wk, rk)]
            if r.logical in _MILLIS:
                kind = INT_US if wk == "int" else LONG_US
            return p.op(kind, col)
        if rk in ("bytes", "string"):
            if r.logical == "decimal":
                return p.op(DEC_BYTES, col, b=r.precision)
            return p.op(STRING if rk == "string" else BYTES, col)
        if rk == "fixed":
            if r.logical == "decimal":
                return p.op(DEC_FIXED, col, r.size, r.precision)
            return p.op(FIXED_UUID if r.logical == "uuid" else FIXED, col, r.size)
        if rk == "enum":
            return self.enum(w, r, col, path)
        if rk == "array":
            item = self.resolve(w.items, r.items, p.columns[col].children[0],   # type: ignore[arg-type]
                                f"{path}[]")
            return p.op(ARRAY, col, item, p.min_size(w.items))   # type: ignore[arg-type]
        if rk == "map":
            value = self.resolve(w.values, r.values, p.columns[col].children[1],  # type: ignore[arg-type]
                                 f"{path}{{}}")
            return p.op(MAP, col, value, 1 + p.min_size(w.values))   # type: ignore[arg-type]
        return self.record(w, r, col, path)

    def enum(self, w: Node, r: Node, col: int, path: str) -> int:
        p = self.p
        entries = []
        for sym in w.symbols:
            if sym in r.symbols:
                entries.append(p.const(sym.encode()))
            elif r.default is not None:
                entries.append(p.const(r.default.encode()))
            else:
                msg = (f"{path or 'the datum'}: symbol {sym} of the writer's {w.describe()} is "
                       f"not in the reader's {r.describe()}, which has no default")
                entries.append(-1 - p.const(_message(msg)))
        return p.op(ENUM, col, p.listed(entries), len(w.symbols))

    def record(self, w: Node, r: Node, col: int, path: str) -> int:
        p = self.p
        prefix = f"{path}." if path else f"{r.fullname}."
        by_name = {f.name: f for f in w.fields}
        source: dict[str, Field] = {}     # writer field name -> reader field
        for rf in r.fields:
            wf = by_name.get(rf.name)
            if wf is None or wf.name in source:
                wf = next((f for f in w.fields if f.name in rf.aliases and f.name not in source
                           and f.name not in {x.name for x in r.fields}), None)
            if wf is not None:
                source[wf.name] = rf
        children = p.columns[col].children
        index = {f.name: i for i, f in enumerate(r.fields)}
        subs = []
        for wf in w.fields:
            got = source.get(wf.name)
            if got is None:
                subs.append(p.skip(wf.type))
            else:
                subs.append(self.resolve(wf.type, got.type, children[index[got.name]],
                                         prefix + got.name))
        read = set(id(f) for f in source.values())
        for rf in r.fields:
            if id(rf) in read:
                continue
            fpath = prefix + rf.name
            if not rf.has_default:
                raise AvroResolutionError(
                    f"{fpath}: the reader's field ({rf.type.describe()}) is missing from the "
                    f"writer's {w.describe()} and has no default")
            data = encode_default(rf.default, rf.type, fpath)
            sub = self.resolve(rf.type, rf.type, children[index[rf.name]], fpath)
            subs.append(p.op(DEFAULT, children[index[rf.name]], p.const(data), sub))
        return p.op(RECORD, col, p.listed(subs), len(subs))


def compile_resolution(writer: Node, reader: Node) -> Program:
    prog = Program()
    col = prog.column(reader, "")
    prog.root = _Resolver(prog).resolve(writer, reader, col, "")
    return prog


# ---- reader defaults, encoded as Avro binary ----

def _zigzag(v: int) -> bytes:
    u = (v << 1) ^ (v >> 63)
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _latin1(v: object, what: str) -> bytes:
    if not isinstance(v, str):
        raise ValueError(f"{what} default must be a JSON string")
    try:
        return v.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"{what} default has a character above U+00FF") from None


def _number(v: object) -> float:
    if isinstance(v, bool):
        raise ValueError("not a number")
    if isinstance(v, (int, float)):
        return float(v)
    if v in ("NaN", "Infinity", "-Infinity"):
        return float(str(v).replace("Infinity", "inf"))
    raise ValueError("not a number")


def _encode(v: object, n: Node, out: bytearray) -> None:
    k = n.kind
    if k == "null":
        if v is not None:
            raise ValueError("null default must be null")
    elif k == "boolean":
        if not isinstance(v, bool):
            raise ValueError("boolean default must be true or false")
        out.append(1 if v else 0)
    elif k in ("int", "long"):
        lim = 31 if k == "int" else 63
        if isinstance(v, bool) or not isinstance(v, int) or not -(1 << lim) <= v < (1 << lim):
            raise ValueError(f"{k} default must be an integer in range")
        out += _zigzag(v)
    elif k in ("float", "double"):
        x = _number(v)
        if k == "float" and math.isfinite(x) and abs(x) > 3.4028234663852886e38:
            raise ValueError("float default out of range")
        out += struct.pack("<f" if k == "float" else "<d", x)
    elif k in ("bytes", "string"):
        if k == "string" and not isinstance(v, str):
            raise ValueError("string default must be a JSON string")
        data = v.encode() if isinstance(v, str) and k == "string" else _latin1(v, "bytes")
        out += _zigzag(len(data)) + data
    elif k == "fixed":
        data = _latin1(v, "fixed")
        if len(data) != n.size:
            raise ValueError(f"fixed default must have {n.size} bytes")
        out += data
    elif k == "enum":
        if v not in n.symbols:
            raise ValueError(f"enum default {v!r} is not a symbol")
        out += _zigzag(n.symbols.index(str(v)))
    elif k == "array":
        if not isinstance(v, list):
            raise ValueError("array default must be a JSON array")
        if v:
            out += _zigzag(len(v))
            for item in v:
                _encode(item, n.items, out)   # type: ignore[arg-type]
        out.append(0)
    elif k == "map":
        if not isinstance(v, dict):
            raise ValueError("map default must be a JSON object")
        if v:
            out += _zigzag(len(v))
            for key, item in v.items():
                data = key.encode()
                out += _zigzag(len(data)) + data
                _encode(item, n.values, out)  # type: ignore[arg-type]
        out.append(0)
    elif k == "union":
        # "Default values for union fields correspond to the first schema that matches in the
        # union" (the specification; before 1.12 it had to be the first schema)
        for i, b in enumerate(n.branches):
            attempt = bytearray(_zigzag(i))
            try:
                _encode(v, b, attempt)
            except ValueError:
                continue
            out += attempt
            return
        raise ValueError("default matches no branch of the union")
    else:
        if not isinstance(v, dict):
            raise ValueError(f"record {n.fullname} default must be a JSON object")
        for f in n.fields:
            if f.name in v:
                _encode(v[f.name], f.type, out)
            elif f.has_default:
                _encode(f.default, f.type, out)
            else:
                raise ValueError(f"record default lacks field {f.name}")


def encode_default(value: object, n: Node, path: str) -> bytes:
    out = bytearray()
    try:
        _encode(value, n, out)
    except (ValueError, RecursionError) as exc:
        raise AvroResolutionError(f"{path}: the reader's default {value!r} is not a valid "
                                  f"{n.describe()}: {exc}") from None
    return bytes(out)
