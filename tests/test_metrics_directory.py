"""The metrics directory (kafka_tiered_source.metrics.directory), the channel of task totals
where there is no accumulator: real task readers write their files through the task runner
(executor/run.py), and collecting them gives back the reads, in order, exactly once per task."""
from __future__ import annotations

import json
import os

import pytest

from kafka_tiered_source.errors import BrokerError
from kafka_tiered_source.executor.run import run_task
from kafka_tiered_source.metrics.directory import (collect, default_dir, history, incomplete, parse_records,
                                                   read_files, resolve, task_record, write_task)
from kafka_tiered_source.metrics.reader import ReadTotals
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.planning import plan


def _options(c, **extra):
    return ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "orders,payments",
                              "remote.storage.uri": f"file://{c.remote_dir}", "partition.target.bytes": "2000000",
                              "cost.egress": "internet", **extra})


def test_tasks_write_one_file_each_and_collecting_gives_the_read_totals(fixture_cluster, tmp_path):
    where = str(tmp_path / "m")
    options = _options(fixture_cluster, **{"metrics.dir": where})
    tasks = plan(options).tasks
    assert len(tasks) > 1
    rows = 0
    for t in tasks:
        for b in run_task(options, t, read_id="r1", tasks_planned=len(tasks), attempt=f"0-0-{t.index}"):
            rows += b.num_rows
    files = os.listdir(os.path.join(where, "r1"))
    assert sorted(files) == sorted(f"task-{t.index}-0-0-{t.index}.json" for t in tasks)

    hist = collect(where)
    assert list(hist.reads) == ["r1"]
    totals = hist.last()
    assert totals.tasks == totals.tasks_planned == len(tasks)
    assert totals.total().records == rows > 0
    assert totals.total().remote_bytes > 0
    assert totals.cost.egress == "internet" and totals.cost.egress_per_gb == options.cost.egress_per_gb
    assert incomplete(hist) == []
    # the metrics.jsonl.path line and the file are the same totals
    record = json.loads(open(os.path.join(where, "r1", files[0])).read())
    assert record["outcome"] == "completed" and record["tasks_planned"] == len(tasks)


def test_a_task_stopped_early_reports_stopped_and_a_failed_one_is_left_out(fixture_cluster, tmp_path):
    where = str(tmp_path / "m")
    options = _options(fixture_cluster, **{"metrics.dir": where})
    task = plan(options).tasks[0]
    gen = run_task(options, task, read_id="r2", tasks_planned=3, attempt="a")
    next(gen)
    gen.close()                    # Spark stops reading (a limit): the task still reports
    bad = ReadOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:1", "assign": '{"orders":[0]}',
                             "remote.storage.uri": f"file://{fixture_cluster.remote_dir}", "metrics.dir": where,
                             "kafka.retries": "0", "kafka.socket.connection.setup.timeout.ms": "200"})
    from kafka_tiered_source.planning.tasks import BrokerRange, ReadTask
    failing = ReadTask(1, (BrokerRange("orders", 0, "", 0, 10, 1000),))   # no broker there: it fails
    with pytest.raises(BrokerError, match="no broker reachable"):
        list(run_task(bad, failing, read_id="r2", tasks_planned=3, attempt="b"))
    outcomes = sorted(r["outcome"] for r in parse_records(read_files(where)))
    assert outcomes == ["failed", "stopped"]
    hist = collect(where)
    assert hist.last().tasks == 1                       # the stopped one; the failed one is not counted
    assert incomplete(hist) == [("r2", 1, 3)]


def test_retried_attempts_count_once_and_reads_come_oldest_first(tmp_path):
    where = str(tmp_path)
    def rec(read_id, task, attempt, started, records, outcome="completed"):
        t = ReadTotals(tasks=1, read_id=read_id)
        t.stats(("c", "t", 0, "s3")).records = records
        return task_record(t, task_index=task, tasks_planned=2, outcome=outcome, attempt=attempt, started=started)
    for r in (rec("late", 0, "x", 200.0, 5), rec("early", 0, "a", 100.0, 1), rec("early", 1, "b", 101.0, 2),
              rec("early", 1, "c", 102.0, 2),                  # a speculative duplicate of task 1
              rec("early", 0, "d", 103.0, 9, "failed")):       # a failed retry
        write_task(where, r)
    hist = collect(where)
    assert list(hist.reads) == ["early", "late"]
    assert hist.reads["early"].total().records == 3 and hist.reads["early"].tasks == 2
    assert hist.last().read_id == "late"


def test_names_and_places(tmp_path):
    assert resolve("s3://bucket/m/", None) == "s3://bucket/m"
    assert resolve(None, "abc-1") == default_dir("abc-1")
    assert default_dir("abc-1").endswith(os.path.join("kafka-tiered-metrics", "abc-1"))
    with pytest.raises(ValueError, match="session id"):
        default_dir("../etc")
    with pytest.raises(ValueError, match="metrics directory needs"):
        resolve(None, None)
    assert collect(str(tmp_path / "nothing-here")).reads == {}
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "task-0-x.json").write_text("not json")
    with pytest.raises(ValueError, match="task-0-x.json: not a kafka-tiered task metrics file"):
        history(parse_records(read_files(str(tmp_path))))
