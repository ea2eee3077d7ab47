"""Filter pushdown for batch reads (Spark 4.1+, ``spark.sql.python.filterPushdown.enabled``).

:class:`KafkaTieredPushdownReader` takes the filters it can apply exactly on ``topic``,
``partition``, ``offset``, ``timestamp`` and ``timestampType`` (see
:mod:`kafka_tiered_source.planning.filters`) and hands every other one back to Spark.  Planning
reads less with them (partitions, offset ranges, tiered segments before a timestamp), and every
task applies them to each Arrow batch, so the rows are the ones Spark's own filtering gives.

Spark refuses a reader class that defines ``pushFilters`` when the setting is off
(``DATA_SOURCE_PUSHDOWN_DISABLED``), so :func:`pushdown_enabled` tells
``KafkaTieredDataSource.reader()`` which reader to return.  The setting never reaches a data
source directly: ``reader()`` runs in a planner Python process with no SparkSession
(``SparkSession.getActiveSession()`` is None there) and its options are only the user's.  What
Spark 4.1-4.3 do (checked on a local[2] session): with the setting on and filters to push, the
JVM runs ``pyspark.sql.worker.data_source_pushdown_filters``, which calls ``reader()`` and then
``pushFilters``; otherwise it runs ``pyspark.sql.worker.plan_data_source_read``, which reads the
setting into its local ``enable_pushdown`` before calling ``reader()`` and refuses a pushdown
reader when it is false.  :func:`pushdown_enabled` looks at its callers' frames for exactly
those two; anywhere else (a later Spark, a reader built by hand) it answers False, so the plain
reader is used and Spark filters every row itself, which is always correct.
"""
from __future__ import annotations

import logging
import sys

from .datasource import KafkaTieredReader, plan_partitions, read_partition

log = logging.getLogger(__name__)

_PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"
_PLAN_WORKER = "pyspark.sql.worker.plan_data_source_read"


def pushdown_enabled() -> bool:
    """Whether the Spark planner process calling ``DataSource.reader()`` has
    ``spark.sql.python.filterPushdown.enabled`` on (module docstring)."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if module == _PUSHDOWN_WORKER:
            return True
        if module == _PLAN_WORKER and "enable_pushdown" in frame.f_locals:
            return bool(frame.f_locals["enable_pushdown"])
        frame = frame.f_back
    # Not silent: a later Spark that moves these makes every read filter row by row in Spark.
    log.info("kafka-tiered: cannot tell whether Spark pushes filters down here (called outside "
             "%s and %s); reading without pushdown, Spark filters every row", _PUSHDOWN_WORKER,
             _PLAN_WORKER)
    return False


class KafkaTieredPushdownReader(KafkaTieredReader):
    """A batch reader that applies the filters it can itself (module docstring)."""

    def __init__(self, options, accumulator=None, app_id=None):
        super().__init__(options, accumulator, app_id)
        from ..planning.filters import RowFilter
        self.row_filter = RowFilter()

    def pushFilters(self, filters):
        from ..planning.filters import RowFilter
        accepted, rejected = RowFilter.of_spark(filters)
        self.row_filter = self.row_filter.and_(accepted)
        if accepted:
            log.info("kafka-tiered: filters pushed down: %s", accepted)
        if rejected:
            log.info("kafka-tiered: filters left to Spark: %s", ", ".join(map(repr, rejected)))
        return rejected

    def partitions(self):
        return plan_partitions(self.options, self.row_filter)

    def read(self, partition):
        return read_partition(self.options, partition, self.accumulator, self.app_id,
                              row_filter=self.row_filter)
