"""``kafka_tiered_source.scan()``: the kafka-tiered read without Spark (issue 28).

Every Kafka 3.9.1 fixture partition is imported into the embedded broker (KIP-1248 on, and
``__remote_log_metadata`` written as today's brokers write it) and tiered; the scan must give
exactly the fixtures' expected records with every locator, in both isolation levels, each
partition in offset order; DuckDB and Polars take the reader as it is; filters, budget, the
storage check and the Spark-only options behave as the Spark read's; closing the reader stops
the tasks."""
from __future__ import annotations

import datetime
import threading
import time

import pyarrow as pa
import pytest

from broker_fixtures import FIXTURE_PARTITIONS, file_tiered_cluster
from spark_helpers import arrow_rows, expected_rows, first_difference

import kafka_tiered_source as kts
from kafka_tiered_source.errors import BudgetExceededError, ConfigError, StoragePreflightError

ALL_TOPICS = "orders,payments,compacted"
ISOLATION = ["read_uncommitted", "read_committed"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("scan")) as c:
        yield c


def options(c, iso="read_uncommitted", **extra) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": ALL_TOPICS, "includeHeaders": "true",
            "kafka.isolation.level": iso, "remote.storage.uri": f"file://{c.remote_dir}", **extra}


def stream_order_ok(batches) -> str | None:
    """None when every partition's offsets rise through the stream, else the first that does not."""
    last: dict = {}
    for b in batches:
        for t, p, o in zip(b.column("topic").to_pylist(), b.column("partition").to_pylist(),
                           b.column("offset").to_pylist(), strict=True):
            if o <= last.get((t, p), -1):
                return f"{t}-{p}: offset {o} after {last[(t, p)]}"
            last[(t, p)] = o
    return None


def assert_fixture_rows(batches, committed: bool, partitions=FIXTURE_PARTITIONS, upto=None):
    got = arrow_rows(batches)
    assert sorted(got) == sorted(partitions)
    for t, p in partitions:
        want = expected_rows(t, p, committed)
        if upto is not None:
            want = [r for r in want if r["offset"] <= upto[(t, p)]]
        assert got[(t, p)] == want, f"{t}-{p}: {first_difference(got[(t, p)], want)}"


@pytest.mark.decoder
@pytest.mark.parametrize("locator", ["auto", "kip1248", "metadata-topic", "listing"])
@pytest.mark.parametrize("iso", ISOLATION)
def test_scan_is_exact_with_every_locator(cluster, locator, iso):
    reader = kts.scan(options(cluster, iso, **{"remote.segment.locator": locator,
                                               "maxRecordsPerPartition": "2000"}), **{"scan.workers": 3})
    batches = list(reader)
    assert_fixture_rows(batches, iso == "read_committed")
    assert stream_order_ok(batches) is None
    stats = kts.last_read_stats()
    total = stats.total()
    assert total.records == sum(b.num_rows for b in batches)
    assert total.remote_requests > 0 and total.fallbacks == 0
    assert stats.tasks == stats.tasks_planned > len(FIXTURE_PARTITIONS)   # several tasks per partition


@pytest.mark.decoder
def test_scan_offline_reads_the_tiered_offsets(cluster):
    """No broker: the store is listed (the listing locator alone)."""
    opts = options(cluster)
    del opts["kafka.bootstrap.servers"]
    batches = list(kts.scan(opts, **{"remote.storage.layout": "aiven"}))
    upto = {(t, p): max(s.end_offset for s in cluster.remote_segments(t, p)) for t, p in FIXTURE_PARTITIONS}
    assert_fixture_rows(batches, False, upto=upto)
    assert stream_order_ok(batches) is None


def test_the_schema_is_sparks_kafka_schema_in_arrow_types(cluster):
    headers = kts.scan(options(cluster), where="partition = 0 AND offset < 10").schema
    assert [(f.name, f.type, f.nullable) for f in headers] == [
        ("key", pa.binary(), True), ("value", pa.binary(), True), ("topic", pa.string(), True),
        ("partition", pa.int32(), True), ("offset", pa.int64(), True),
        ("timestamp", pa.timestamp("us", tz="UTC"), True), ("timestampType", pa.int32(), True),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])), True)]
    plain = kts.scan({**options(cluster), "includeHeaders": "false"}, where="partition = 0 AND offset < 10")
    assert plain.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert plain.read_all().schema == plain.schema


@pytest.mark.decoder
def test_where_reads_less_and_keeps_exactly_the_matching_rows(cluster):
    everything = list(kts.scan(options(cluster, **{"scan.workers": 1})))
    whole = kts.last_read_stats().total()
    ts = sorted(r["timestamp"] for r in expected_rows("orders", 0, False))
    bound = ts[len(ts) * 3 // 4]
    since = datetime.datetime.fromtimestamp(bound / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    batches = list(kts.scan(options(cluster), where=f"topic = 'orders' AND partition = 0 AND timestamp >= '{since}'"
                                                    " AND offset < 8000"))
    part = kts.last_read_stats().total()
    got = arrow_rows(batches)
    want = [r for r in expected_rows("orders", 0, False) if r["timestamp"] >= bound and r["offset"] < 8000]
    assert list(got) == [("orders", 0)] and got[("orders", 0)] == want
    assert 0 < part.remote_requests < whole.remote_requests and part.remote_bytes < whole.remote_bytes / 4
    assert sum(b.num_rows for b in everything) > 4 * len(want)


def test_each_scan_has_its_own_totals_without_a_session(cluster):
    before = kts.read_history()
    reader = kts.scan(options(cluster), where="partition = 0")
    planned = kts.last_read_stats()          # the new scan, before any task ran
    assert planned.read_id not in before.reads and planned.tasks == 0 and planned.total().records == 0
    n = sum(b.num_rows for b in reader)
    stats = kts.last_read_stats()
    assert stats.read_id == planned.read_id and stats.tasks == stats.tasks_planned
    assert stats.total().records == n > 0 and stats.total().remote_bytes > 0
    assert len(kts.read_history()) == len(before) + 1


def test_spark_only_options_are_refused_by_name(cluster):
    for name, value in (("maxOffsetsPerTrigger", "100"), ("minOffsetsPerTrigger", "1"),
                        ("maxTriggerDelay", "5s"), ("maxBytesPerTrigger", "1000"), ("groupIdPrefix", "x")):
        with pytest.raises(ConfigError) as info:
            kts.scan(options(cluster), **{name: value})
        assert info.value.option == name and "readStream" in str(info.value)
    with pytest.raises(ConfigError) as info:
        kts.scan(options(cluster), **{"scan.wokers": "2"})
    assert info.value.option == "scan.wokers" and "scan.workers" in str(info.value)
    with pytest.raises(ConfigError) as info:
        kts.scan(options(cluster), **{"scan.workers": "0"})
    assert info.value.option == "scan.workers"
    with pytest.raises(ConfigError) as info:      # the source's own validation, by name
        kts.scan(options(cluster), startingOfsets="earliest")
    assert "startingOffsets" in str(info.value)


def test_the_budget_refuses_the_scan_before_any_get(cluster):
    with pytest.raises(BudgetExceededError, match="cost.budget.usd"):
        kts.scan(options(cluster, **{"cost.budget.usd": "0.0000001"}))


@pytest.mark.parametrize("wrong", [{"remote.storage.uri": "file:///nonexistent-kt-typo/"},
                                   {"remote.storage.layout": "kafka-local-tiered"}])
def test_a_wrong_store_fails_the_scan_at_once(cluster, wrong):
    with pytest.raises(StoragePreflightError, match="before any task was launched"):
        kts.scan({**options(cluster), **wrong})


def test_fallback_always_reads_through_the_broker(cluster):
    batches = list(kts.scan(options(cluster, "read_committed", **{"fetch.remote.fallback": "always"})))
    assert_fixture_rows(batches, True)
    total = kts.last_read_stats().total()
    assert total.remote_requests == 0 and total.fallbacks > 0


def test_duckdb_and_polars_take_the_reader_as_it_is(cluster):
    import duckdb
    import polars as pl
    reader = kts.scan(options(cluster, "read_committed"))   # noqa: F841  (DuckDB finds it by name)
    got = duckdb.sql('SELECT topic, "partition", count(*) AS n, min("offset") AS lo, max("offset") AS hi, '
                     'count(headers) AS with_headers FROM reader GROUP BY ALL ORDER BY ALL').fetchall()
    want = []
    for t, p in FIXTURE_PARTITIONS:
        rows = expected_rows(t, p, True)
        want.append((t, p, len(rows), rows[0]["offset"], rows[-1]["offset"],
                     sum(1 for r in rows if r["headers"] is not None)))
    assert got == sorted(want)
    df = pl.from_arrow(kts.scan(options(cluster), where="topic = 'payments'"))
    assert df.schema["timestamp"] == pl.Datetime("us", "UTC") and df.schema["key"] == pl.Binary
    assert df.schema["headers"] == pl.List(pl.Struct({"key": pl.String, "value": pl.Binary}))
    assert df.height == len(expected_rows("payments", 0, False))
    assert df["offset"].to_list() == [r["offset"] for r in expected_rows("payments", 0, False)]


def _scan_threads():
    return [t for t in threading.enumerate() if t.name.startswith("kafka-tiered-scan-")]


def test_closing_the_reader_stops_the_tasks(cluster):
    reader = kts.scan(options(cluster, **{"maxRecordsPerPartition": "500", "scan.workers": "2"}))
    first = reader.read_next_batch()
    assert first.num_rows > 0 and _scan_threads()
    reader.close()
    assert _scan_threads() == []
    stats = kts.last_read_stats()
    read = stats.total()
    time.sleep(0.3)
    assert kts.last_read_stats().total().remote_requests == read.remote_requests   # nothing after close
    assert stats.tasks < stats.tasks_planned
    assert read.records < sum(len(expected_rows(t, p, False)) for t, p in FIXTURE_PARTITIONS)
    with kts.scan(options(cluster), where="partition = 0") as again:       # the context manager too
        again.read_next_batch()
    assert _scan_threads() == []


# ---------------------------------------------------------------------------------------------
# the window of tasks on its own: the order it keeps and what it holds, whatever the timing

def _tasks(spec):
    """ReadTasks from ``[(partition, first offset, count), ...]`` per task."""
    from kafka_tiered_source.planning.tasks import BrokerRange, ReadTask
    return [ReadTask(i, tuple(BrokerRange("t", p, "id", o, o + n, 0) for p, o, n in ranges))
            for i, ranges in enumerate(spec)]


def _batch(p: int, offsets) -> pa.RecordBatch:
    return pa.record_batch([pa.array([p] * len(offsets), pa.int32()), pa.array(offsets, pa.int64()),
                            pa.array([b"x" * 1000] * len(offsets), pa.binary())],
                           names=["partition", "offset", "value"])


def test_the_window_keeps_partition_order_and_bounds_what_it_holds():
    from kafka_tiered_source.scanner.window import TaskWindow
    # partition 0 spans tasks 0-2, partition 1 tasks 3-4; task 0 is slow, so tasks 1, 2 (same
    # partition) finish first and must wait; tasks 3-4 (another partition) stream meanwhile
    tasks = _tasks([[(0, 0, 40)], [(0, 40, 40)], [(0, 80, 40)], [(1, 0, 40)], [(1, 40, 40)]])
    made, lock, high = [0], threading.Lock(), [0]

    def run(task):
        r = task.ranges[0]
        for o in range(r.offset_start, r.offset_end, 4):
            if task.index == 0:
                time.sleep(0.01)
            with lock:
                made[0] += 1
            yield _batch(r.partition, list(range(o, o + 4)))

    window = TaskWindow(tasks, run, workers=3, buffer_bytes=8 * 1000, queue_batches=2)
    taken = 0
    out = []
    for b in window.batches():
        taken += 1
        with lock:
            high[0] = max(high[0], made[0] - taken)
        out.append(b)
        time.sleep(0.002)
    got = [(p, o) for b in out for p, o in zip(b.column("partition").to_pylist(), b.column("offset").to_pylist(),
                                                                       strict=True)]
    assert [o for p, o in got if p == 0] == list(range(120)) and [o for p, o in got if p == 1] == list(range(80))
    # made but not taken: 3 workers x (a buffer of 8 KB = 2 batches + 1 more, or 1 in hand) + 2 queued
    assert high[0] <= 3 * 3 + 2, high[0]


def test_a_failing_task_ends_the_window_with_its_error():
    from kafka_tiered_source.errors import CorruptRecordError
    from kafka_tiered_source.scanner.window import TaskWindow
    started = []

    def run(task):
        started.append(task.index)
        yield _batch(task.index, [0])
        if task.index == 1:
            raise CorruptRecordError("bad batch at byte 7 of seg.log")
        for o in range(1, 10_000):
            yield _batch(task.index, [o])

    window = TaskWindow(_tasks([[(p, 0, 1)] for p in range(6)]), run, workers=2)
    with pytest.raises(CorruptRecordError, match="byte 7"):
        for _ in window.batches():
            pass
    assert not [t for t in threading.enumerate() if t.name.startswith("kafka-tiered-scan-")]
    assert len(started) < 6


def test_an_error_while_reading_names_its_class_and_where(cluster, tmp_path):
    """A corrupt byte in a tiered segment fails its task (as a bad CRC does in Spark) and the
    scan with it: the message through the C stream starts with the error's class."""
    import os
    import shutil
    copy = tmp_path / "remote"
    shutil.copytree(cluster.remote_dir, copy)
    logs = sorted(os.path.join(d, f) for d, _, fs in os.walk(copy) for f in fs
                  if f.endswith(".log") and "/payments-" in os.path.join(d, f))
    with open(logs[0], "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    reader = kts.scan({**options(cluster), "remote.storage.uri": f"file://{copy}"}, where="topic = 'payments'")
    with pytest.raises(pa.ArrowInvalid) as info:
        reader.read_all()
    text = str(info.value)
    assert text.startswith("Invalid: CorruptRecordError: CRC-32C mismatch") and "byte position" in text, text[:500]


def test_the_duckdb_example_reads_one_day(tmp_path):
    import os
    import re
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, os.path.join(root, "examples", "duckdb_window.py"), "--records", "30000",
                           "--segment-bytes", "16384"],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert re.search(r"^read 10,000 orders of 2026-10-01 into DuckDB in [\d.]+ s \(00:0\d:\d\d \.\. 23:5\d:\d\d UTC\)$",
                     out, re.M), out
    assert "storage checked" in out and re.search(r"^the read cost: \$\d+\.\d{6} for \d+ GETs", out, re.M), out
    assert proc.stderr.strip() == "", proc.stderr[-2000:]
