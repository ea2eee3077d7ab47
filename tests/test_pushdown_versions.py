"""``pushFilters=auto`` agrees with ``spark.sql.python.filterPushdown.enabled`` on every pyspark
the format supports that installs here (4.0-4.2 in small venvs of their own, tests/pyspark_venvs.py;
4.3 in the suite's session), and ``pushFilters=true|false`` say it outright.

Agreement is seen in what the tasks read, not in which class was picked: a pushed
``partition = 1`` leaves partition 0 of ``orders`` unplanned, so the read's ``last_read_stats``
counts only partition 1's records, while Spark's own filtering reads both; the rows are the same
either way.  Spark 4.0 has no filter pushdown: there ``auto`` never pushes.  The other pysparks
run as subprocesses at the same time (a JVM each), with ``auto`` under both settings (the suite's
own pyspark also runs ``pushFilters=true|false``), and check that the metrics accumulators do not
keep a stopped SparkContext alive.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

import pyspark
from broker_fixtures import file_tiered_cluster, fixture_expected
from pushdown_check import AUTO, run_cases
from pyspark_venvs import RELEASES, ensure
from spark_session import spark_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]

HERE = os.path.dirname(os.path.abspath(__file__))
BOTH = len(fixture_expected("orders", 0, False)) + len(fixture_expected("orders", 1, False))
ONE = len(fixture_expected("orders", 1, False))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("pushdown-versions")) as c:
        yield c


def options(c) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "assign": json.dumps({"orders": [0, 1]}),
            "remote.storage.uri": f"file://{c.remote_dir}"}


def expected(version: str) -> list[dict]:
    """What each case of pushdown_check.CASES must give on pyspark ``version``."""
    pushes = tuple(int(x) for x in version.split(".")[:2]) >= (4, 1)
    pushed = {"rows": ONE, "records_read": ONE if pushes else BOTH}
    plain = {"rows": ONE, "records_read": BOTH}
    refused = {"error": "DATA_SOURCE_PUSHDOWN_DISABLED"} if pushes else plain
    return [{"conf": "true", "pushFilters": None, **(pushed if pushes else plain)},
            {"conf": "false", "pushFilters": None, **plain},
            {"conf": "true", "pushFilters": "true", **pushed},
            {"conf": "true", "pushFilters": "false", **plain},
            {"conf": "false", "pushFilters": "true", **refused}]


def test_auto_agrees_with_the_spark_setting_on_every_supported_pyspark(spark, cluster):
    opts = options(cluster)
    env = {**os.environ, **spark_env()}
    runs = {}
    for minor in RELEASES:         # started together: a JVM each, while this one reads below
        python = ensure(minor)
        runs[minor] = subprocess.Popen(
            [python, os.path.join(HERE, "pushdown_check.py"), json.dumps(opts)], cwd=HERE,
            env={**env, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run_cases(spark, opts) == expected(pyspark.__version__)
        for minor, proc in runs.items():
            out, err = proc.communicate(timeout=240)
            line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
            assert proc.returncode == 0 and line, f"pyspark {minor}:\n{err[-3000:]}"
            result = json.loads(line[len("RESULT "):])
            assert result["pyspark"].startswith(minor + ".")
            assert result["cases"] == expected(result["pyspark"])[:len(AUTO)], minor
            assert not result["context_held"], f"pyspark {minor}: kafka_tiered_source holds the stopped SparkContext"
    finally:
        for proc in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
