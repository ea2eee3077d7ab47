"""Avro schemas: parsing (named types, namespaces, aliases, references), the Parsing Canonical
Form, and the Arrow type each schema becomes.  Public names are re-exported by
:mod:`kafka_tiered_source.values.avro`, which documents the interface.

A parsed schema is a graph of :class:`Node` objects (a recursive record points back at
itself).  Every walk over it is bounded: definitions may nest at most ``MAX_DEPTH`` levels,
counted through references to named types, so a walk that follows the reader's tree cannot run
away, and the walks that may meet a cycle (skip programs, minimum sizes) keep a memo.
"""
from __future__ import annotations

import json
import math
import re
from typing import Iterator, Mapping

import pyarrow as pa

from ..errors import KafkaTieredError

#: how deep a schema's definitions may nest (through references); deeper schemas are refused
MAX_DEPTH = 100
PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
NAMED = frozenset(("record", "enum", "fixed"))
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: logical type -> the underlying types it may annotate (anything else is ignored, as the
#: specification says of unknown and invalid logical types)
LOGICAL_ON = {
    "decimal": ("bytes", "fixed"), "uuid": ("string", "fixed"), "date": ("int",),
    "time-millis": ("int",), "time-micros": ("long",),
    "timestamp-millis": ("long",), "timestamp-micros": ("long",),
    "local-timestamp-millis": ("long",), "local-timestamp-micros": ("long",),
}
#: Arrow's decimal128 holds 38 digits; a wider decimal is read as its underlying bytes
MAX_DECIMAL_PRECISION = 38


class AvroError(KafkaTieredError, ValueError):
    """A schema that cannot be parsed or used, or Avro data that cannot be decoded."""


class AvroResolutionError(AvroError):
    """A writer schema that cannot be read with the reader schema; the message names the field
    path and both types."""


class AvroDecodeError(AvroError):
    """A malformed datum: ``row`` (the entry of the decoded array), ``byte_offset`` (within the
    datum, after the skipped prefix) and ``reason``."""

    def __init__(self, row: int, byte_offset: int, reason: str):
        self.row = row
        self.byte_offset = byte_offset
        self.reason = reason
        super().__init__(f"malformed Avro datum in row {row} at byte {byte_offset}: {reason}")

    def __reduce__(self):
        return (AvroDecodeError, (self.row, self.byte_offset, self.reason))


class Field:
    __slots__ = ("name", "type", "has_default", "default", "aliases")

    def __init__(self, name: str, type: "Node", has_default: bool, default: object,
                 aliases: tuple[str, ...]):
        self.name = name
        self.type = type
        self.has_default = has_default
        self.default = default
        self.aliases = aliases


class Node:
    """One schema node.  ``kind`` is a primitive name or record/enum/fixed/array/map/union;
    ``logical`` the logical type when it is known and valid for this node, else None."""

    __slots__ = ("kind", "logical", "precision", "scale", "raw_logical", "fullname", "aliases",
                 "fields", "symbols", "default", "size", "items", "values", "branches", "depth",
                 "done")

    def __init__(self, kind: str):
        self.kind = kind
        self.logical: str | None = None
        self.precision = 0
        self.scale = 0
        self.raw_logical: tuple | None = None   # (logicalType, precision, scale) as written
        self.fullname: str | None = None
        self.aliases: tuple[str, ...] = ()
        self.fields: list[Field] = []
        self.symbols: tuple[str, ...] = ()
        self.default: str | None = None          # enum default symbol
        self.size = 0
        self.items: Node | None = None
        self.values: Node | None = None
        self.branches: list[Node] = []
        self.depth = 1
        self.done = False                        # named types: definition fully parsed

    @property
    def short(self) -> str:
        """The unqualified name of a named type."""
        return (self.fullname or "").rsplit(".", 1)[-1]

    def describe(self) -> str:
        """How error messages name this type."""
        k = self.kind
        if k in NAMED:
            return f"{k} {self.fullname}" + (f"({self.size})" if k == "fixed" else "")
        if k == "array":
            return f"array<{self.items.describe()}>"   # type: ignore[union-attr]
        if k == "map":
            return f"map<{self.values.describe()}>"    # type: ignore[union-attr]
        if k == "union":
            return "union[" + ", ".join(b.describe() for b in self.branches) + "]"
        return k if self.logical is None else f"{k} ({self.logical})"

    def children(self) -> Iterator["Node"]:
        if self.kind == "record":
            for f in self.fields:
                yield f.type
        elif self.kind == "array":
            yield self.items      # type: ignore[misc]
        elif self.kind == "map":
            yield self.values     # type: ignore[misc]
        elif self.kind == "union":
            yield from self.branches


# ---- parsing ----

def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise AvroError(f"{what} must be a non-empty string, not {name!r}")
    for part in name.split("."):
        if not _NAME.match(part):
            raise AvroError(f"invalid {what} {name!r}: each part must match [A-Za-z_][A-Za-z0-9_]*")
    return name


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class _Parser:
    def __init__(self, names: dict[str, Node]):
        self.names = names

    def lookup(self, name: str, ns: str) -> Node:
        node = None
        if "." not in name and ns:
            node = self.names.get(f"{ns}.{name}")
        if node is None:
            node = self.names.get(name)   # a full name, or the null namespace (as Java falls back)
        if node is None:
            raise AvroError(f"unknown type {name!r}" + (f" (namespace {ns!r})" if ns else ""))
        return node

    def parse(self, obj: object, ns: str, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise AvroError(f"schema nests deeper than {MAX_DEPTH} levels")
        if isinstance(obj, str):
            return Node(obj) if obj in PRIMITIVES else self.lookup(obj, ns)
        if isinstance(obj, list):
            return self.union(obj, ns, depth)
        if not isinstance(obj, dict):
            raise AvroError(f"a schema is a JSON string, object or array, not {obj!r}")
        t = obj.get("type")
        if not isinstance(t, str):
            raise AvroError(f"schema object without a string 'type': {_short(obj)}")
        if t in PRIMITIVES:
            node = Node(t)
        elif t in ("record", "error", "enum", "fixed"):
            node = self.named(obj, "record" if t == "error" else t, ns, depth)
        elif t == "array":
            if "items" not in obj:
                raise AvroError(f"array without 'items': {_short(obj)}")
            node = Node("array")
            node.items = self.parse(obj["items"], ns, depth + 1)
        elif t == "map":
            if "values" not in obj:
                raise AvroError(f"map without 'values': {_short(obj)}")
            node = Node("map")
            node.values = self.parse(obj["values"], ns, depth + 1)
        else:
            return self.lookup(t, ns)    # {"type": "some.Name"}: a reference
        _logical(node, obj)
        return _finish(node)

    def union(self, obj: list, ns: str, depth: int) -> Node:
        node = Node("union")
        seen: set[str] = set()
        for b in obj:
            branch = self.parse(b, ns, depth + 1)
            if branch.kind == "union":
                raise AvroError("a union may not immediately contain another union")
            key = branch.fullname if branch.kind in NAMED else branch.kind
            if key in seen:
                raise AvroError(f"union has two branches of type {key}")
            seen.add(key)   # type: ignore[arg-type]
            node.branches.append(branch)
        return _finish(node)

    def named(self, obj: dict, kind: str, ns: str, depth: int) -> Node:
        name = _check_name(obj.get("name"), f"{kind} name")
        space = obj.get("namespace")
        if "." in name:
            fullname = name
        else:
            if space is None:
                space = ns
            if not isinstance(space, str):
                raise AvroError(f"namespace of {name!r} must be a string, not {space!r}")
            if space:
                _check_name(space, "namespace")
            fullname = f"{space}.{name}" if space else name
        if name.rsplit(".", 1)[-1] in PRIMITIVES:
            raise AvroError(f"a {kind} may not be named {name!r} (a primitive type name)")
        if fullname in self.names:
            raise AvroError(f"type {fullname} is defined twice")
        inner = fullname.rsplit(".", 1)[0] if "." in fullname else ""
        node = Node(kind)
        node.fullname = fullname
        aliases = obj.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise AvroError(f"aliases of {fullname} must be a list of strings")
        node.aliases = tuple(a if "." in a else (f"{inner}.{a}" if inner else a) for a in aliases)
        self.names[fullname] = node     # before the fields: a record may refer to itself
        if kind == "record":
            self.record_fields(node, obj, inner, depth)
        elif kind == "enum":
            symbols = obj.get("symbols")
            if not isinstance(symbols, list):
                raise AvroError(f"enum {fullname} needs a list of 'symbols'")
            for s in symbols:
                _check_name(s, f"symbol of enum {fullname}")
            if len(set(symbols)) != len(symbols):
                raise AvroError(f"enum {fullname} repeats a symbol")
            node.symbols = tuple(symbols)
            if "default" in obj:
                if obj["default"] not in node.symbols:
                    raise AvroError(f"default {obj['default']!r} of enum {fullname} is not one "
                                    f"of its symbols")
                node.default = obj["default"]
        else:
            size = obj.get("size")
            if not _is_int(size) or size < 0:      # type: ignore[operator]
                raise AvroError(f"fixed {fullname} needs a non-negative integer 'size'")
            node.size = size                        # type: ignore[assignment]
        node.done = True
        return node

    def record_fields(self, node: Node, obj: dict, ns: str, depth: int) -> None:
        fields = obj.get("fields")
        if not isinstance(fields, list):
            raise AvroError(f"record {node.fullname} needs a list of 'fields'")
        seen = set()
        for f in fields:
            if not isinstance(f, dict):
                raise AvroError(f"a field of record {node.fullname} is not an object: {f!r}")
            name = f.get("name")
            if not isinstance(name, str) or not _NAME.match(name):
                raise AvroError(f"invalid field name {name!r} in record {node.fullname}")
            if name in seen:
                raise AvroError(f"record {node.fullname} has two fields named {name!r}")
            seen.add(name)
            if "type" not in f:
                raise AvroError(f"field {node.fullname}.{name} has no 'type'")
            aliases = f.get("aliases", [])
            if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                raise AvroError(f"aliases of field {node.fullname}.{name} must be a list of strings")
            ftype = self.parse(f["type"], ns, depth + 1)
            node.fields.append(Field(name, ftype, "default" in f, f.get("default"),
                                     tuple(aliases)))
        _finish(node)


def _finish(node: Node) -> Node:
    """The node's depth, counted through references (a reference to a type still being
    defined, i.e. recursion, adds nothing: walks that meet a cycle keep a memo)."""
    d = 0
    for c in node.children():
        if c.kind not in NAMED or c.done:
            d = max(d, c.depth)
    node.depth = d + 1
    if node.depth > MAX_DEPTH:
        raise AvroError(f"schema nests deeper than {MAX_DEPTH} levels")
    return node


def _logical(node: Node, obj: dict) -> None:
    lt = obj.get("logicalType")
    if not isinstance(lt, str):
        return
    node.raw_logical = (lt, obj.get("precision"), obj.get("scale"))
    if node.kind not in LOGICAL_ON.get(lt, ()):
        return                              # unknown, or not on this type: the underlying type
    if lt == "uuid" and node.kind == "fixed" and node.size != 16:
        return
    if lt == "decimal":
        p, s = obj.get("precision"), obj.get("scale", 0)
        if not (isinstance(p, int) and isinstance(s, int)) or isinstance(p, bool) or isinstance(s, bool):
            return
        if not (0 < p <= MAX_DECIMAL_PRECISION and 0 <= s <= p):
            return
        if node.kind == "fixed" and (node.size == 0 or
                                     p > math.floor(math.log10(2 ** (8 * node.size - 1) - 1))):
            return
        node.precision, node.scale = p, s
    node.logical = lt


def _short(obj: object) -> str:
    text = json.dumps(obj)
    return text if len(text) <= 120 else text[:117] + "..."


def _register(names: dict[str, Node], key: str, node: Node) -> None:
    """Make a referenced schema's named types known (by full name, and by the reference's
    name), as a registry client parses references into the same name space."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.kind in NAMED:
            old = names.setdefault(n.fullname, n)   # type: ignore[arg-type]
            if old is not n and full_form(old) != full_form(n):
                # the same reference parsed twice (B and the main schema both refer to A) is
                # fine; two different types under one name are not
                raise AvroError(f"type {n.fullname} is defined differently by two referenced schemas")
        stack.extend(n.children())
    names.setdefault(key, node)


# ---- the forms a schema is written back as ----

def canonical_form(node: Node) -> str:
    """The Parsing Canonical Form (specification, "Transforming into Parsing Canonical Form")."""
    seen: set[str] = set()

    def pcf(n: Node) -> str:
        k = n.kind
        if k in PRIMITIVES:
            return json.dumps(k)
        if k == "union":
            return "[" + ",".join(pcf(b) for b in n.branches) + "]"
        if k == "array":
            return '{"type":"array","items":' + pcf(n.items) + "}"       # type: ignore[arg-type]
        if k == "map":
            return '{"type":"map","values":' + pcf(n.values) + "}"       # type: ignore[arg-type]
        name = _js(n.fullname)
        if n.fullname in seen:
            return name
        seen.add(n.fullname)    # type: ignore[arg-type]
        if k == "record":
            fields = ",".join('{"name":' + _js(f.name) + ',"type":' + pcf(f.type) + "}"
                              for f in n.fields)
            return '{"name":' + name + ',"type":"record","fields":[' + fields + "]}"
        if k == "enum":
            return ('{"name":' + name + ',"type":"enum","symbols":['
                    + ",".join(_js(s) for s in n.symbols) + "]}")
        return '{"name":' + name + ',"type":"fixed","size":' + str(n.size) + "}"

    return pcf(node)


def _js(s: object) -> str:
    return json.dumps(s, ensure_ascii=False)


def full_form(node: Node) -> object:
    """The schema as self-contained JSON with everything that affects decoding (logical types,
    defaults, aliases): what two schemas are compared by, and what a pickle carries."""
    seen: set[str] = set()

    def full(n: Node) -> object:
        k = n.kind
        if k == "union":
            return [full(b) for b in n.branches]
        out: dict[str, object]
        if k in NAMED:
            if n.fullname in seen:
                return n.fullname
            seen.add(n.fullname)    # type: ignore[arg-type]
            out = {"type": k, "name": n.fullname}
            if "." not in n.fullname:   # type: ignore[operator]
                out["namespace"] = ""
            if n.aliases:
                out["aliases"] = list(n.aliases)
            if k == "record":
                out["fields"] = [_field_form(f, full) for f in n.fields]
            elif k == "enum":
                out["symbols"] = list(n.symbols)
                if n.default is not None:
                    out["default"] = n.default
            else:
                out["size"] = n.size
        elif k == "array":
            out = {"type": k, "items": full(n.items)}      # type: ignore[arg-type]
        elif k == "map":
            out = {"type": k, "values": full(n.values)}    # type: ignore[arg-type]
        else:
            out = {"type": k}
        if n.raw_logical is not None:
            lt, p, s = n.raw_logical
            out["logicalType"] = lt
            if p is not None:
                out["precision"] = p
            if s is not None:
                out["scale"] = s
        return out

    return full(node)


def _field_form(f: Field, full) -> dict:
    out = {"name": f.name, "type": full(f.type)}
    if f.has_default:
        out["default"] = f.default
    if f.aliases:
        out["aliases"] = list(f.aliases)
    return out


# ---- the Arrow type (spark-avro's SchemaConverters) ----

TS_UTC = pa.timestamp("us", tz="UTC")
TS_LOCAL = pa.timestamp("us")
_PRIMITIVE_ARROW = {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(),
                    "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
                    "bytes": pa.binary(), "string": pa.string(), "fixed": pa.binary(),
                    "enum": pa.string()}
_LOGICAL_ARROW = {"uuid": pa.string(), "date": pa.date32(), "time-millis": pa.int32(),
                  "time-micros": pa.int64(), "timestamp-millis": TS_UTC,
                  "timestamp-micros": TS_UTC, "local-timestamp-millis": TS_LOCAL,
                  "local-timestamp-micros": TS_LOCAL}


def non_null(node: Node) -> list[Node]:
    return [b for b in node.branches if b.kind != "null"]


def arrow_type(node: Node) -> pa.DataType:
    """The column type of a schema.  Arrow types are finite, so a recursive record (which
    spark-avro refuses as well) raises AvroError."""
    active: set[int] = set()

    def conv(n: Node) -> pa.DataType:
        k = n.kind
        if n.logical == "decimal":
            return pa.decimal128(n.precision, n.scale)
        if n.logical is not None:
            return _LOGICAL_ARROW[n.logical]
        if k in _PRIMITIVE_ARROW:
            return _PRIMITIVE_ARROW[k]
        if k == "array":
            return pa.list_(conv(n.items))    # type: ignore[arg-type]
        if k == "map":
            return pa.map_(pa.string(), conv(n.values))   # type: ignore[arg-type]
        if k == "union":
            nn = non_null(n)
            if not nn:
                return pa.null()
            if len(nn) == 1:
                return conv(nn[0])
            return pa.struct([pa.field(f"member{i}", conv(b)) for i, b in enumerate(nn)])
        if id(n) in active:
            raise AvroError(f"record {n.fullname} refers to itself: a recursive type has no "
                            f"Arrow column type")
        active.add(id(n))
        t = pa.struct([pa.field(f.name, conv(f.type)) for f in n.fields])
        active.discard(id(n))
        return t

    return conv(node)


def parse_node(text: str, named: Mapping[str, Node] | None) -> Node:
    if not isinstance(text, str):
        raise TypeError(f"an Avro schema is JSON text (str), not {type(text).__name__}")
    try:
        obj = json.loads(text)
    except RecursionError:
        raise AvroError("schema JSON nests too deeply") from None
    except ValueError as exc:
        raise AvroError(f"schema is not valid JSON: {exc}") from None
    names: dict[str, Node] = {}
    for key, node in (named or {}).items():
        _register(names, key, node)
    return _Parser(names).parse(obj, "", 1)
