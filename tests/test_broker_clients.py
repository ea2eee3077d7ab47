"""Third-party Kafka clients (kafka-python, confluent-kafka/librdkafka) against the embedded
broker: produce with every codec, consume before and after tiering, transactions, the Kafka
3.9.1 fixture partitions through broker fetches, restart, SASL/SCRAM, telemetry."""
from __future__ import annotations

import base64
import random

import pytest

from broker_fixtures import (  # noqa: F401  (pytest fixtures)
    CONSUMERS, FIXTURE_META, FIXTURE_PARTITIONS, cluster_factory, consume_confluent,
    consume_kafka_python, fixture_cluster, fixture_expected, tiered_cluster,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 400


def _records(tag: str):
    """Keys, values (some null / large) and headers, distinct per producer."""
    out = []
    for i in range(N):
        key = None if i % 17 == 0 else f"{tag}-k{i}".encode()
        # incompressible values, so every codec still rolls several segments
        value = None if i % 29 == 1 and key is not None else \
            f"{tag}-v{i}-".encode() + random.Random(f"{tag}{i}").randbytes(i % 300)
        headers = [("h", f"{i}".encode()), ("empty", b"")] if i % 5 == 0 else []
        out.append((key, value, headers, 1_700_000_000_000 + i))
    return out


def produce_kafka_python(bootstrap, topic, records, codec, **extra):
    import kafka

    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                            enable_idempotence=True, acks="all", linger_ms=5, batch_size=4096, **extra)
    try:
        for i, (k, v, h, ts) in enumerate(records):
            p.send(topic, key=k, value=v, headers=h, partition=0, timestamp_ms=ts)
            if i % 100 == 99:
                p.flush()
        p.flush()
    finally:
        p.close()


def produce_confluent(bootstrap, topic, records, codec, **extra):
    import confluent_kafka as ck

    errors = []
    p = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True,
                     "linger.ms": 5, "batch.size": 4096, **extra})
    for i, (k, v, h, ts) in enumerate(records):
        p.produce(topic, key=k, value=v, headers=h or None, partition=0, timestamp=ts,
                  on_delivery=lambda err, msg: err and errors.append(err))
        if i % 100 == 99:
            p.flush(30)
    assert p.flush(30) == 0
    assert not errors, errors


PRODUCERS = {"kafka-python": produce_kafka_python, "confluent-kafka": produce_confluent}


def expected_rows(records, base=0):
    import base64

    def b(v):
        return None if v is None else base64.b64encode(v).decode()
    return [{"offset": base + i, "timestamp": ts, "timestampType": 0, "key": b(k), "value": b(v),
             "headers": [[hk, b(hv)] for hk, hv in h]} for i, (k, v, h, ts) in enumerate(records)]


@pytest.fixture(scope="module")
def codec_cluster(tmp_path_factory):
    from kafka_tiered_source.testing import EmbeddedCluster

    base = tmp_path_factory.mktemp("codec-broker")
    with EmbeddedCluster(str(base / "data"), remote_storage=f"file://{base}/remote",
                         segment_bytes=16 * 1024) as c:
        yield c


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_produce_every_codec_then_consume_before_and_after_tiering(codec_cluster, producer, codec):
    c = codec_cluster
    topic = f"codec-{producer}-{codec}"
    c.create_topic(topic, 1)
    records = _records(topic)
    PRODUCERS[producer](c.bootstrap_servers, topic, records, codec)
    want = expected_rows(records)
    assert c.offsets(topic, 0).high_watermark == N
    for name, consume in CONSUMERS.items():
        assert consume(c.bootstrap_servers, topic, 0) == want, name
    c.roll(topic, 0)
    copied = c.tier(topic)
    o = c.offsets(topic, 0)
    assert len(copied) >= 2 and o.local_log_start_offset == N == o.highest_tiered_offset + 1
    for name, consume in CONSUMERS.items():
        assert consume(c.bootstrap_servers, topic, 0) == want, name
        # and from the middle of a tiered segment
        assert consume(c.bootstrap_servers, topic, 0, start=N // 2 + 1) == want[N // 2 + 1:], name
    assert c.storage.metrics.get("remote_fetch_requests_total", topic=topic) > 0


# ------------------------------------------------------------------------------ fixtures

@pytest.mark.parametrize("read_committed", [False, True], ids=["uncommitted", "committed"])
@pytest.mark.parametrize("client", list(CONSUMERS))
@pytest.mark.parametrize("tp", FIXTURE_PARTITIONS, ids=[f"{t}-{p}" for t, p in FIXTURE_PARTITIONS])
def test_fixture_partitions_through_broker_fetch(fixture_cluster, tp, client, read_committed):
    topic, partition = tp
    meta = FIXTURE_META[tp]
    o = fixture_cluster.offsets(topic, partition)
    assert (o.log_start_offset, o.high_watermark, o.last_stable_offset) == \
        (meta["logStartOffset"], meta["highWatermark"], meta["lastStableOffset"])
    assert o.highest_tiered_offset >= 0 and o.local_log_start_offset > o.log_start_offset
    got = CONSUMERS[client](fixture_cluster.bootstrap_servers, topic, partition, read_committed=read_committed)
    assert got == fixture_expected(topic, partition, read_committed)


# ------------------------------------------------------------------------------ transactions

def _txn_confluent(bootstrap, topic):
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "txn-ck", "linger.ms": 1})
    p.init_transactions(30)
    for outcome, n in (("commit", 10), ("abort", 7), ("commit", 5)):
        p.begin_transaction()
        for i in range(n):
            p.produce(topic, key=f"{outcome}-{i}".encode(), value=b"x" * i, partition=i % 2)
        p.flush(30)
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(30)


def _txn_kafka_python(bootstrap, topic):
    import kafka

    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id="txn-kp", linger_ms=1)
    try:
        p.init_transactions()
        for outcome, n in (("commit", 10), ("abort", 7), ("commit", 5)):
            p.begin_transaction()
            for i in range(n):
                p.send(topic, key=f"{outcome}-{i}".encode(), value=b"x" * i, partition=i % 2)
            p.flush()
            (p.commit_transaction if outcome == "commit" else p.abort_transaction)()
    finally:
        p.close()


@pytest.mark.parametrize("producer", ["confluent-kafka", "kafka-python"])
def test_transactions_commit_and_abort(tiered_cluster, producer):
    c = tiered_cluster
    topic = f"txn-{producer}"
    c.create_topic(topic, 2)
    {"confluent-kafka": _txn_confluent, "kafka-python": _txn_kafka_python}[producer](c.bootstrap_servers, topic)

    def keys(rows):
        return sorted(base64.b64decode(r["key"]).decode() for r in rows)

    committed = sorted([f"commit-{i}" for i in range(10)] + [f"commit-{i}" for i in range(5)])
    everything = sorted(committed + [f"abort-{i}" for i in range(7)])
    for tiered in (False, True):
        if tiered:
            for p in (0, 1):
                c.roll(topic, p)
            assert c.tier(topic)
            assert all(c.offsets(topic, p).local_log_start_offset > 0 for p in (0, 1))
        for name, consume in CONSUMERS.items():
            rc = [r for p in (0, 1) for r in consume(c.bootstrap_servers, topic, p, read_committed=True)]
            ru = [r for p in (0, 1) for r in consume(c.bootstrap_servers, topic, p)]
            assert keys(rc) == committed, (name, tiered)
            assert keys(ru) == everything, (name, tiered)
        for p in (0, 1):
            o = c.offsets(topic, p)
            assert o.last_stable_offset == o.high_watermark     # no transaction left open
