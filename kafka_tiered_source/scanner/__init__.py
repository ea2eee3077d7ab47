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
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .options import ScanConfig, split_options

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["scan", "open_scan", "Scan", "ScanConfig"]


def scan(options: dict | None = None, *, where: Any = None, time_zone: str = "UTC",
         **kw: Any) -> "pa.RecordBatchReader":
    """Plan the read now (a broker answers, storage is checked; errors raise here) and return
    a ``pyarrow.RecordBatchReader`` whose batches are read as they are taken, ``scan.workers``
    tasks at a time.  ``where``: the filters to read with (a SQL condition, Spark filter
    objects or ``(column, op, value)`` tuples, as :func:`kafka_tiered_source.estimate` takes
    them), zone-less times in ``time_zone``.  Closing the reader (or dropping it) stops the
    tasks.  An error while reading arrives as ``pyarrow.ArrowInvalid`` whose message begins
    with the kafka-tiered error's class (the C stream interface that DuckDB and Polars read
    through carries messages, not exception types)."""
    return open_scan(options, where=where, time_zone=time_zone, **kw).reader()


def open_scan(options: dict | None = None, *, where: Any = None, time_zone: str = "UTC", **kw: Any) -> "Scan":
    """:func:`scan`'s planning, as a :class:`Scan` that says what it will read before
    :meth:`Scan.reader` reads it (``kafka-tiered export`` shows progress against it)."""
    from ..options import ReadOptions
    from ..planning.checked import plan_checked
    from ..planning.where import parse_where

    config, source = split_options(options, kw)
    from ..values.readers import resolve_readers
    read_options = resolve_readers(ReadOptions.parse(source))
    row_filter = parse_where(where, time_zone=time_zone) or None
    tasks, carried = plan_checked(read_options, row_filter)
    return Scan(read_options, config, tasks, carried, row_filter)


class Scan:
    """A planned scan: its options, tasks and totals so far; :meth:`reader` reads it (once)."""

    def __init__(self, options: Any, config: ScanConfig, tasks: list, carried: Any, row_filter: Any):
        from .history import ScanTotals
        self.options = options
        self.config = config
        self.tasks = tasks
        self.row_filter = row_filter
        self.totals = ScanTotals(uuid.uuid4().hex, len(tasks), carried, options.cost)
        ranges = [r for t in tasks for r in t.ranges]
        # [start, end) of each partition's offsets, over every task
        self.offsets: dict = {}
        for r in ranges:
            lo, hi = self.offsets.get((r.topic, r.partition), (r.offset_start, r.offset_end))
            self.offsets[(r.topic, r.partition)] = (min(lo, r.offset_start), max(hi, r.offset_end))
        self._read = False

    @property
    def read_id(self) -> str:
        return self.totals.read_id

    @property
    def planned_offsets(self) -> int:
        """Offsets the scan covers (records, plus what compaction, aborted transactions and
        control batches leave out)."""
        return sum(hi - lo for lo, hi in self.offsets.values())

    @property
    def schema(self) -> "pa.Schema":
        from ..values.columns import output_schema
        return output_schema(self.options.values, self.options.include_headers)

    def reader(self) -> "pa.RecordBatchReader":
        """The scan's ``pyarrow.RecordBatchReader``; the tasks start when it is first read."""
        import pyarrow as pa

        from .window import TaskWindow
        if self._read:
            raise RuntimeError("this scan has been read already; scan() again to read it again")
        self._read = True
        window = TaskWindow(self.tasks, _task_runner(self.options, self.row_filter, self.totals, len(self.tasks)),
                            self.config.workers)
        inner = pa.RecordBatchReader.from_batches(self.schema, _batches(window, self.totals))
        # A reader over the C stream of ``inner``: its close() releases the stream, which drops
        # the generator and so stops the workers (close() on a from_batches reader does not).
        return pa.RecordBatchReader.from_stream(inner)


def _task_runner(options: Any, row_filter: Any, totals: Any, planned: int) -> Callable[[Any], Iterator[Any]]:
    from ..executor.run import run_task

    def run(task: Any) -> Iterator[Any]:
        return run_task(options, task, read_id=totals.read_id, tasks_planned=planned, accumulator=totals,
                        row_filter=row_filter)
    return run


def _batches(window: Any, totals: Any) -> Iterator[Any]:
    import pyarrow as pa

    from ..errors import KafkaTieredError
    try:
        yield from window.batches()
    except KafkaTieredError as exc:
        # The class name first: through the C stream only the message survives.
        raise pa.ArrowInvalid(f"{type(exc).__name__}: {exc}").with_traceback(None) from None
    finally:
        totals.finished()
