"""The output schema of the ``kafka-tiered`` source: Spark's built-in Kafka source schema.

Two spellings of one schema: the Spark DDL string ``DataSource.schema()`` returns, and the
Arrow schema of the batches ``read()`` yields (owned by the record decoder,
:func:`kafka_tiered_source.records.kafka_schema`, re-exported here).  Spark compares the first
Arrow batch against the DDL strictly, so the two must agree field for field; the Spark tests
check that they do.
"""
from __future__ import annotations

from ..records.schema import kafka_schema as arrow_schema

__all__ = ["KAFKA_DDL", "KAFKA_DDL_WITH_HEADERS", "arrow_schema", "ddl", "read_ddl"]

# Back-quoted: ``offset``, ``partition`` and ``timestamp`` are SQL keywords.  Every column is
# nullable, as in Spark's KafkaRecordToRowConverter.kafkaSchema.
KAFKA_DDL = ("`key` BINARY, `value` BINARY, `topic` STRING, `partition` INT, `offset` BIGINT, "
             "`timestamp` TIMESTAMP, `timestampType` INT")
KAFKA_DDL_WITH_HEADERS = KAFKA_DDL + ", `headers` ARRAY<STRUCT<`key`: STRING, `value`: BINARY>>"


def read_ddl(options) -> str:
    """The DDL schema of a read: Spark's Kafka source's, with the keys and values typed as
    ``key.format``/``value.format`` say (their reader schemas resolved already,
    :func:`kafka_tiered_source.values.readers.resolve_readers`)."""
    if not options.values.typed:
        return ddl(options.include_headers)
    from ..values.columns import ddl as typed_ddl
    return typed_ddl(options.values, options.include_headers)


def ddl(include_headers: bool) -> str:
    """The DDL schema; ``headers`` only with ``includeHeaders=true`` (null when a record has
    none)."""
    return KAFKA_DDL_WITH_HEADERS if include_headers else KAFKA_DDL
