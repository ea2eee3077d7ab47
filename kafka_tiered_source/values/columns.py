"""The columns of a typed read, in Arrow and as Spark's DDL (the two must agree field for field:
Spark checks the first Arrow batch against the DDL strictly).

Spark's Kafka columns come first, in their order, with ``key`` and ``value`` typed as their
formats say (``string``: STRING; ``avro``/``protobuf``/``json``: the reader schema's type, a
struct for a record); then, for each side written with a registry's serializer,
``keySchemaId`` / ``valueSchemaId`` (INT: the writer schema id of the row, null where the row is
null or not framed); then, with ``mode=PERMISSIVE``, ``corruptKey`` / ``corruptValue`` (BINARY:
the raw bytes of a key or value that could not be decoded, null for every other row).
"""
from __future__ import annotations

import pyarrow as pa

from ..options.typed_values import SIDES, ValuesConfig
from ..records.schema import kafka_schema


def side_type(config: ValuesConfig, side: str) -> pa.DataType:
    s = config.side(side)
    if s.format == "binary":
        return pa.binary()
    if s.format == "string":
        return pa.string()
    readers = config.readers
    reader = getattr(readers, side, None) if readers is not None else None
    if reader is None:
        raise ValueError(f"the {side} reader schema is not resolved yet")
    return reader.arrow_type


def output_schema(config: ValuesConfig, include_headers: bool) -> pa.Schema:
    """The Arrow schema of a read's batches."""
    base = kafka_schema(include_headers)
    if not config.typed:
        return base
    fields = [pa.field(f.name, side_type(config, f.name)) if f.name in SIDES else f for f in base]
    for side in SIDES:
        if config.side(side).registry:
            fields.append(pa.field(f"{side}SchemaId", pa.int32()))
    if config.permissive:
        for side in SIDES:
            if config.side(side).typed:
                fields.append(pa.field(f"corrupt{side.capitalize()}", pa.binary()))
    return pa.schema(fields)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def spark_type(t: pa.DataType) -> str:
    """The Spark SQL type of an Arrow type this package produces."""
    if pa.types.is_struct(t):
        return "STRUCT<" + ", ".join(f"{_quote(f.name)}: {spark_type(f.type)}" for f in t) + ">"
    if pa.types.is_map(t):
        return f"MAP<{spark_type(t.key_type)}, {spark_type(t.item_type)}>"
    if pa.types.is_list(t):
        return f"ARRAY<{spark_type(t.value_type)}>"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP" if t.tz is not None else "TIMESTAMP_NTZ"
    simple = {pa.bool_(): "BOOLEAN", pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT",
              pa.int64(): "BIGINT", pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.string(): "STRING",
              pa.binary(): "BINARY", pa.date32(): "DATE", pa.null(): "VOID"}
    if t in simple:
        return simple[t]
    raise ValueError(f"no Spark type for the Arrow type {t}")


def ddl(config: ValuesConfig, include_headers: bool) -> str:
    """The DDL schema of a read (Spark's Kafka source's when nothing is typed)."""
    return ", ".join(f"{_quote(f.name)} {spark_type(f.type)}" for f in output_schema(config, include_headers))
