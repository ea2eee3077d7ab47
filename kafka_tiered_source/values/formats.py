"""One interface over the three registry formats: a reader schema's column type, and a writer
schema resolved to it that decodes rows of a batch.

:class:`ReaderSchema` is what the driver resolves (``readers.py``) and ships to executors: the
reader schema's text and references, where it came from, and its Arrow type.
:func:`resolver` compiles a writer schema (the registry's, by id) against it into a
:class:`Resolver`, by each format's own rules: Avro schema resolution (``avro.py``), Protobuf by
field number (``protobuf.py``), JSON by name (``json_schema.py``).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..dataclass import dataclass, field
from ..errors import SchemaError
from .registry import RegisteredSchema


@dataclass(frozen=True)
class ReaderSchema:
    """The reader schema of one side (``key`` or ``value``): ``text`` in the format's own form
    (Avro JSON, Protobuf serialized, JSON Schema), ``references`` (name -> text), where it came
    from (``subject``/``version``/``schema_id``: None for a schema given outright), the Protobuf
    message or Avro record it names, and the column type."""
    side: str
    format: str
    text: str
    arrow_type: pa.DataType
    references: tuple[tuple[str, str], ...] = ()
    schema_id: int | None = None
    subject: str | None = None
    version: int | None = None
    record_name: str | None = None

    def describe(self) -> str:
        if self.subject is not None:
            return f"subject {self.subject} version {self.version} (schema id {self.schema_id})"
        return f"{self.side}.schema"


@dataclass
class Decoded:
    """What a resolver made of some rows: one entry per row (null where bad), and the bad ones
    as (index among the rows, reason)."""
    array: pa.Array
    bad: list[tuple[int, str]] = field(default_factory=list)


def reader_type(fmt: str, text: str, references: dict[str, str], record_name: str | None,
                schema_id: int | None = None) -> pa.DataType:
    """The column type of a reader schema."""
    if fmt == "avro":
        return _avro_reader(text, references, schema_id).arrow_type
    if fmt == "protobuf":
        from . import protobuf
        return protobuf.arrow_type(protobuf.message(protobuf.load_file(text, references, schema_id), record_name,
                                                    schema_id=schema_id))
    if fmt == "json":
        from . import json_schema
        return json_schema.arrow_type(json_schema.parse(text, schema_id), schema_id)
    raise SchemaError(f"format {fmt!r} has no schemas")


def avro_module() -> Any:
    """``values/avro.py`` (issue 37's Avro decoder, its own module: imported by name)."""
    import importlib
    return importlib.import_module(f"{__package__}.avro")


def _avro_parse(text: str, references: dict[str, str], schema_id: int | None) -> Any:
    """``text`` parsed, with its references (by full name) parsed first, in whatever order they
    resolve (a reference may use another)."""
    avro = avro_module()
    named: dict[str, Any] = {}
    todo = dict(references)
    while todo:
        progress = False
        for name, body in list(todo.items()):
            try:
                parsed = avro.parse_schema(body, named)
            except avro.AvroError:
                continue
            named[parsed.fullname or name] = parsed
            del todo[name]
            progress = True
        if not progress:
            break
    try:
        return avro.parse_schema(text, named)
    except avro.AvroError as exc:
        raise SchemaError(f"Avro schema: {exc}", schema_id=schema_id) from None


def _avro_reader(text: str, references: dict[str, str], schema_id: int | None) -> Any:
    return _avro_parse(text, references, schema_id)


class Resolver:
    """A writer schema resolved to the reader schema.  ``decode(values, rows, skips)``: the
    payloads ``values[rows[i]][skips[i]:]``."""

    def decode(self, values: pa.Array, rows: np.ndarray, skips: np.ndarray) -> Decoded:
        raise NotImplementedError


class AvroResolver(Resolver):
    def __init__(self, reader: ReaderSchema, writer: RegisteredSchema, writer_refs: dict[str, str]):
        avro = self._avro = avro_module()
        w = _avro_parse(writer.text, writer_refs, writer.id)
        r = _avro_parse(reader.text, dict(reader.references), reader.schema_id)
        try:
            self.resolution = avro.resolve(w, r)
        except avro.AvroError as exc:
            raise SchemaError(f"writer schema {writer.id} cannot be read as the reader schema: {exc}",
                              schema_id=writer.id) from None

    def decode(self, values: pa.Array, rows: np.ndarray, skips: np.ndarray) -> Decoded:
        out = self._avro.decode(self.resolution, values, pa.array(rows, pa.int32()), skip=5, permissive=True)
        return Decoded(out.array, [(row, f"{reason} (byte {offset} of the Avro datum)") for row, offset, reason
                                   in out.bad])


class ProtobufResolver(Resolver):
    def __init__(self, reader: ReaderSchema, writer: RegisteredSchema, writer_refs: dict[str, str]):
        from . import protobuf
        self._pb = protobuf
        self.writer_id = writer.id
        self.writer_file = protobuf.load_file(writer.text, writer_refs, writer.id)
        reader_file = protobuf.load_file(reader.text, dict(reader.references), reader.schema_id)
        self.reader_desc = protobuf.message(reader_file, reader.record_name, schema_id=reader.schema_id)
        self.cls = protobuf.message_class(self.reader_desc)
        self.convert = protobuf.converter(self.reader_desc)
        self.type = reader.arrow_type
        self._checked: set[tuple[int, ...]] = set()

    def check(self, indexes: Sequence[int]) -> None:
        key = tuple(indexes)
        if key not in self._checked:
            writer_desc = self._pb.message(self.writer_file, indexes=key, schema_id=self.writer_id)
            self._pb.check_compatible(writer_desc, self.reader_desc, self.writer_id)
            self._checked.add(key)

    def decode(self, values: pa.Array, rows: np.ndarray, skips: np.ndarray) -> Decoded:
        from google.protobuf.message import DecodeError
        offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset:values.offset + len(values) + 1]
        data = values.buffers()[2]
        view = memoryview(data) if data is not None else memoryview(b"")
        cls = self.cls
        parse = cls.FromString
        offs = offsets.tolist()
        msgs: list = []
        bad: list[tuple[int, str]] = []
        mask = None
        for i, (row, skip) in enumerate(zip(rows.tolist(), skips.tolist(), strict=True)):
            try:
                msgs.append(parse(view[offs[row] + skip:offs[row + 1]]))
            except (DecodeError, ValueError, RuntimeError) as exc:
                bad.append((i, f"not a Protobuf message of the reader schema: {exc}"))
                if mask is None:
                    mask = [False] * len(rows)
                mask[i] = True
                msgs.append(cls())
        return Decoded(self.convert(msgs, mask), bad)


class JsonResolver(Resolver):
    def __init__(self, reader: ReaderSchema, writer: RegisteredSchema, writer_refs: dict[str, str]):
        from . import json_schema
        self._json = json_schema
        json_schema.parse(writer.text, writer.id)     # a writer schema that is not one is refused
        self.type = reader.arrow_type
        self.fast = json_schema.fast(self.type)

    def decode(self, values: pa.Array, rows: np.ndarray, skips: np.ndarray) -> Decoded:
        framed = values.take(pa.array(rows, pa.int32()))
        if self.fast:
            got = self._json.read_many(framed, self.type)
            if got is not None:
                return Decoded(got)
        out: list = []
        bad: list[tuple[int, str]] = []
        for i, text in enumerate(framed.to_pylist()):
            try:
                out.append(self._json.read_one(text[5:], self.type))
            except ValueError as exc:
                out.append(None)
                bad.append((i, str(exc)))
        return Decoded(pa.array(out, self.type), bad)


_RESOLVERS = {"avro": AvroResolver, "protobuf": ProtobufResolver, "json": JsonResolver}


def resolver(reader: ReaderSchema, writer: RegisteredSchema, writer_refs: dict[str, str]) -> Resolver:
    if writer.kind != reader.format:
        raise SchemaError(f"schema {writer.id} is a {writer.kind} schema but {reader.side}.format is "
                          f"{reader.format}", schema_id=writer.id)
    return _RESOLVERS[reader.format](reader, writer, writer_refs)
