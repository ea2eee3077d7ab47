"""The ``kafka-tiered`` Spark data source (Spark 4 Python data source API).

Options are parsed and checked once, when the DataFrame is created
(``spark.read.format("kafka-tiered")...load()`` fails there, naming the option).  Planning runs
in ``partitions()`` (Spark's planner process): it asks the partition leaders where the data lives
and groups the work into coarse tasks.  ``read()`` runs on executors: ranged GETs of tiered
segments, native decoding into Arrow, broker fetch for the rest and as the fallback.

>>> df = (spark.read.format("kafka-tiered")                      # doctest: +SKIP
...       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
...       .option("subscribe", "orders")
...       .option("remote.storage.fetcher", "s3")
...       .option("remote.storage.s3.bucket", "tiered")
...       .load())
"""
from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSource

from ..options import ReadOptions
from ..options.read import log_ignored, with_default_client_id
from .metrics import SessionContext, with_metrics_dir
from .partitions import KafkaTieredReader, TaskPartition, plan_partitions, read_partition
from .schema import read_ddl

log = logging.getLogger(__name__)

__all__ = ["KafkaTieredDataSource", "KafkaTieredReader", "TaskPartition", "for_session", "plan_partitions",
           "read_partition"]


class KafkaTieredDataSource(DataSource):
    """``spark.read.format("kafka-tiered")``.

    The parsed :class:`ReadOptions` travel with the instance when Spark pickles it, so options
    are parsed once, in the process that creates the DataFrame.  ``context`` is what
    ``kafka_tiered_source.register(spark)`` knows of its session (metrics channel, application
    name and id; :func:`for_session`); the class Spark finds by itself has none.
    """

    context: SessionContext = SessionContext()

    def __init__(self, options):
        ctx = self.context
        options = with_default_client_id(options, ctx.app_name)
        super().__init__(options)
        # The same source serves spark.read and spark.readStream, and Spark does not say which
        # when it creates it: the options are checked as a batch read's (errors surface at
        # load()), and streamReader() parses them again as a stream's.
        from ..values.readers import resolve_readers
        # typed keys and values: their reader schemas are fetched here, once, and travel with the options
        self.read_options = resolve_readers(with_metrics_dir(ReadOptions.parse(options, warn_ignored=False),
                                                             ctx.metrics_dir, ctx.session))
        from .pushdown import setting
        setting(options)    # a bad pushFilters fails at load() too
        storage = self.read_options.storage
        if self.read_options.fetch_remote_enabled and storage.configured:
            # An unknown fetcher name or class is an options error too: find it at load time,
            # not when the first action plans the read.
            from ..storage.registry import fetcher_class
            fetcher_class(storage.fetcher, class_path=storage.fetcher_class)

    @classmethod
    def name(cls) -> str:
        return "kafka-tiered"

    def schema(self) -> str:
        return read_ddl(self.read_options)

    def reader(self, schema) -> "KafkaTieredReader":
        for name in self.read_options.ignored:
            log_ignored(name)
        # Filter pushdown only where Spark has it on: it refuses a reader with pushFilters
        # otherwise (the pushFilters option, or what spark/pushdown.py detects)
        from .pushdown import KafkaTieredPushdownReader, pushdown_enabled
        cls = KafkaTieredPushdownReader if pushdown_enabled(self.options) else KafkaTieredReader
        return cls(self.read_options, self.context.accumulator, self.context.app_id)

    def streamReader(self, schema):
        from .stream import KafkaTieredStreamReader
        ctx = self.context
        # the reader schemas schema() was given
        options = ReadOptions.parse(self.options, streaming=True).replace(values=self.read_options.values)
        return KafkaTieredStreamReader(with_metrics_dir(options, ctx.metrics_dir, ctx.session),
                                       ctx.accumulator, ctx.app_id)


def for_session(context: SessionContext) -> type[KafkaTieredDataSource]:
    """The data source that ``register(spark)`` registers: :class:`KafkaTieredDataSource` with
    the session's ``context``.  Spark 4.3 creates data sources in worker processes with no
    SparkContext (``__init__``, ``partitions()``), so the context must travel inside the class
    Spark pickles.  Defined here, its qualified name (``for_session.<locals>...``) cannot be
    imported, which is what makes cloudpickle ship it by value, context and all; the class
    Spark finds by itself (``pyspark_kafka_tiered``) is the base, imported by name."""

    class KafkaTieredDataSource(_Base):
        pass

    KafkaTieredDataSource.context = context
    return KafkaTieredDataSource


_Base = KafkaTieredDataSource
