"""Tiered copies whose tails compaction emptied (KAFKA-15388's shape), read on every path.

One partition, on today's Kafka and on a KIP-1248 broker, made the way such topics come about:
keyed records on a ``cleanup.policy=compact`` topic, one LogCleaner round, then the topic
switched to ``delete`` and tiered.  Four segments, each ending with a batch whose keys the next
segment's first batch repeats, so the round leaves the first three copies with a tail that holds
no record (the fourth keeps its last batch: the round's last, LogCleaner keeps it).  An unclean
election then cuts the lineage at the fourth copy's base: the third copy becomes the last one on
the lineage, and no copy follows its tail.  So there is a compacted tail in the first copy, in a
middle one, and in the last one, where Kafka's remote read answers nothing (RemoteLogManager.read:
empty records, no error).  New records follow, locally; a transaction stays open at the end.

What every reader must return is stated from how the data was made (``EXPECTED``), never taken
from a read.
"""
from __future__ import annotations

import json
import threading
import time

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker_fixtures import consume_confluent, consume_kafka_python, today_and_kip1248
from histories import rows_of
from spark_helpers import read_tasks

import kafka_tiered_source as kts
from kafka_tiered_source import planning
from kafka_tiered_source.errors import BrokerError, NoRecordsError
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.planning.filters import Predicate, RowFilter
from kafka_tiered_source.planning.stream import range_options
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source.records.header import iter_headers

TOPIC = "tails"
PID = 7

# (first offset, keys) of each produced batch; a key's value is b"v<offset>".  The keys of batches
# [4..6], [14..16] and [24..26] come again in the next segment's first batch.
SEGMENTS = [
    [(0, "a0 a1 a2 a3"), (4, "x0 x1 x2")],
    [(7, "x0 x1 x2"), (10, "b0 b1 b2 b3"), (14, "z0 z1 z2")],
    [(17, "z0 z1 z2"), (20, "c0 c1 c2 c3"), (24, "w0 w1 w2")],
    [(27, "w0 w1 w2"), (30, "d0 d1 d2")],
]
CUT = 27                 # the unclean election's new log end: the fourth copy's base
LATER = 5                # records 27..31 of the new lineage, keyless
TXN = 2                  # an open transaction's records 32..33
KEPT = [o for o in range(CUT) if not 4 <= o <= 6 and not 14 <= o <= 16 and not 24 <= o <= 26]
ISOLATION = ["read_uncommitted", "read_committed"]


def _batch(base: int, keys: list[bytes | None], values: list[bytes], *, pid: int = -1, seq: int = -1) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=pid >= 0, producer_id=pid,
                                  producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, batch_size=1 << 20)
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        b.append(i, timestamp=1_700_000_000_000 + base + i, key=k, value=v, headers=[])
    return bytes(b.build())


def value(offset: int) -> bytes:
    return b"v%d" % offset


def key(offset: int) -> bytes | None:
    if offset >= CUT:
        return None          # the new lineage's records are keyless
    for seg in SEGMENTS:
        for base, keys in seg:
            names = keys.split()
            if base <= offset < base + len(names):
                return names[offset - base].encode()
    return None


def expected(committed: bool, start: int = 0, end: int | None = None) -> list[tuple]:
    last = CUT + LATER + (0 if committed else TXN)
    if end is not None:
        last = min(last, end)
    return [(o, key(o), value(o)) for o in [*KEPT, *range(CUT, CUT + LATER + TXN)] if start <= o < last]


def make(c) -> None:
    c.create_topic(TOPIC)
    replica = c.add_replica(TOPIC, 0, segment_bytes=1 << 20)
    for seg in SEGMENTS:
        for base, keys in seg:
            names = [k.encode() for k in keys.split()]
            assert c.append(TOPIC, 0, _batch(base, names, [value(base + i) for i in range(len(names))])).base_offset == base
        c.roll(TOPIC, 0)
        c.roll(TOPIC, 0, replica)
    assert c.compact(TOPIC, 0) == 9                       # the three tails
    part = c.storage.partition(TOPIC, 0)
    assert [s.base_offset for s in part.log.segments] == [0, 7, 17, 27, 33]    # none grouped (small segment.bytes)
    assert [m.end_offset for m in c.tier(TOPIC)] == [6, 16, 26, 32]
    c.unclean_leader_election(TOPIC, 0, CUT, replica=replica)
    base = c.append(TOPIC, 0, _batch(CUT, [None] * LATER, [value(CUT + i) for i in range(LATER)])).base_offset
    assert base == CUT
    c.append(TOPIC, 0, _batch(CUT + LATER, [None] * TXN, [value(CUT + LATER + i) for i in range(TXN)], pid=PID, seq=0))


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    base = tmp_path_factory.mktemp("tails")
    with today_and_kip1248(base, 400, 1, ("metadata-topic", "listing")) as (today, kip):
        for c in (today, kip):
            make(c)
        yield {"today": today, "kip": kip}


def opts(c, iso="read_uncommitted", **extra) -> ReadOptions:
    return ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": TOPIC,
                              "kafka.isolation.level": iso, "remote.storage.uri": f"file://{c.remote_dir}",
                              "remote.storage.layout": c.layout, "kafkaConsumer.pollTimeoutMs": "20000",
                              **extra})


def read(o, row_filter=None) -> list[tuple]:
    plan = planning.plan(o, row_filter)
    batches, _ = read_tasks(o, plan.tasks)
    return rows_of(batches, TOPIC)


# --- the broker's answers ---------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["today", "kip"])
def test_the_broker_answers_a_compacted_tail_as_remote_log_manager_read_does(clusters, kind):
    c = clusters[kind]
    with BrokerClient({"bootstrap.servers": c.bootstrap_servers}) as client:
        def first_offsets(offset):
            r = client.fetch(TOPIC, 0, offset, max_wait_ms=0)
            return [h.base_offset for h in iter_headers(r.records or b"")], r.partition
        # a tail in the first and a middle copy: the next copy's first batch is served
        assert first_offsets(5)[0][:1] == [7]
        assert first_offsets(15)[0][:1] == [17]
        # the last copy on the lineage: nothing after the tail, so empty records and no error,
        # below the high watermark; the fourth copy (another lineage's now) is never served
        got, part = first_offsets(25)
        assert got == [] and part.error_code == 0 and part.high_watermark == CUT + LATER + TXN
        r = client.fetch(TOPIC, 0, 20, max_wait_ms=0)
        assert max(h.last_offset for h in iter_headers(r.records)) < CUT
        if kind == "kip":
            # KIP-1248 answers point at the same bytes: the next copy from its first batch; an
            # empty range with the cut as the end where nothing would be served
            loc = client.fetch(TOPIC, 0, 5, request_remote_location=True, max_wait_ms=0).partition
            assert (loc.remote_log_segment_base_offset, loc.remote_log_segment_start_position) == (7, 0)
            loc = client.fetch(TOPIC, 0, 25, request_remote_location=True, max_wait_ms=0).partition
            assert loc.remote_log_segment_start_position == loc.remote_log_segment_end_position
            assert (loc.remote_log_segment_base_offset, loc.remote_log_segment_end_offset) == (17, CUT - 1)


def test_kafka_python_moves_past_a_tail_the_next_copy_follows_and_stalls_where_none_does(clusters):
    """As against Kafka: kafka-python's position goes past the first two tails (the broker serves
    the next copy's batches) and stays at the third (empty answers); past it, it reads on.
    librdkafka stalls there too."""
    c = clusters["today"]
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match="position 24 of tails-0 did not reach 34"):
        consume_kafka_python(c.bootstrap_servers, TOPIC, 0, timeout_s=3, fetch_max_wait_ms=100)
    assert time.monotonic() - t0 < 30
    got = consume_kafka_python(c.bootstrap_servers, TOPIC, 0, start=0, end=24, timeout_s=10)
    assert [r["offset"] for r in got] == [o for o, _, _ in expected(False, end=24)]
    after = consume_kafka_python(c.bootstrap_servers, TOPIC, 0, start=CUT, timeout_s=10)
    assert [r["offset"] for r in after] == [o for o, _, _ in expected(False, start=CUT)]
    # librdkafka (confluent-kafka) too: the records before the last tail, then nothing
    with pytest.raises(AssertionError, match=f"no end of tails-0 in 2 s \\({len(expected(False, end=24))} records"):
        consume_confluent(c.bootstrap_servers, TOPIC, 0, timeout_s=2)


# --- every read path --------------------------------------------------------------------------
PATHS = {
    "direct": {},
    "brokers": {"fetch.remote.enabled": "false"},
    "fallback=always": {"fetch.remote.fallback": "always"},
}


@pytest.mark.decoder        # empty batches, gaps inside and between batches: both decoders
@pytest.mark.parametrize("iso", ISOLATION)
@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("kind", ["today", "kip"])
def test_every_path_reads_the_compacted_copies_exactly(clusters, kind, path, iso):
    c = clusters[kind]
    want = expected(iso == "read_committed")
    for locator in c.locators:
        got = read(opts(c, iso, **{"remote.segment.locator": locator, **PATHS[path]}))
        assert got == want, (locator, path)


@pytest.mark.parametrize("iso", ISOLATION)
def test_direct_reads_off_on_a_kip1248_broker_without_the_metadata_topic(clusters, iso):
    """The plan learns the tiered spans from the KIP-1248 walk (its locations go unused)."""
    c = clusters["kip"]
    o = opts(c, iso, **{"fetch.remote.enabled": "false", "remote.log.metadata.topic": "no-such-topic"})
    plan = planning.plan(o)
    assert not plan.remote_ranges and any(r.tiered for r in plan.broker_ranges)
    assert rows_of(read_tasks(o, plan.tasks)[0], TOPIC) == expected(iso == "read_committed")


@pytest.mark.parametrize("kind", ["today", "kip"])
def test_ranges_that_start_or_end_inside_a_tail(clusters, kind):
    """A micro-batch of a stream is planned as a batch read of its range (planning/stream.py):
    ranges starting and ending in each tail, direct and through the brokers."""
    c = clusters[kind]
    for start, end in [(5, 15), (4, 7), (15, 25), (24, 27), (25, 30), (5, 26)]:
        for extra in ({}, {"fetch.remote.enabled": "false"}):
            o = range_options(opts(c, **extra), {(TOPIC, 0): start}, {(TOPIC, 0): end})
            assert read(o) == expected(False, start, end), (start, end, extra)


@pytest.mark.parametrize("kind", ["today", "kip"])
def test_scan_and_pushed_down_filters(clusters, kind):
    c = clusters[kind]
    base = {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": TOPIC,
            "remote.storage.uri": f"file://{c.remote_dir}", "remote.storage.layout": c.layout}
    table = kts.scan(base).read_all()
    assert sorted(table.column("offset").to_pylist()) == [o for o, _, _ in expected(False)]
    table = kts.scan(base, where="offset >= 5 AND offset < 26").read_all()
    assert sorted(table.column("offset").to_pylist()) == [o for o, _, _ in expected(False, 5, 26)]
    flt = RowFilter((Predicate("offset", ">=", 14), Predicate("offset", "<", 30)))
    assert read(opts(c, **{"fetch.remote.enabled": "false"}), flt) == expected(False, 14, 30)


def test_no_plan_knowledge_fails_after_the_poll_timeout_without_spinning(clusters):
    """Through the brokers with nothing located (direct reads off, and no metadata topic to
    learn the copies from: today's Kafka without the topic-based metadata manager), nothing
    proves the last tail empty: the reader asks again, backing off, and fails after
    kafkaConsumer.pollTimeoutMs, naming the partition, the offset and why."""
    c = clusters["today"]
    o = opts(c, **{"fetch.remote.enabled": "false", "remote.log.metadata.topic": "no-such-topic",
                   "kafkaConsumer.pollTimeoutMs": "1500", "startingOffsets": json.dumps({TOPIC: {"0": 20}})})
    plan = planning.plan(o)
    from kafka_tiered_source.executor import TaskReader
    reader = TaskReader(o)
    fetches = []
    fetch = reader.client.fetch
    reader.client.fetch = lambda *a, **k: fetches.append(a[2]) or fetch(*a, **k)    # count, then fetch
    t0 = time.monotonic()
    with pytest.raises(NoRecordsError) as err:
        [b for t in plan.tasks for b in reader.read(t)]
    elapsed = time.monotonic() - t0
    reader.close()
    assert err.value.offset == 24 and err.value.topic == TOPIC and err.value.partition == 0
    assert "offset 24 with no records" in str(err.value) and "kafkaConsumer.pollTimeoutMs" in str(err.value)
    assert "compacted tail" in str(err.value)
    assert 1.5 <= elapsed < 15
    assert fetches.count(24) <= 12, fetches          # backing off (retry.backoff.ms doubling), not spinning


# --- proving a tail empty: remote reads that outlast remote.fetch.max.wait.ms ------------------
SLOW_WAIT_MS = 200       # the slow cluster's remote.fetch.max.wait.ms


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    """Today's Kafka with remote.fetch.max.wait.ms=200 (tests lift its slow reads sooner)."""
    from kafka_tiered_source.testing import EmbeddedCluster
    base = tmp_path_factory.mktemp("slow-tails")
    with EmbeddedCluster(str(base / "b"), remote_storage=f"file://{base}/remote", kip1248=False,
                         remote_log_metadata_partitions=1, segment_bytes=400,
                         remote_fetch_max_wait_ms=SLOW_WAIT_MS) as c:
        c.remote_dir, c.layout = f"{base}/remote", "aiven"
        make(c)
        yield c


def brokers_only(c, storage: bool, **extra) -> ReadOptions:
    """Direct reads off; with ``storage`` the reader may still read the copies (the storage
    proof), without it only the answers' timing can prove a tail empty."""
    o = {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": TOPIC, "fetch.remote.enabled": "false",
         "kafkaConsumer.pollTimeoutMs": "20000", **extra}
    if storage:
        o.update({"remote.storage.uri": f"file://{c.remote_dir}", "remote.storage.layout": c.layout})
    return ReadOptions.parse(o)


def test_the_broker_answers_a_remote_read_past_remote_fetch_max_wait_ms_with_nothing(slow):
    """As DelayedRemoteFetch expires: empty records, no error, the high watermark, after about
    remote.fetch.max.wait.ms; local reads never wait so; DescribeConfigs of the broker says the
    wait; a fetch fenced with another leader epoch is refused (KIP-320)."""
    lift = slow.slow_remote_reads(1.0)
    try:
        with BrokerClient({"bootstrap.servers": slow.bootstrap_servers, "retries": "0"}) as client:
            assert client.describe_broker_config(0, ["remote.fetch.max.wait.ms"]) == {
                "remote.fetch.max.wait.ms": str(SLOW_WAIT_MS)}
            t0 = time.monotonic()
            r = client.fetch(TOPIC, 0, 0, fenced=True)
            took = time.monotonic() - t0
            assert (bytes(r.records or b""), r.partition.error_code) == (b"", 0)
            assert r.partition.high_watermark == CUT + LATER + TXN and r.leader_epoch >= 0 and r.node_id == 0
            assert SLOW_WAIT_MS / 1000 <= took < 0.9, took
            r = client.fetch(TOPIC, 0, CUT, fenced=True)           # local: served at once
            assert [h.base_offset for h in iter_headers(r.records)][:1] == [CUT]
            with pytest.raises(BrokerError, match="FENCED_LEADER_EPOCH"):
                client.fetch(TOPIC, 0, CUT, current_leader_epoch=r.leader_epoch - 1)
    finally:
        lift()


@pytest.mark.parametrize("storage", [False, True], ids=["timing", "storage"])
def test_remote_reads_that_time_out_lose_no_record(slow, storage):
    """Before the reader proved tails empty, two expired remote reads in a row inside a copy's
    span made it skip to the span's end.  Every remote read now outlasts remote.fetch.max.wait.ms
    until the store gets fast: the reader asks again (nothing is fast, and the copy's bytes, when
    it may read them, hold batches there), then reads every record once the reads are fast."""
    lift = slow.slow_remote_reads(5.0)
    timer = threading.Timer(0.8, lift)
    timer.start()
    try:
        assert read(brokers_only(slow, storage)) == expected(False)
    finally:
        timer.cancel()
        lift()


@pytest.mark.parametrize("storage", [False, True], ids=["timing", "storage"])
def test_remote_reads_that_never_get_fast_fail_by_name(slow, storage):
    o = brokers_only(slow, storage, **{"kafkaConsumer.pollTimeoutMs": "1200"})
    lift = slow.slow_remote_reads(5.0)
    try:
        with pytest.raises(NoRecordsError) as err:
            read(o)
    finally:
        lift()
    assert (err.value.topic, err.value.partition, err.value.offset) == (TOPIC, 0, 0)
    text = str(err.value)
    assert "nothing proved offsets [0, 7) empty" in text and "remote.fetch.max.wait.ms" in text
    if storage:
        assert "holds a batch at or after offset 0" in text
    else:
        assert "could not be read (no remote.storage.* options" in text and "fast enough" in text


@pytest.mark.parametrize("path,proof", [("brokers", "timing"), ("brokers", "storage"), ("fallback=always", "storage")])
@pytest.mark.parametrize("kind", ["today", "kip"])
def test_a_compacted_tail_reads_through_with_either_proof_alone(clusters, kind, path, proof, caplog):
    """Timing alone (the reader cannot read storage): fast empty answers.  Storage alone
    (fetch.max.wait.ms=0 lets a broker answer at once, so timing proves nothing): the copy's
    bytes, through the brokers and on a fallback (its tiered slice's copy).  Either way the last
    copy's tail, which no later copy follows, is read through."""
    c = clusters[kind]
    extra = {"fetch.remote.fallback": "always", "fetch.remote.enabled": "true"} if path != "brokers" else {}
    if proof == "storage":
        extra["kafka.fetch.max.wait.ms"] = "0"
    caplog.set_level("INFO", logger="kafka_tiered_source.executor.reader")
    assert read(brokers_only(c, proof == "storage", **extra)) == expected(False)
    proven = [r.getMessage() for r in caplog.records if "no record at offsets [24," in r.getMessage()]
    assert proven and all(("read from storage" in m) == (proof == "storage") for m in proven), proven


# --- Spark ----------------------------------------------------------------------------------------
@pytest.mark.spark
def test_spark_reads_the_compacted_copies_exactly(clusters, spark):
    """Where Spark's own Kafka source times out ("Cannot fetch record for offset"), the
    kafka-tiered format reads the records: with direct reads on and off, on a KIP-1248 broker and
    on today's Kafka, in both isolation levels (the eight reads in one Spark job)."""
    from pyspark.sql import functions as F
    from spark_helpers import load
    cases = [(kind, direct, iso) for kind in sorted(clusters) for direct in ("true", "false") for iso in ISOLATION]
    frames = []
    for n, (kind, direct, iso) in enumerate(cases):
        c = clusters[kind]
        df = load(spark, {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": TOPIC,
                          "kafka.isolation.level": iso, "fetch.remote.enabled": direct,
                          "remote.storage.uri": f"file://{c.remote_dir}", "remote.storage.layout": c.layout,
                          "kafkaConsumer.pollTimeoutMs": "20000"})
        frames.append(df.select(F.lit(n).alias("case"), "partition", "offset", "key", "value"))
    union = frames[0]
    for df in frames[1:]:
        union = union.unionByName(df)
    got: dict = {n: [] for n in range(len(cases))}
    for r in union.collect():
        got[r.case].append((r.offset, None if r.key is None else bytes(r.key), bytes(r.value)))
    for n, case in enumerate(cases):
        assert sorted(got[n]) == expected(case[2] == "read_committed"), case


@pytest.mark.spark
def test_a_stream_reads_the_compacted_copies_exactly(clusters, spark, tmp_path):
    """readStream with Trigger.AvailableNow through the brokers on today's Kafka, micro-batches
    of 25 offsets: the edge between the two falls inside the last tail."""
    kts.register(spark)
    c = clusters["today"]
    df = (spark.readStream.format("kafka-tiered")
          .options(**{"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": TOPIC,
                      "startingOffsets": "earliest", "maxOffsetsPerTrigger": "25", "fetch.remote.enabled": "false",
                      "remote.storage.uri": f"file://{c.remote_dir}", "remote.storage.layout": c.layout,
                      "kafkaConsumer.pollTimeoutMs": "20000"}).load())
    q = (df.writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()
    got = sorted((r.offset, None if r.key is None else bytes(r.key), bytes(r.value))
                 for r in spark.read.parquet(str(tmp_path / "out")).select("offset", "key", "value").collect())
    assert got == expected(False)
