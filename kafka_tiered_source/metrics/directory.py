"""A metrics directory: how task totals reach the client where there is no accumulator (Spark
Connect), keyed by read id.

Every task of a read writes one small JSON object, its
:class:`~kafka_tiered_source.metrics.reader.ReadTotals` plus who it was::

    <metrics dir>/<read id>/task-<index>-<attempt>.json

through fsspec, so the directory is any location the executors can write: a local path (the
default is the temp directory of the machine that runs the task, which serves local mode and
single-machine clusters), a shared mount (``/dbfs/...``, ``/Volumes/...``, NFS) or an object
store URL (``s3://`` with s3fs, ``gs://`` with gcsfs, ``abfs://`` with adlfs).  One object per
task attempt and one ``put`` each: no appends, so object stores serve as well as disks, and
retried or speculative attempts never overwrite each other.

:func:`collect` turns the files back into a :class:`~kafka_tiered_source.metrics.reader.ReadHistory`:
reads ordered by when their first task started; per task index one attempt, the first that
finished (a failed attempt's GETs are not part of the read's result, as with Spark's
accumulators); a read whose files are fewer than its planned tasks is reported by
:func:`incomplete`.  The Spark side (:mod:`kafka_tiered_source.spark.metrics`) runs
:func:`read_files` on the cluster, so the client needs no access to the directory itself.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import time
import uuid
from dataclasses import asdict

from .reader import ReadHistory, ReadTotals

#: The outcomes a task records: it ran to the end; Spark stopped reading it early (a ``limit``);
#: it failed (and Spark will retry it).
OUTCOMES = ("completed", "stopped", "failed")
DEFAULT_ROOT = "kafka-tiered-metrics"
_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


def default_dir(session: str) -> str:
    """The default metrics directory of a session on the machine this runs on: the temp
    directory, so it is resolved where the tasks run (and where the collecting task runs),
    never on the client."""
    return os.path.join(tempfile.gettempdir(), DEFAULT_ROOT, _checked(session, "session id"))


def resolve(base: str | None, session: str | None) -> str:
    """The directory a read's tasks write under: ``base`` as given, else the default of
    ``session`` on this machine."""
    if base:
        return base.rstrip("/") if "://" in base else base
    if not session:
        raise ValueError("a metrics directory needs a base location or a session id")
    return default_dir(session)


def task_record(totals: ReadTotals, *, task_index: int | None, tasks_planned: int | None,
                outcome: str = "completed", attempt: str | None = None, started: float | None = None) -> dict:
    """The JSON object one task writes (the ``metrics.jsonl.path`` line plus what collecting
    needs: the planned task count, the attempt and its outcome, the full cost model)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown task outcome {outcome!r}; outcomes: {', '.join(OUTCOMES)}")
    row = {"time": time.time(), "task": task_index, "started": started, "tasks_planned": tasks_planned,
           "outcome": outcome, "attempt": attempt, **totals.as_dict()}
    if totals.cost is not None:
        row["cost_model"] = totals.cost.preset
        row["cost"] = asdict(totals.cost)
    return row


def write_task(directory: str, record: dict) -> str:
    """Write one task's record under ``<directory>/<read id>/``; returns the path written."""
    import fsspec
    read_id = _checked(record.get("read_id") or "unknown-read", "read id")
    task = record.get("task")
    attempt = _checked(str(record.get("attempt") or uuid.uuid4().hex[:12]), "attempt")
    name = f"task-{task if task is not None else 'x'}-{attempt}.json"
    fs, root = fsspec.core.url_to_fs(directory)
    folder = f"{root.rstrip('/')}/{read_id}"
    path = f"{folder}/{name}"
    data = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
    if _is_local(fs):
        os.makedirs(folder, exist_ok=True)
        tmp = f"{folder}/.{name}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)        # readers never see half a file
    else:
        fs.pipe_file(path, data)     # one PUT: an object appears whole or not at all
    return path


def read_files(directory: str) -> list[tuple[str, bytes]]:
    """Every task file under ``directory`` (all reads), as ``(path, content)``.  Runs where the
    directory can be read: a task on the cluster, or the client when it shares the location."""
    import fsspec
    fs, root = fsspec.core.url_to_fs(directory)
    root = root.rstrip("/")
    try:
        if not fs.exists(root):
            return []
        paths = sorted(p for p in fs.find(root) if p.rsplit("/", 1)[-1].startswith("task-")
                       and p.endswith(".json"))
    except FileNotFoundError:
        return []
    if not paths:
        return []
    contents = fs.cat(paths, on_error="omit")   # concurrent on object stores
    return [(p, contents[p]) for p in paths if p in contents]


def parse_records(files) -> list[dict]:
    """The task records of ``(path, content)`` pairs; a file that is not one is named."""
    out = []
    for path, content in files:
        try:
            record = json.loads(content)
            if not isinstance(record, dict) or "stats" not in record:
                raise ValueError("no 'stats' field")
        except ValueError as exc:
            raise ValueError(f"{path}: not a kafka-tiered task metrics file: {exc}") from None
        out.append(record)
    return out


def history(records) -> ReadHistory:
    """The reads of ``records`` (from :func:`parse_records`), oldest first: one attempt per
    task index (the first to finish), failed attempts left out."""
    by_read: dict[str, dict] = {}
    for r in records:
        if r.get("outcome", "completed") == "failed":
            continue
        tasks = by_read.setdefault(r.get("read_id") or "-", {})
        key = r.get("task") if r.get("task") is not None else f"?{len(tasks)}"
        if key not in tasks or (r.get("time") or 0) < (tasks[key].get("time") or 0):
            tasks[key] = r
    def first_start(item):
        return min((r.get("started") or r.get("time") or 0) for r in item[1].values())
    out = ReadHistory()
    for _read_id, tasks in sorted(by_read.items(), key=first_start):
        for r in sorted(tasks.values(), key=lambda x: str(x.get("task"))):
            out.add(_totals(r))
    return out


def collect(directory: str) -> ReadHistory:
    """:func:`history` of every task file under ``directory``, read from here."""
    return history(parse_records(read_files(directory)))


def incomplete(hist: ReadHistory) -> list[tuple[str, int, int]]:
    """``(read id, tasks found, tasks planned)`` of each read with fewer task files than
    planned tasks (still running, or written where this collector cannot see: local disks of
    several machines)."""
    out = []
    for read_id, totals in hist.reads.items():
        planned = totals.tasks_planned
        if planned and totals.tasks < planned:
            out.append((read_id, totals.tasks, planned))
    return out


def _totals(record: dict) -> ReadTotals:
    totals = ReadTotals.from_dict(record)
    totals.tasks_planned = record.get("tasks_planned") or 0
    cost = record.get("cost")
    if isinstance(cost, dict):
        from ..options.pricing import CostModel
        try:
            totals.cost = CostModel(**cost)
        except TypeError:     # written by another version: fall back to the preset's rates
            totals.cost = None
    if totals.cost is None and record.get("cost_model"):
        from ..options.pricing import CostModel
        try:
            totals.cost = CostModel.of(record["cost_model"])
        except ValueError:
            pass
    return totals


def _is_local(fs) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


def _checked(value: str, what: str) -> str:
    if not _SAFE.match(value):
        raise ValueError(f"{what} {value!r} cannot name a metrics file (letters, digits, '.', '_', '-')")
    return value
