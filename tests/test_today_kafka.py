"""Direct reads on the Kafka that exists today: the embedded broker as Apache Kafka 4.1
(``kip1248=False``: location tags ignored, tiered data served through the broker) writing
``__remote_log_metadata`` as TopicBasedRemoteLogMetadataManager does, and the reader finding
the tiered segments through that topic, reading them directly and only the untiered tail
through the broker."""
from __future__ import annotations

import logging
import struct

import pytest

from broker_fixtures import FIXTURE_PARTITIONS, file_tiered_cluster, s3_tiered_cluster
from spark_helpers import arrow_rows, expected_rows, first_difference, read_tasks
from test_remote_log_metadata import java_objects_hash_of, read_frame
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kafka_tiered_source import planning
from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.ids import uuid_from_str
from kafka_tiered_source.model import EARLIEST_LOCAL, LATEST_TIERED
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.protocol import remote_log_metadata as rlm
from kafka_tiered_source.protocol.client import BrokerClient


ISOLATION = ["read_uncommitted", "read_committed"]
ALL_TOPICS = "orders,payments,compacted"
BROKER_REMOTE_BYTES = "remote_fetch_bytes_total"


@pytest.fixture(scope="module")
def today(tmp_path_factory):
    """Every fixture partition imported and tiered on a broker that is today's Kafka."""
    with file_tiered_cluster(tmp_path_factory.mktemp("today"), kip1248=False,
                             remote_log_metadata_partitions=7) as c:
        yield c


def options(c, iso, **extra) -> ReadOptions:
    return ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": ALL_TOPICS,
                              "includeHeaders": "true", "kafka.isolation.level": iso,
                              "remote.storage.uri": f"file://{c.remote_dir}", **extra})


def assert_fixture_rows(batches, committed: bool):
    got = arrow_rows(batches)
    assert sorted(got) == sorted(FIXTURE_PARTITIONS)
    for t, p in FIXTURE_PARTITIONS:
        want = expected_rows(t, p, committed)
        assert got[(t, p)] == want, f"{t}-{p}: {first_difference(got[(t, p)], want)}"


@pytest.mark.decoder
@pytest.mark.parametrize("locator", ["auto", "metadata-topic"])
@pytest.mark.parametrize("iso", ISOLATION)
def test_fixtures_are_read_directly_through_the_metadata_topic(today, locator, iso, caplog):
    before = today.storage.metrics.get(BROKER_REMOTE_BYTES)
    opts = options(today, iso, **{"remote.segment.locator": locator})
    with caplog.at_level(logging.INFO, logger="kafka_tiered_source.planning"):
        plan = planning.plan(opts)
    assert set(plan.locators.values()) == {"metadata-topic"}
    assert plan.remote_segments > 0 and plan.remote_ranges
    logged = [r.getMessage() for r in caplog.records if "located by" in r.getMessage()]
    assert len(logged) == 1 and "metadata-topic for compacted-0" in logged[0]
    batches, totals = read_tasks(opts, plan.tasks)
    assert_fixture_rows(batches, iso == "read_committed")
    assert totals.remote_requests > 0 and totals.fallbacks == 0 and totals.remote_bytes > 0
    # no tiered record byte went through the broker, planning included
    assert today.storage.metrics.get(BROKER_REMOTE_BYTES) == before


def test_the_estimate_names_the_locators(today):
    from kafka_tiered_source.planning.estimate import estimate_plan
    opts = options(today, "read_uncommitted")
    est = estimate_plan(planning.plan(opts), opts)
    assert est.locators == {"metadata-topic": len(FIXTURE_PARTITIONS)}
    assert "metadata-topic" in str(est)


def test_a_kip1248_locator_on_todays_kafka_is_an_error_naming_why(today):
    with pytest.raises(ConfigError) as info:
        planning.plan(options(today, "read_uncommitted", **{"remote.segment.locator": "kip1248"}))
    assert info.value.option == "remote.segment.locator"
    assert "ignores the KIP-1248 tags" in str(info.value)


def test_a_metadata_topic_that_cannot_be_read_is_an_error_naming_why(today):
    with pytest.raises(ConfigError) as info:
        planning.plan(options(today, "read_uncommitted", **{"remote.segment.locator": "metadata-topic",
                                                            "remote.log.metadata.topic": "__nope"}))
    assert "__nope" in str(info.value) and "UNKNOWN_TOPIC_OR_PARTITION" in str(info.value)


@pytest.mark.decoder
def test_listing_with_the_broker_reads_the_same_rows(today):
    opts = options(today, "read_committed", **{"remote.segment.locator": "listing"})
    plan = planning.plan(opts)
    assert set(plan.locators.values()) == {"listing"}
    batches, totals = read_tasks(opts, plan.tasks)
    assert_fixture_rows(batches, True)
    assert totals.fallbacks == 0


def test_metadata_records_are_kafkas_and_sit_where_kafkas_partitioner_puts_them(today):
    import kafka
    from kafka import TopicPartition as KTP
    n = today.storage.topic(rlm.TOPIC).partitions
    assert n == 7
    # read to the end offsets the broker reports (not until 3 s pass without a record); the
    # timeout only turns a record that never comes into the length assertion failing below
    consumer = kafka.KafkaConsumer(bootstrap_servers=today.bootstrap_servers, consumer_timeout_ms=30_000,
                                   enable_auto_commit=False)
    parts = [KTP(rlm.TOPIC, p) for p in range(n)]
    consumer.assign(parts)
    consumer.seek_to_beginning()
    end = consumer.end_offsets(parts)
    seen: dict = {}
    for msg in consumer:
        assert msg.key is None
        rec = read_frame(msg.value)                        # the test's own parser
        tid, partition = rec["tip"][1], rec["tip"][2]
        h = java_objects_hash_of(tid, partition)
        assert msg.partition == (kafka_python_murmur2(struct.pack(">i", h)) & 0x7FFFFFFF) % n
        seen.setdefault(rec.get("segment_id"), []).append((rec["api_key"], rec["state"]))
        if all(consumer.position(tp) >= end[tp] for tp in parts):
            break
    consumer.close()
    tiered = sum(len(today.remote_segments(t, p)) for t, p in FIXTURE_PARTITIONS)
    assert len(seen) == tiered
    assert all(events == [(0, rlm.COPY_SEGMENT_STARTED), (1, rlm.COPY_SEGMENT_FINISHED)]
               for events in seen.values())


def test_confluent_kafka_can_assign_and_read_the_metadata_topic(today):
    import confluent_kafka as ck
    import time
    # every partition read to its end (librdkafka's partition EOF), not until 5 s pass idle
    c = ck.Consumer({"bootstrap.servers": today.bootstrap_servers, "group.id": "rlmm-reader",
                     "enable.auto.commit": False, "enable.partition.eof": True, "log_level": 0})
    try:
        n = today.storage.topic(rlm.TOPIC).partitions
        c.list_topics(rlm.TOPIC, timeout=30)     # the leaders known before assign(): no 500 ms retry
        c.assign([ck.TopicPartition(rlm.TOPIC, p, ck.OFFSET_BEGINNING) for p in range(n)])
        values, at_end = [], set()
        deadline = time.monotonic() + 60
        while len(at_end) < n:
            assert time.monotonic() < deadline, f"no end of {sorted(set(range(n)) - at_end)}"
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error() and msg.error().code() == ck.KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
                continue
            assert not msg.error(), msg.error()
            values.append(msg.value())
    finally:
        c.close()
    records = [rlm.decode_record(v, where="test") for v in values]
    assert sum(isinstance(r, rlm.SegmentUpdate) for r in records) == \
        sum(len(today.remote_segments(t, p)) for t, p in FIXTURE_PARTITIONS)


def test_offset_for_leader_epoch_and_the_tiered_list_offsets(today):
    t, p = "orders", 0
    with BrokerClient({"bootstrap.servers": today.bootstrap_servers}) as client:
        listed = client.list_offsets(t, {p: EARLIEST_LOCAL})[p].offset
        tiered = client.list_offsets(t, {p: LATEST_TIERED})[p].offset
        segs = today.remote_segments(t, p)
        assert tiered == max(s.end_offset for s in segs)
        assert listed == tiered + 1          # local copies of tiered segments are gone
        latest = today.leader_epoch(t, p)
        answers = client.offset_for_leader_epoch(t, p, [latest, latest + 5])
    leo = today.offsets(t, p).log_end_offset
    # LeaderEpochFileCache.endOffsetFor: the latest epoch ends at the log end offset; an epoch
    # above every known one has no answer
    assert answers[latest] == (latest, leo) and answers[latest + 5] == (-1, -1)


# ---------------------------------------------------------------------------------------------
# a transaction that starts in a tiered segment and ends in the local log
def _txn_topic(c, topic):
    """Records of every codec (lz4, zstd, snappy, gzip, none) from confluent-kafka, with an
    aborted and a committed transaction, each crossing from a tiered segment into the local log."""
    import confluent_kafka as ck
    c.create_topic(topic, partitions=1)
    base = {"bootstrap.servers": c.bootstrap_servers, "linger.ms": 0, "log_level": 0}
    plain = ck.Producer({**base, "compression.type": "lz4"})
    for i in range(300):
        plain.produce(topic, value=b"plain-%d" % i, key=b"k%d" % i, partition=0)
    plain.flush()
    tx = ck.Producer({**base, "transactional.id": "crossing", "compression.type": "zstd"})
    tx.init_transactions()
    outcomes = []
    for n, commit in enumerate([False, True]):
        tx.begin_transaction()
        for i in range(50):
            tx.produce(topic, value=b"tx%d-%d" % (n, i), partition=0)
        tx.flush()
        c.roll(topic, 0)                      # the transaction's first records: a closed segment
        c.tier(topic)
        other = ck.Producer({**base, "compression.type": "snappy"})
        for i in range(20):
            other.produce(topic, value=b"between-%d-%d" % (n, i), partition=0)
        other.flush()
        for i in range(50):
            tx.produce(topic, value=b"tx%d-late-%d" % (n, i), partition=0)
        tx.flush()                            # all written before the marker (abort purges unsent)
        (tx.commit_transaction if commit else tx.abort_transaction)()
        outcomes.append(commit)
    for codec in ("gzip", "none"):
        tail = ck.Producer({**base, "compression.type": codec})
        for i in range(40):
            tail.produce(topic, value=b"tail-%s-%d" % (codec.encode(), i), partition=0)
        tail.flush()
    return outcomes


@pytest.mark.decoder
@pytest.mark.parametrize("iso", ISOLATION)
def test_read_committed_stays_exact_across_the_tiered_local_boundary(tmp_path, iso):
    from broker_fixtures import consume_kafka_python
    from spark_helpers import consumer_rows
    with file_tiered_cluster(tmp_path, kip1248=False, segment_bytes=1 << 20) as c:
        topic = "crossing"
        _txn_topic(c, topic)
        assert c.remote_segments(topic, 0), "the crossing transactions' first segments are tiered"
        opts = ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": topic,
                                  "includeHeaders": "true", "kafka.isolation.level": iso,
                                  "remote.storage.uri": f"file://{c.remote_dir}"})
        plan = planning.plan(opts)
        assert plan.locators[(topic, 0)] == "metadata-topic" and plan.broker_ranges
        before = c.storage.metrics.get(BROKER_REMOTE_BYTES)
        batches, totals = read_tasks(opts, plan.tasks)
        assert totals.fallbacks == 0 and c.storage.metrics.get(BROKER_REMOTE_BYTES) == before
        # what a real consumer reads through the broker (which reads the tiered part for it)
        want = consumer_rows(consume_kafka_python(c.bootstrap_servers, topic, 0,
                                                  read_committed=iso == "read_committed"))
        got = arrow_rows(batches)[(topic, 0)]
        assert got == want, first_difference(got, want)
        values = [r["value"] for r in got]
        import base64
        decoded = [base64.b64decode(v) for v in values]
        if iso == "read_committed":
            assert not any(v.startswith(b"tx0") for v in decoded)       # the aborted one
            assert sum(v.startswith(b"tx1") for v in decoded) == 100     # the committed one
        else:
            assert sum(v.startswith(b"tx0") for v in decoded) == 100


# ---------------------------------------------------------------------------------------------
# the lineage rule: an unclean re-upload
def test_an_off_lineage_copy_is_skipped_as_remote_log_manager_does(tmp_path):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    with file_tiered_cluster(tmp_path, kip1248=False, segment_bytes=1 << 20) as c:
        c.create_topic("epochs", partitions=1)
        import kafka
        producer = kafka.KafkaProducer(bootstrap_servers=c.bootstrap_servers)
        for i in range(100):
            producer.send("epochs", value=b"good-%d" % i, partition=0)
        producer.flush()
        c.bump_leader_epoch("epochs", 0)            # a new leader from offset 100
        for i in range(50):
            producer.send("epochs", value=b"later-%d" % i, partition=0)
        producer.flush()
        producer.close()
        c.roll("epochs", 0)
        c.tier("epochs")
        (live,) = c.remote_segments("epochs", 0)
        assert live.leader_epochs == {0: 0, 1: 100}
        # A replica that led epoch 2 (never on this partition's lineage) re-uploads offsets
        # 0-149 with other records, after the live copy: "the latest upload wins" would read it.
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                      batch_size=1 << 20)
        for i in range(150):
            b.append(i, timestamp=1_700_000_000_000, key=None, value=b"stale-%d" % i, headers=[])
        data = bytearray(b.build())
        struct.pack_into(">i", data, 12, 2)      # partitionLeaderEpoch (outside the CRC): epoch 2
        stale = c.upload_segment_copy("epochs", 0, bytes(data))
        assert (stale.base_offset, stale.end_offset) == (0, 149) and stale.leader_epochs == {2: 0}
        opts = ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "epochs",
                                  "remote.storage.uri": f"file://{c.remote_dir}",
                                  "remote.segment.locator": "metadata-topic"})
        plan = planning.plan(opts)
        assert {r.segment.segment_id for r in plan.remote_ranges} == {live.segment_id}
        batches, _ = read_tasks(opts, plan.tasks)
        import base64
        values = [base64.b64decode(r["value"]) for r in arrow_rows(batches)[("epochs", 0)]]
        assert values == [b"good-%d" % i for i in range(100)] + [b"later-%d" % i for i in range(50)]


def test_retention_writes_delete_events(tmp_path):
    with file_tiered_cluster(tmp_path, kip1248=False) as c:
        t, p = FIXTURE_PARTITIONS[0]
        segs = c.remote_segments(t, p)
        c.delete_records(t, p, segs[0].end_offset + 1)
        tid = uuid_from_str(c.topic(t).topic_id)
        mp = rlm.metadata_partition(tid, p, c.storage.topic(rlm.TOPIC).partitions)
        with BrokerClient({"bootstrap.servers": c.bootstrap_servers}) as client:
            res = client.fetch(rlm.TOPIC, mp, 0, max_bytes=1 << 20, partition_max_bytes=1 << 20)
        from kafka_tiered_source.records import decode
        values = decode(res.records, include_headers=False).column("value").to_pylist()
        states = [(read_frame(v)["api_key"], read_frame(v)["state"]) for v in values
                  if read_frame(v)["tip"][2] == p and read_frame(v).get("segment_id") == uuid_from_str(segs[0].segment_id)]
        assert states == [(0, rlm.COPY_SEGMENT_STARTED), (1, rlm.COPY_SEGMENT_FINISHED),
                          (1, rlm.DELETE_SEGMENT_STARTED), (1, rlm.DELETE_SEGMENT_FINISHED)]


@pytest.fixture(scope="module")
def today_s3(tmp_path_factory):
    """Today's Kafka tiering every fixture partition to a moto S3 server: one for both reads."""
    with s3_tiered_cluster(tmp_path_factory.mktemp("today-s3"), "today", FIXTURE_PARTITIONS,
                           kip1248=False) as c:
        yield c


@pytest.mark.slow
@pytest.mark.parametrize("iso", ISOLATION)
def test_on_s3_through_the_metadata_topic(today_s3, iso):
    from storage_servers import S3_KEY_ID, S3_SECRET
    c = today_s3
    opts = ReadOptions.parse({
        "kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": ALL_TOPICS,
        "includeHeaders": "true", "kafka.isolation.level": iso,
        "remote.storage.uri": "s3://today/kt", "remote.storage.s3.endpoint": c.moto.endpoint,
        "remote.storage.s3.region": "us-east-1", "remote.storage.s3.access.key.id": S3_KEY_ID,
        "remote.storage.s3.secret.access.key": S3_SECRET})
    before = c.storage.metrics.get(BROKER_REMOTE_BYTES)
    plan = planning.plan(opts)
    assert set(plan.locators.values()) == {"metadata-topic"}
    batches, totals = read_tasks(opts, plan.tasks)
    assert_fixture_rows(batches, iso == "read_committed")
    assert totals.remote_requests > 0 and totals.fallbacks == 0
    assert c.storage.metrics.get(BROKER_REMOTE_BYTES) == before
