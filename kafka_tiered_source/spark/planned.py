"""What the driver does before any task of a read, for the format and for ``read()`` alike:
plan, refuse a read over ``cost.budget.usd`` before any GET, and check storage with one cheap
request before any task (:mod:`~kafka_tiered_source.planning.preflight`).  No pyspark import:
``read()`` runs on Spark 3.4/3.5, which has no ``pyspark.sql.datasource``."""
from __future__ import annotations


def plan_checked(options, row_filter=None) -> tuple[list, object]:
    """``(tasks, carried)``: the read's tasks (at least one: Spark wants a partition) and the
    :class:`~kafka_tiered_source.metrics.reader.ReadTotals` of the storage check's GETs, which
    join the read's totals through the first task (None when it made none), so every GET of a
    read is accounted."""
    from ..executor.reader import _backend_name
    from ..metrics.reader import ReaderMetrics, ReadTotals
    from ..planning import ReadTask, plan
    from ..planning.estimate import check_budget, estimate_plan
    from ..planning.preflight import preflight
    planned = plan(options, row_filter)
    check_budget(estimate_plan(planned, options))
    checked = ReaderMetrics(options.client_id, _backend_name(options))
    tasks = list(preflight(planned, options, observer=checked)) or [ReadTask(0, ())]
    carried = ReadTotals(checked.snapshot().by_tags)
    return tasks, carried if carried.by_tags else None
