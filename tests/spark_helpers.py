"""Helpers for the end-to-end Spark read tests: loading a ``kafka-tiered`` DataFrame and turning
Spark rows into the shape of the fixtures' ``expected/*.jsonl`` so the two compare directly.

Rows are compared as dicts ``{offset, timestamp (ms), timestampType, key, value (base64 or
None), headers}``.  Spark gives ``headers`` as null for a record without headers, while the
fixture files list ``[]``; :func:`expected_rows` maps ``[]`` to ``None`` so the comparison also
checks that Spark really shows null there.
"""
from __future__ import annotations

import textwrap

import time

import subprocess

import signal

import os

import contextlib

import base64


def b64(value):
    return None if value is None else base64.b64encode(bytes(value)).decode("ascii")


def load(spark, options: dict):
    reader = spark.read.format("kafka-tiered")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def collect_rows(df) -> dict:
    """Collect ``df`` once: ``{(topic, partition): [row dict, ...]}`` in offset order.  The
    timestamp is taken as ``unix_micros`` so no session time zone takes part; every Kafka
    timestamp is whole milliseconds, so a remainder is a bug and is kept visible."""
    has_headers = "headers" in df.columns
    cols = ["topic", "partition", "offset", "unix_micros(timestamp) AS ts_us", "timestampType",
            "key", "value"] + (["headers"] if has_headers else [])
    out: dict = {}
    for r in df.selectExpr(*cols).collect():
        ts = r.ts_us // 1000 if r.ts_us is not None and r.ts_us % 1000 == 0 else ("us", r.ts_us)
        row = {"offset": r.offset, "timestamp": ts, "timestampType": r.timestampType,
               "key": b64(r.key), "value": b64(r.value)}
        if has_headers:
            row["headers"] = None if r.headers is None else [[h.key, b64(h.value)]
                                                               for h in r.headers]
        out.setdefault((r.topic, r.partition), []).append(row)
    for rows in out.values():
        rows.sort(key=lambda x: x["offset"])
    return out


def expected_rows(topic: str, partition: int, committed: bool, *, headers: bool = True) -> list:
    # imported here: the session workers (tests/session_worker.py) import this module in
    # interpreters without pytest, where only collect_rows is used
    from broker_fixtures import fixture_expected
    rows = []
    for e in fixture_expected(topic, partition, committed):
        row = {k: e[k] for k in ("offset", "timestamp", "timestampType", "key", "value")}
        if headers:
            row["headers"] = e["headers"] or None
        rows.append(row)
    return rows


def consumer_rows(rows: list) -> list:
    """Rows from broker_fixtures' consume helpers (headers as ``[]`` when none), in our shape."""
    return [{**r, "headers": r["headers"] or None} for r in rows]


def first_difference(got: list, want: list) -> str:
    """A short description of where two row lists part, for assertion messages."""
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            return f"row {i}: got {g!r:.300} want {w!r:.300}"
    return f"lengths differ: got {len(got)} rows, want {len(want)}"


def arrow_rows(batches) -> dict:
    """``pyarrow.RecordBatch`` objects (as ``TaskReader.read`` yields them) in the same shape as
    :func:`collect_rows`."""
    import pyarrow as pa
    out: dict = {}
    for batch in batches:
        if not batch.num_rows:
            continue
        ts_us = batch.column(batch.schema.get_field_index("timestamp")).cast(pa.int64()).to_pylist()
        for r, us in zip(batch.to_pylist(), ts_us, strict=True):
            row = {"offset": r["offset"], "timestamp": us // 1000 if us % 1000 == 0 else ("us", us),
                   "timestampType": r["timestampType"], "key": b64(r["key"]), "value": b64(r["value"])}
            if "headers" in r:
                row["headers"] = None if r["headers"] is None else [[h["key"], b64(h["value"])]
                                                                   for h in r["headers"]]
            out.setdefault((r["topic"], r["partition"]), []).append(row)
    for rows in out.values():
        rows.sort(key=lambda x: x["offset"])
    return out


def read_tasks(options, tasks, reader=None):
    """Run ``tasks`` one after the other with one TaskReader (``reader``, or a new one); the
    reader is closed at the end.  Returns (Arrow batches, the reader's metric totals)."""
    from kafka_tiered_source.executor import TaskReader
    reader = reader or TaskReader(options)
    try:
        batches = [b for t in tasks for b in reader.read(t)]
    finally:
        reader.close()
    return batches, reader.metrics.snapshot().total()


def offsets_of(batches) -> list:
    """The offset column of Arrow ``batches``, in order."""
    return [o for b in batches for o in b.column(b.schema.get_field_index("offset")).to_pylist()]


def read_as_executors(options, tasks) -> dict:
    """Run ``tasks`` as Spark's executors do: one ``TaskReader`` (so one fetcher, with its own
    manifest cache) per task, no fallback to the broker allowed.  Rows as :func:`arrow_rows`."""
    from kafka_tiered_source.executor import TaskReader
    out: dict = {}
    for task in tasks:
        reader = TaskReader(options, tasks_planned=len(tasks))
        try:
            for key, rows in arrow_rows(reader.read(task)).items():
                out.setdefault(key, []).extend(rows)
            assert reader.metrics.total().fallbacks == 0
        finally:
            reader.close()
    return out


def without_manifest_info(tasks) -> list:
    """``tasks`` carrying nothing of the Aiven manifests: each task's reader GETs them itself."""
    from dataclasses import replace
    from kafka_tiered_source.planning.tasks import ReadTask, RemoteRange
    return [ReadTask(t.index, tuple(replace(r, segment=replace(r.segment, manifest_info=None))
                                    if isinstance(r, RemoteRange) else r for r in t.ranges), t.txn)
            for t in tasks]


# ---------------------------------------------------------------------------------------------
# A Spark standalone cluster: a master and two workers from pyspark's own bin/spark-class.

SPARK_HOME = os.path.dirname(__import__("pyspark").__file__)


def spark_class(cls: str, args: list, env: dict, log_path: str) -> subprocess.Popen:
    log = open(log_path, "wb")
    try:
        # spark-class execs the JVM, so the child is the JVM; its own session lets teardown
        # signal the worker's executors (its children) too.
        return subprocess.Popen([os.path.join(SPARK_HOME, "bin", "spark-class"), cls, *args],
                                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=os.path.dirname(log_path),
                                start_new_session=True)
    finally:
        log.close()


def stop_process_group(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@contextlib.contextmanager
def standalone_cluster(base, workers: int = 2):
    """A master and ``workers`` workers (1 core, 512 MiB each) on 127.0.0.1, with web UIs on
    ports the JVMs pick themselves (port 0) and worker registration read from the master's log,
    so no other process's port can be mistaken for ours on a shared machine.  Yields
    ``(master url, env, master log path)``."""
    from spark_session import spark_env
    from storage_servers import free_port, wait_port
    env = {**os.environ, **spark_env(), "SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOCAL_DIRS": str(base / "local"), "SPARK_WORKER_DIR": str(base / "work")}
    master_port = free_port()
    master_log = base / "master.log"
    procs = []
    try:
        procs.append(spark_class("org.apache.spark.deploy.master.Master",
                                 ["--host", "127.0.0.1", "--port", str(master_port), "--webui-port", "0"],
                                 env, str(master_log)))
        wait_port(master_port, 60, procs[0])
        url = f"spark://127.0.0.1:{master_port}"
        for i in range(workers):
            procs.append(spark_class("org.apache.spark.deploy.worker.Worker",
                                     [url, "--host", "127.0.0.1", "--cores", "1", "--memory", "512m",
                                      "--webui-port", "0", "--work-dir", str(base / f"work{i}")],
                                     env, str(base / f"worker{i}.log")))
        deadline = time.monotonic() + 60
        while master_log.read_text(errors="replace").count("Registering worker") < workers:
            for p in procs:
                assert p.poll() is None, f"a Spark daemon exited with {p.returncode}"
            assert time.monotonic() < deadline, master_log.read_text(errors="replace")[-3000:]
            time.sleep(0.3)
        yield url, env, master_log
    finally:
        for p in reversed(procs):
            stop_process_group(p)


# A driver in its own interpreter (a process holds one SparkContext, and the test process holds
# the shared local[2] one): argv = master, options as JSON, output path, application name.  It
# reads once and writes the rows plus what the tests check about the job.
DRIVER = textwrap.dedent("""
    import json, os, sys
    from pyspark.sql import SparkSession
    from spark_helpers import collect_rows, load
    import kafka_tiered_source as kts

    master, options, out, app = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "512m")
             .config("spark.executor.cores", "1")
             .config("spark.cores.max", "2")
             .config("spark.executor.extraJavaOptions", os.environ.get("SPARK_SUBMIT_OPTS", ""))
             .getOrCreate())
    try:
        kts.register(spark)
        df = load(spark, options)
        rows = collect_rows(df)     # one job: every row, duplicates kept
        keys = [(t, p, r["offset"]) for (t, p), rs in rows.items() for r in rs]
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        with open(out, "w") as f:
            json.dump({"partitions": df.rdd.getNumPartitions(), "executors": executors,
                       "count": len(keys), "distinct": len(set(keys)),
                       "rows": [[t, p, r] for (t, p), r in rows.items()]}, f)
    finally:
        spark.stop()
""")
