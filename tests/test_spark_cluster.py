"""The ``kafka-tiered`` source on a real Spark standalone cluster: a master and two workers
(1 core, 512 MiB each) started from pyspark's own ``bin/spark-class`` on 127.0.0.1, and a driver
in a separate Python process (the test process already holds the shared local[2] SparkContext,
and a process can have only one).  The executors run in the workers' JVMs, so the options, the
plan and the reader travel pickled to other processes, as they do in production.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from broker_fixtures import FIXTURE_PARTITIONS, file_tiered_cluster
from spark_helpers import DRIVER, expected_rows, first_difference


pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("spark-cluster-broker")) as c:
        yield c


def test_read_on_a_standalone_cluster_equals_expected(standalone, cluster):
    url, env, base, master_log = standalone
    options = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "includeHeaders": "true",
               "subscribe": "orders,payments,compacted", "kafka.isolation.level": "read_committed",
               "remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{cluster.remote_dir}",
               "minPartitions": "4"}
    grants = cluster.storage.metrics.get("location_grants_total")
    out = base / "rows.json"
    done = subprocess.run([sys.executable, "-c", DRIVER, url, json.dumps(options), str(out),
                           "kafka-tiered-cluster-test"],
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
    # the application ran on this master
    assert "Registered app kafka-tiered-cluster-test" in master_log.read_text(errors="replace")
