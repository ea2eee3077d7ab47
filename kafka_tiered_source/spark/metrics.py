"""Driver side: a Spark accumulator that totals every task's metrics.

Spark 4.3 runs a Python data source's ``__init__``/``schema()`` and ``partitions()`` in worker
processes, never in the driver's Python process, so the data source itself cannot create an
accumulator (there is no SparkContext there).  :func:`install` (called by
``kafka_tiered_source.register(spark)``) creates it on the driver and registers a subclass of
the data source that carries it (cloudpickle ships the dynamically made class by value, the
accumulator inside it), together with the application name (the default ``client.id``) and id.
Tasks add their :class:`~kafka_tiered_source.metrics.reader.ReadTotals` to it in ``read()``; the driver reads them back
with :func:`last_read_stats` / :func:`read_history`.

Reads through the automatically registered source (``pyspark_kafka_tiered``) still work, but
their totals reach the driver only if :func:`install` ran first.
"""
from __future__ import annotations

import threading

from pyspark.accumulators import AccumulatorParam

from ..metrics.reader import ReadHistory

_lock = threading.Lock()
_accumulators: dict = {}     # id(SparkContext) -> (SparkContext, Accumulator)


class ReadHistoryParam(AccumulatorParam):
    """Merges :class:`ReadHistory` values and the :class:`ReadTotals` tasks add."""

    def zero(self, value):
        return ReadHistory()

    def addInPlace(self, value1, value2):
        if not isinstance(value1, ReadHistory):
            value1 = ReadHistory().add(value1)
        return value1.add(value2)


def accumulator(spark):
    """The session's accumulator (created on first use, on the driver)."""
    sc = spark.sparkContext
    with _lock:
        entry = _accumulators.get(id(sc))
        if entry is None or entry[0] is not sc:
            entry = (sc, sc.accumulator(ReadHistory(), ReadHistoryParam()))
            _accumulators[id(sc)] = entry
        return entry[1]


def install(spark) -> None:
    """Register the ``kafka-tiered`` source with ``spark`` so that its tasks' metrics reach this
    driver, and its default ``client.id`` is the application name."""
    from .datasource import KafkaTieredDataSource
    sc = spark.sparkContext
    attrs = {"_kts_accumulator": accumulator(spark), "_kts_app_name": sc.appName,
             "_kts_app_id": sc.applicationId, "__module__": __name__,
             # not an attribute of this module: cloudpickle then ships the class by value
             "__qualname__": "KafkaTieredDataSource<tracked>"}
    spark.dataSource.register(type("KafkaTieredDataSource", (KafkaTieredDataSource,), attrs))


def read_history(spark) -> ReadHistory:
    """Every read's totals in this session so far (reads since :func:`install`)."""
    return accumulator(spark).value


def last_read_stats(spark):
    """The :class:`~kafka_tiered_source.metrics.reader.ReadTotals` of the latest read (the latest Spark action over a
    ``kafka-tiered`` DataFrame) whose tasks reported; None before any."""
    return read_history(spark).last()
