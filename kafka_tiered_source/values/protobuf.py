"""Protobuf values: descriptors from the registry, resolution by field number, Arrow columns.

Schemas are FileDescriptorProtos (the registry's ``format=serialized``, what confluent-kafka's
ProtobufSerializer registers), their imports registry references, the well-known types built in.
The reader schema fixes the column: its message (``<side>.schema.record.name``, else the file's
first, as ProtobufDeserializer starts from) becomes a struct, field by field
(:func:`arrow_type`).  Every writer message is read by field number into that reader message, as
the wire format itself resolves them: the payload is parsed by the protobuf runtime (upb) with
the reader's class, so fields the reader lacks are skipped and fields the writer lacks take their
default.  :func:`check_compatible` refuses beforehand a field number whose writer and reader types
do not share a wire encoding (the runtime would drop such a field silently).

Values are the runtime's: a field without presence (a proto3 scalar) reads as its default when
absent, a field with presence (a message, ``optional``, a oneof member, proto2) as null.  Enums
are their names (an unknown number: the number as text); ``google.protobuf.Timestamp`` is a
timestamp, ``Duration`` an int64 of microseconds, the wrappers (``Int32Value``...) their nullable
value.  Decoding parses one message per record (the runtime has no columnar parser) and builds
each column from a list of the messages' fields.
"""
from __future__ import annotations

import base64
from decimal import Decimal
from operator import attrgetter, methodcaller
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from ..errors import SchemaError

_TS = pa.timestamp("us", tz="UTC")
_WRAPPERS = {"google.protobuf.DoubleValue": pa.float64(), "google.protobuf.FloatValue": pa.float32(),
             "google.protobuf.Int64Value": pa.int64(), "google.protobuf.UInt64Value": pa.decimal128(20, 0),
             "google.protobuf.Int32Value": pa.int32(), "google.protobuf.UInt32Value": pa.int64(),
             "google.protobuf.BoolValue": pa.bool_(), "google.protobuf.StringValue": pa.string(),
             "google.protobuf.BytesValue": pa.binary()}
# wire encodings: types that share one read each other's bytes
_WIRE = {}
for _t in ("INT32", "INT64", "UINT32", "UINT64", "BOOL", "ENUM"):
    _WIRE[_t] = "varint"
for _t in ("SINT32", "SINT64"):
    _WIRE[_t] = "zigzag"
for _t in ("FIXED32", "SFIXED32", "FLOAT"):
    _WIRE[_t] = "32-bit"
for _t in ("FIXED64", "SFIXED64", "DOUBLE"):
    _WIRE[_t] = "64-bit"
for _t in ("STRING", "BYTES"):
    _WIRE[_t] = "bytes"
_WIRE["MESSAGE"] = "message"
_WIRE["GROUP"] = "group"


def _runtime():
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError as exc:   # pragma: no cover - the `values` extra installs it
        raise SchemaError(f"value.format=protobuf needs the protobuf package (pip install "
                          f"'kafka-tiered-source[values]'): {exc}") from None
    return descriptor_pb2, descriptor_pool, message_factory


def _type_name(field) -> str:
    from google.protobuf.descriptor import FieldDescriptor
    for name in dir(FieldDescriptor):
        if name.startswith("TYPE_") and getattr(FieldDescriptor, name) == field.type:
            return name[5:]
    return str(field.type)


def file_descriptor_proto(text: str, schema_id: int | None = None) -> Any:
    """The FileDescriptorProto of a registry's serialized Protobuf schema (base64)."""
    descriptor_pb2, _, _ = _runtime()
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(base64.b64decode(text.strip(), validate=True))
    except Exception as exc:
        raise SchemaError(f"a Protobuf schema must be the base64 of a FileDescriptorProto (the registry's "
                          f"format=serialized), which this is not: {exc}", schema_id=schema_id) from None
    return proto


def load_file(text: str, references: dict[str, str], schema_id: int | None = None) -> Any:
    """The FileDescriptor of ``text`` in a pool of its own, with the well-known types and
    ``references`` (import path -> serialized schema) added first."""
    _, descriptor_pool, _ = _runtime()
    pool = descriptor_pool.DescriptorPool()
    _add_well_known(pool)
    added: set[str] = set()

    def add(name: str, body: str) -> None:
        proto = file_descriptor_proto(body, schema_id)
        proto.name = name
        for dep in proto.dependency:
            if dep not in added and dep in references:
                added.add(dep)
                add(dep, references[dep])
        try:
            pool.Add(proto)
        except Exception as exc:
            raise SchemaError(f"Protobuf schema file {name!r} cannot be loaded: {exc}", schema_id=schema_id) from None

    main = file_descriptor_proto(text, schema_id)
    for dep in main.dependency:
        if dep not in added and dep in references:
            added.add(dep)
            add(dep, references[dep])
    name = main.name or "schema.proto"
    main.name = name
    try:
        pool.Add(main)
        return pool.FindFileByName(name)
    except Exception as exc:
        raise SchemaError(f"Protobuf schema cannot be loaded: {exc}", schema_id=schema_id) from None


def _add_well_known(pool) -> None:
    from google.protobuf import (any_pb2, api_pb2, descriptor_pb2, duration_pb2, empty_pb2, field_mask_pb2,
                                 source_context_pb2, struct_pb2, timestamp_pb2, type_pb2, wrappers_pb2)
    for mod in (any_pb2, source_context_pb2, type_pb2, api_pb2, descriptor_pb2, duration_pb2, empty_pb2,
                field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2):
        pool.AddSerializedFile(mod.DESCRIPTOR.serialized_pb)


def message(file, name: str | None = None, indexes: Sequence[int] = (0,), schema_id: int | None = None):
    """The message of ``file`` named ``name`` (full name, or the bare name), else the one the
    message indexes of the wire format point at."""
    if name is not None:
        pool = file.pool
        for candidate in (name, f"{file.package}.{name}" if file.package else name):
            try:
                return pool.FindMessageTypeByName(candidate)
            except KeyError:
                continue
        raise SchemaError(f"the Protobuf schema has no message {name!r} (messages: "
                          f"{', '.join(file.message_types_by_name)})", schema_id=schema_id)
    found = None
    types = list(file.message_types_by_name.values())
    for depth, i in enumerate(indexes):
        if not 0 <= i < len(types):
            raise SchemaError(f"message index {list(indexes)} is out of range at depth {depth} "
                              f"({len(types)} message(s) there)", schema_id=schema_id)
        found = types[i]
        types = list(found.nested_types)
    if found is None:
        raise SchemaError("the Protobuf schema has no message", schema_id=schema_id)
    return found


def _is_map(field) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def arrow_type(desc, _seen: tuple = ()) -> pa.DataType:
    """The struct a message maps to (Spark's from_protobuf types; every field nullable)."""
    if desc.full_name in _seen:
        raise SchemaError(f"Protobuf message {desc.full_name} is recursive ({' -> '.join(_seen + (desc.full_name,))}): "
                          f"a recursive message has no column type")
    seen = _seen + (desc.full_name,)
    return pa.struct([pa.field(f.name, _field_type(f, seen)) for f in desc.fields])


def _field_type(f, seen: tuple) -> pa.DataType:
    if _is_map(f):
        entry = f.message_type
        key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
        return pa.map_(_single_type(key, seen), pa.field("value", _single_type(value, seen)))
    single = _single_type(f, seen)
    return pa.list_(single) if f.is_repeated else single


def _single_type(f, seen: tuple) -> pa.DataType:
    kind = _type_name(f)
    if kind == "MESSAGE" or kind == "GROUP":
        name = f.message_type.full_name
        if name == "google.protobuf.Timestamp":
            return _TS
        if name == "google.protobuf.Duration":
            return pa.int64()
        if name in _WRAPPERS:
            return _WRAPPERS[name]
        return arrow_type(f.message_type, seen)
    return {"DOUBLE": pa.float64(), "FLOAT": pa.float32(), "INT64": pa.int64(), "SINT64": pa.int64(),
            "SFIXED64": pa.int64(), "UINT64": pa.decimal128(20, 0), "FIXED64": pa.decimal128(20, 0),
            "INT32": pa.int32(), "SINT32": pa.int32(), "SFIXED32": pa.int32(), "UINT32": pa.int64(),
            "FIXED32": pa.int64(), "BOOL": pa.bool_(), "STRING": pa.string(), "BYTES": pa.binary(),
            "ENUM": pa.string()}[kind]


def check_compatible(writer, reader, schema_id: int | None = None, path: str = "") -> None:
    """Raise :class:`SchemaError` when a field number of both messages has types whose wire
    encodings differ (or one side repeated, the other not, for a message)."""
    for rf in reader.fields:
        wf = writer.fields_by_number.get(rf.number)
        if wf is None:
            continue
        where = f"{path}{rf.name}"
        wk, rk = _type_name(wf), _type_name(rf)
        if _WIRE.get(wk) != _WIRE.get(rk) or (_is_map(wf) != _is_map(rf)):
            raise SchemaError(f"field {where} (number {rf.number}) is {wk.lower()} in the writer schema and "
                              f"{rk.lower()} in the reader schema: their wire encodings differ", schema_id=schema_id)
        if rk in ("MESSAGE", "GROUP"):
            if wf.is_repeated != rf.is_repeated:
                raise SchemaError(f"field {where} (number {rf.number}) is repeated on one side only",
                                  schema_id=schema_id)
            if not rf.message_type.full_name.startswith("google.protobuf."):
                check_compatible(wf.message_type, rf.message_type, schema_id, where + ".")


def message_class(desc) -> Any:
    _, _, message_factory = _runtime()
    return message_factory.GetMessageClass(desc)


# -- messages -> Arrow ----------------------------------------------------------------------
def converter(desc) -> Callable[[list, Any], pa.Array]:
    """``convert(messages, mask)``: the StructArray of ``messages`` (``mask``: True where null)."""
    fields = [(f, _field_converter(f)) for f in desc.fields]
    typ = arrow_type(desc)

    def convert(msgs: list, mask=None) -> pa.Array:
        children = [conv(msgs) for _, conv in fields]
        if not children:
            return pa.array([{}] * len(msgs), typ, mask=mask) if msgs else pa.array([], typ)
        return pa.StructArray.from_arrays(children, fields=list(typ), mask=mask)
    return convert


def _field_converter(f) -> Callable[[list], pa.Array]:
    get = attrgetter(f.name)
    typ = _field_type(f, ())
    if _is_map(f):
        entry = f.message_type
        key_f, value_f = entry.fields_by_name["key"], entry.fields_by_name["value"]
        key_conv, value_conv = _values_converter(key_f), _values_converter(value_f)

        def maps(msgs: list) -> pa.Array:
            offsets, keys, values = [0], [], []
            for m in msgs:
                entries = get(m)
                for k in entries:
                    keys.append(k)
                    values.append(entries[k])
                offsets.append(len(keys))
            return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), key_conv(keys), value_conv(values),
                                           type=typ)
        return maps
    if f.is_repeated:
        inner = _values_converter(f)

        def repeated(msgs: list) -> pa.Array:
            lists = list(map(get, msgs))
            offsets = np.zeros(len(lists) + 1, np.int32)
            np.cumsum(np.fromiter(map(len, lists), np.int32, len(lists)), out=offsets[1:])
            flat = [x for one in lists for x in one]
            return pa.ListArray.from_arrays(pa.array(offsets), inner(flat), type=typ)
        return repeated
    values = _values_converter(f)
    if f.has_presence:
        name = f.name

        has = methodcaller("HasField", name)

        def present(msgs: list) -> pa.Array:
            return values(list(map(get, msgs)), ~np.fromiter(map(has, msgs), bool, len(msgs)))
        return present
    return lambda msgs: values(list(map(get, msgs)))


def _values_converter(f) -> Callable[..., pa.Array]:
    """``conv(values, mask=None)``: the Arrow array of one field's values (not repeated)."""
    kind = _type_name(f)
    typ = _single_type(f, ())
    if kind in ("MESSAGE", "GROUP"):
        name = f.message_type.full_name
        if name == "google.protobuf.Timestamp":
            return lambda vs, mask=None: pa.array([v.seconds * 1_000_000 + v.nanos // 1000 for v in vs], pa.int64(),
                                                  mask=_mask(mask)).cast(_TS)
        if name == "google.protobuf.Duration":
            return lambda vs, mask=None: pa.array([v.seconds * 1_000_000 + int(v.nanos / 1000) for v in vs],
                                                  pa.int64(), mask=_mask(mask))
        if name in _WRAPPERS:
            inner = typ
            if pa.types.is_decimal(inner):
                return lambda vs, mask=None: pa.array([Decimal(v.value) for v in vs], inner, mask=_mask(mask))
            return lambda vs, mask=None: pa.array([v.value for v in vs], inner, mask=_mask(mask))
        nested = converter(f.message_type)
        return lambda vs, mask=None: nested(vs, _mask(mask))
    if kind == "ENUM":
        names = {v.number: v.name for v in f.enum_type.values}
        return lambda vs, mask=None: pa.array([names.get(v) or str(v) for v in vs], pa.string(), mask=_mask(mask))
    if pa.types.is_decimal(typ):
        return lambda vs, mask=None: pa.array([Decimal(v) for v in vs], typ, mask=_mask(mask))
    return lambda vs, mask=None: pa.array(vs, typ, mask=_mask(mask))


def _mask(mask):
    if mask is None:
        return None
    m = np.asarray(mask, bool)
    return pa.array(m, pa.bool_()) if m.any() else None
