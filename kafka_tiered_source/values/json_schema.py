"""JSON Schema values: the reader schema's Arrow type, and JSON texts read into it by name.

:func:`arrow_type` maps a JSON Schema (draft 4 to 2020-12, the keywords that fix a shape) to a
column type: ``object`` with ``properties`` -> struct (every field nullable); ``object`` with only
``additionalProperties`` -> map<string, T>; ``array`` -> list of ``items``; ``integer`` -> int64;
``number`` -> float64; ``boolean``; ``string`` (whatever its ``format``) and ``enum``/``const`` of
strings -> string; ``["null", T]``, ``oneOf``/``anyOf`` of null and one schema -> T, nullable;
other ``oneOf``/``anyOf`` -> struct<member0, member1, ...> (spark-avro's naming; a value fills
the first member whose type it fits); ``allOf`` of objects -> their properties merged; ``$ref``
into the schema's own ``definitions``/``$defs`` (a recursive reference is refused); a schema that
fixes no type (``{}``, ``true``) -> string, the value's JSON text.

Values are matched to fields by name: properties the reader lacks are ignored, those the writer
lacks are null (JSON has no defaults to apply; JSONDeserializer returns what was written).  An
integer fits a ``number`` field (the promotion); anything else that does not fit its field's type
makes the record malformed.  Decoding is pyarrow's JSON reader over the batch's payloads at once
where the type allows (no maps, unions or untyped values); otherwise, and to find the records a
failed batch holds, each text is parsed alone.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import SchemaError

ANY = pa.string()
#: the metadata of a field whose schema fixes no type: it holds the value's JSON text
UNTYPED = {b"json": b"untyped"}


def _field(name: str, t: pa.DataType, untyped: bool) -> pa.Field:
    return pa.field(name, t, metadata=UNTYPED if untyped else None)


def untyped(f: pa.Field) -> bool:
    return bool(f.metadata) and f.metadata.get(b"json") == b"untyped"


def parse(text: str, schema_id: int | None = None) -> Any:
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"the JSON schema is not JSON: {exc}", schema_id=schema_id) from None
    if not isinstance(schema, (dict, bool)):
        raise SchemaError("a JSON schema is an object (or true/false)", schema_id=schema_id)
    return schema


def arrow_type(schema: Any, schema_id: int | None = None) -> pa.DataType:
    return _Mapper(schema, schema_id).type(schema, ())


class _Mapper:
    def __init__(self, root: Any, schema_id: int | None):
        self.root = root
        self.schema_id = schema_id

    def error(self, message: str) -> SchemaError:
        return SchemaError(f"JSON schema: {message}", schema_id=self.schema_id)

    def resolve(self, ref: str, seen: tuple) -> tuple[Any, tuple]:
        if ref in seen:
            raise self.error(f"$ref {ref} is recursive: a recursive schema has no column type")
        if not ref.startswith("#"):
            raise self.error(f"$ref {ref!r} points outside the schema (only #/definitions/... and #/$defs/... "
                             f"are followed)")
        node = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise self.error(f"$ref {ref} names nothing")
            node = node[part]
        return node, seen + (ref,)

    def type(self, s: Any, seen: tuple) -> pa.DataType:
        nullable, t = self.shape(s, seen)
        return t

    def field(self, name: str, s: Any, seen: tuple) -> pa.Field:
        """A field of ``s``'s type, marked when ``s`` fixes no type (its values are JSON texts)."""
        return _field(name, self.type(s, seen), self.is_untyped(s, seen))

    def is_untyped(self, s: Any, seen: tuple) -> bool:
        if s is True or s == {} or s is None:
            return True
        if not isinstance(s, dict):
            return False
        if "$ref" in s:
            try:
                target, seen = self.resolve(s["$ref"], seen)
            except SchemaError:
                return False
            return self.is_untyped(target, seen)
        if any(k in s for k in ("oneOf", "anyOf", "allOf")):
            return False
        if "enum" in s or "const" in s:
            kinds = {_kind(v) for v in s.get("enum", [s.get("const")])} - {"null"}
            return len(kinds) != 1 or kinds == {"other"}
        return s.get("type") is None and not any(k in s for k in ("properties", "additionalProperties", "items"))

    def shape(self, s: Any, seen: tuple) -> tuple[bool, pa.DataType]:
        """(may be null, the type)."""
        if s is True or s == {} or s is None:
            return True, ANY
        if s is False:
            return True, pa.null()
        if not isinstance(s, dict):
            raise self.error(f"{s!r} is not a schema")
        if "$ref" in s:
            target, seen = self.resolve(s["$ref"], seen)
            return self.shape(target, seen)
        for key in ("oneOf", "anyOf"):
            if key in s:
                return self.union(s[key], seen)
        if "allOf" in s:
            return self.all_of(s["allOf"], seen)
        if "enum" in s or "const" in s:
            seen_kinds = {_kind(v) for v in s.get("enum", [s.get("const")])}
            nullable = "null" in seen_kinds
            seen_kinds.discard("null")
            if len(seen_kinds) == 1:
                return nullable, {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(),
                                  "boolean": pa.bool_()}.get(seen_kinds.pop(), ANY)
            return True, ANY
        kinds = s.get("type")
        if kinds is None:
            if "properties" in s or "additionalProperties" in s:
                kinds = "object"
            elif "items" in s:
                kinds = "array"
            else:
                return True, ANY
        if isinstance(kinds, list):
            nullable = "null" in kinds
            rest = [k for k in kinds if k != "null"]
            if len(rest) == 1:
                return True, self.single(rest[0], s, seen)
            if not rest:
                return True, pa.null()
            return True, pa.struct([pa.field(f"member{i}", self.single(k, s, seen)) for i, k in enumerate(rest)])
        return kinds == "null", self.single(kinds, s, seen)

    def single(self, kind: str, s: dict, seen: tuple) -> pa.DataType:
        if kind == "object":
            props = s.get("properties")
            extra = s.get("additionalProperties")
            if not props and isinstance(extra, dict) and extra:
                return pa.map_(pa.string(), self.field("value", extra, seen))
            return pa.struct([self.field(name, sub, seen) for name, sub in (props or {}).items()])
        if kind == "array":
            items = s.get("items", {})
            if isinstance(items, list):       # draft 4-7 tuples: one type per position -> untyped
                return pa.list_(_field("item", ANY, True))
            return pa.list_(self.field("item", items, seen))
        simple = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_(),
                  "null": pa.null()}
        if kind not in simple:
            raise self.error(f"unknown type {kind!r}")
        return simple[kind]

    def union(self, members: list, seen: tuple) -> tuple[bool, pa.DataType]:
        shapes = [(self.shape(m, seen), m) for m in members]
        real = [(t, m) for (_, t), m in shapes if not pa.types.is_null(t)]
        nullable = len(real) < len(shapes) or any(n for (n, _), _ in shapes)
        if len(real) == 1:
            return True, real[0][0]
        if not real:
            return True, pa.null()
        return nullable, pa.struct([_field(f"member{i}", t, self.is_untyped(m, seen)) for i, (t, m) in enumerate(real)])

    def all_of(self, members: list, seen: tuple) -> tuple[bool, pa.DataType]:
        merged: dict[str, pa.Field] = {}
        for m in members:
            _, t = self.shape(m, seen)
            if not pa.types.is_struct(t):
                raise self.error("allOf of schemas that are not all objects has no column type")
            for f in t:
                merged.setdefault(f.name, f)
        return True, pa.struct(list(merged.values()))


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "other"


def fast(t: pa.DataType) -> bool:
    """Whether pyarrow's JSON reader reads this type as :func:`fit` would (no maps, unions
    or untyped values)."""
    if not pa.types.is_struct(t):
        return False
    return not is_union(t) and all(_fast_field(f.type) and not untyped(f) for f in t)


def is_union(t: pa.DataType) -> bool:
    """A struct standing for a union (fields member0, member1, ...)."""
    return (pa.types.is_struct(t) and t.num_fields > 0
            and all(f.name == f"member{i}" for i, f in enumerate(t)))


def _fast_field(t: pa.DataType) -> bool:
    if pa.types.is_map(t) or pa.types.is_null(t):
        return False
    if pa.types.is_struct(t):
        return fast(t)
    if pa.types.is_list(t):
        return _fast_field(t.value_type) and not untyped(t.value_field)
    return t in (pa.string(), pa.int64(), pa.float64(), pa.bool_())


def read_many(framed: pa.Array, t: pa.DataType) -> pa.Array | None:
    """``framed`` (binary, no nulls: the schema registry's 5-byte framing, then one JSON object
    each) read at once by pyarrow into the struct ``t``, or None when that fails (a text is not an
    object of ``t``'s shape, or holds a newline pyarrow would split it at).  The framing of each
    value is overwritten with a newline and four spaces, which makes the batch's bytes one
    newline-delimited JSON text in a single copy."""
    import pyarrow.json as pj
    n = len(framed)
    if n == 0:
        return pa.array([], t)
    offsets = np.frombuffer(framed.buffers()[1], np.int32)[framed.offset:framed.offset + n + 1]
    first, last = int(offsets[0]), int(offsets[-1])
    body = np.frombuffer(framed.buffers()[2], np.uint8)[first:last].copy()
    starts = offsets[:-1] - first
    for k, byte in enumerate(b"\n    "):
        body[starts + k] = byte
    try:
        table = pj.read_json(pa.BufferReader(pa.py_buffer(body)), parse_options=pj.ParseOptions(
            explicit_schema=pa.schema(list(t)), unexpected_field_behavior="ignore", newlines_in_values=False),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(body) + 1)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows != n:
        return None
    table = table.combine_chunks()
    return pa.StructArray.from_arrays([table.column(i).chunk(0) if table.column(i).num_chunks else
                                       pa.array([], f.type) for i, f in enumerate(t)], fields=list(t))


def fit(value: Any, t: pa.DataType, path: str = "", raw: bool = False) -> Any:
    """``value`` (as json.loads gives it) as Arrow's Python form of ``t`` (``raw``: a field whose
    schema fixes no type, holding JSON text); ValueError naming the field when it does not fit."""
    if value is None:
        return None
    if raw:
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if pa.types.is_struct(t):
        if is_union(t):
            for i, f in enumerate(t):
                try:
                    return {f"member{i}": fit(value, f.type, path, untyped(f))}
                except ValueError:
                    continue
            raise ValueError(f"{path or 'the value'}: {_kind(value)} fits no member of the union")
        if not isinstance(value, dict):
            raise ValueError(f"{path or 'the value'}: expected an object, got {_kind(value)}")
        return {f.name: fit(value.get(f.name), f.type, f"{path}{f.name}.", untyped(f)) for f in t}
    where = path.rstrip(".") or "the value"
    if pa.types.is_map(t):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected an object, got {_kind(value)}")
        return [(k, fit(v, t.item_type, f"{path}{k}.", untyped(t.item_field))) for k, v in value.items()]
    if pa.types.is_list(t):
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected an array, got {_kind(value)}")
        return [fit(v, t.value_type, path, untyped(t.value_field)) for v in value]
    kind = _kind(value)
    if t == pa.string():
        if kind != "string":
            raise ValueError(f"{where}: expected a string, got {kind}")
        return value
    if t == pa.int64():
        if kind == "number" and float(value).is_integer():
            return int(value)
        if kind != "integer":
            raise ValueError(f"{where}: expected an integer, got {kind}")
        if not -(1 << 63) <= value < (1 << 63):
            raise ValueError(f"{where}: {value} does not fit a 64-bit integer")
        return value
    if t == pa.float64():
        if kind not in ("integer", "number"):
            raise ValueError(f"{where}: expected a number, got {kind}")
        number = float(value)
        if math.isinf(number) and kind == "integer":
            raise ValueError(f"{where}: {value} does not fit a double")
        return number
    if t == pa.bool_():
        if kind != "boolean":
            raise ValueError(f"{where}: expected a boolean, got {kind}")
        return value
    if pa.types.is_null(t):
        raise ValueError(f"{where}: expected null")
    raise ValueError(f"{where}: no conversion to {t}")


def read_one(text: bytes, t: pa.DataType) -> Any:
    """One JSON text as Arrow's Python form of ``t``; ValueError saying why not."""
    try:
        value = json.loads(bytes(text))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if value is None:
        raise ValueError("the JSON text is null")
    return fit(value, t)
