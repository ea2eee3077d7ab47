"""values.avro: Avro datums written by fastavro's schemaless_writer (the encoder under
confluent-kafka's AvroSerializer) decode to the Arrow arrays fastavro's schemaless_reader (what
its AvroDeserializer returns) gives, turned into Arrow by this file's own small mapping of the
interface's type table.  Every type and logical type, schema resolution (fields added with
defaults, removed, promoted, renamed by aliases, enum defaults), and malformed data under
FAILFAST and PERMISSIVE.  The tests marked `decoder` run with both decoders (the suite's second
pass sets KAFKA_TIERED_NO_EXTENSIONS=1); `both` runs the two side by side in one process.
"""
from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import uuid

import fastavro
import pyarrow as pa
import pytest

from kafka_tiered_source.values import avro
from kafka_tiered_source.values.avro import (AvroDecodeError, decode, parse_schema, resolve)

PREFIX = b"\x00\x00\x00\x00\x07"          # magic byte, schema id 7: what decode skips
UTC = dt.timezone.utc
BACKENDS = ("native", "python")


# ---- the test's own mapping: fastavro's Python values -> Arrow (the interface's table) ----

def _names(s, ns="", out=None):
    """Named types of a schema (JSON) by full name, as the test wrote them."""
    out = {} if out is None else out
    if isinstance(s, list):
        for b in s:
            _names(b, ns, out)
    elif isinstance(s, dict):
        t = s["type"]
        if t in ("record", "enum", "fixed"):
            full = s["name"] if "." in s["name"] else ".".join(x for x in (s.get("namespace", ns), s["name"]) if x)
            out[full] = s
            inner = full.rsplit(".", 1)[0] if "." in full else ""
            for f in s.get("fields", []):
                _names(f["type"], inner, out)
        elif t == "array":
            _names(s["items"], ns, out)
        elif t == "map":
            _names(s["values"], ns, out)
    return out


def _deref(s, names):
    if isinstance(s, str) and s not in ("null", "boolean", "int", "long", "float", "double",
                                        "bytes", "string"):
        return names[s] if s in names else next(v for k, v in names.items() if k.endswith("." + s))
    return s


LOGICAL = {"date": pa.date32(), "time-millis": pa.int32(), "time-micros": pa.int64(),
           "timestamp-millis": pa.timestamp("us", "UTC"), "timestamp-micros": pa.timestamp("us", "UTC"),
           "local-timestamp-millis": pa.timestamp("us"), "local-timestamp-micros": pa.timestamp("us"),
           "uuid": pa.string()}
LOGICAL_ON = {"date": "int", "time-millis": "int", "time-micros": "long", "timestamp-millis": "long",
              "timestamp-micros": "long", "local-timestamp-millis": "long", "local-timestamp-micros": "long",
              "uuid": ("string", "fixed")}
PRIM = {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
        "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}


def arrow_of(s, names) -> pa.DataType:
    s = _deref(s, names)
    if isinstance(s, str):
        return PRIM[s]
    if isinstance(s, list):
        nn = [b for b in s if b != "null"]
        if len(nn) == 1:
            return arrow_of(nn[0], names)
        return pa.struct([(f"member{i}", arrow_of(b, names)) for i, b in enumerate(nn)])
    t, lt = s["type"], s.get("logicalType")
    if lt == "decimal" and s.get("scale", 0) <= s["precision"]:
        return pa.decimal128(s["precision"], s.get("scale", 0))
    if lt in LOGICAL and t in LOGICAL_ON[lt] and (lt != "uuid" or t == "string" or s.get("size") == 16):
        return LOGICAL[lt]
    if t == "record":
        return pa.struct([(f["name"], arrow_of(f["type"], names)) for f in s["fields"]])
    if t == "array":
        return pa.list_(arrow_of(s["items"], names))
    if t == "map":
        return pa.map_(pa.string(), arrow_of(s["values"], names))
    return {"enum": pa.string(), "fixed": pa.binary()}.get(t) or arrow_of(t, names)


def _latin1(v):
    return v.encode("latin-1") if isinstance(v, str) else v


def _branch(nn, v, names):
    """Which non-null branch fastavro's value came from (named types come as (name, value))."""
    if isinstance(v, tuple):
        name, v = v
        for i, b in enumerate(nn):
            d = _deref(b, names)
            if isinstance(d, dict) and d.get("name") in (name, name.rsplit(".", 1)[-1]):
                return i, v
    kinds = {bool: ("boolean",), int: ("int", "long"), float: ("float", "double"),
             str: ("string",), bytes: ("bytes",), list: ("array",), dict: ("map",)}[type(v)]
    for i, b in enumerate(nn):
        d = _deref(b, names)
        if (d if isinstance(d, str) else d["type"]) in kinds:
            return i, v
    raise AssertionError(f"no branch for {v!r}")


def to_arrow(s, v, names):
    """fastavro's value (or a reader default, which it returns as written in JSON) for schema s."""
    s = _deref(s, names)
    if v is None:
        return None
    if isinstance(s, list):
        nn = [b for b in s if b != "null"]
        if len(nn) == 1:
            return to_arrow(nn[0], v[1] if isinstance(v, tuple) else v, names)
        i, v = _branch(nn, v, names)
        return {f"member{k}": (to_arrow(b, v, names) if k == i else None) for k, b in enumerate(nn)}
    if isinstance(s, str):
        return _latin1(v) if s == "bytes" else v
    t, lt = s["type"], s.get("logicalType")
    if lt == "decimal" and s.get("scale", 0) <= s["precision"]:
        if isinstance(v, (str, bytes)):
            v = decimal.Decimal(int.from_bytes(_latin1(v), "big", signed=True)).scaleb(-s.get("scale", 0))
        return v
    if lt == "uuid":
        if isinstance(v, bytes) and len(v) == 16:
            return str(uuid.UUID(bytes=v))
        return str(v) if t == "string" else v
    if lt in ("time-millis", "time-micros") and isinstance(v, dt.time):
        us = ((v.hour * 60 + v.minute) * 60 + v.second) * 10**6 + v.microsecond
        return us // 1000 if lt == "time-millis" else us
    if lt in ("timestamp-millis", "local-timestamp-millis") and isinstance(v, int):
        return v * 1000
    if t == "record":
        return {f["name"]: to_arrow(f["type"], v.get(f["name"]), names) for f in s["fields"]}
    if t == "array":
        return [to_arrow(s["items"], x, names) for x in v]
    if t == "map":
        return [(k, to_arrow(s["values"], x, names)) for k, x in v.items()]
    if t in ("fixed", "bytes"):
        return _latin1(v)
    return v


# ---- writing and reading the way confluent-kafka's serializers do ----

def write(schema, records, prefix=PREFIX):
    parsed = fastavro.parse_schema(schema)
    out = []
    for r in records:
        if r is None:
            out.append(None)
            continue
        b = io.BytesIO()
        b.write(prefix)
        fastavro.schemaless_writer(b, parsed, r)
        out.append(b.getvalue())
    return pa.array(out, pa.binary())


def fastavro_read(writer, reader, values):
    w, r = fastavro.parse_schema(writer), fastavro.parse_schema(reader)
    return [None if v is None else fastavro.schemaless_reader(io.BytesIO(v[len(PREFIX):]), w, r,
                                                              return_named_type=True)
            for v in values.to_pylist()]


def expected(writer, reader, values):
    names = _names(reader)
    got = [None if v is None else to_arrow(reader, v, names) for v in fastavro_read(writer, reader, values)]
    return pa.array(got, arrow_of(reader, names))


def schema(s):
    return parse_schema(json.dumps(s))


def both(res, values, **kw):
    """Decode with both decoders; they must agree exactly (rows and bad entries)."""
    skip, permissive = kw.get("skip", 5), kw.get("permissive", False)
    args = avro._inputs(values, kw.get("rows"), skip)
    out = [avro._decode_with(b, res, *args, skip, permissive) for b in BACKENDS]
    assert out[0].array.equals(out[1].array), (out[0].array, out[1].array)
    assert out[0].bad == out[1].bad
    return out[0]


def check(writer, reader, records):
    values = write(writer, records)
    res = resolve(schema(writer), schema(reader))
    want = expected(writer, reader, values)
    got = decode(res, values)
    assert got.bad == []
    assert got.array.type == want.type
    assert got.array.equals(want), (got.array.to_pylist(), want.to_pylist())
    both(res, values)
    return got.array


# ---- every type and logical type ----

FIXED4 = {"type": "fixed", "name": "Four", "size": 4}
ALL_TYPES = {
    "type": "record", "name": "Everything", "namespace": "t.types", "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "by", "type": "bytes"},
        {"name": "s", "type": "string"},
        {"name": "n", "type": "null"},
        {"name": "fx", "type": FIXED4},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "a", "type": {"type": "array", "items": "long"}},
        {"name": "m", "type": {"type": "map", "values": "string"}},
        {"name": "nested", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "x", "type": "int"},
            {"name": "deeper", "type": {"type": "record", "name": "Deeper", "fields": [
                {"name": "tags", "type": {"type": "array", "items": "string"}}]}}]}},
        {"name": "opt", "type": ["null", "string"]},
        {"name": "opt_last", "type": ["long", "null"]},
        {"name": "multi", "type": ["null", "int", "string", "Inner"]},
        {"name": "again", "type": "Inner"},
        {"name": "fx2", "type": "Four"},
        {"name": "recs", "type": {"type": "array", "items": {"type": "record", "name": "Item", "fields": [
            {"name": "k", "type": "string"}, {"name": "v", "type": ["null", "double"]}]}}},
        {"name": "mrec", "type": {"type": "map", "values": ["null", "Item"]}},
    ]}


def everything(i):
    inner = {"x": i, "deeper": {"tags": ["t"] * (i % 3)}}
    return {
        "b": i % 2 == 0, "i": -(2**31) if i == 1 else i * 7, "l": 2**63 - 1 if i == 2 else -i * 10**12,
        "f": 1.5 * i, "d": -2.25 * i, "by": bytes(range(i % 5)), "s": "héllo ✓ " * (i % 3),
        "n": None, "fx": b"abcd", "e": ["RED", "GREEN", "BLUE"][i % 3], "a": list(range(i % 4)),
        "m": {f"k{j}": "v" * j for j in range(i % 3)}, "nested": inner,
        "opt": None if i % 2 else f"o{i}", "opt_last": None if i % 3 == 0 else i,
        "multi": [None, 5, "five", ("t.types.Inner", inner)][i % 4], "again": inner, "fx2": b"\x00\xff\x00\xff",
        "recs": [{"k": f"r{j}", "v": None if j % 2 else j / 2} for j in range(i % 3)],
        "mrec": {"a": None, "b": {"k": "x", "v": 1.0}} if i % 2 else {},
    }


@pytest.mark.decoder
def test_every_type_decodes_to_what_fastavro_reads():
    arr = check(ALL_TYPES, ALL_TYPES, [everything(i) for i in range(12)] + [None])
    assert arr.null_count == 1 and len(arr) == 13


LOGICALS = {
    "type": "record", "name": "Logical", "fields": [
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
        {"name": "decf", "type": {"type": "fixed", "name": "D16", "size": 16, "logicalType": "decimal",
                                  "precision": 38, "scale": 10}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "uidf", "type": {"type": "fixed", "name": "U16", "size": 16, "logicalType": "uuid"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "tsms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsus", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "lms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "lus", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "odec", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}]},
        {"name": "unknown", "type": {"type": "string", "logicalType": "lowercase"}},
        {"name": "misplaced", "type": {"type": "long", "logicalType": "date"}},
    ]}


def logical(i):
    base = dt.datetime(2024, 2, 29, 13, 14, 15, 123456, tzinfo=UTC) + dt.timedelta(days=400 * (i - 3))
    return {
        "dec": decimal.Decimal("-12345678.9012") * (i - 2), "decf": decimal.Decimal("1234567890123.4567890123") * i,
        "uid": uuid.UUID(int=i * 0x1234567890ABCDEF), "uidf": uuid.UUID(int=2**128 - 1 - i).bytes,
        "day": dt.date(1969, 12, 31) + dt.timedelta(days=i * 1000), "tms": dt.time(23, 59, 59, 999000),
        "tus": dt.time(0, 0, i, 1), "tsms": base.replace(microsecond=123000), "tsus": base,
        "lms": base.replace(tzinfo=None, microsecond=0), "lus": base.replace(tzinfo=None),
        "odec": None if i % 2 else decimal.Decimal("-999.99"), "unknown": "AbC",
        "misplaced": 19000 + i,
    }


@pytest.mark.decoder
def test_logical_types_decode_to_what_fastavro_reads():
    arr = check(LOGICALS, LOGICALS, [logical(i) for i in range(7)])
    t = arr.type
    assert t.field("misplaced").type == pa.int64()
    assert t.field("unknown").type == pa.string()


@pytest.mark.decoder
@pytest.mark.parametrize("s,values", [
    ("string", ["", "x", "ünïcode"]), ("long", [0, -1, 2**63 - 1, -(2**63)]),
    ({"type": "array", "items": "int"}, [[], [1, 2]]), ("null", [None]),
    (["null", "string"], [None, "a"]), (["string", "null"], ["a", None]),
    (["int", "string"], [1, "a"]), ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, ["B"]),
    ({"type": "map", "values": ["null", "long"]}, [{}, {"a": None, "b": 3}]),
], ids=lambda x: str(x)[:30])
def test_top_level_schemas_that_are_not_records(s, values):
    check(s, s, values)


# ---- schema resolution ----

V1 = {"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "id", "type": "int"},
    {"name": "name", "type": "string"},
    {"name": "score", "type": "float"},
    {"name": "legacy", "type": {"type": "array", "items": {"type": "record", "name": "Old", "fields": [
        {"name": "m", "type": {"type": "map", "values": ["null", "bytes", {"type": "fixed", "name": "F3", "size": 3}]}},
        {"name": "e", "type": {"type": "enum", "name": "OldE", "symbols": ["P", "Q"]}}]}}},
    {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["FREE", "PRO", "GOLD"]}},
    {"name": "blob", "type": "string"},
    {"name": "raw", "type": "bytes"},
]}
V2 = {"type": "record", "name": "Customer", "aliases": ["shop.User"], "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},                                   # int -> long
    {"name": "full_name", "aliases": ["name"], "type": "string"},     # renamed by an alias
    {"name": "score", "type": "double"},                              # float -> double
    {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["FREE", "PRO"], "default": "FREE"}},
    {"name": "blob", "type": "bytes"},                                # string -> bytes
    {"name": "raw", "type": "string"},                                # bytes -> string
    {"name": "email", "type": ["null", "string"], "default": None},   # added with defaults
    {"name": "visits", "type": "int", "default": 3},
    {"name": "prefs", "type": {"type": "map", "values": "long"}, "default": {"a": 1}},
    {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 1700000000000},
    {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 2}, "default": "\u00ffA"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
     "default": "\u0001\u0000"},
    {"name": "addr", "type": {"type": "record", "name": "Addr", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"], "default": None}]},
     "default": {"city": "Paris"}},
    {"name": "hist", "type": {"type": "array", "items": "double"}, "default": [1, 2.5]},
    {"name": "kind", "type": ["string", "int"], "default": 4},       # the first branch that matches
]}                                                                    # legacy: removed (skipped)


def user(i):
    return {"id": i * 1000, "name": f"user {i}", "score": i / 4, "tier": ["FREE", "PRO", "GOLD"][i % 3],
            "legacy": [{"m": {"x": None, "y": b"\x00", "z": ("shop.F3", b"abc")}, "e": "Q"}] * (i % 2),
            "blob": "blöb", "raw": "ràw".encode()}


@pytest.mark.decoder
def test_resolution_added_removed_promoted_renamed_and_enum_default():
    arr = check(V1, V2, [user(i) for i in range(6)])
    rows = arr.to_pylist()
    assert [r["tier"] for r in rows[:3]] == ["FREE", "PRO", "FREE"]      # GOLD -> the default
    assert rows[0]["addr"] == {"city": "Paris", "zip": None} and rows[0]["kind"] == {"member0": None, "member1": 4}
    assert rows[0]["code"] == b"\xffA" and rows[1]["blob"] == "blöb".encode()


@pytest.mark.decoder
@pytest.mark.parametrize("w,r,vals", [
    ("int", "long", [1, -(2**31)]), ("int", "float", [2**24 + 1, 7]), ("int", "double", [2**31 - 1]),
    ("long", "float", [2**53 + 1, -3]), ("long", "double", [2**62 + 1]), ("float", "double", [0.1, -2.5]),
    ("string", "bytes", ["é"]), ("bytes", "string", [b"ok"]),
    (["null", "int"], ["null", "long"], [None, 5]), ("int", ["null", "long"], [6]),
    (["null", "int"], ["null", "string", "long"], [None, 9]),
    ({"type": "array", "items": "int"}, {"type": "array", "items": "double"}, [[1, 2]]),
    ({"type": "map", "values": "float"}, {"type": "map", "values": "double"}, [{"a": 1.5}]),
], ids=lambda x: str(x)[:24])
def test_promotions_and_unions(w, r, vals):
    check(w, r, vals)


@pytest.mark.decoder
def test_a_union_branch_or_enum_symbol_the_reader_lacks_fails_only_those_datums():
    w = {"type": "record", "name": "R", "fields": [
        {"name": "v", "type": ["null", "string", "int"]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}}]}
    r = {"type": "record", "name": "R", "fields": [
        {"name": "v", "type": ["null", "string"]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}]}
    values = write(w, [{"v": "a", "e": "A"}, {"v": 3, "e": "B"}, {"v": None, "e": "C"}, {"v": "z", "e": "B"}])
    res = resolve(schema(w), schema(r))
    with pytest.raises(AvroDecodeError) as err:
        decode(res, values)
    assert (err.value.row, err.value.byte_offset) == (1, 1)    # after the union index
    assert "branch 2 (int)" in err.value.reason and "R.v" in err.value.reason
    got = decode(res, values, permissive=True)
    assert got.array.to_pylist() == [{"v": "a", "e": "A"}, None, None, {"v": "z", "e": "B"}]
    assert [b[:2] for b in got.bad] == [(1, 1), (2, 1)]
    assert "symbol C" in got.bad[1][2] and "no default" in got.bad[1][2]
    both(res, values, permissive=True)
    for v in (values[1], values[2]):    # fastavro refuses them too
        with pytest.raises(Exception, match="schema mismatch|not found"):
            fastavro_read(w, r, pa.array([v.as_py()], pa.binary()))


# ---- malformed data ----

REC = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "u", "type": ["null", "boolean"]}]}


def _bad(datum, s=REC, **kw):
    res = resolve(schema(s), schema(s))
    values = pa.array([PREFIX + datum], pa.binary())
    with pytest.raises(AvroDecodeError) as err:
        decode(res, values, **kw)
    got = decode(res, values, permissive=True, **kw)
    assert got.array.to_pylist() == [None]
    assert got.bad == [(0, err.value.byte_offset, err.value.reason)]
    both(res, values, permissive=True)
    return err.value.byte_offset, err.value.reason


@pytest.mark.decoder
@pytest.mark.parametrize("datum,offset,reason", [
    (b"", 0, "truncated long"),
    (b"\x02", 1, "truncated long"),                                     # id 1, then nothing
    (b"\x02\x06ab", 2, "truncated string: needs 3 bytes, 2 left"),
    (b"\x02\x05", 1, "negative string length -3"),
    (b"\x02\x02\xff\x00", 2, "invalid UTF-8 in string"),
    (b"\xff" * 10 + b"\x01", 0, "invalid long encoding"),
    (b"\x02\x00\x00", 3, "truncated int"),                               # no union index
    (b"\x02\x00\x00\x04", 3, "union index 2 not in [0, 2)"),
    (b"\x02\x00\x00\x02\x07", 4, "invalid boolean byte 7"),
    (b"\x02\x00\xfe\xff\xff\xff\x0f", 2, "array block of 2147483647 items exceeds the 0 bytes left"),
    (b"\x02\x00\x01", 3, "truncated long"),                              # count -1: its size is missing
    (b"\x02\x00\x01\x00", 2, "array block of 1 items exceeds the 0 bytes left"),
])
def test_malformed_datums_fail_with_their_offset(datum, offset, reason):
    assert _bad(datum) == (offset, reason)


@pytest.mark.decoder
def test_a_bad_row_leaves_the_others_whole_under_permissive():
    good = [{"id": i, "name": f"n{i}", "tags": ["a", "b"][: i % 3], "u": [None, True, False][i % 3]} for i in range(6)]
    values = write(REC, good).to_pylist()
    cut = values[2][:-1]                  # ends inside the union: tags already appended
    values = values[:2] + [cut, None, b"\x00\x00", values[4] + b"trailing bytes are ignored"]
    res = resolve(schema(REC), schema(REC))
    got = decode(res, pa.array(values, pa.binary()), permissive=True)
    assert got.array.to_pylist() == [good[0], good[1], None, None, None, good[4]]
    assert [b[:2] for b in got.bad] == [(2, len(cut) - 5), (4, 0)]
    assert got.bad[1][2] == "value of 2 bytes is shorter than its 5-byte prefix"
    both(res, pa.array(values, pa.binary()), permissive=True)
    with pytest.raises(AvroDecodeError, match="row 2 at byte"):
        decode(res, pa.array(values, pa.binary()))


@pytest.mark.decoder
def test_rows_select_and_order_the_entries():
    values = write(REC, [{"id": i, "name": "", "tags": [], "u": None} for i in range(5)])
    res = resolve(schema(REC), schema(REC))
    got = decode(res, values.slice(1), rows=pa.array([3, 0, 3], pa.int32()), skip=5)
    assert [r["id"] for r in got.array.to_pylist()] == [4, 1, 4]
    both(res, values.slice(1), rows=pa.array([3, 0, 3], pa.int32()))
    with pytest.raises(IndexError):
        decode(res, values, rows=pa.array([5], pa.int32()))


@pytest.mark.decoder
def test_hostile_counts_are_bounded_not_allocated():
    nulls = {"type": "array", "items": "null"}
    assert _bad(b"\x80\x80\x80\x80\x80\x80\x80\x80\x40", nulls)[1] == \
        "zero-width items exceed the call's budget (2^16 and 8 per byte of the values)"
    assert _bad(b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", {"type": "map", "values": "null"})[1] == \
        "map block of 9223372036854775807 items exceeds the 0 bytes left"
    # a recursive writer type the reader skips: nesting is capped, not the C stack
    node = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    w = {"type": "record", "name": "Top", "fields": [{"name": "n", "type": node}, {"name": "x", "type": "int"}]}
    r = {"type": "record", "name": "Top", "fields": [{"name": "x", "type": "int"}]}
    res = resolve(schema(w), schema(r))
    deep = pa.array([PREFIX + b"\x02" * 500 + b"\x00\x04"], pa.binary())
    got = decode(res, deep, permissive=True)
    assert got.array.to_pylist() == [None] and got.bad[0][2] == "nesting deeper than 128 levels"
    both(res, deep, permissive=True)
    shallow = write(w, [{"n": {"next": {"next": None}}, "x": 7}])
    assert decode(res, shallow).array.to_pylist() == [{"x": 7}]


@pytest.mark.decoder
def test_decimals_that_do_not_fit_their_precision_are_malformed():
    s = {"type": "bytes", "logicalType": "decimal", "precision": 3, "scale": 1}
    assert _bad(b"\x04\x03\xe8", s) == (1, "decimal does not fit precision 3")       # 1000
    assert _bad(b"\x22\x01" + b"\x00" * 16, s)[1] == "decimal does not fit precision 3"       # 2^128
    assert _bad(b"\x22\x00\x80" + b"\x00" * 15, s)[1] == "decimal does not fit precision 3"   # 2^127
    res = resolve(schema(s), schema(s))
    ok = pa.array([PREFIX + b"\x04\xfc\x19", PREFIX + b"\x00", PREFIX + b"\x22" + b"\xff" * 16 + b"\xfe",
                   PREFIX + b"\x22" + b"\x00" * 16 + b"\x01"], pa.binary())   # sign extension is fine
    assert decode(res, ok).array.to_pylist() == [decimal.Decimal("-99.9"), decimal.Decimal("0.0"),
                                                 decimal.Decimal("-0.2"), decimal.Decimal("0.1")]
    both(res, ok)


def test_backend_follows_the_environment(monkeypatch):
    monkeypatch.setenv("KAFKA_TIERED_NO_EXTENSIONS", "1")
    assert avro.decoder_backend() == "python"
    monkeypatch.delenv("KAFKA_TIERED_NO_EXTENSIONS")
    assert avro.decoder_backend() == "native"
