"""Shared pytest fixtures and client helpers around the embedded broker (``EmbeddedCluster``).

Its fixtures are every test module's (tests/conftest.py registers them): a test takes them as
parameters; the helpers are imported (``from broker_fixtures import consume_kafka_python``).

``cluster_factory(**kwargs)`` starts an EmbeddedCluster on a fresh data dir (remote storage in
``file://`` under the test's tmp dir unless ``remote_storage`` is given) and stops it at teardown;
``tiered_cluster`` is one such cluster with small segments (64 KiB) so produced data rolls.
``fixture_cluster`` (module scope) holds every Kafka 3.9.1 fixture partition, imported and tiered,
with the local copies of tiered segments deleted (reads of them go to remote storage); for a
module's own such cluster, ``file_tiered_cluster(base, **kwargs)`` is the context manager behind
it, and ``import_and_tier(c, partitions)`` does the importing and tiering for any cluster.
``s3_tiered_cluster(base, bucket, partitions)`` is a context manager for a cluster that tiers
fixture partitions to a moto S3 server of its own, with a ``FaultProxy`` in front for readers.

The consume helpers (``consume_kafka_python``, ``consume_confluent``; ``CONSUMERS`` by name)
return records as dicts shaped like the fixtures' ``expected/*.jsonl`` (offset, timestamp,
timestampType, key and value base64 or None, headers ``[[key, b64|None]]``); the produce
helpers (``produce_kafka_python``, ``produce_confluent``; ``PRODUCERS``) write records with a
codec, and ``expected_rows(records, base)`` is what consuming them back must give.
"""
from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import time

import pytest

from conftest import FIXTURES
from storage_servers import S3_KEY_ID, S3_SECRET, FaultProxy, MotoS3
from kafka_tiered_source.testing import EmbeddedCluster

# librdkafka's log lines (KIP-714 telemetry, connection notices) into Python logging, where
# pytest keeps them with a failing test's report instead of printing them between tests.
LIBRDKAFKA_QUIET = {"logger": logging.getLogger("librdkafka")}

FIXTURE_META = {(m["topic"], m["partition"]): m
                for m in json.load(open(os.path.join(FIXTURES, "meta.json")))}
FIXTURE_PARTITIONS = sorted(FIXTURE_META)


def fixture_segments(topic: str, partition: int) -> str:
    return os.path.join(FIXTURES, "segments", f"{topic}-{partition}")


def fixture_expected(topic: str, partition: int, committed: bool) -> list[dict]:
    kind = "committed" if committed else "uncommitted"
    with open(os.path.join(FIXTURES, "expected", f"{topic}-{partition}.{kind}.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _b64(v):
    return None if v is None else base64.b64encode(bytes(v)).decode("ascii")


def _row(offset, ts, ts_type, key, value, headers):
    return {"offset": offset, "timestamp": ts, "timestampType": ts_type, "key": _b64(key),
            "value": _b64(value), "headers": [[k, _b64(v)] for k, v in (headers or [])]}


@pytest.fixture
def cluster_factory(tmp_path):
    started = []

    def make(**kwargs) -> EmbeddedCluster:
        n = len(started)
        data_dir = kwargs.pop("data_dir", str(tmp_path / f"broker{n}"))
        kwargs.setdefault("remote_storage", f"file://{tmp_path}/remote{n}")
        c = EmbeddedCluster(data_dir, **kwargs).start()
        started.append(c)
        return c

    yield make
    for c in started:
        c.stop()


@pytest.fixture
def tiered_cluster(cluster_factory):
    return cluster_factory(segment_bytes=64 * 1024)


def import_and_tier(c, partitions=FIXTURE_PARTITIONS):
    """Import the fixture ``partitions`` into cluster ``c`` and tier them.  Something must have
    been tiered; returns what ``tier()`` did."""
    for t, p in partitions:
        c.import_log_dir(t, p, fixture_segments(t, p))
    tiered = c.tier()
    assert tiered, "nothing was tiered"
    return tiered


@contextlib.contextmanager
def file_tiered_cluster(base, **cluster_kwargs):
    """An EmbeddedCluster (data under ``base``) with every fixture partition imported and tiered
    to ``file://<base>/remote`` (``c.remote_dir``); ``cluster_kwargs`` go to EmbeddedCluster."""
    remote = base / "remote"
    with EmbeddedCluster(str(base / "data"), remote_storage=f"file://{remote}",
                         **cluster_kwargs) as c:
        import_and_tier(c)
        c.remote_dir = str(remote)
        yield c


@contextlib.contextmanager
def today_and_kip1248(base, segment_bytes: int, metadata_partitions: int, today_locators: tuple):
    """Two EmbeddedClusters under ``base``: today's Kafka (``__remote_log_metadata`` with
    ``metadata_partitions``, Aiven's layout, read with ``today_locators``) and a KIP-1248 broker
    (Kafka's own layout, read with kip1248); each carries ``remote_dir``, ``layout`` and
    ``locators`` for the tests."""
    with EmbeddedCluster(str(base / "today"), remote_storage=f"file://{base}/today-remote", kip1248=False,
                         remote_log_metadata_partitions=metadata_partitions, segment_bytes=segment_bytes) as today, \
            EmbeddedCluster(str(base / "kip"), remote_storage=f"file://{base}/kip-remote", kip1248=True,
                            layout="kafka-local-tiered", segment_bytes=segment_bytes) as kip:
        today.remote_dir, today.layout, today.locators = f"{base}/today-remote", "aiven", today_locators
        kip.remote_dir, kip.layout, kip.locators = f"{base}/kip-remote", "kafka-local-tiered", ("kip1248",)
        yield today, kip


@pytest.fixture(scope="module")
def fixture_cluster(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("fixture-broker")) as c:
        yield c


@contextlib.contextmanager
def s3_tiered_cluster(base, bucket: str, partitions, **cluster_kwargs):
    """An EmbeddedCluster (data under ``base``) tiering to ``s3://<bucket>/kt`` on a moto S3
    server of its own, with the fixture ``partitions`` imported and tiered; ``cluster_kwargs``
    go to EmbeddedCluster.  The broker tiers straight to moto (``c.moto``); readers go through
    ``c.proxy``, a FaultProxy in front of it.  All three are stopped at the end."""
    moto = MotoS3().start()
    moto.client().create_bucket(Bucket=bucket)
    proxy = FaultProxy(moto.port).start()
    c = EmbeddedCluster(str(base / "data"), remote_storage=f"s3://{bucket}/kt", s3_endpoint_url=moto.endpoint,
                        s3_region="us-east-1", s3_access_key_id=S3_KEY_ID, s3_secret_access_key=S3_SECRET,
                        **cluster_kwargs)
    try:
        c.start()
        import_and_tier(c, partitions)
        c.moto, c.proxy = moto, proxy
        yield c
    finally:
        c.stop()
        proxy.stop()
        moto.stop()


# --------------------------------------------------------------------------------------------
# consuming with the real clients


def consume_kafka_python(bootstrap: str, topic: str, partition: int, *, start: int | None = None,
                         end: int | None = None, read_committed: bool = False, timeout_s: float = 60,
                         **config) -> list[dict]:
    """Every record of ``topic``/``partition`` from ``start`` (default earliest) until the
    consumer's position reaches ``end`` (default: the end offset the broker reports for the
    isolation level), with kafka-python's KafkaConsumer and assign()."""
    import kafka

    tp = kafka.TopicPartition(topic, partition)
    kwargs = dict(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                  isolation_level="read_committed" if read_committed else "read_uncommitted",
                  auto_offset_reset="earliest")
    kwargs.update(config)
    c = kafka.KafkaConsumer(**kwargs)
    try:
        c.assign([tp])
        if start is None:
            c.seek_to_beginning(tp)
        else:
            c.seek(tp, start)
        if end is None:
            end = c.end_offsets([tp])[tp]
        rows = []
        deadline = time.monotonic() + timeout_s
        while c.position(tp) < end:
            if time.monotonic() > deadline:
                raise AssertionError(f"kafka-python: position {c.position(tp)} of {topic}-{partition} did "
                                     f"not reach {end} in {timeout_s} s ({len(rows)} records)")
            for recs in c.poll(timeout_ms=500).values():
                for r in recs:
                    rows.append(_row(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers))
        return rows
    finally:
        c.close()


def consume_confluent(bootstrap: str, topic: str, partition: int, *, start: int | None = None,
                      read_committed: bool = False, timeout_s: float = 60, **config) -> list[dict]:
    """Every record from ``start`` (default earliest) to the end offset for the isolation level
    (librdkafka's partition EOF), with confluent-kafka's Consumer and assign()."""
    import confluent_kafka as ck

    conf = {"bootstrap.servers": bootstrap, "group.id": "broker-tests", "enable.auto.commit": False,
            "enable.partition.eof": True,
            # librdkafka reports EOF after an empty fetch: a short long-poll keeps tests quick
            "fetch.wait.max.ms": 100,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted", **LIBRDKAFKA_QUIET}
    conf.update(config)
    c = ck.Consumer(conf)
    try:
        # The partition's leader known before assign(): librdkafka otherwise retries the offset
        # lookup of OFFSET_BEGINNING 500 ms later ("no current leader"), in every call.
        c.list_topics(topic, timeout=timeout_s)
        c.assign([ck.TopicPartition(topic, partition, ck.OFFSET_BEGINNING if start is None else start)])
        rows = []
        deadline = time.monotonic() + timeout_s
        while True:
            if time.monotonic() > deadline:
                raise AssertionError(f"confluent-kafka: no end of {topic}-{partition} in {timeout_s} s "
                                     f"({len(rows)} records)")
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                    return rows
                raise AssertionError(f"confluent-kafka consumer error: {msg.error()}")
            ts_type, ts = msg.timestamp()
            rows.append(_row(msg.offset(), ts, 1 if ts_type == ck.TIMESTAMP_LOG_APPEND_TIME else 0,
                             msg.key(), msg.value(), msg.headers()))
    finally:
        c.close()


CONSUMERS = {"kafka-python": consume_kafka_python, "confluent-kafka": consume_confluent}


# --------------------------------------------------------------------------------------------
# producing with the real clients: ``records`` = [(key, value, [(header key, value)], timestamp ms)]
# to partition 0, idempotent, in several batches (a flush every 100 records)


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
                     "linger.ms": 5, "batch.size": 4096, **LIBRDKAFKA_QUIET, **extra})
    for i, (k, v, h, ts) in enumerate(records):
        p.produce(topic, key=k, value=v, headers=h or None, partition=0, timestamp=ts,
                  on_delivery=lambda err, msg: err and errors.append(err))
        if i % 100 == 99:
            p.flush(30)
    assert p.flush(30) == 0
    assert not errors, errors


PRODUCERS = {"kafka-python": produce_kafka_python, "confluent-kafka": produce_confluent}


def expected_rows(records, base=0) -> list[dict]:
    """What consuming ``records`` (key, value, headers, timestamp) written from offset ``base``
    with CreateTime gives, in the consume helpers' row shape."""
    return [_row(base + i, ts, 0, k, v, h) for i, (k, v, h, ts) in enumerate(records)]

