"""The ``kafka-tiered`` Spark data source: options, schema and registration.

Spark registers the source by itself when this project is installed (the top-level module
``pyspark_kafka_tiered`` exposes ``DefaultSource``); :func:`register` does it explicitly for a
session, e.g. when the package is only on ``sys.path``.  pyspark is imported lazily so that
the rest of the package works without it.
"""
from __future__ import annotations


def register(spark, metrics_dir: str | None = None) -> None:
    """Register the ``kafka-tiered`` format with ``spark`` (a ``SparkSession``): the same
    registration as ``kafka_tiered_source.register`` (:func:`.registration.install`)."""
    from .registration import install
    install(spark, metrics_dir)


__all__ = ["register"]
