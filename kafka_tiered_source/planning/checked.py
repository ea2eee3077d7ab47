"""What runs before any task of a read, for every entry point that reads (the Spark format,
``read()``, ``scan()``): plan, refuse a read over ``cost.budget.usd`` before any GET, and check
storage with one cheap request before any task (:mod:`.preflight`).  :func:`estimate` is the same
without the read: the plan, what it will cost (:mod:`.estimate`) and the storage check."""
from __future__ import annotations

from typing import Any

from ..errors import RemoteStorageError
from ..metrics.reader import ReaderMetrics, ReadTotals
from .estimate import Estimate, check_budget, estimate_checked, estimate_plan
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
    from .preflight import preflight
    planned = plan_read(options, row_filter)
    check_budget(estimate_plan(planned, options))
    # Every GET names its own backend (RemoteStorageFetcher.backend), so the check's metrics
    # need no backend tag of their own.
    checked = ReaderMetrics(options.client_id)
    tasks = list(preflight(planned, options, observer=checked)) or [ReadTask(0, ())]
    carried = ReadTotals(checked.snapshot().by_tags)
    return tasks, carried if carried.by_tags else None


def estimate(spark=None, options: dict | None = None, *, where=None, check: bool = True, refresh: bool = False,
             **kw) -> Estimate:
    """Plan a read without reading data and count its GETs, bytes and dollars.

    Options as for ``spark.read.format("kafka-tiered")``, as a dict and/or keywords
    (``estimate(spark, {"kafka.bootstrap.servers": ...}, subscribe="t")``).  ``spark`` (optional) supplies the default ``client.id`` (its application name),
    as the registered source does, and the time zone of zone-less times in ``where``.

    ``where``: the filters the read's ``.where()`` would push down, so the estimate (and the
    ``cost.budget.usd`` check) counts only what that read fetches: a SQL condition such as
    ``"timestamp >= '2026-10-01' AND partition IN (0, 1)"``, a list of Spark filter objects or
    of ``(column, op, value)`` tuples (every form: :mod:`kafka_tiered_source.planning.where`).
    Nothing is derived from a DataFrame: give the condition you will filter with.

    ``check``: storage is checked as the read checks it before any task (one cheap request with
    the read's options, :mod:`.preflight`), so a wrong prefix, layout, bucket or key raises
    :class:`~kafka_tiered_source.errors.StoragePreflightError` here, not when the read starts.
    ``check=False`` plans without asking storage, on purpose (no credentials at hand, the store
    not reachable from here); the estimate then says storage was not checked.

    ``refresh``: the ``__remote_log_metadata`` catalog (kept in this process and as snapshots
    under ``remote.log.metadata.cache.dir``) reads the metadata partitions of this read from
    their start, and the snapshots are written anew."""
    from ..dataclass import replace
    row_filter = None
    if where is not None:   # the parser (and datetime) only for a condition
        from .where import parse_where
        zone = "UTC"
        if spark is not None:
            zone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
        row_filter = parse_where(where, time_zone=zone)
    est = _estimate(spark, options, row_filter, check, refresh=refresh, **kw)
    return replace(est, where=str(row_filter)) if row_filter else est


def _estimate(spark, options, row_filter, check: bool = True, *, refresh: bool = False, **kw) -> Estimate:
    """The planning part of :func:`estimate`.  Planning talks to the brokers (Metadata, ListOffsets,
    location Fetches) but issues few storage GETs: the offset index of segments that must be
    split (``minPartitions``, ``maxRecordsPerPartition``, segments above
    ``partition.target.bytes``) or that a range starts inside (Aiven: with their manifests),
    and, offline, what finding offsets for timestamps reads (a time index, an offset index and
    a few KiB of log per partition).  Those are not counted in the estimate."""
    from ..options import ReadOptions
    from ..options.read import with_default_client_id
    opts = dict(options or {})
    opts.update(kw)
    if spark is not None:   # spark.app.name: classic and Connect alike
        opts = with_default_client_id(opts, spark.conf.get("spark.app.name"))
    read_options = ReadOptions.parse(opts)
    return estimate_checked(plan_read(read_options, row_filter, refresh=refresh), read_options, check)
