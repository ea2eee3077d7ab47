"""``spark.read.format("kafka-tiered")`` with no ``register()`` call, run from a directory other
than the checkout and without the checkout on PYTHONPATH: Spark's own discovery must find the
installed ``pyspark_kafka_tiered`` module (the README's install, which CI runs).

Spark discovers Python data sources in a worker process with ``pkgutil.iter_modules()`` over
``sys.path`` (pyspark.sql.worker.lookup_data_sources).  An editable install whose modules are
served by an import hook instead of a ``sys.path`` entry is invisible to it: that was the bug."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from broker_fixtures import FIXTURE_PARTITIONS, fixture_expected, file_tiered_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("registration")) as c:
        yield c


def _neutral_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def test_the_installed_package_is_found_from_a_neutral_directory(tmp_path):
    # The checkout must not be importable by accident: not the cwd, not on PYTHONPATH.
    probe = subprocess.run([sys.executable, "-c", "import sys, json; print(json.dumps(sys.path))"],
                           cwd=tmp_path, env=_neutral_env(), capture_output=True, text=True, check=True)
    assert os.path.join(ROOT, "tests") not in json.loads(probe.stdout)
    found = subprocess.run([sys.executable, "-c", "import pkgutil; print(sorted(m.name for m in "
                            "pkgutil.iter_modules() if m.name.startswith('pyspark_')))"],
                           cwd=tmp_path, env=_neutral_env(), capture_output=True, text=True, check=True)
    assert "pyspark_kafka_tiered" in found.stdout, \
        "Spark's discovery (pkgutil.iter_modules) does not see pyspark_kafka_tiered"


@pytest.mark.slow
@pytest.mark.spark
def test_spark_finds_the_format_without_register_from_a_neutral_directory(cluster, tmp_path):
    topic, partition = FIXTURE_PARTITIONS[0]
    script = textwrap.dedent(f"""
        import json
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[2]").appName("registration")
                 .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        df = (spark.read.format("kafka-tiered")
              .option("kafka.bootstrap.servers", {cluster.bootstrap_servers!r})
              .option("assign", json.dumps({{{topic!r}: [{partition}]}}))
              .option("remote.storage.uri", "file://" + {cluster.remote_dir!r})
              .load())
        print("OFFSETS", json.dumps([r.offset for r in df.orderBy("offset").select("offset").collect()]))
        spark.stop()
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=_neutral_env(),
                          capture_output=True, text=True, timeout=300)
    errors = [ln for ln in done.stderr.splitlines() if "Exception" in ln or "Error" in ln][:5]
    assert done.returncode == 0, "\n".join(errors) or done.stderr[-3000:]
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("OFFSETS "))
    want = [r["offset"] for r in fixture_expected(topic, partition, committed=False)]
    assert json.loads(line[len("OFFSETS "):]) == want
