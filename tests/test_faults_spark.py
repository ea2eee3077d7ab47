"""Spark-level faults (issue 9 part B): a task whose first attempt fails for real and is retried,
and an executor JVM killed on a standalone cluster in the middle of a job.  Both must finish
with every offset exactly once (count == distinct count == expected, rows equal).

Each job runs in its own driver process: the test process already holds the shared local[2]
SparkContext (maxFailures 1), and task retries need ``local[2,4]`` or a cluster.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from broker_fixtures import FIXTURE_PARTITIONS, file_tiered_cluster, s3_tiered_cluster
from spark_helpers import DRIVER, expected_rows, first_difference
from spark_session import spark_env
from storage_servers import S3_KEY_ID, S3_SECRET, Rule


pytestmark = [pytest.mark.spark, pytest.mark.slow]



def run_driver(master: str, options: dict, out, env: dict, cwd: str) -> subprocess.Popen:
    """Start the driver; its output goes to ``out`` + ``.log`` (a file, not a pipe nobody reads
    while the test polls: a full pipe would stall the driver)."""
    with open(f"{out}.log", "wb") as log:
        return subprocess.Popen([sys.executable, "-c", DRIVER, master, json.dumps(options), str(out),
                                 "kafka-tiered-faults"],
                                env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)


def driver_log(out) -> str:
    with open(f"{out}.log", errors="replace") as f:
        return f.read()


def check_result(out, partitions, committed=False):
    result = json.loads(out.read_text())
    got = {(t, p): rows for t, p, rows in result["rows"]}
    want_total = sum(len(expected_rows(t, p, committed)) for t, p in partitions)
    assert result["count"] == result["distinct"] == want_total, result["count"]
    assert sorted(got) == sorted(partitions)
    for t, p in partitions:
        want = expected_rows(t, p, committed)
        assert got[(t, p)] == want, f"{t}-{p}: {first_difference(got[(t, p)], want)}"
    return result


# ---------------------------------------------------------------------------------------------
# a task that fails once and is retried (local[2,4]: up to 4 attempts per task)


S3_PARTITIONS = [("orders", 0), ("payments", 0)]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    base = tmp_path_factory.mktemp("faults-spark-s3")
    with s3_tiered_cluster(base, "tiered", S3_PARTITIONS) as c:
        c.base = base
        yield c


@pytest.fixture(scope="module")
def retry_job(s3):
    """The driver of test_task_failing_its_first_attempt..., started as the module starts: it is
    a process of its own (local[2,4]) that shares nothing with the standalone cluster's job, so
    it runs while test_executor_killed_mid_job... does, and the retry test (after it in this
    file) checks what it did.  Yields (process, output path, the proxy rule)."""
    options = {"kafka.bootstrap.servers": s3.bootstrap_servers, "includeHeaders": "true",
               "subscribe": "orders,payments", "remote.storage.fetcher": "s3",
               "remote.storage.s3.bucket": "tiered", "remote.storage.prefix": "kt/",
               "remote.storage.s3.endpoint": s3.proxy.endpoint, "remote.storage.s3.region": "us-east-1",
               "remote.storage.s3.access.key.id": S3_KEY_ID, "remote.storage.s3.secret.access.key": S3_SECRET,
               "partition.target.bytes": str(512 * 1024)}
    # past the first batch: the failed attempt has already handed Spark some rows
    rule = s3.proxy.add(Rule(match=".log", damage="corrupt", times=1, keep=lambda n: n * 3 // 4))
    out = s3.base / "retry.json"
    env = {**os.environ, **spark_env()}
    proc = run_driver("local[2,4]", options, out, env, str(s3.base))
    with _reaped(proc):
        yield proc, out, rule


@contextlib.contextmanager
def _reaped(proc):
    """The driver process is killed if it still runs when the block ends (a test that failed
    or timed out)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module", autouse=True)
def _retry_driver_runs_meanwhile(retry_job):
    """Start the retry test's driver before the first test of the module."""


# ---------------------------------------------------------------------------------------------
# an executor JVM killed on a standalone cluster during the job


@pytest.fixture(scope="module")
def file_cluster(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("faults-spark-file")) as c:
        yield c


def _executors_of(base) -> list[int]:
    """Executor JVMs (CoarseGrainedExecutorBackend) whose working directory is under ``base``:
    launched by this test's workers, never anyone else's."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if b"CoarseGrainedExecutorBackend" in cmd and cwd.startswith(str(base)):
            pids.append(int(entry))
    return sorted(pids)


def test_executor_killed_mid_job_job_completes_with_every_offset_once(standalone, file_cluster):
    url, env, base, _ = standalone     # the suite's cluster (conftest)
    metrics = base / "task-metrics.jsonl"
    if metrics.exists():
        metrics.unlink()
    options = {"kafka.bootstrap.servers": file_cluster.bootstrap_servers, "includeHeaders": "true",
               "subscribe": "orders", "kafka.isolation.level": "read_committed",
               "remote.storage.fetcher": "fsspec",
               "remote.storage.fsspec.url": f"file://{file_cluster.remote_dir}",
               "partition.target.bytes": str(256 * 1024),
               # ~0.5 s per task, so the job is still running when an executor dies
               "quota.remote.bytes.per.second": str(512 * 1024),
               "metrics.jsonl.path": str(metrics)}
    out = base / "killed.json"
    proc = run_driver(url, options, out, env, str(base))
    killed = None
    done_at_kill = None
    with _reaped(proc):
        deadline = time.monotonic() + 120
        while killed is None and time.monotonic() < deadline and proc.poll() is None:
            # wait until an executor runs and the job has finished at least one task (on a busy
            # machine the second executor may start only when the job is nearly done: killing
            # the one that runs is the same fault, and Spark must recover from it alike)
            execs = _executors_of(base)
            finished = len(metrics.read_text().splitlines()) if metrics.exists() else 0
            if execs and finished >= 1:
                killed, done_at_kill = execs[0], finished
                os.kill(killed, signal.SIGKILL)
                break
            time.sleep(0.2)
        proc.wait(timeout=150)
    log = driver_log(out)
    assert killed is not None, "the job ended before an executor could be killed"
    assert proc.returncode == 0, log[-4000:]
    result = check_result(out, [tp for tp in FIXTURE_PARTITIONS if tp[0] == "orders"], committed=True)
    # the kill landed mid-job: tasks were still to run, and Spark saw the executor go
    assert done_at_kill < result["partitions"]
    assert "Lost executor" in log or "lost executor" in log.lower(), log[-3000:]
    assert killed not in _executors_of(base)


def test_task_failing_its_first_attempt_is_retried_and_every_offset_comes_once(retry_job):
    """The first GET of a segment answers a body with one flipped byte (no checksum header, so
    only the batch CRC catches it): that task attempt dies with CorruptRecordError after it may
    already have produced rows.  Spark retries the task; the retry reads clean bytes.  Every
    offset comes out once: rows of the failed attempt never reach the result."""
    proc, out, rule = retry_job
    proc.wait(timeout=150)     # the fixture kills it if it is still running
    log = driver_log(out)
    assert proc.returncode == 0, log[-4000:]
    assert rule.hits == 1
    # the attempt really failed, for the reason given, and was retried
    assert "CorruptRecordError" in log and "Lost task" in log, log[-4000:]
    check_result(out, S3_PARTITIONS)
