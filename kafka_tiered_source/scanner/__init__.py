"""``kafka_tiered_source.scan()``: the ``kafka-tiered`` read without Spark, as a
``pyarrow.RecordBatchReader``.

The same options (Spark's streaming ones refused by name, :mod:`.options`), the same schema in
Arrow types, the same plan, locators, fallback policy, budget check and storage check
(:func:`~kafka_tiered_source.planning.checked.plan_checked`), and the same task reader as a
Spark executor's (:func:`~kafka_tiered_source.executor.run.run_task`); only who runs the tasks
differs: a window of threads in this process (:mod:`.window`).  Filters go through ``where=``,
as :func:`~kafka_tiered_source.estimate` takes them: partitions and offsets that cannot match
are not read, and every row is filtered exactly.  Totals reach
``kafka_tiered_source.last_read_stats()`` (no session) as each task ends (:mod:`.history`).

>>> import duckdb, kafka_tiered_source                                       # doctest: +SKIP
>>> reader = kafka_tiered_source.scan({"kafka.bootstrap.servers": "broker:9092",
...                                    "remote.storage.uri": "s3://tiered/kt"},
...                                   subscribe="orders", where="timestamp >= '2026-10-01'")
>>> duckdb.sql("SELECT partition, count(*) FROM reader GROUP BY 1").show()

Nothing here imports Spark.
"""
from __future__ import annotations

import uuid
from typing import Any

from .options import ScanConfig, split_options

__all__ = ["scan", "ScanConfig"]


def scan(options: dict | None = None, *, where: Any = None, time_zone: str = "UTC", **kw: Any):
    """Plan the read now (a broker answers, storage is checked; errors raise here) and return
    a ``pyarrow.RecordBatchReader`` whose batches are read as they are taken, ``scan.workers``
    tasks at a time.  ``where``: the filters to read with (a SQL condition, Spark filter
    objects or ``(column, op, value)`` tuples, as :func:`kafka_tiered_source.estimate` takes
    them), zone-less times in ``time_zone``.  Closing the reader (or dropping it) stops the
    tasks.  An error while reading arrives as ``pyarrow.ArrowInvalid`` whose message begins
    with the kafka-tiered error's class (the C stream interface that DuckDB and Polars read
    through carries messages, not exception types)."""
    import pyarrow as pa

    from ..options import ReadOptions
    from ..planning.checked import plan_checked
    from ..planning.where import parse_where
    from ..records.schema import kafka_schema
    from .history import ScanTotals
    from .window import TaskWindow

    config, source = split_options(options, kw)
    read_options = ReadOptions.parse(source)
    row_filter = parse_where(where, time_zone=time_zone) or None
    tasks, carried = plan_checked(read_options, row_filter)
    totals = ScanTotals(uuid.uuid4().hex, len(tasks), carried, read_options.cost)
    window = TaskWindow(tasks, _task_runner(read_options, row_filter, totals, len(tasks)), config.workers)
    schema = kafka_schema(read_options.include_headers)
    inner = pa.RecordBatchReader.from_batches(schema, _batches(window, totals))
    # A reader over the C stream of ``inner``: its close() releases the stream, which drops the
    # generator and so stops the workers (close() on a from_batches reader itself does not).
    return pa.RecordBatchReader.from_stream(inner)


def _task_runner(options: Any, row_filter: Any, totals: Any, planned: int):
    from ..executor.run import run_task

    def run(task: Any):
        return run_task(options, task, read_id=totals.read_id, tasks_planned=planned, accumulator=totals,
                        row_filter=row_filter)
    return run


def _batches(window: Any, totals: Any):
    import pyarrow as pa

    from ..errors import KafkaTieredError
    try:
        yield from window.batches()
    except KafkaTieredError as exc:
        # The class name first: through the C stream only the message survives.
        raise pa.ArrowInvalid(f"{type(exc).__name__}: {exc}").with_traceback(None) from None
    finally:
        totals.finished()
