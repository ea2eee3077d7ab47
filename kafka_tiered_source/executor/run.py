"""One planned task, start to finish, as every Spark entry point runs it: the data source's
``read()`` (Spark 4), and ``kafka_tiered_source.read()``'s ``mapInArrow`` function (Spark 3.4+,
classic or Connect).  Yields the task's Arrow batches, then reports its metrics with how it
ended; nothing here imports Spark (the caller passes what Spark's TaskContext says)."""
from __future__ import annotations

from typing import Iterator


def run_task(options, task, *, read_id: str | None = None, tasks_planned: int = 1, accumulator=None,
             app_id: str | None = None, metrics_dir: str | None = None,
             attempt: str | None = None, row_filter=None, driver_totals=None) -> Iterator:
    """Read ``task`` (a :class:`~kafka_tiered_source.planning.tasks.ReadTask`), keeping the rows
    ``row_filter`` (pushed-down filters) keeps, and report its totals
    (:func:`~kafka_tiered_source.executor.finish.finish_task`), with ``driver_totals`` (the
    driver's storage check, carried by the first task) added: ``completed`` when every batch
    was taken, ``stopped`` when Spark stopped early (a ``limit``), ``failed`` on an error
    (Spark retries the task; that attempt's totals are left out of the read's)."""
    from .reader import TaskReader
    reader = TaskReader(options, tasks_planned=tasks_planned, row_filter=row_filter)
    if driver_totals is not None:
        reader.metrics.absorb(driver_totals)
    outcome = "failed"
    try:
        try:
            yield from reader.read(task)
            outcome = "completed"
        except GeneratorExit:
            outcome = "stopped"
            raise
    finally:
        try:
            reader.finish(accumulator=accumulator, read_id=read_id, task_index=task.index, app_id=app_id,
                          metrics_dir=metrics_dir, tasks_planned=tasks_planned, outcome=outcome,
                          attempt=attempt)
        finally:
            reader.close()
