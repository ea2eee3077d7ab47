"""A read's Spark partitions: planning them on the driver (:func:`plan_partitions`, one
:class:`TaskPartition` per planned task), reading one on an executor (:func:`read_partition`),
and the batch reader that does both (:class:`KafkaTieredReader`).  The batch reader with
pushdown (:mod:`.pushdown`) and the stream reader (:mod:`.stream`) plan and read through the
same two functions."""
from __future__ import annotations


from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..dataclass import dataclass
from ..options import ReadOptions


@dataclass(frozen=True)
class TaskPartition(InputPartition):
    """One Spark partition: a :class:`~kafka_tiered_source.planning.tasks.ReadTask`."""
    task: object
    read_id: str | None = None      # one id per planning (per Spark action), for metrics
    tasks_planned: int = 1          # job-level quotas are split over this many tasks
    driver_totals: object = None    # the driver's storage check's GETs (first partition only)

    def __init__(self, task, read_id=None, tasks_planned=1, driver_totals=None):
        object.__setattr__(self, "task", task)
        object.__setattr__(self, "value", task.index)
        object.__setattr__(self, "read_id", read_id)
        object.__setattr__(self, "tasks_planned", tasks_planned)
        object.__setattr__(self, "driver_totals", driver_totals)


class KafkaTieredReader(DataSourceReader):
    def __init__(self, options: ReadOptions, accumulator=None, app_id=None):
        self.options = options
        self.accumulator = accumulator
        self.app_id = app_id

    def partitions(self):
        return plan_partitions(self.options)

    def read(self, partition):
        return read_partition(self.options, partition, self.accumulator, self.app_id)


def plan_partitions(options: ReadOptions, row_filter=None) -> list:
    """Plan a read (a batch, or one micro-batch) into Spark partitions, refusing it before any
    GET when its estimate (of what the pushed-down ``row_filter`` leaves) is over
    ``cost.budget.usd``, and before any task when remote storage cannot be read (one cheap
    request, :mod:`~kafka_tiered_source.planning.preflight`)."""
    import uuid
    from .planned import plan_checked
    tasks, carried = plan_checked(options, row_filter)
    read_id = uuid.uuid4().hex
    return [TaskPartition(t, read_id, len(tasks), carried if i == 0 else None)
            for i, t in enumerate(tasks)]


def read_partition(options: ReadOptions, partition, accumulator=None, app_id=None, row_filter=None):
    """Run one planned task (executor side), keeping the rows ``row_filter`` (pushed-down
    filters) keeps, and report its metrics."""
    from ..executor.run import run_task
    from .session import task_attempt
    attempt = task_attempt()
    if attempt is not None:
        _freeze_worker_heap()
    return run_task(options, partition.task, read_id=partition.read_id, tasks_planned=partition.tasks_planned,
                    accumulator=accumulator, app_id=app_id, attempt=attempt, row_filter=row_filter,
                    driver_totals=getattr(partition, "driver_totals", None))


_heap_frozen = False


def _freeze_worker_heap() -> None:
    """Once per Python worker, at its first task: move what is alive (pyspark, pyarrow, this
    package: its modules, classes and tables, ~40,000 objects) out of the garbage collector's
    reach (``gc.freeze``).  pyspark's daemon runs a full ``gc.collect()`` after every task of a
    reused worker, and walking those objects each time cost a task tens of milliseconds of CPU
    on the cores the next task needs.  They live as long as the process; what later tasks create
    is collected as before."""
    global _heap_frozen
    if not _heap_frozen:
        import gc
        gc.freeze()
        _heap_frozen = True
