"""Shared test set-up.  Servers used by the tests are started here or in the test modules
themselves, always on 127.0.0.1."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Segments written by Apache Kafka 3.9.1 itself (tests/fixtures/kafka-3.9.1/README.md): kept in the
# repository so a clone runs its whole suite with nothing beside it.
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "kafka-3.9.1")

# The fixtures every test module may take by name: the embedded brokers (cluster_factory,
# tiered_cluster, fixture_cluster) and the one local SparkSession (spark).  Registered here
# rather than imported into each module, where a test's parameter of the same name would
# shadow the import (pyflakes' F811).
pytest_plugins = ["broker_fixtures", "spark_session"]
if os.environ.get("KAFKA_TIERED_CPU_REPORT"):      # wall and CPU per test file (tests/cpu_report.py)
    pytest_plugins.append("cpu_report")

# Every JVM of the suite (Spark drivers, the Connect server, standalone daemons) lives for
# seconds to minutes: the C1 compiler alone starts a session and runs its first jobs in about
# two thirds of the time tiered C2 takes (a JIT setting: what runs is the same).  The serial
# collector: on two cores shared by a dozen JVMs and interpreters, G1's concurrent and parallel
# GC threads only add CPU for heaps this small (a session and six tiny queries: 32.3 s of CPU
# with G1, 30.5 s serial, one run each at load ~10, tests/cpu_report.py's tree_cpu).  Executors of the
# standalone cluster get both from their driver (spark_helpers.DRIVER).
JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_SUBMIT_OPTS", JVM_OPTS)
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", JVM_OPTS)

# The __remote_log_metadata catalog's snapshots (remote.log.metadata.cache.dir's default) go to
# a directory of this run, not the user's cache: every process the suite starts (Spark's planner
# workers, CLI subprocesses) inherits it.  Each embedded cluster has a cluster id of its own, so
# the suite's clusters never share a snapshot.
if "KAFKA_TIERED_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile
    os.environ["KAFKA_TIERED_CACHE_DIR"] = tempfile.mkdtemp(prefix="kafka-tiered-test-cache-")
    atexit.register(shutil.rmtree, os.environ["KAFKA_TIERED_CACHE_DIR"], ignore_errors=True)


# `make test` runs the suite on pytest-xdist workers (Makefile: TEST_WORKERS), one test file per
# worker at a time: a file's module fixtures are made once.  Files start longest first, so no
# worker is left with a long file when the others are done.  Seconds per file, serial, on a
# 2-vCPU machine (pytest --junitxml); a file not named here is short, and runs after these.
LONGEST_FIRST = {
    "test_faults_spark": 95, "test_spark_connect": 90, "test_spark_read": 67, "test_pushdown_versions": 66,
    "test_streaming": 65, "test_wheel": 63, "test_aiven_encryption": 52, "test_first_hour": 49,
    "test_spark35": 46, "test_faults_storage": 38, "test_spark_cluster": 38, "test_cost_spark": 35,
    "test_registration": 34, "test_broker_clients": 34, "test_compacted_tails": 34, "test_offline": 34,
    "test_records_streams": 31, "test_records_lz4": 27, "test_scan": 25, "test_pushdown": 24,
    "test_storage_conformance": 23, "test_today_kafka": 18, "test_fallback_policy": 15, "test_histories": 15,
    "test_offline_timestamps": 13, "test_txn_ends": 12, "test_spark_datasource": 11, "test_oauth": 11,
    "test_broker_tiering": 11, "test_txn_spark": 11,
}


def pytest_collection_modifyitems(config, items):
    def cost(item) -> int:
        return LONGEST_FIRST.get(os.path.splitext(os.path.basename(str(item.path)))[0], 0)
    items.sort(key=cost, reverse=True)    # stable: a file's tests keep their order


@pytest.fixture(scope="session")
def standalone(tmp_path_factory):
    """One Spark standalone cluster (a master and two workers, spark_helpers.standalone_cluster)
    for the suite: test_faults_spark and test_spark_cluster each run their own applications
    (drivers in processes of their own) on it.  Yields (master url, env, base dir, master log)."""
    from spark_helpers import standalone_cluster
    base = tmp_path_factory.mktemp("spark-standalone")
    with standalone_cluster(base) as (url, env, master_log):
        yield url, env, base, master_log

