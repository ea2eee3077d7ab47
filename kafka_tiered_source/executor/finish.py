"""The end of one read task: its totals go to the driver's accumulator (classic Spark), to the
read's metrics directory (Spark Connect, or ``metrics.dir``: one file per task under the read
id, :mod:`kafka_tiered_source.metrics.directory`), to the optional ``metrics.jsonl.path`` file
(one JSON line per task) and, when the broker subscribes, to the broker as a KIP-714 push (over
a connection the task already has, else its process's one telemetry connection).
None of this may fail the task: errors are logged.

``metrics.jsonl.path`` is a path on the host that runs the task (an executor's local disk, or
a shared mount on a cluster); tasks append to it, one line each."""
from __future__ import annotations

import json
import logging
import os
import time

log = logging.getLogger(__name__)


def finish_task(reader, *, accumulator=None, read_id: str | None = None, task_index: int | None = None,
                app_id: str | None = None, metrics_dir: str | None = None, tasks_planned: int | None = None,
                outcome: str = "completed", attempt: str | None = None):
    """Report what ``reader`` (a :class:`~kafka_tiered_source.executor.reader.TaskReader`) did;
    returns its :class:`~kafka_tiered_source.metrics.reader.ReadTotals`.  ``metrics_dir`` (the
    resolved directory; ``options.metrics_dir`` when not given) gets one file for this attempt,
    with its ``outcome`` (completed, stopped, failed) and ``attempt`` tag."""
    options = reader.options
    totals = reader.metrics.snapshot()
    totals.read_id = read_id
    totals.cost = options.cost
    totals.app_id = app_id
    if options.telemetry_push and not options.offline and totals.by_tags:
        try:
            _push(reader, totals, app_id)
        except Exception as exc:   # the broker may not answer; the read itself succeeded
            log.info("KIP-714 telemetry push failed: %s", exc)
    if options.metrics_jsonl_path:
        try:
            write_jsonl(options.metrics_jsonl_path, totals, task_index=task_index,
                        started=reader.metrics.started)
        except OSError as exc:
            log.warning("cannot append task metrics to %s: %s", options.metrics_jsonl_path, exc)
    metrics_dir = metrics_dir or options.metrics_dir
    if metrics_dir:
        from ..metrics.directory import task_record, write_task
        try:
            write_task(metrics_dir, task_record(totals, task_index=task_index, tasks_planned=tasks_planned,
                                                outcome=outcome, attempt=attempt,
                                                started=reader.metrics.started))
        except Exception as exc:   # a missing filesystem package, no permission, a full disk
            log.warning("cannot write task metrics under %s: %s", metrics_dir, exc)
    if accumulator is not None and outcome != "failed":
        accumulator.add(totals)
    return totals


def _push(reader, totals, app_id):
    """KIP-714, without a connection of the task's own: over one the task already has (it read
    through a broker), else over its process's telemetry connection (telemetry.push_task)."""
    from ..options import client_properties
    from ..telemetry import push_task
    resource = {"client_id": reader.options.client_id, "service.name": "kafka-tiered"}
    if app_id:
        resource["spark.app.id"] = app_id
    push_task(totals, client_properties(reader.options), connections=reader.open_connections(),
              resource=resource, start_time_ns=int(reader.metrics.started * 1e9))


def write_jsonl(path: str, totals, *, task_index=None, started=None) -> None:
    """Append one line for one task.  One ``write`` of an ``O_APPEND`` descriptor: lines of
    tasks running at once on one host do not interleave."""
    row = {"time": time.time(), "task": task_index, "started": started, **totals.as_dict()}
    if totals.cost is not None:
        row["cost_model"] = totals.cost.preset
    line = (json.dumps(row, sort_keys=True, default=str) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_jsonl(path: str) -> list:
    """The task lines of a ``metrics.jsonl.path`` file as ``ReadTotals`` (in file order)."""
    from ..metrics.reader import ReadTotals
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(ReadTotals.from_dict(json.loads(line)))
                except (ValueError, KeyError) as exc:
                    raise ValueError(f"{path}:{n}: not a task metrics line: {exc}") from None
    return out
