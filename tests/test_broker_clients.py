"""Third-party Kafka clients (kafka-python, confluent-kafka/librdkafka) against the embedded
broker: produce with every codec, consume before and after tiering, transactions, the Kafka
3.9.1 fixture partitions through broker fetches, restart, SASL/SCRAM, telemetry."""
from __future__ import annotations

import base64
import random
import time

import pytest

from broker_fixtures import (CONSUMERS, FIXTURE_META, FIXTURE_PARTITIONS, PRODUCERS, consume_confluent,
                             consume_kafka_python, expected_rows, fixture_expected, produce_confluent,
                             produce_kafka_python)

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


# ------------------------------------------------------------------------------ SASL

USERS = {"alice": "alice-Secret-1", "bob": "b0b,=odd"}


@pytest.fixture
def sasl_cluster(cluster_factory):
    c = cluster_factory(sasl={"mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"], "users": USERS},
                        segment_bytes=16 * 1024)
    c.create_topic("secure", 1)
    return c


def _ck_sasl(mech, user, password):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech, "sasl.username": user,
            "sasl.password": password}


def _kp_sasl(mech, user, password):
    return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mech, sasl_plain_username=user,
                sasl_plain_password=password)


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_scram_with_real_clients(sasl_cluster, mech):
    c = sasl_cluster
    records = _records(f"sasl-{mech}")[:50]
    produce_confluent(c.bootstrap_servers, "secure", records, "lz4", **_ck_sasl(mech, "alice", USERS["alice"]))
    produce_kafka_python(c.bootstrap_servers, "secure", records, "gzip", **_kp_sasl(mech, "bob", USERS["bob"]))
    c.roll("secure", 0)
    c.tier()
    want = expected_rows(records) + expected_rows(records, base=50)
    assert consume_confluent(c.bootstrap_servers, "secure", 0, **_ck_sasl(mech, "bob", USERS["bob"])) == want
    assert consume_kafka_python(c.bootstrap_servers, "secure", 0, **_kp_sasl(mech, "alice", USERS["alice"])) == want


def test_sasl_wrong_password_is_refused_clearly(sasl_cluster, caplog):
    import confluent_kafka as ck
    import kafka
    import kafka.errors

    c = sasl_cluster
    errors = []
    p = ck.Producer({"bootstrap.servers": c.bootstrap_servers, "error_cb": errors.append,
                     **_ck_sasl("SCRAM-SHA-256", "alice", "wrong-password")})
    p.produce("secure", b"never", partition=0)
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors and errors[0].code() == ck.KafkaError._AUTHENTICATION
    assert "Authentication failed" in errors[0].str() and "SCRAM-SHA-256" in errors[0].str()
    assert p.flush(0.5) == 1                # nothing was delivered
    p.purge()
    p.flush(0)
    del p
    with pytest.raises(kafka.errors.KafkaTimeoutError):
        kafka.KafkaConsumer(bootstrap_servers=c.bootstrap_servers, bootstrap_timeout_ms=3000,
                            **_kp_sasl("SCRAM-SHA-512", "alice", "wrong-password"))
    kp_errors = [r.getMessage() for r in caplog.records if r.name.startswith("kafka.")]
    assert any("SaslAuthenticationFailedError" in msg and "invalid credentials" in msg for msg in kp_errors)
    broker = [r.getMessage() for r in caplog.records if r.name.startswith("kafka_tiered_source.testing.")]
    assert any("authentication" in msg and "failed" in msg for msg in broker)
    assert not any("wrong-password" in r.getMessage() for r in caplog.records)
    assert c.offsets("secure", 0).high_watermark == 0


# ------------------------------------------------------------------------------ client telemetry

def test_client_telemetry_pushes_are_stored(cluster_factory):
    import confluent_kafka as ck

    c = cluster_factory(telemetry_metrics=("",), telemetry_push_interval_ms=200)
    c.create_topic("tele", 1)
    p = ck.Producer({"bootstrap.servers": c.bootstrap_servers, "client.id": "tele-producer"})
    p.produce("tele", b"x", partition=0)
    assert p.flush(10) == 0
    deadline = time.monotonic() + 20
    while not c.telemetry("tele-producer") and time.monotonic() < deadline:
        p.poll(0.2)
    pushes = c.telemetry("tele-producer")
    assert pushes and pushes[0].compression_type == 0 and len(pushes[0].metrics) > 0
    # OTLP protobuf: the payload names librdkafka's producer metrics
    assert b"org.apache.kafka.producer" in pushes[0].metrics
    assert c.telemetry("someone-else") == []
    del p


# ------------------------------------------------------------------------------ TLS

@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (its own CA)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    certfile, keyfile = d / "cert.pem", d / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return str(certfile), str(keyfile)


def test_tls_with_sasl_plain(cluster_factory, tls_files):
    certfile, keyfile = tls_files
    c = cluster_factory(ssl={"certfile": certfile, "keyfile": keyfile},
                        sasl={"mechanism": "PLAIN", "users": {"carol": "c-pass"}})
    c.create_topic("tls", 1)
    records = _records("tls")[:40]
    produce_confluent(c.bootstrap_servers, "tls", records, "zstd", **{
        "security.protocol": "SASL_SSL", "ssl.ca.location": certfile, "sasl.mechanism": "PLAIN",
        "sasl.username": "carol", "sasl.password": "c-pass"})
    kp = dict(security_protocol="SASL_SSL", ssl_cafile=certfile, sasl_mechanism="PLAIN",
              sasl_plain_username="carol", sasl_plain_password="c-pass")
    assert consume_kafka_python(c.bootstrap_servers, "tls", 0, **kp) == expected_rows(records)


# ------------------------------------------------------------------------------ committed offsets

def test_group_offsets_commit_and_fetch_with_real_clients(tiered_cluster):
    import confluent_kafka as ck
    import kafka
    from kafka.structs import OffsetAndMetadata

    c = tiered_cluster
    c.create_topic("grp", 1)
    records = _records("grp")[:30]
    produce_confluent(c.bootstrap_servers, "grp", records, "none")
    cc = ck.Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "g-ck", "enable.auto.commit": False})
    cc.commit(offsets=[ck.TopicPartition("grp", 0, 7)], asynchronous=False)
    cc.close()
    # a new consumer resumes from the committed offset (OffsetFetch on assign with OFFSET_STORED)
    cc = ck.Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "g-ck", "enable.auto.commit": False})
    cc.assign([ck.TopicPartition("grp", 0, ck.OFFSET_STORED)])
    msg = None
    deadline = time.monotonic() + 20
    while msg is None and time.monotonic() < deadline:
        msg = cc.poll(0.5)
    assert msg is not None and not msg.error() and msg.offset() == 7
    assert cc.committed([ck.TopicPartition("grp", 0)], timeout=10)[0].offset == 7
    cc.close()
    kc = kafka.KafkaConsumer(bootstrap_servers=c.bootstrap_servers, group_id="g-kp", enable_auto_commit=False)
    tp = kafka.TopicPartition("grp", 0)
    kc.assign([tp])
    assert kc.committed(tp) is None
    kc.commit({tp: OffsetAndMetadata(12, "meta", -1)})
    assert kc.committed(tp) == 12
    kc.close()
    assert c.coordinator.committed("g-kp")["grp"][0][0] == 12
    assert c.coordinator.committed("g-ck")["grp"][0][0] == 7
