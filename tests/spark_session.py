"""One local[2] SparkSession for every Spark test of the suite.

A test takes it as its ``spark`` parameter (tests/conftest.py registers this module's fixture
for every test module).  The session is a process-wide singleton, so one JVM serves the whole
run; it is stopped when the test process exits.  Executors run this interpreter
(``PYSPARK_PYTHON=sys.executable``) with the repository and ``tests/`` on ``PYTHONPATH``, so
they import ``kafka_tiered_source`` and test modules, and Spark's data-source lookup finds
``pyspark_kafka_tiered``.
"""
from __future__ import annotations

import atexit
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_session = None


def spark_env() -> dict:
    """The environment a Spark process (this one or a child) needs for these tests."""
    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    # The tests directory too: readers defined in test modules are pickled by reference.
    for path in (os.path.join(ROOT, "tests"), ROOT):
        if path not in paths:
            paths.insert(0, path)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def build_session(master: str = "local[2]"):
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master(master)
            .appName("kafka-tiered-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")   # no progress bar redrawn on stderr
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .getOrCreate())


def get_spark():
    global _session
    if _session is None:
        os.environ.update(spark_env())      # before the JVM starts: it passes them on
        _session = build_session()
        atexit.register(_session.stop)
    return _session


@pytest.fixture(scope="session")
def spark():
    return get_spark()
