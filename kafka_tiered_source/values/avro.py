"""Avro values: schemas, resolution and a vectorized decoder into Arrow.

Keys and values written by Confluent's Avro serializer are a 5-byte prefix (magic byte, schema
id) and one Avro binary datum written with the writer's schema.  :func:`decode` reads a column
of them, resolved to a reader schema as the Avro specification states it, into one Arrow array
typed as spark-avro's SchemaConverters would type the reader schema::

    writer = parse_schema(registry_text_for_the_id)
    res = resolve(writer, reader)          # once per (writer id, reader)
    decoded = decode(res, batch.column("value"), rows=rows_with_that_id)

Two decoders sit behind :func:`decode`: the C one (native/avro.c, the ``_native`` extension)
and the pure-Python reference (``_avro_python``), chosen as the record decoder is:
``KAFKA_TIERED_NO_EXTENSIONS=1`` selects the pure one.  Both interpret one program compiled from
the resolution (``_avro_resolve``) and give the same rows, errors and byte offsets.

Arrow mapping: boolean/int/long/float/double -> bool/int32/int64/float32/float64; bytes, fixed
-> binary; string, enum -> string; record -> struct (every field nullable); array -> list;
map -> map<string, T>; a union of null and one type -> that type, nullable; other unions ->
struct<member0, member1, ...> (the non-null branches, in order); null -> null.  Logical types:
decimal -> decimal128(precision, scale) (a decimal wider than 38 digits, which decimal128
cannot hold, is read as its bytes); uuid -> string (on string, or on fixed(16), formatted);
date -> date32; time-millis -> int32; time-micros -> int64; timestamp-millis/micros ->
timestamp("us", "UTC"); local-timestamp-millis/micros -> timestamp("us").  An unknown or
invalid logical type is read as its underlying type, as the specification says.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import KafkaTieredError
from . import _avro_python, _avro_resolve
from ._avro_schema import (AvroDecodeError, AvroError, AvroResolutionError, Node, arrow_type,
                           canonical_form, full_form, parse_node)

__all__ = ["AvroError", "AvroResolutionError", "AvroDecodeError", "AvroSchema", "parse_schema",
           "AvroResolution", "resolve", "AvroDecoded", "decode", "decoder_backend"]

NO_EXTENSIONS_ENV = "KAFKA_TIERED_NO_EXTENSIONS"
for _cls in (AvroError, AvroResolutionError, AvroDecodeError):
    _cls.__module__ = __name__


class AvroSchema:
    """A parsed schema: immutable, hashable, equal to another when everything that decoding
    depends on is equal (names, fields, defaults, aliases, logical types; not docs)."""

    __slots__ = ("_node", "_key", "_arrow", "canonical", "fullname")

    def __init__(self, node: Node):
        set_ = object.__setattr__
        set_(self, "_node", node)
        set_(self, "_key", json.dumps(full_form(node), sort_keys=True, separators=(",", ":")))
        set_(self, "_arrow", None)
        set_(self, "canonical", canonical_form(node))
        set_(self, "fullname", node.fullname if node.kind in ("record", "enum", "fixed") else None)

    _node: Node
    _key: str
    _arrow: pa.DataType | None
    canonical: str
    fullname: str | None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"AvroSchema is immutable ({name})")

    @property
    def arrow_type(self) -> pa.DataType:
        """The column type (see the module's mapping); AvroError for a recursive type."""
        if self._arrow is None:
            object.__setattr__(self, "_arrow", arrow_type(self._node))
        return self._arrow

    @property
    def type(self) -> str:
        """The Avro type: a primitive name, or record, enum, fixed, array, map, union."""
        return self._node.kind

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AvroSchema) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"AvroSchema({self.canonical if len(self.canonical) < 200 else self.canonical[:197] + '...'})"

    def __reduce__(self):
        return (parse_schema, (self._key,))


def parse_schema(text: str, named: Mapping[str, AvroSchema] | None = None) -> AvroSchema:
    """Parse a schema's JSON text.  `named`: already-parsed referenced schemas by full name (a
    registry's `references`); their named types may be used by name.  Raises AvroError."""
    return AvroSchema(parse_node(text, {k: v._node for k, v in (named or {}).items()}))


class AvroResolution:
    """A writer schema resolved to a reader schema, compiled once for both decoders."""

    __slots__ = ("writer", "reader", "_program", "_python", "_native")
    _python: _avro_python.Fn | None
    _native: tuple | None

    def __init__(self, writer: AvroSchema, reader: AvroSchema):
        self.writer = writer
        self.reader = reader
        self._program = _avro_resolve.compile_resolution(writer._node, reader._node)
        self._python = None
        self._native = None

    def __reduce__(self):
        return (resolve, (self.writer, self.reader))

    def __repr__(self) -> str:
        return f"AvroResolution(writer={self.writer!r}, reader={self.reader!r})"


def resolve(writer: AvroSchema, reader: AvroSchema) -> AvroResolution:
    """Avro schema resolution as the specification states it (names and aliases, defaults,
    promotions int->long/float/double, long->float/double, float->double, string<->bytes,
    unions by the first matching branch, enum defaults).  Raises AvroResolutionError.

    What the schemas settle is checked here; what depends on the data (a writer union branch
    that no reader branch matches, an enum symbol the reader lacks with no default) fails only
    the datums that carry it, as the specification has it.  The last 128 resolutions are kept:
    resolving the same two schemas again returns the compiled one."""
    return _resolve(writer, reader)


@functools.lru_cache(maxsize=128)
def _resolve(writer: AvroSchema, reader: AvroSchema) -> AvroResolution:
    return AvroResolution(writer, reader)


class AvroDecoded:
    """``array``: of ``resolution.reader.arrow_type``, one entry per row; ``bad``: ``(row,
    byte_offset, reason)`` of each malformed datum (permissive decoding only)."""

    __slots__ = ("array", "bad")

    def __init__(self, array: pa.Array, bad: list[tuple[int, int, str]]):
        self.array = array
        self.bad = bad

    def __repr__(self) -> str:
        return f"AvroDecoded({len(self.array)} rows, {len(self.bad)} bad)"


def decoder_backend() -> str:
    """``"native"`` or ``"python"`` (``KAFKA_TIERED_NO_EXTENSIONS=1``)."""
    return "python" if os.environ.get(NO_EXTENSIONS_ENV) == "1" else "native"


def _native_program(res: AvroResolution):
    if res._native is None:
        try:
            from . import _avro_native
        except ImportError as exc:
            raise KafkaTieredError(
                f"the native Avro decoder (kafka_tiered_source._native) cannot be imported: "
                f"{exc}. Build it with `pip install -e .` (needs a C compiler), or set "
                f"{NO_EXTENSIONS_ENV}=1 to use the pure-Python decoder") from None
        res._native = (_avro_native, _avro_native.pack(res._program))
    return res._native


def _decode_with(backend: str, res: AvroResolution, values: pa.Array, rows: pa.Array | None,
                 skip: int, permissive: bool) -> AvroDecoded:
    try:
        if backend == "python":
            if res._python is None:
                res._python = _avro_python.compile_program(res._program)
            rlist = None if rows is None else rows.to_pylist()
            array, bad, error = _avro_python.decode(res._program, res._python, values, rlist,
                                                    skip, permissive)
        else:
            mod, prog = _native_program(res)
            array, bad, error = mod.decode(res._program, prog, values, rows, skip, permissive)
    except OverflowError as exc:    # Arrow's int32 offsets: decode fewer rows at a time
        raise AvroError(f"{exc}; decode fewer rows at a time") from None
    if error is not None:
        raise AvroDecodeError(*error)
    return AvroDecoded(array, bad)


def _inputs(values, rows, skip: int):
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if not isinstance(values, pa.Array) or values.type != pa.binary():
        raise TypeError(f"values must be a pyarrow BinaryArray, not {getattr(values, 'type', type(values))}")
    if rows is not None:
        if not isinstance(rows, pa.Array):
            rows = pa.array(rows, type=pa.int32())
        if rows.type != pa.int32() or rows.null_count:
            raise TypeError("rows must be a pyarrow Int32Array without nulls")
        if len(rows) and (pc.min(rows).as_py() < 0 or pc.max(rows).as_py() >= len(values)):
            raise IndexError(f"rows must index into the {len(values)} values")
    if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
        raise ValueError(f"skip must be a non-negative int, not {skip!r}")
    return values, rows


def decode(res: AvroResolution, values: pa.BinaryArray, rows: pa.Int32Array | None = None,
           skip: int = 5, permissive: bool = False) -> AvroDecoded:
    """Decode values[rows[i]][skip:] (every row when rows is None): Avro binary written with
    res.writer, resolved to res.reader.  A null value gives a null entry.  A malformed datum raises
    AvroDecodeError(row=i, ...) unless permissive, where its entry is null and `bad` names it.
    Bytes after a complete datum are ignored, as fastavro's schemaless_reader (what
    confluent-kafka's AvroDeserializer uses) ignores them."""
    values, rows = _inputs(values, rows, skip)
    return _decode_with(decoder_backend(), res, values, rows, skip, bool(permissive))
