"""Spark Connect: a Connect client against pyspark's own Connect server (``SparkConnectServer``,
local[2], a process of its own), the client in a worker interpreter of its own
(tests/session_worker.py: a process that has run a Connect session is a Connect process); one
server and one client for the module.  The Kafka 3.9.1 fixtures are imported into the embedded broker and
tiered; reads are checked row for row against the fixtures' expected records.

There is no SparkContext and no accumulator on Connect: the tasks' totals travel through the
metrics directory (one file per task, read back by a one-task job on the cluster), and these
tests hold ``last_read_stats``, ``cost_report`` and ``estimate`` to the files and to the
broker's own counters.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

import pytest

from broker_fixtures import FIXTURE_PARTITIONS, file_tiered_cluster
from session_worker import SessionWorker, connect_server
from spark_helpers import expected_rows, first_difference
from spark_session import spark_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ISOLATION = ["read_uncommitted", "read_committed"]
APP = "kafka-tiered-connect-tests"     # the server's application name
GRANTS = "location_grants_total"
BROKER_REMOTE_BYTES = "remote_fetch_bytes_total"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("connect")) as c:
        yield c


@pytest.fixture(scope="module")
def connect(tmp_path_factory):
    base = tmp_path_factory.mktemp("connect-session")
    env = {**os.environ, **spark_env()}
    # The server runs from a neutral directory without the checkout on PYTHONPATH: its Python
    # workers find the installed package (and the format, through pyspark_kafka_tiered) by
    # themselves.  The client has the tests directory on its path for spark_helpers.
    server_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    with connect_server(base, server_env) as url:
        worker = SessionWorker(sys.executable, "connect", url, APP, str(base / "client.log"), env=env)
        try:
            assert worker.info["type"].startswith("pyspark.sql.connect"), worker.info
            yield worker
        finally:
            worker.close()


@pytest.fixture(scope="module")
def metrics_base(tmp_path_factory):
    return str(tmp_path_factory.mktemp("connect-metrics"))


def options(c, iso="read_uncommitted", **extra) -> dict:
    # several tasks per read (2 MB each), so the metrics of several tasks must be gathered
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "orders,payments,compacted",
            "includeHeaders": "true", "kafka.isolation.level": iso,
            "remote.storage.uri": f"file://{c.remote_dir}", "partition.target.bytes": str(2_000_000), **extra}


def orders0(c, **extra) -> dict:
    """orders-0 alone: ~5 MB of segments, so three 2 MB tasks."""
    opts = options(c, **extra)
    del opts["subscribe"]
    opts["assign"] = json.dumps({"orders": [0]})
    return opts


def assert_exact(got: dict, committed: bool) -> None:
    assert sorted(got) == sorted(f"{t}-{p}" for t, p in FIXTURE_PARTITIONS)
    for t, p in FIXTURE_PARTITIONS:
        want = expected_rows(t, p, committed)
        assert got[f"{t}-{p}"] == want, f"{t}-{p}: {first_difference(got[f'{t}-{p}'], want)}"


def expected_count(committed: bool) -> int:
    return sum(len(expected_rows(t, p, committed)) for t, p in FIXTURE_PARTITIONS)


READ_AND_REPORT = """
import dataclasses
df = {load}
got = rows(df)
st = kts.last_read_stats(spark)
report = kts.cost_report(st)
result = {{"rows": got, "stats": st.as_dict(), "tasks_planned": st.tasks_planned,
          "report": [dataclasses.asdict(r) for r in report.rows], "text": str(report),
          "history": list(kts.read_history(spark).reads)}}
"""


def test_the_format_is_found_without_register_and_a_bad_option_is_named(connect, cluster):
    # a new session of the same server: nothing registered in it
    got = connect.run("""
s = spark.newSession()
schema = s.read.format("kafka-tiered").options(**vars["good"]).load().schema
try:
    s.read.format("kafka-tiered").options(**vars["bad"]).load().schema
    error = None
except Exception as exc:
    error = {"type": type(exc).__name__, "message": str(exc)}
result = {"fields": [f.name for f in schema.fields], "error": error}
""", good=options(cluster), bad=options(cluster, startingOfsets="earliest"))
    assert got["fields"] == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                             "headers"]
    assert got["error"] is not None, "a misspelt option was accepted"
    assert got["error"]["type"] == "AnalysisException"
    assert "Unknown option 'startingofsets'" in got["error"]["message"]
    assert "Did you mean 'startingOffsets'?" in got["error"]["message"]


@pytest.mark.parametrize("iso", ISOLATION)
def test_registered_format_reads_exactly_and_its_metrics_reach_the_client(connect, cluster, metrics_base, iso):
    committed = iso == "read_committed"
    opts = options(cluster, iso)
    grants, broker_remote = cluster.storage.metrics.get(GRANTS), cluster.storage.metrics.get(BROKER_REMOTE_BYTES)
    est = connect.run("""
kts.register(spark, metrics_dir=vars["base"])
e = kts.estimate(spark, vars["opts"])
result = {"gets": e.gets, "bytes": e.bytes, "partitions": e.partitions}
""", base=metrics_base, opts=opts)
    got = connect.run(READ_AND_REPORT.format(load='spark.read.format("kafka-tiered").options(**vars["opts"]).load()'),
                      opts=opts)
    assert_exact(got["rows"], committed)

    stats, total = got["stats"], {}
    for row in stats["stats"]:
        for k in ("records", "remote_requests", "remote_bytes", "fallbacks"):
            total[k] = total.get(k, 0) + row[k]
    assert total["records"] == expected_count(committed)
    assert total["remote_bytes"] > 0 and total["fallbacks"] == 0
    assert all(row["remote_errors"] == {} for row in stats["stats"])
    assert stats["tasks"] == got["tasks_planned"] == est["partitions"] > 1
    assert {row["client_id"] for row in stats["stats"]} == {APP}     # the default client.id
    # the estimate, made before the read, counted the GETs the tasks made
    assert est["gets"] == total["remote_requests"]
    # direct reads: the broker granted locations and read no remote bytes on anyone's behalf
    assert cluster.storage.metrics.get(GRANTS) > grants
    assert cluster.storage.metrics.get(BROKER_REMOTE_BYTES) == broker_remote

    report = {r["topic"]: r for r in got["report"]}
    assert set(report) == {"orders", "payments", "compacted"}
    assert sum(r["remote_requests"] for r in report.values()) == total["remote_requests"]
    assert sum(r["records"] for r in report.values()) == total["records"]
    assert all(r["client_id"] == APP and r["dollars"] > 0 for r in report.values())
    assert "aws-s3-standard" in got["text"]

    # where the totals went: one file per task under <base>/<session id>/<read id>/
    sessions = os.listdir(metrics_base)
    assert len(sessions) == 1
    files = os.listdir(os.path.join(metrics_base, sessions[0], stats["read_id"]))
    assert len(files) == stats["tasks"] and all(f.startswith("task-") for f in files)
    assert got["history"][-1] == stats["read_id"]


def test_read_function_on_connect_one_partition_per_task(connect, cluster):
    got = connect.run("""
from pyspark.sql import functions as F
df = kts.read(spark, vars["opts"])
parts = df.select(F.spark_partition_id().alias("p")).distinct().count()
""" + READ_AND_REPORT.format(load="df") + """
result["spark_partitions"] = parts
""", opts=options(cluster))
    assert_exact(got["rows"], committed=False)
    stats = got["stats"]
    assert sum(r["records"] for r in stats["stats"]) == expected_count(False)
    assert sum(r["remote_bytes"] for r in stats["stats"]) > 0
    assert sum(r["fallbacks"] for r in stats["stats"]) == 0
    assert stats["tasks"] == got["tasks_planned"] == got["spark_partitions"] > 1
    # one read per action: the scan of rows() is its own read id, after the partition count's
    assert got["history"][-1] == stats["read_id"] and got["history"][-2] != stats["read_id"]
    assert stats["read_id"].split("-")[0] == got["history"][-2].split("-")[0]


def test_a_read_over_budget_is_refused_before_any_task_runs(connect, cluster):
    opts = options(cluster, **{"cost.budget.usd": "0.000000001"})
    got = connect.run("""
before = len(kts.read_history(spark))
errors = {}
try:
    spark.read.format("kafka-tiered").options(**vars["opts"]).load().count()
except Exception as exc:
    errors["format"] = str(exc)
try:
    kts.read(spark, vars["opts"])
except Exception as exc:
    errors["read"] = type(exc).__name__ + ": " + str(exc)
result = {"errors": errors, "new_reads": len(kts.read_history(spark)) - before}
""", opts=opts)
    assert set(got["errors"]) == {"format", "read"}
    for where, message in got["errors"].items():
        assert "over the budget" in message and "'cost.budget.usd'" in message and "nothing was read" in message, \
            (where, message[:500])
    assert got["errors"]["read"].startswith("BudgetExceededError")
    assert got["new_reads"] == 0


def test_a_stream_catches_up_on_connect_and_its_micro_batches_report(connect, cluster, metrics_base, tmp_path):
    opts = options(cluster, startingOffsets="earliest", maxOffsetsPerTrigger="600")
    opts.pop("partition.target.bytes")
    opts.pop("subscribe")
    opts["assign"] = json.dumps({"payments": [0]})
    got = connect.run("""
kts.register(spark, metrics_dir=vars["base"])
before = set(kts.read_history(spark).reads)
q = (spark.readStream.format("kafka-tiered").options(**vars["opts"]).load()
     .writeStream.format("memory").queryName("kt_connect_stream")
     .option("checkpointLocation", vars["checkpoint"]).trigger(availableNow=True).start())
q.awaitTermination(300)
got = rows(spark.table("kt_connect_stream"))
reads = [t for k, t in kts.read_history(spark).reads.items() if k not in before]
result = {"rows": got, "records": sum(t.total().records for t in reads), "reads": len(reads),
          "remote_bytes": sum(t.total().remote_bytes for t in reads)}
""", opts=opts, checkpoint=str(tmp_path / "checkpoint"), base=metrics_base)
    assert list(got["rows"]) == ["payments-0"]
    assert got["rows"]["payments-0"] == expected_rows("payments", 0, False)
    assert got["reads"] >= 3            # ~1,400 offsets at 600 per micro-batch
    assert got["records"] == len(expected_rows("payments", 0, False))
    assert got["remote_bytes"] > 0


def test_an_unregistered_session_finds_read_metrics_in_the_default_directory_and_a_read_s_own(connect, cluster,
                                                                                              tmp_path):
    where = str(tmp_path / "own")
    got = connect.run("""
s = spark.newSession()
before = kts.last_read_stats(s)
n = kts.read(s, vars["committed"]).count()
st = kts.last_read_stats(s)
result = {"count": n, "read_id": st.read_id, "records": st.total().records, "tasks": st.tasks,
          "session": s.session_id, "before": before is None}
# the format, unregistered in this session: no channel of its own, but the read's metrics.dir
result["format_count"] = s.read.format("kafka-tiered").options(**vars["own"]).load().count()
own = kts.last_read_stats(s, metrics_dir=vars["where"])
result["own_records"], result["own_tasks"] = own.total().records, own.tasks
result["latest_is_still_read"] = kts.last_read_stats(s).read_id == st.read_id
""", committed=orders0(cluster, **{"kafka.isolation.level": "read_committed"}),
                      own=orders0(cluster, **{"metrics.dir": where}), where=where)
    assert got["before"] is True        # a new session has read nothing
    assert got["count"] == got["records"] == len(expected_rows("orders", 0, True))
    session_dir = os.path.join(tempfile.gettempdir(), "kafka-tiered-metrics", got["session"])
    try:
        assert len(os.listdir(os.path.join(session_dir, got["read_id"]))) == got["tasks"] > 1
    finally:
        shutil.rmtree(session_dir, ignore_errors=True)
    assert got["format_count"] == got["own_records"] == len(expected_rows("orders", 0, False))
    assert got["latest_is_still_read"]
    files = [os.path.join(dp, f) for dp, _, fs in os.walk(where) for f in fs]
    assert len(files) == got["own_tasks"] > 1
    assert {json.loads(open(f).read())["outcome"] for f in files} == {"completed"}
