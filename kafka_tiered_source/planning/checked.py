"""What runs before any task of a read, for every entry point that reads (the Spark format,
``read()``, ``scan()``): plan, refuse a read over ``cost.budget.usd`` before any GET, and check
storage with one cheap request before any task (:mod:`.preflight`)."""
from __future__ import annotations

from typing import Any

from ..errors import RemoteStorageError
from ..metrics.reader import ReaderMetrics, ReadTotals
from .filters import RowFilter
from .plan import Plan
from .tasks import ReadTask


def plan_read(options: Any, row_filter: RowFilter | None = None, *, refresh: bool = False) -> Plan:
    """:func:`~kafka_tiered_source.planning.plan`, with a storage error planning hit that will not
    heal (a bucket that does not exist, access denied, an endpoint nobody answers: listing the
    store finds them first) raised as the storage check raises it,
    :class:`~kafka_tiered_source.errors.StoragePreflightError`, for every caller alike.
    ``refresh``: rescan the metadata catalog (:func:`~kafka_tiered_source.planning.plan`)."""
    from . import plan
    from .preflight import planning_failed
    try:
        return plan(options, row_filter, refresh=refresh)
    except RemoteStorageError as exc:
        failed = planning_failed(exc)
        if failed is None:
            raise
        raise failed from None


def plan_checked(options: Any, row_filter: RowFilter | None = None) -> tuple[list[ReadTask], ReadTotals | None]:
    """``(tasks, carried)``: the read's tasks (at least one: an empty read is one empty task)
    and the :class:`~kafka_tiered_source.metrics.reader.ReadTotals` of the storage check's GETs,
    which belong to the read's totals (None when it made none), so every GET of a read is
    accounted."""
    from .estimate import check_budget, estimate_plan
    from .preflight import preflight
    planned = plan_read(options, row_filter)
    check_budget(estimate_plan(planned, options))
    # Every GET names its own backend (RemoteStorageFetcher.backend), so the check's metrics
    # need no backend tag of their own.
    checked = ReaderMetrics(options.client_id)
    tasks = list(preflight(planned, options, observer=checked)) or [ReadTask(0, ())]
    carried = ReadTotals(checked.snapshot().by_tags)
    return tasks, carried if carried.by_tags else None
