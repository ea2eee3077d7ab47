"""Coverage-guided fuzzing (atheris) of the Avro value decoder: native (native/avro.c) against
the pure-Python reference (values/_avro_python.py).

Every input is decoded by both decoders, permissive and failfast; the run fails on any
exception other than AvroDecodeError, on a disagreement between the two (rows, bad entries,
the first error's row, offset and reason), or, under the sanitizer build, on any memory error
in native/avro*.c.  Input layout: byte 0 picks one of the resolutions in ``PAIRS`` (every
instruction of the program appears in one of them: all types and logical types, promotions,
skipped writer fields, defaults, enum defaults, unions both ways, a recursive writer type,
zero-width items), byte 1 the prefix length to skip (0-5), then the values, each a length byte
(255: a null value) and that many bytes.

    python benchmarks/fuzz_avro.py -max_total_time=600 /tmp/kt-corpus/avro

Against the AddressSanitizer build, as docs/fuzzing.md describes for fuzz_all.py::

    cd /tmp/kt-asan && PYTHONPATH=/tmp/kt-asan ASAN_OPTIONS=detect_leaks=0,allocator_may_return_null=1 \\
        LD_PRELOAD=$(python -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so \\
        python /work/main/benchmarks/fuzz_avro.py -max_total_time=600 -rss_limit_mb=4096 corpus/

``random_schema``, ``random_value``, ``derive_reader`` and ``outcome`` are shared with
tests/test_values_avro_diff.py, which runs a CI-sized pass of the same comparison.
"""
from __future__ import annotations

import io
import json
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.append(ROOT)   # appended: a sanitizer build of the package on PYTHONPATH must win

import pyarrow as pa  # noqa: E402

if __name__ == "__main__":      # fuzzing: Python-level coverage of the decoders
    import atheris
    with atheris.instrument_imports(include=["kafka_tiered_source.values"]):
        from kafka_tiered_source.values import avro
else:
    from kafka_tiered_source.values import avro

PRIMS = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
LOGICALS = [("bytes", {"logicalType": "decimal", "precision": 9, "scale": 2}),
            ("string", {"logicalType": "uuid"}), ("int", {"logicalType": "date"}),
            ("int", {"logicalType": "time-millis"}), ("long", {"logicalType": "time-micros"}),
            ("long", {"logicalType": "timestamp-millis"}), ("long", {"logicalType": "timestamp-micros"}),
            ("long", {"logicalType": "local-timestamp-millis"}),
            ("long", {"logicalType": "local-timestamp-micros"})]


# ---- random schemas and values ----

def random_schema(rng: random.Random, depth: int = 0, names: list | None = None):
    names = [0] if names is None else names

    def name(prefix):
        names[0] += 1
        return f"{prefix}{names[0]}"

    roll = rng.random()
    if depth >= 3 or roll < 0.35:
        return rng.choice(PRIMS)
    if roll < 0.45:
        base, extra = rng.choice(LOGICALS)
        return {"type": base, **extra}
    kind = rng.choice(["record", "record", "enum", "fixed", "array", "map", "union", "union"])
    if kind == "record":
        return {"type": "record", "name": name("R"), "fields": [
            {"name": f"f{i}", "type": random_schema(rng, depth + 1, names)} for i in range(rng.randint(0, 4))]}
    if kind == "enum":
        return {"type": "enum", "name": name("E"), "symbols": [f"S{i}" for i in range(rng.randint(1, 4))]}
    if kind == "fixed":
        size = rng.choice([0, 1, 4, 16])
        extra = {"logicalType": "decimal", "precision": 5, "scale": 1} if size == 4 and rng.random() < 0.5 else {}
        if size == 16 and rng.random() < 0.5:
            extra = {"logicalType": "uuid"}
        return {"type": "fixed", "name": name("F"), "size": size, **extra}
    if kind == "array":
        return {"type": "array", "items": random_schema(rng, depth + 1, names)}
    if kind == "map":
        return {"type": "map", "values": random_schema(rng, depth + 1, names)}
    branches, seen = [], set()
    for _ in range(rng.randint(1, 3)):
        b = random_schema(rng, depth + 1, names)
        if isinstance(b, list):
            continue                      # a union may not hold a union
        key = b if isinstance(b, str) else (b.get("name") or b["type"])
        if key not in seen:
            seen.add(key)
            branches.append(b)
    if "null" not in seen and (rng.random() < 0.6 or not branches):
        branches.insert(rng.randint(0, len(branches)), "null")
    return branches


def strip_logical(s):
    """The schema without logical types: what the random values are written with."""
    if isinstance(s, list):
        return [strip_logical(b) for b in s]
    if isinstance(s, dict):
        out = {k: v for k, v in s.items() if k not in ("logicalType", "precision", "scale")}
        if "fields" in out:
            out["fields"] = [{**f, "type": strip_logical(f["type"])} for f in out["fields"]]
        for key in ("items", "values"):
            if key in out:
                out[key] = strip_logical(out[key])
        return out
    return s


def random_value(rng: random.Random, s, names: dict | None = None, depth: int = 0):
    """A value fastavro writes for `s` (named types referenced by name are looked up in
    `names`, filled as their definitions are met; past depth 5 unions take null and arrays and
    maps are empty, so a recursive type ends)."""
    names = {} if names is None else names
    if isinstance(s, str) and s not in PRIMS:
        s = names[s]
    if isinstance(s, list):
        b = "null" if depth > 5 and "null" in s else rng.choice(s)
        v = random_value(rng, b, names, depth + 1)
        named = names.get(b) if isinstance(b, str) else b
        return (named["name"], v) if isinstance(named, dict) and "name" in named else v
    t = s if isinstance(s, str) else s["type"]
    if isinstance(s, dict) and "name" in s:
        names.setdefault(s["name"], s)
    many = 0 if depth > 5 else 3
    if t == "null":
        return None
    if t == "boolean":
        return rng.random() < 0.5
    if t == "int":
        return rng.choice([0, -1, 1, 2**31 - 1, -(2**31), rng.randint(-1000, 1000)])
    if t == "long":
        return rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randint(-10**15, 10**15)])
    if t in ("float", "double"):
        return rng.choice([0.0, -1.5, 1e30, rng.uniform(-1e6, 1e6), math.inf])
    if t == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 6)))
    if t == "string":
        return "".join(rng.choice("a\u00e9\u2713\U0001F600z") for _ in range(rng.randint(0, 5)))
    if t == "fixed":
        return bytes(rng.randrange(256) for _ in range(s["size"]))
    if t == "enum":
        return rng.choice(s["symbols"])
    if t == "array":
        return [random_value(rng, s["items"], names, depth + 1) for _ in range(rng.randint(0, many))]
    if t == "map":
        return {f"k{i}": random_value(rng, s["values"], names, depth + 1) for i in range(rng.randint(0, many))}
    return {f["name"]: random_value(rng, f["type"], names, depth + 1) for f in s["fields"]}


_PROMOTE = {"int": ["long", "float", "double"], "long": ["float", "double"], "float": ["double"],
            "string": ["bytes"], "bytes": ["string"]}
_ADDED = [("int", 3), (["null", "string"], None), ({"type": "array", "items": "long"}, [1, 2]),
          ({"type": "map", "values": "string"}, {"k": "v"}), ("bytes", "\u00ff\u0000"),
          ({"type": "long", "logicalType": "timestamp-millis"}, 1700000000000), ("double", "NaN")]


def derive_reader(rng: random.Random, s):
    """A reader schema for data written with `s`: fields dropped, added with defaults, renamed
    by aliases, types promoted, enum symbols dropped for a default, unions narrowed."""
    if isinstance(s, str):
        return rng.choice(_PROMOTE.get(s, [s]) + [s]) if rng.random() < 0.5 else s
    if isinstance(s, list):
        return [derive_reader(rng, b) for b in s if b == "null" or rng.random() < 0.85] or s
    t = s["type"]
    if t == "record":
        fields = [{**f, "type": derive_reader(rng, f["type"])} for f in s["fields"] if rng.random() < 0.8]
        for f in fields:
            if rng.random() < 0.2:
                f["aliases"], f["name"] = [f["name"]], f["name"] + "_r"
        if rng.random() < 0.4:
            typ, default = rng.choice(_ADDED)
            fields.append({"name": f"added{rng.randrange(1000)}", "type": typ, "default": default})
        out = {**s, "fields": fields}
        if rng.random() < 0.2:
            out["aliases"], out["name"] = [s["name"]], s["name"] + "New"
        return out
    if t == "enum" and len(s["symbols"]) > 1 and rng.random() < 0.5:
        kept = s["symbols"][:-1]
        return {**s, "symbols": kept, **({"default": kept[0]} if rng.random() < 0.7 else {})}
    if t == "array":
        return {**s, "items": derive_reader(rng, s["items"])}
    if t == "map":
        return {**s, "values": derive_reader(rng, s["values"])}
    return s


def encode(writer_json, records, prefix=b"\x00\x00\x00\x00\x01"):
    import fastavro
    parsed = fastavro.parse_schema(strip_logical(writer_json))
    out = []
    for r in records:
        b = io.BytesIO()
        b.write(prefix)
        fastavro.schemaless_writer(b, parsed, r)
        out.append(b.getvalue())
    return out


# ---- comparing the two decoders ----

def _norm(v):
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, list):
        return [_norm(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_norm(x) for x in v)
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


def _pylist(a: pa.Array) -> list:
    """``a.to_pylist()`` with dates and timestamps as their integers (Python's dates cannot hold
    every value Arrow does; pyarrow's cast and view of nested arrays holding a null-typed list
    come out broken, so the walk is by hand)."""
    t = a.type
    valid = a.is_valid().to_pylist()
    if pa.types.is_struct(t):
        kids = [_pylist(a.field(i)) for i in range(t.num_fields)]
        return [{t.field(k).name: kids[k][i] for k in range(t.num_fields)} if valid[i] else None
                for i in range(len(a))]
    if pa.types.is_list(t) or pa.types.is_map(t):
        off = a.offsets.to_pylist()
        if pa.types.is_map(t):
            items = list(zip(_pylist(a.keys), _pylist(a.items), strict=True))
        else:
            items = _pylist(a.values)
        return [items[off[i]:off[i + 1]] if valid[i] else None for i in range(len(a))]
    if pa.types.is_date32(t):
        a = a.view(pa.int32())
    elif pa.types.is_timestamp(t):
        a = a.view(pa.int64())
    return a.to_pylist()


def outcome(res, values: pa.Array, backend: str, permissive: bool, skip: int = 5):
    try:
        got = avro._decode_with(backend, res, values, None, skip, permissive)
    except avro.AvroDecodeError as exc:
        return ("error", exc.row, exc.byte_offset, exc.reason)
    got.array.validate(full=True)
    return ("ok", str(got.array.type), _norm(_pylist(got.array)), got.bad)


def compare(res, values: pa.Array, skip: int = 5) -> None:
    for permissive in (True, False):
        native = outcome(res, values, "native", permissive, skip)
        python = outcome(res, values, "python", permissive, skip)
        if native != python:
            raise AssertionError(f"decoders disagree (permissive={permissive}):\n native {native!r}\n"
                                 f" python {python!r}")


# ---- the atheris harness ----

NODE = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"},
                                                     {"name": "next", "type": ["null", "Node"]}]}
KITCHEN = {"type": "record", "name": "K", "fields": [
    {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
    {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "by", "type": "bytes"},
    {"name": "s", "type": "string"}, {"name": "fx", "type": {"type": "fixed", "name": "F2", "size": 2}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
    {"name": "a", "type": {"type": "array", "items": ["null", "long"]}},
    {"name": "m", "type": {"type": "map", "values": {"type": "record", "name": "V", "fields": [
        {"name": "x", "type": "string"}]}}},
    {"name": "u", "type": ["null", "int", "string", "V"]}]}
LOGICAL = {"type": "record", "name": "L", "fields": [
    {"name": n, "type": {"type": base, **extra}} for n, (base, extra) in zip("abcdefghi", LOGICALS, strict=True)] + [
    {"name": "df", "type": {"type": "fixed", "name": "DF", "size": 17, "logicalType": "decimal",
                            "precision": 38, "scale": 3}},
    {"name": "uf", "type": {"type": "fixed", "name": "UF", "size": 16, "logicalType": "uuid"}}]}
PAIRS = [
    (KITCHEN, KITCHEN),
    (KITCHEN, {"type": "record", "name": "K2", "aliases": ["K"], "fields": [
        {"name": "i", "type": "double"}, {"name": "l", "type": "float"}, {"name": "f", "type": "double"},
        {"name": "bytes_now", "aliases": ["s"], "type": "bytes"}, {"name": "by", "type": "string"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["B", "A"], "default": "B"}},
        {"name": "u", "type": ["string", "long", "null"]},
        {"name": "new", "type": {"type": "record", "name": "N", "fields": [{"name": "q", "type": "int"}]},
         "default": {"q": 5}}]}),
    (LOGICAL, LOGICAL),
    ({"type": "record", "name": "T", "fields": [{"name": "n", "type": NODE}, {"name": "z", "type": "int"}]},
     {"type": "record", "name": "T", "fields": [{"name": "z", "type": "long"}]}),
    ({"type": "array", "items": "null"}, {"type": "array", "items": "null"}),
    ({"type": "map", "values": {"type": "record", "name": "Z", "fields": []}},
     {"type": "map", "values": {"type": "record", "name": "Z", "fields": []}}),
    (["null", "int", "string"], ["null", "string"]),
    ({"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}, {"type": "enum", "name": "E", "symbols": ["A"]}),
    ("string", "string"),
]
_RESOLVED: dict[int, object] = {}


def resolution(i: int):
    if i not in _RESOLVED:
        w, r = PAIRS[i]
        _RESOLVED[i] = avro.resolve(avro.parse_schema(json.dumps(w)), avro.parse_schema(json.dumps(r)))
    return _RESOLVED[i]


def split_input(data: bytes) -> tuple[int, int, pa.Array]:
    pair, skip = (data[0] if data else 0) % len(PAIRS), (data[1] if len(data) > 1 else 0) % 6
    values, pos = [], 2
    while pos < len(data):
        n = data[pos]
        pos += 1
        values.append(None if n == 255 else data[pos:pos + n])
        pos += 0 if n == 255 else n
    return pair, skip, pa.array(values, pa.binary())


def join_input(pair: int, skip: int, values: list) -> bytes:
    out = bytearray([pair, skip])
    for v in values:
        if v is None:
            out.append(255)
        else:
            v = v[:254]
            out.append(len(v))
            out += v
    return bytes(out)


def TestOneInput(data: bytes) -> None:
    pair, skip, values = split_input(data)
    compare(resolution(pair), values, skip)


def seeds() -> list[bytes]:
    rng = random.Random(20261127)
    out = []
    for i, (w, _) in enumerate(PAIRS):
        for _ in range(3):
            records = [random_value(rng, strip_logical(w)) for _ in range(3)]
            out.append(join_input(i, 5, encode(w, records) + [None]))
    return out


def main(argv: list[str]) -> None:
    import atheris
    corpus = [a for a in argv[1:] if not a.startswith("-")]
    if corpus:
        os.makedirs(corpus[0], exist_ok=True)
        if not os.listdir(corpus[0]):        # seed an empty corpus with valid inputs
            for k, s in enumerate(seeds()):
                with open(os.path.join(corpus[0], f"seed-{k}"), "wb") as f:
                    f.write(s)
    atheris.Setup(argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
