"""Test tooling: an embedded Kafka-protocol broker with tiered storage (``EmbeddedCluster``).

Imported lazily so that ``import kafka_tiered_source.testing.storage`` does not pull in the
network server."""
from __future__ import annotations

__all__ = ["EmbeddedCluster"]


def __getattr__(name):
    if name == "EmbeddedCluster":
        from .cluster import EmbeddedCluster
        return EmbeddedCluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
