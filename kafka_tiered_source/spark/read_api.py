"""``kafka_tiered_source.read(spark, **options)``: the ``kafka-tiered`` read where the format
cannot be used — Spark 3.4 and 3.5 (no Python data source API), sessions that may not register
a data source — and anywhere else (Spark 4 classic and Connect).

Same options, same schema, same planner and task reader as ``spark.read.format("kafka-tiered")``:
the read is planned here, in the calling process (it must reach the brokers, and the store when
segments are found by listing), refused before any GET when over ``cost.budget.usd``, and run
as ``mapInArrow`` over ``spark.range(n, numPartitions=n)``: one Spark partition per planned task,
each running the task whose index it holds.  The tasks travel inside the function (pickled, as
the format's partitions do).

Unlike the format, which plans at each action, the DataFrame is bound to the offsets resolved
when ``read()`` is called (``endingOffsets=latest`` means the latest at that moment); every
action over it reads the same rows.  Each action's scan is its own read in
:func:`kafka_tiered_source.read_history` (read id ``<plan id>-<stage id>``).

>>> df = kafka_tiered_source.read(spark, {"kafka.bootstrap.servers": "broker:9092"},  # doctest: +SKIP
...                               subscribe="orders", startingOffsets="earliest",
...                               **{"remote.storage.uri": "s3://tiered-kafka/prefix"})
"""
from __future__ import annotations

import logging
import pickle
import uuid

from ..options import ReadOptions
from ..options.read import with_default_client_id
from .metrics import MetricsSink
from .planned import plan_checked
from .schema import read_ddl
from .session import app_name, check_read_api

log = logging.getLogger(__name__)


def read(spark, options: dict | None = None, **kw):
    """A DataFrame of the records the options select, in Spark's Kafka schema."""
    check_read_api(spark)
    opts: dict = {str(k): _option_value(v) for k, v in dict(options or {}).items()}
    opts.update({str(k): _option_value(v) for k, v in kw.items()})
    from ..values.readers import resolve_readers
    read_options = resolve_readers(ReadOptions.parse(with_default_client_id(opts, app_name(spark))))
    tasks, carried = plan_checked(read_options)
    sink = MetricsSink.of(spark)
    run = task_function(read_options, [pickle.dumps(t, protocol=pickle.HIGHEST_PROTOCOL) for t in tasks],
                        uuid.uuid4().hex, sink, carried)
    return spark.range(0, len(tasks), 1, len(tasks)).mapInArrow(run, read_ddl(read_options))


def task_function(options: ReadOptions, task_blobs: list, plan_id: str, sink: MetricsSink, carried=None):
    """The ``mapInArrow`` function: each input row is a task index; yields that task's
    batches, then reports its totals to ``sink`` (task 0 adds ``carried``, the driver's storage
    check)."""
    planned = len(task_blobs)

    def run(batches):
        import pickle as _pickle
        from kafka_tiered_source.executor.run import run_task
        from kafka_tiered_source.spark.session import task_attempt, task_stage
        stage = task_stage()
        read_id = plan_id if stage is None else f"{plan_id}-{stage}"
        directory = sink.resolved_dir(options)
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from run_task(options, _pickle.loads(task_blobs[index]), read_id=read_id,
                                    tasks_planned=planned, accumulator=sink.accumulator, app_id=sink.app_id,
                                    metrics_dir=directory, attempt=task_attempt(),
                                    driver_totals=carried if index == 0 else None)
    return run


def _option_value(value) -> str | None:
    """As ``DataFrameReader.option`` turns values into strings (booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None or isinstance(value, str):
        return value
    return str(value)
