"""Test tooling: an embedded Kafka-protocol broker with tiered storage (``EmbeddedCluster``) and a
Schema Registry REST server (``SchemaRegistry``).

Imported lazily so that ``import kafka_tiered_source.testing.storage`` does not pull in the
network server."""
from __future__ import annotations

__all__ = ["EmbeddedCluster", "SchemaRegistry"]


def __getattr__(name):
    if name == "EmbeddedCluster":
        from .cluster import EmbeddedCluster
        return EmbeddedCluster
    if name == "SchemaRegistry":
        from .schema_registry import SchemaRegistry
        return SchemaRegistry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
