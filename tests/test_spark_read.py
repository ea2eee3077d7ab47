"""End to end: Kafka 3.9.1 segments imported into the embedded broker, tiered, and read back with
``spark.read.format("kafka-tiered")`` on the shared local[2] SparkSession.

Every read is checked row for row against the fixtures' expected records (offset, timestamp,
timestampType, key, value, headers), so the direct path, the broker-only path, the fallback path
and a real Kafka consumer (kafka-python) are all held to the same rows.  Which path served the
records is checked on the broker's own counters (KIP-1248 location grants vs. remote bytes the
broker read for ordinary fetches), the only place a Spark executor's work is visible from here.
"""
from __future__ import annotations

import shutil

import pytest
from pyspark.errors import PySparkException
from pyspark.sql.types import StructType

from broker_fixtures import (FIXTURE_PARTITIONS, consume_kafka_python, file_tiered_cluster,
                             fixture_expected, fixture_segments, s3_tiered_cluster)
from spark_helpers import (arrow_rows, b64, collect_rows, consumer_rows, expected_rows,
                           first_difference, load)
from storage_servers import S3_KEY_ID, S3_SECRET, Rule

import kafka_tiered_source as kts
from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.testing import EmbeddedCluster

pytestmark = [pytest.mark.spark]

ISOLATION = ["read_uncommitted", "read_committed"]
ALL_TOPICS = "orders,payments,compacted"
GRANTS = "location_grants_total"
BROKER_REMOTE_BYTES = "remote_fetch_bytes_total"


@pytest.fixture(scope="module")
def sp(spark):
    kts.register(spark)     # the package's register: the tasks' metrics reach this driver
    return spark


def rows_in(partitions, committed: bool) -> int:
    return sum(len(expected_rows(t, p, committed)) for t, p in partitions)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Every fixture partition imported and tiered (the last segment of each stays local, so
    each read also has a broker tail), plus an empty topic.  64 KiB segments so the topics the
    tests produce themselves roll."""
    with file_tiered_cluster(tmp_path_factory.mktemp("spark-read"),
                             segment_bytes=64 * 1024) as c:
        c.create_topic("empty", partitions=2)
        yield c


def base_options(c, iso="read_uncommitted", **extra) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "includeHeaders": "true",
            "kafka.isolation.level": iso, "remote.storage.fetcher": "fsspec",
            "remote.storage.fsspec.url": f"file://{c.remote_dir}", **extra}


def broker_counter(c, name: str) -> float:
    return c.storage.metrics.get(name)


def assert_partitions_equal(got: dict, partitions, committed: bool) -> None:
    assert sorted(got) == sorted(partitions)
    for t, p in partitions:
        want = expected_rows(t, p, committed)
        assert got[(t, p)] == want, f"{t}-{p}: {first_difference(got[(t, p)], want)}"


# ---------------------------------------------------------------------------------------------
# the fixtures, every path


@pytest.mark.decoder
@pytest.mark.parametrize("iso", ISOLATION)
def test_fixture_partitions_read_directly_equal_expected(sp, cluster, iso):
    grants, broker_remote = broker_counter(cluster, GRANTS), broker_counter(cluster, BROKER_REMOTE_BYTES)
    df = load(sp, base_options(cluster, iso, subscribe=ALL_TOPICS))
    got = collect_rows(df)
    assert_partitions_equal(got, FIXTURE_PARTITIONS, iso == "read_committed")
    stats = kts.last_read_stats(sp).total()
    assert stats.records == rows_in(FIXTURE_PARTITIONS, iso == "read_committed")
    assert stats.remote_bytes > 0 and stats.fallbacks == 0
    # the tiered segments were read straight from storage: the broker granted locations and
    # read no remote bytes on anyone's behalf
    assert broker_counter(cluster, GRANTS) > grants
    assert broker_counter(cluster, BROKER_REMOTE_BYTES) == broker_remote


@pytest.mark.decoder
@pytest.mark.parametrize("iso", ISOLATION)
def test_broker_only_read_equals_expected(sp, cluster, iso):
    grants, broker_remote = broker_counter(cluster, GRANTS), broker_counter(cluster, BROKER_REMOTE_BYTES)
    df = load(sp, base_options(cluster, iso, subscribe=ALL_TOPICS, **{"fetch.remote.enabled": "false"}))
    got = collect_rows(df)
    assert_partitions_equal(got, FIXTURE_PARTITIONS, iso == "read_committed")
    stats = kts.last_read_stats(sp).total()
    assert stats.remote_bytes == 0 and stats.broker_bytes > 0
    assert broker_counter(cluster, GRANTS) == grants
    assert broker_counter(cluster, BROKER_REMOTE_BYTES) > broker_remote


@pytest.mark.parametrize("iso", ISOLATION)
def test_kafka_python_consumer_sees_the_same_rows(cluster, iso):
    committed = iso == "read_committed"
    for t, p in FIXTURE_PARTITIONS:
        rows = consumer_rows(consume_kafka_python(cluster.bootstrap_servers, t, p,
                                                  read_committed=committed))
        want = expected_rows(t, p, committed)
        assert rows == want, f"{t}-{p}: {first_difference(rows, want)}"


@pytest.mark.decoder
@pytest.mark.parametrize("iso", ISOLATION)
def test_storage_removed_mid_read_falls_back_to_broker(cluster, tmp_path, iso):
    """The reader's copy of the remote storage disappears after planning and after the first
    task was read: the remaining tiered ranges fail (object missing) and are fetched through
    the broker instead, with the same rows."""
    copy = tmp_path / "reader-view"
    shutil.copytree(cluster.remote_dir, copy)
    opts = ReadOptions.parse(base_options(cluster, iso, subscribe=ALL_TOPICS, **{
        "remote.storage.fsspec.url": f"file://{copy}",
        "partition.target.bytes": str(256 * 1024)}))
    plan = planning.plan(opts)
    remote_tasks = [t for t in plan.tasks if any(r in plan.remote_ranges for r in t.ranges)]
    assert len(remote_tasks) >= 2, f"want several tasks with tiered ranges, got {len(remote_tasks)}"
    first, rest = remote_tasks[0], [t for t in plan.tasks if t is not remote_tasks[0]]

    reader = TaskReader(opts)
    try:
        batches = list(reader.read(first))
        before = reader.metrics.snapshot().total()
        assert before.fallbacks == 0 and before.remote_bytes > 0
        shutil.rmtree(copy)
        for task in rest:
            batches += list(reader.read(task))
    finally:
        reader.close()
    stats = reader.metrics.snapshot().total()
    assert stats.fallbacks > 0
    assert stats.fallback_bytes > 0
    assert_partitions_equal(arrow_rows(batches), FIXTURE_PARTITIONS, iso == "read_committed")


# ---------------------------------------------------------------------------------------------
# options and bounds


@pytest.mark.parametrize("extra, option", [
    ({"endingOffsets": "earliest"}, "endingOffsets"),
    ({"startingTimestamp": "yesterday"}, "startingTimestamp"),
    ({"fetch.remote.concurrency": "0"}, "fetch.remote.concurrency"),
    ({"remote.storage.fetcher": "ftp"}, "remote.storage.fetcher"),
    ({"maxRecordsPerPartition": "-3"}, "maxRecordsPerPartition"),
    ({"startingOffsets": '{"orders":{"0":-7}}'}, "startingOffsets"),
    ({"kafka.enable.auto.commit": "true"}, "enable.auto.commit"),
])
def test_option_errors_surface_at_load_naming_the_option(sp, cluster, extra, option):
    with pytest.raises(PySparkException) as info:
        load(sp, base_options(cluster, subscribe="orders", **extra))
    assert option in str(info.value)


def _first_at_or_after(rows, ts):
    """Kafka ListOffsets by timestamp: the first offset whose timestamp is >= ts."""
    hits = [r["offset"] for r in rows if r["timestamp"] >= ts]
    return min(hits) if hits else None


def test_starting_and_ending_timestamp(sp, cluster):
    t1, t2 = 1_700_000_012_000, 1_700_000_019_000
    partitions = [tp for tp in FIXTURE_PARTITIONS if tp[0] in ("orders", "compacted")]
    df = load(sp, base_options(cluster, subscribe="orders,compacted",
                               startingTimestamp=str(t1), endingTimestamp=str(t2)))
    got = collect_rows(df)
    for t, p in partitions:
        rows = expected_rows(t, p, False)
        start, end = _first_at_or_after(rows, t1), _first_at_or_after(rows, t2)
        assert start is not None and end is not None and start < end
        want = [r for r in rows if start <= r["offset"] < end]
        assert got.get((t, p), []) == want, f"{t}-{p}: {first_difference(got.get((t, p), []), want)}"
    assert sorted(got) == partitions


def test_min_partitions_splits_and_keeps_rows(sp, cluster):
    df = load(sp, base_options(cluster, subscribe="orders", minPartitions="6"))
    assert df.rdd.getNumPartitions() >= 6
    got = collect_rows(df)
    assert_partitions_equal(got, [tp for tp in FIXTURE_PARTITIONS if tp[0] == "orders"], False)


def test_empty_topic_gives_no_rows_with_the_kafka_schema(sp, cluster):
    df = load(sp, base_options(cluster, subscribe="empty"))
    reference = load(sp, base_options(cluster, subscribe="orders"))
    assert isinstance(df.schema, StructType) and df.schema == reference.schema
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType", "headers"]
    assert df.collect() == []


@pytest.mark.decoder
def test_partly_tiered_topic_reads_remote_and_broker_ranges(sp, cluster):
    import kafka
    topic = "fresh"
    cluster.create_topic(topic, partitions=1)
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5,
                                   batch_size=16 * 1024)
    sent = {}

    def produce(first, count):
        futures = [(i, producer.send(topic, key=b"k%06d" % i, value=(b"v%06d-" % i) * 12,
                                     partition=0, headers=[("n", b"%d" % i)] if i % 3 else None))
                   for i in range(first, first + count)]
        producer.flush()
        for i, f in futures:
            sent[f.get(timeout=30).offset] = i

    try:
        produce(0, 3000)
        assert cluster.tier(topic), "the produced records did not fill a segment"
        produce(3000, 700)
    finally:
        producer.close()
    opts = base_options(cluster, subscribe=topic)
    plan = planning.plan(ReadOptions.parse(opts))
    assert plan.remote_ranges and plan.broker_ranges
    assert max(r.offset_end for r in plan.remote_ranges) <= min(r.offset_start for r in plan.broker_ranges)

    got = collect_rows(load(sp, opts))[(topic, 0)]
    assert [r["offset"] for r in got] == sorted(sent)
    want_values = [b64((b"v%06d-" % sent[o]) * 12) for o in sorted(sent)]
    assert [r["value"] for r in got] == want_values
    assert [r["key"] for r in got] == [b64(b"k%06d" % sent[o]) for o in sorted(sent)]
    assert [r["headers"] for r in got] == [[["n", b64(b"%d" % sent[o])]] if sent[o] % 3 else None
                                           for o in sorted(sent)]


# ---------------------------------------------------------------------------------------------
# S3 (moto): the s3 fetcher, presigned URLs, and storage failing during a Spark job

S3_PARTITIONS = [("orders", 0), ("payments", 0)]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_tiered_cluster(tmp_path_factory.mktemp("spark-s3"), "tiered", S3_PARTITIONS, presign=True) as c:
        yield c


def s3_options(c, iso, endpoint=None, **extra) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "includeHeaders": "true",
            "kafka.isolation.level": iso, "subscribe": "orders,payments",
            "remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "tiered",
            "remote.storage.prefix": "kt/", "remote.storage.s3.endpoint": endpoint or c.moto.endpoint,
            "remote.storage.s3.region": "us-east-1", "remote.storage.s3.access.key.id": S3_KEY_ID,
            "remote.storage.s3.secret.access.key": S3_SECRET, **extra}


@pytest.mark.parametrize("iso", ISOLATION)
def test_s3_fetcher_reads_directly(sp, s3, iso):
    s3.proxy.reset()
    grants, broker_remote = broker_counter(s3, GRANTS), broker_counter(s3, BROKER_REMOTE_BYTES)
    got = collect_rows(load(sp, s3_options(s3, iso, endpoint=s3.proxy.endpoint)))
    assert_partitions_equal(got, S3_PARTITIONS, iso == "read_committed")
    assert s3.proxy.gets_for(".log") > 0
    assert broker_counter(s3, GRANTS) > grants
    assert broker_counter(s3, BROKER_REMOTE_BYTES) == broker_remote


def test_presigned_urls_read_directly(sp, s3):
    grants, broker_remote = broker_counter(s3, GRANTS), broker_counter(s3, BROKER_REMOTE_BYTES)
    opts = {"kafka.bootstrap.servers": s3.bootstrap_servers, "includeHeaders": "true",
            "subscribe": "orders,payments", "kafka.isolation.level": "read_committed",
            "remote.storage.fetcher": "presigned"}
    plan = planning.plan(ReadOptions.parse(opts))
    assert plan.remote_ranges and all(r.segment.presigned_url for r in plan.remote_ranges)
    got = collect_rows(load(sp, opts))
    assert_partitions_equal(got, S3_PARTITIONS, True)
    assert broker_counter(s3, GRANTS) > grants
    assert broker_counter(s3, BROKER_REMOTE_BYTES) == broker_remote


def test_with_no_fetcher_configured_presigned_urls_are_used_and_rows_are_the_same(sp, s3):
    """Switching from Spark's "kafka" format by changing one word (no storage options): the
    segments the broker hands out presigned URLs for are read directly."""
    opts = {"kafka.bootstrap.servers": s3.bootstrap_servers, "includeHeaders": "true",
            "subscribe": "orders,payments", "kafka.isolation.level": "read_committed"}
    plan = planning.plan(ReadOptions.parse(opts))
    assert plan.remote_ranges and all(r.segment.presigned_url for r in plan.remote_ranges)
    got = collect_rows(load(sp, opts))
    assert_partitions_equal(got, S3_PARTITIONS, True)
    stats = kts.last_read_stats(sp).total()
    assert stats.remote_requests > 0 and stats.fallbacks == 0


def test_with_no_fetcher_and_no_presigned_urls_everything_comes_through_the_broker(tmp_path):
    with EmbeddedCluster(str(tmp_path / "data"), remote_storage=f"file://{tmp_path}/remote") as c:
        c.import_log_dir("orders", 1, fixture_segments("orders", 1))
        assert c.tier()
        options = ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers,
                                     "subscribe": "orders"})
        plan = planning.plan(options)
        assert not plan.remote_ranges and plan.broker_ranges
        reader = TaskReader(options)
        rows = sum(b.num_rows for t in plan.tasks for b in reader.read(t))
        reader.close()
    assert rows == len(fixture_expected("orders", 1, False))
    assert reader.metrics.snapshot().total().remote_requests == 0


def test_s3_failing_during_the_spark_job_falls_back(sp, s3):
    """The object store (behind a proxy) serves the first segment GET of the job and then
    answers 503 to every later one: those ranges fall back to the broker, rows unchanged."""
    s3.proxy.reset()
    passed = s3.proxy.add(Rule(match=".log", times=1))
    failing = s3.proxy.add(Rule(match=".log", status=503, body=b"<Error><Code>SlowDown</Code></Error>"))
    broker_remote = broker_counter(s3, BROKER_REMOTE_BYTES)
    try:
        got = collect_rows(load(sp, s3_options(s3, "read_committed", endpoint=s3.proxy.endpoint, **{
            "partition.target.bytes": str(256 * 1024), "fetch.remote.retry.max.attempts": "2",
            "fetch.remote.retry.backoff.ms": "10"})))
    finally:
        s3.proxy.reset()
    assert_partitions_equal(got, S3_PARTITIONS, True)
    assert passed.hits == 1 and failing.hits > 0
    stats = kts.last_read_stats(sp).total()
    assert stats.fallbacks > 0 and stats.fallback_bytes > 0
    assert stats.records == rows_in(S3_PARTITIONS, True)
    assert broker_counter(s3, BROKER_REMOTE_BYTES) > broker_remote
