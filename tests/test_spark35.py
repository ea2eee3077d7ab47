"""Spark 3.5, which has no Python data source API: ``kafka_tiered_source.read(spark, ...)`` on a
real pyspark 3.5 local[2] session, in the second venv (tests/spark35_venv.py; ``make test``
makes it) and an interpreter of its own (tests/session_worker.py), one session for the module.

The Kafka 3.9.1 fixtures are imported into the embedded broker and tiered; the reads are
checked row for row against the fixtures' expected records, and the direct reads are proven by
the metrics that came back through the accumulator and by the broker's own counters."""
from __future__ import annotations

import os

import pytest

import spark35_venv
from broker_fixtures import FIXTURE_PARTITIONS, file_tiered_cluster
from session_worker import SessionWorker
from spark_helpers import expected_rows, first_difference
from spark_session import spark_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]

GRANTS = "location_grants_total"
BROKER_REMOTE_BYTES = "remote_fetch_bytes_total"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("spark35")) as c:
        yield c


@pytest.fixture(scope="module")
def spark35(tmp_path_factory):
    python = spark35_venv.ensure()
    base = tmp_path_factory.mktemp("spark35-session")
    env = {**os.environ, **spark_env(), "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    worker = SessionWorker(python, "classic", "local[2]", "spark35-tests", str(base / "session.log"), env=env)
    try:
        assert worker.info["version"].startswith("3.5."), worker.info
        yield worker
    finally:
        worker.close()


def options(c, iso: str) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "orders,payments,compacted",
            "includeHeaders": "true", "kafka.isolation.level": iso, "remote.storage.uri": f"file://{c.remote_dir}",
            "partition.target.bytes": str(2_000_000)}


@pytest.mark.parametrize("iso", ["read_uncommitted", "read_committed"])
def test_read_is_exact_and_direct_on_spark_35(spark35, cluster, iso):
    committed = iso == "read_committed"
    grants, broker_remote = cluster.storage.metrics.get(GRANTS), cluster.storage.metrics.get(BROKER_REMOTE_BYTES)
    got = spark35.run("""
df = kts.read(spark, vars["opts"])
got = rows(df)
st = kts.last_read_stats(spark)
t = st.total()
result = {"rows": got, "partitions": df.rdd.getNumPartitions(), "tasks": st.tasks, "records": t.records,
          "remote_bytes": t.remote_bytes, "remote_requests": t.remote_requests, "fallbacks": t.fallbacks,
          "client_ids": sorted({tags[0] for tags in st.by_tags}),
          "report_topics": sorted(r.topic for r in kts.cost_report(st).rows)}
""", opts=options(cluster, iso))
    assert sorted(got["rows"]) == sorted(f"{t}-{p}" for t, p in FIXTURE_PARTITIONS)
    for t, p in FIXTURE_PARTITIONS:
        want = expected_rows(t, p, committed)
        assert got["rows"][f"{t}-{p}"] == want, f"{t}-{p}: {first_difference(got['rows'][f'{t}-{p}'], want)}"
    # the metrics came back (accumulator): every row, read straight from storage, one Spark
    # partition per planned task
    assert got["records"] == sum(len(expected_rows(t, p, committed)) for t, p in FIXTURE_PARTITIONS)
    assert got["remote_bytes"] > 0 and got["remote_requests"] > 0 and got["fallbacks"] == 0
    assert got["tasks"] == got["partitions"] > 1
    assert got["client_ids"] == ["spark35-tests"]
    assert got["report_topics"] == ["compacted", "orders", "payments"]
    # and the broker agrees: it granted locations and read no tiered bytes for anyone
    assert cluster.storage.metrics.get(GRANTS) > grants
    assert cluster.storage.metrics.get(BROKER_REMOTE_BYTES) == broker_remote


def test_the_format_is_refused_on_spark_35_and_options_are_checked_by_read(spark35, cluster):
    got = spark35.run("""
errors = {}
try:
    kts.register(spark)
except Exception as exc:
    errors["register"] = [type(exc).__name__, str(exc)]
try:
    kts.read(spark, vars["opts"], startingOfsets="earliest")
except Exception as exc:
    errors["option"] = [type(exc).__name__, str(exc)]
result = errors
""", opts=options(cluster, "read_uncommitted"))
    kind, message = got["register"]
    assert kind == "UnsupportedSparkError"
    assert "Spark 4.0 or later" in message and "kafka_tiered_source.read(spark" in message
    kind, message = got["option"]
    assert kind == "ConfigError" and "Did you mean 'startingOffsets'?" in message
