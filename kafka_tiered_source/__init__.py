"""kafka-tiered: read Apache Kafka topics straight out of tiered storage.

The data path: options → planning (where each offset range lives) → storage
(RemoteStorageFetcher plugins and object layouts) → records (v2 RecordBatch decoding into Arrow)
→ executor (one read task) → spark (the ``kafka-tiered`` data source) or scan (the same read as a
``pyarrow.RecordBatchReader``, without Spark).  DESIGN.md walks it;
``testing`` holds the embedded reference broker.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    BrokerError,
    BudgetExceededError,
    ConfigError,
    CorruptRecordError,
    DataLossError,
    DecompressionLimitError,
    KafkaTieredError,
    NoRecordsError,
    OfflinePlanningError,
    ProtocolError,
    RemoteStorageError,
    SegmentFormatError,
    SliceMismatchError,
    UnresolvedTransactionError,
    UnsupportedSparkError,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from .cost import CostModel, CostReport
    from .metrics.reader import ReadHistory, ReadTotals
    from .planning.estimate import Estimate

#: A classic ``pyspark.sql.SparkSession`` or a Spark Connect one (two unrelated classes), and
#: their DataFrames likewise: the entry points take and give either.
_SparkSession = Any
_DataFrame = Any


__all__ = [
    "__version__",
    "BrokerError", "BudgetExceededError", "ConfigError", "CorruptRecordError", "DataLossError",
    "DecompressionLimitError", "KafkaTieredError", "NoRecordsError", "OfflinePlanningError", "ProtocolError",
    "RemoteStorageError", "SegmentFormatError", "SliceMismatchError", "UnresolvedTransactionError",
    "UnsupportedSparkError",
    "decode", "decoder_backend", "read", "register", "scan",
    "cost_report", "estimate", "last_read_stats", "read_history", "describe_read",
]


def decode(data: Any, **kwargs: Any) -> pa.Table:
    """Decode consecutive v2 record batches into a ``pyarrow.Table`` (see :mod:`.records`)."""
    from .records import decode as _decode
    return _decode(data, **kwargs)


def decoder_backend() -> str:
    """``"native"`` or ``"python"``: which decoder ``decode`` uses in this process."""
    from .records import decoder_backend as _backend
    return _backend()


def register(spark: _SparkSession, metrics_dir: str | None = None) -> None:
    """Register the ``kafka-tiered`` format with a ``SparkSession``, classic or Spark Connect
    (Spark also registers it by itself when the package is installed, through the top-level
    ``pyspark_kafka_tiered``).  Spark 4.0+; on Spark 3.4/3.5 use :func:`read`.

    Registering explicitly also brings every task's metrics back to this caller
    (:func:`last_read_stats`) and makes the application name the default ``client.id``.  On a
    classic session the metrics travel in a Spark accumulator; on Spark Connect, which has none,
    each task writes them under a metrics directory that a small Spark job reads back on the
    cluster: ``metrics_dir`` (a path or fsspec URL every executor can write, e.g. ``s3://bucket/kt-metrics``
    or ``/Volumes/...``; the session's files go to ``<metrics_dir>/<session id>/<read id>/``),
    by default each machine's temp directory (local mode, single-machine clusters)."""
    from .spark.registration import install
    install(spark, metrics_dir)


def read(spark: _SparkSession, options: dict | None = None, **kw: Any) -> _DataFrame:
    """The ``kafka-tiered`` read as a plain DataFrame, without the format: Spark 3.4+ (including
    3.5, which has no Python data source API), classic or Connect.  Same options and schema as
    ``spark.read.format("kafka-tiered")``; planned now, in this process, and run as
    ``mapInArrow`` with one Spark partition per planned task (see
    :mod:`kafka_tiered_source.spark.read_api`).  Options as a dict and/or keywords::

        df = kafka_tiered_source.read(spark, {"kafka.bootstrap.servers": "broker:9092",
                                              "remote.storage.uri": "s3://tiered/kt"},
                                      subscribe="orders")
    """
    from .spark.read_api import read as _read
    return _read(spark, options, **kw)


def scan(options: dict | None = None, *, where: Any = None, time_zone: str = "UTC",
         **kw: Any) -> pa.RecordBatchReader:
    """The ``kafka-tiered`` read without Spark: a ``pyarrow.RecordBatchReader`` in Spark's Kafka
    schema (Arrow types), planned now with the same options, planner, budget check and storage
    check as ``spark.read.format("kafka-tiered")``, read as it is taken by ``scan.workers``
    threads, each partition in offset order.  DuckDB and Polars take it as it is::

        reader = kafka_tiered_source.scan({"kafka.bootstrap.servers": "broker:9092",
                                           "remote.storage.uri": "s3://tiered/kt"},
                                          subscribe="orders", where="timestamp >= '2026-10-01'")
        duckdb.sql("SELECT partition, count(*) FROM reader GROUP BY 1")

    ``where`` as :func:`estimate` takes it; its totals go to :func:`last_read_stats` with no
    session.  See :mod:`kafka_tiered_source.scanner`."""
    from .scanner import scan as _scan
    return _scan(options, where=where, time_zone=time_zone, **kw)


def last_read_stats(spark: _SparkSession | None = None, metrics_dir: str | None = None) -> ReadTotals | None:
    """The totals (:class:`~kafka_tiered_source.metrics.reader.ReadTotals`) of the latest
    ``kafka-tiered`` read of this session (after :func:`register`, or by :func:`read`); None
    before any.  ``metrics_dir``: the latest read recorded under that directory instead (a
    read's own ``metrics.dir`` option).  Without a session: the latest :func:`scan` of this
    process (its tasks' totals so far, while it is being read)."""
    if spark is None and metrics_dir is None:
        from .scanner.history import last
        return last()
    from .spark.metrics import last_read_stats as _last
    return _last(spark, metrics_dir)


def read_history(spark: _SparkSession | None = None, metrics_dir: str | None = None) -> ReadHistory:
    """Every read's totals in this session, by read id (oldest first); without a session,
    every :func:`scan` of this process."""
    if spark is None and metrics_dir is None:
        from .scanner.history import history
        return history()
    from .spark.metrics import read_history as _history
    return _history(spark, metrics_dir)


def cost_report(stats: Any, model: CostModel | None = None, **rates: Any) -> CostReport:
    """Bytes, GETs, dollars, bytes per GET, error rate and the broker-path comparison per
    client id and topic of a finished read (see :func:`kafka_tiered_source.cost.cost_report`)."""
    from .cost import cost_report as _report
    return _report(stats, model, **rates)


def estimate(spark: _SparkSession | None = None, options: dict | None = None, *, where: Any = None,
             check: bool = True, refresh: bool = False, **kw: Any) -> Estimate:
    """Plan a read without reading data: GETs, bytes, dollars, partitions (see
    :func:`kafka_tiered_source.planning.estimate.estimate`).  ``where``: the filters the read
    will push down (``"timestamp >= '2026-10-01' AND partition = 1"``, ...), so only what that
    read fetches is counted.  Storage is checked as the read checks it (a wrong prefix, layout
    or bucket raises ``StoragePreflightError``); ``check=False`` plans without asking it, and the
    estimate says so.  ``refresh=True`` reads ``__remote_log_metadata`` again from the start of
    the partitions the read needs, instead of from where this process's catalog or its snapshot
    stands (``remote.log.metadata.cache.dir``), and writes the snapshots anew."""
    from .planning.checked import estimate as _estimate
    return _estimate(spark, options, where=where, check=check, refresh=refresh, **kw)


def describe_read(spark: _SparkSession, options: dict) -> str:
    """Plan a read on the driver and set it as the Spark job description of the jobs this
    thread submits next (``kafka-tiered: orders, 32 tiered ranges, 9.5 MB, 8 tasks``); returns
    the text (see :mod:`kafka_tiered_source.spark.jobs`)."""
    from .spark.jobs import describe_read as _describe
    return _describe(spark, options)


def __getattr__(name: str) -> Any:
    if name == "__version__":       # from the distribution's metadata (pyproject.toml), when asked
        from .version import package_version
        return package_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
