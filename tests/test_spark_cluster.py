"""The ``kafka-tiered`` source on a real Spark standalone cluster: a master and two workers
(1 core, 512 MiB each) started from pyspark's own ``bin/spark-class`` on 127.0.0.1, and a driver
in a separate Python process (the test process already holds the shared local[2] SparkContext,
and a process can have only one).  The executors run in the workers' JVMs, so the options, the
plan and the reader travel pickled to other processes, as they do in production.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

from broker_fixtures import FIXTURE_PARTITIONS, fixture_segments
from spark_helpers import expected_rows, first_difference
from spark_session import spark_env
from storage_servers import free_port, wait_port

from kafka_tiered_source.testing import EmbeddedCluster

pytestmark = [pytest.mark.spark, pytest.mark.decoder, pytest.mark.slow]

SPARK_HOME = os.path.dirname(__import__("pyspark").__file__)

# Runs in its own interpreter: drives the query on the cluster and writes the rows as JSON.
DRIVER = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    from spark_helpers import collect_rows, load
    import kafka_tiered_source.spark as kts

    master, options, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    spark = (SparkSession.builder.master(master).appName("kafka-tiered-cluster-test")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "512m")
             .config("spark.executor.cores", "1")
             .config("spark.cores.max", "2")
             .getOrCreate())
    try:
        kts.register(spark)
        df = load(spark, options)
        rows = collect_rows(df)
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        with open(out, "w") as f:
            json.dump({"partitions": df.rdd.getNumPartitions(), "executors": executors,
                       "rows": [[t, p, r] for (t, p), r in rows.items()]}, f)
    finally:
        spark.stop()
""")


def _spark_class(cls: str, args: list, env: dict, log_path: str) -> subprocess.Popen:
    log = open(log_path, "wb")
    try:
        # spark-class execs the JVM, so the child is the JVM; its own session lets teardown
        # signal the worker's executors (its children) too.
        return subprocess.Popen([os.path.join(SPARK_HOME, "bin", "spark-class"), cls, *args],
                                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=os.path.dirname(log_path),
                                start_new_session=True)
    finally:
        log.close()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as resp:
        return json.load(resp)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    base = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, **spark_env(), "SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOCAL_DIRS": str(base / "local"), "SPARK_WORKER_DIR": str(base / "work")}
    master_port, master_ui = free_port(), free_port()
    procs = []
    try:
        procs.append(_spark_class("org.apache.spark.deploy.master.Master",
                                  ["--host", "127.0.0.1", "--port", str(master_port),
                                   "--webui-port", str(master_ui)], env, str(base / "master.log")))
        wait_port(master_port, 60, procs[0])
        # the web UI (its /json/ state) binds after the RPC port; wait for it before picking the
        # workers' UI ports, so a free-port pick cannot land on it
        wait_port(master_ui, 60, procs[0])
        url = f"spark://127.0.0.1:{master_port}"
        for i in range(2):
            procs.append(_spark_class("org.apache.spark.deploy.worker.Worker",
                                      [url, "--host", "127.0.0.1", "--cores", "1", "--memory", "512m",
                                       "--webui-port", str(free_port()),
                                       "--work-dir", str(base / f"work{i}")],
                                      env, str(base / f"worker{i}.log")))
        deadline = time.monotonic() + 60
        while True:
            try:
                workers = _master_state(master_ui).get("workers", [])
            except OSError:        # the UI answers 404 until its handlers are attached
                workers = []
            alive = [w for w in workers if w.get("state") == "ALIVE"]
            if len(alive) == 2:
                break
            if time.monotonic() > deadline:
                logs = "".join(open(base / f"worker{i}.log", errors="replace").read()[-1500:] for i in range(2))
                raise AssertionError(f"only {len(alive)} of 2 workers registered: {logs}")
            for p in procs:
                assert p.poll() is None, f"a Spark daemon exited with {p.returncode}"
            time.sleep(0.5)
        yield url, env, base, master_ui
    finally:
        for p in reversed(procs):
            _stop(p)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("spark-cluster-broker")
    with EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote") as c:
        for t, p in FIXTURE_PARTITIONS:
            c.import_log_dir(t, p, fixture_segments(t, p))
        assert c.tier()
        c.remote_dir = str(base / "remote")
        yield c


def test_read_on_a_standalone_cluster_equals_expected(standalone, cluster):
    url, env, base, master_ui = standalone
    options = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "includeHeaders": "true",
               "subscribe": "orders,payments,compacted", "kafka.isolation.level": "read_committed",
               "remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{cluster.remote_dir}",
               "minPartitions": "4"}
    grants = cluster.storage.metrics.get("location_grants_total")
    out = base / "rows.json"
    done = subprocess.run([sys.executable, "-c", DRIVER, url, json.dumps(options), str(out)],
                          env=env, cwd=str(base), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["executors"] == 2
    assert result["partitions"] >= 4
    got = {(t, p): rows for t, p, rows in result["rows"]}
    assert sorted(got) == sorted(FIXTURE_PARTITIONS)
    for t, p in FIXTURE_PARTITIONS:
        want = expected_rows(t, p, True)
        assert got[(t, p)] == want, f"{t}-{p}: {first_difference(got[(t, p)], want)}"
    # the executors read the tiered segments directly
    assert cluster.storage.metrics.get("location_grants_total") > grants
    assert cluster.storage.metrics.get("remote_fetch_bytes_total") == 0
    state = _master_state(master_ui)
    apps = state.get("completedapps", []) + state.get("activeapps", [])
    assert "kafka-tiered-cluster-test" in [a.get("name") for a in apps]
