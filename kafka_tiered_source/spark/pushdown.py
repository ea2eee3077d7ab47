"""Filter pushdown for batch reads (Spark 4.1+, ``spark.sql.python.filterPushdown.enabled``).

:class:`KafkaTieredPushdownReader` takes the filters it can apply exactly on ``topic``,
``partition``, ``offset``, ``timestamp`` and ``timestampType`` (see
:mod:`kafka_tiered_source.planning.filters`) and hands every other one back to Spark.  Planning
reads less with them (partitions, offset ranges, tiered segments before a timestamp), and every
task applies them to each Arrow batch, so the rows are the ones Spark's own filtering gives.

Spark refuses a reader class that defines ``pushFilters`` when the setting is off
(``DATA_SOURCE_PUSHDOWN_DISABLED``), so ``KafkaTieredDataSource.reader()`` must know the setting,
which never reaches a data source: ``reader()`` runs in a planner Python process with no
SparkSession, and its options are only the user's.  The option ``pushFilters`` says it:
``true`` and ``false`` outright (no guessing: set it to what the session's setting is), and
``auto`` (the default) by :func:`detect`, which recognises the planner processes of Spark
4.1-4.3 (checked on each, tests/test_pushdown_versions.py): with the setting on and filters to
push, the JVM runs ``pyspark.sql.worker.data_source_pushdown_filters``, which calls ``reader()``
and then ``pushFilters``; otherwise it runs ``pyspark.sql.worker.plan_data_source_read``, which
reads the setting into its local ``enable_pushdown`` before calling ``reader()``.  Anywhere else
(Spark 4.0, a later Spark that moves these, a reader built by hand) ``auto`` answers no: the
plain reader, and Spark filters every row itself, which is always correct.
"""
from __future__ import annotations

import logging
import sys
from types import FrameType
from typing import Mapping

from ..options.table import BY_KEY
from .partitions import KafkaTieredReader, plan_partitions, read_partition

log = logging.getLogger(__name__)

OPTION = "pushFilters"
_PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"
_PLAN_WORKER = "pyspark.sql.worker.plan_data_source_read"


def setting(options: Mapping[str, str]) -> str:
    """``auto``, ``true`` or ``false``: the ``pushFilters`` option of a (case-insensitive)
    option map, checked (a bad value is a ConfigError naming the option)."""
    option = BY_KEY[OPTION.lower()]
    for key, raw in options.items():
        if str(key).lower() == option.key:
            return option.value(raw)
    return option.default


def pushdown_enabled(options: Mapping[str, str] | None = None) -> bool:
    """Whether ``DataSource.reader()`` should return the pushdown reader: ``pushFilters`` when
    it says so, else what :func:`detect` sees of Spark's setting."""
    chosen = setting(options or {})
    if chosen != "auto":
        return chosen == "true"
    return detect()


def detect() -> bool:
    """``spark.sql.python.filterPushdown.enabled`` of the Spark planner process calling
    ``DataSource.reader()``, from its callers' frames (module docstring); False where it cannot
    be told."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if module == _PUSHDOWN_WORKER:
            return True
        if module == _PLAN_WORKER and "enable_pushdown" in frame.f_locals:
            return bool(frame.f_locals["enable_pushdown"])
        frame = frame.f_back
    # Not silent: a later Spark that moves these makes every read filter row by row in Spark.
    log.info("kafka-tiered: cannot tell whether Spark pushes filters down here (called outside "
             "%s and %s); reading without pushdown, Spark filters every row (set the option %s=true "
             "where spark.sql.python.filterPushdown.enabled is on)", _PUSHDOWN_WORKER, _PLAN_WORKER, OPTION)
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
