"""The Arrow schema of decoded records: Spark's own Kafka source schema, column for column."""
from __future__ import annotations

import pyarrow as pa

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

_BASE = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]
_SCHEMAS = {
    False: pa.schema(_BASE),
    True: pa.schema(_BASE + [pa.field("headers", HEADER_TYPE)]),
}


def kafka_schema(include_headers: bool) -> pa.Schema:
    """``key binary, value binary, topic string, partition int32, offset int64,
    timestamp timestamp[us, UTC], timestampType int32`` and, when ``include_headers``,
    ``headers list<struct<key: string, value: binary>>``; every field nullable.  Never
    ``large_*`` types: Spark refuses them, so batches are split by bytes instead."""
    return _SCHEMAS[bool(include_headers)]
