"""The embedded broker's protocol side, spoken over a raw socket with the project's codec:
ApiVersions and bad requests, Metadata, ListOffsets, Produce errors, Fetch long-poll and
sessions, KIP-1248 direct fetch answers (+ ranged read of the hinted bytes), restart,
coordinator state, metrics and the ``kafka-tiered broker`` command."""
from __future__ import annotations

import base64
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from itertools import pairwise

import pytest

from broker_fixtures import (FIXTURE_META, consume_confluent, consume_kafka_python, fixture_expected,
                             fixture_segments)
from conftest import ROOT
from kafka_tiered_source.ids import uuid_to_str
from kafka_tiered_source.protocol import codec
from kafka_tiered_source.protocol import messages as m
from kafka_tiered_source.protocol.errors import code_of
from kafka_tiered_source.testing.apis import ADVERTISED

STORAGE_FORMAT = "ApacheKafkaV1"


class Raw:
    """One client connection speaking the codec by hand."""

    def __init__(self, port, client_id="raw-test"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.corr = 0
        self.client_id = client_id

    def close(self):
        self.sock.close()

    def _exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return bytes(buf)

    def send(self, msg, version):
        self.corr += 1
        self.sock.sendall(codec.encode_request(msg, version, self.corr, self.client_id))
        return self.corr

    def recv(self, cls, version):
        (size,) = struct.unpack(">i", self._exact(4))
        return codec.decode_response(self._exact(size), cls, version)

    def call(self, msg, version):
        corr = self.send(msg, version)
        got, resp = self.recv(type(msg), version)
        assert got == corr
        return resp

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def api_versions_ok(port):
    r = Raw(port)
    try:
        resp = r.call(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        return resp.error_code == 0 and len(resp.api_keys) == len(ADVERTISED)
    finally:
        r.close()


def fetch_request(v, topic_info, partition, offset, *, direct=False, isolation=0, max_bytes=1 << 20,
                  max_wait_ms=0, min_bytes=0, session_id=0, session_epoch=-1):
    F = m.FetchRequest
    return F(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation,
             session_id=session_id, session_epoch=session_epoch,
             topics=[F.FetchTopic(topic=topic_info.name, topic_id=topic_info.topic_id_bytes, partitions=[
                 F.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])],
             remote_log_segment_location_requested=direct,
             supported_storage_format_versions=[STORAGE_FORMAT] if direct else [])


def batches(data: bytes):
    """(base offset, [record offsets]) of every whole batch, read with kafka-python's reader."""
    from kafka.record import MemoryRecords

    out = []
    mr = MemoryRecords(bytes(data))
    while True:
        b = mr.next_batch()
        if b is None:
            return out
        out.append((b.base_offset, [r.offset for r in b]))


# ------------------------------------------------------------------------------ ApiVersions, bad requests

def test_api_versions_advertises_what_is_served_and_answers_unknown_versions_with_v0(tiered_cluster):
    r = Raw(tiered_cluster.port)
    resp = r.call(m.ApiVersionsRequest(client_software_name="raw", client_software_version="0"), 4)
    got = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
    assert resp.error_code == 0 and got == ADVERTISED
    assert got[1] == (4, 18) and got[0] == (3, 12) and got[18] == (0, 4) and got[36] == (0, 2)
    # a version the broker does not know: a v0 body with UNSUPPORTED_VERSION and the ranges
    r.corr += 1
    raw = bytearray(codec.encode_request(m.ApiVersionsRequest(), 0, r.corr, "raw"))
    struct.pack_into(">h", raw, 6, 99)
    r.sock.sendall(raw)
    corr, err = r.recv(m.ApiVersionsResponse, 0)
    assert corr == r.corr and err.error_code == code_of("UNSUPPORTED_VERSION")
    assert {a.api_key: (a.min_version, a.max_version) for a in err.api_keys} == ADVERTISED
    # the connection stays usable, as with Kafka
    assert r.call(m.ApiVersionsRequest(), 0).error_code == 0
    r.close()


@pytest.mark.parametrize("bad", ["unknown-api-key", "unadvertised-version", "negative-size", "huge-size",
                                 "garbage-body", "truncated-frame"])
def test_bad_requests_close_only_that_connection(tiered_cluster, bad, caplog):
    port = tiered_cluster.port
    r = Raw(port)
    if bad == "unknown-api-key":
        r.sock.sendall(struct.pack(">ihhi", 8, 999, 0, 1) + struct.pack(">h", -1))
    elif bad == "unadvertised-version":       # Metadata v0: the codec knows it, the broker does not serve it
        r.send(m.MetadataRequest(topics=[]), 0)
    elif bad == "negative-size":
        r.sock.sendall(struct.pack(">i", -7) + b"xxxx")
    elif bad == "huge-size":
        r.sock.sendall(struct.pack(">i", 1 << 30))
    elif bad == "garbage-body":
        r.sock.sendall(struct.pack(">i", 11) + struct.pack(">hhi", 3, 12, 5) + b"\xff\xff\xff")
    elif bad == "truncated-frame":
        r.sock.sendall(struct.pack(">i", 100) + b"short")
        r.sock.shutdown(socket.SHUT_WR)
    assert r.closed_by_peer()
    r.close()
    assert api_versions_ok(port)            # the server lives on
    if bad in ("negative-size", "huge-size"):
        assert any("malformed frame" in rec.getMessage() for rec in caplog.records)


# ------------------------------------------------------------------------------ Metadata, ListOffsets

def test_metadata_topics_ids_and_unknown_topics(tiered_cluster):
    c = tiered_cluster
    a = c.create_topic("alpha", 3)
    c.create_topic("beta", 1)
    r = Raw(c.port)
    M = m.MetadataRequest
    resp = r.call(M(topics=None), 12)
    assert resp.brokers[0].node_id == 0 and resp.brokers[0].port == c.port and resp.controller_id == 0
    by_name = {t.name: t for t in resp.topics}
    assert set(by_name) == {"alpha", "beta"}
    assert by_name["alpha"].topic_id == a.topic_id_bytes and len(by_name["alpha"].partitions) == 3
    assert all(p.leader_id == 0 and p.isr_nodes == [0] for p in by_name["alpha"].partitions)
    resp = r.call(M(topics=[M.MetadataRequestTopic(name="nope"), M.MetadataRequestTopic(name="beta")],
                    allow_auto_topic_creation=True), 9)
    assert [(t.name, t.error_code) for t in resp.topics] == [("nope", code_of("UNKNOWN_TOPIC_OR_PARTITION")),
                                                             ("beta", 0)]
    assert "nope" not in c.topics        # auto-creation is off by default
    # look-up by topic id (v12+)
    resp = r.call(M(topics=[M.MetadataRequestTopic(topic_id=a.topic_id_bytes, name=None)]), 13)
    assert resp.topics[0].name == "alpha" and resp.topics[0].error_code == 0
    resp = r.call(M(topics=[M.MetadataRequestTopic(topic_id=b"\x01" * 16, name=None)]), 13)
    assert resp.topics[0].error_code == code_of("UNKNOWN_TOPIC_ID")
    r.close()


def test_metadata_auto_create_when_enabled(cluster_factory):
    c = cluster_factory(auto_create_topics=True)
    r = Raw(c.port)
    M = m.MetadataRequest
    resp = r.call(M(topics=[M.MetadataRequestTopic(name="made")], allow_auto_topic_creation=True), 12)
    assert resp.topics[0].error_code == 0 and "made" in c.topics
    resp = r.call(M(topics=[M.MetadataRequestTopic(name="notmade")], allow_auto_topic_creation=False), 12)
    assert resp.topics[0].error_code == code_of("UNKNOWN_TOPIC_OR_PARTITION") and "notmade" not in c.topics
    r.close()


def test_list_offsets_special_timestamps_and_times(cluster_factory):
    c = cluster_factory()
    c.import_log_dir("payments", 0, fixture_segments("payments", 0))
    c.tier()
    meta = FIXTURE_META[("payments", 0)]
    o = c.offsets("payments", 0)
    first = fixture_expected("payments", 0, False)[10]
    L = m.ListOffsetsRequest
    r = Raw(c.port)

    def ask(ts, v=11, isolation=0):
        resp = r.call(L(replica_id=-1, isolation_level=isolation, topics=[L.ListOffsetsTopic(
            name="payments", partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=ts)])]), v)
        p = resp.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp

    assert ask(-1) == (0, meta["highWatermark"], -1)
    assert ask(-1, isolation=1) == (0, meta["lastStableOffset"], -1)
    assert ask(-2) == (0, meta["logStartOffset"], -1)
    assert ask(-4) == (0, o.local_log_start_offset, -1)
    assert ask(-5) == (0, o.highest_tiered_offset, -1)
    assert ask(-4, v=7)[0] == code_of("UNSUPPORTED_VERSION")
    err, off, ts = ask(-3)
    assert err == 0 and ts == max(s["maxTimestamp"] for s in meta["segments"])
    # by time: the first record at or after the timestamp of a tiered record
    assert ask(first["timestamp"]) == (0, first["offset"], first["timestamp"])
    assert ask(first["timestamp"], v=1)[:2] == (0, first["offset"])
    r.close()


# ------------------------------------------------------------------------------ Produce

def _batch(offset_count=1, value=b"v"):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(offset_count):
        b.append(i, timestamp=1_700_000_000_000 + i, key=None, value=value, headers=[])
    return bytes(b.build())


def test_produce_errors_per_partition_and_acks_zero(tiered_cluster):
    c = tiered_cluster
    c.create_topic("p", 1)
    P = m.ProduceRequest
    good = _batch(3)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF                     # CRC no longer matches
    r = Raw(c.port)
    req = P(acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name="p", partition_data=[P.PartitionProduceData(index=0, records=good),
                                                     P.PartitionProduceData(index=7, records=good)]),
        P.TopicProduceData(name="missing", partition_data=[P.PartitionProduceData(index=0, records=good)])])
    resp = r.call(req, 12)
    got = {(t.name, p.index): (p.error_code, p.base_offset) for t in resp.responses for p in t.partition_responses}
    assert got == {("p", 0): (0, 0), ("p", 7): (code_of("UNKNOWN_TOPIC_OR_PARTITION"), -1),
                   ("missing", 0): (code_of("UNKNOWN_TOPIC_OR_PARTITION"), -1)}
    resp = r.call(P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="p", partition_data=[P.PartitionProduceData(index=0, records=bytes(corrupt))])]), 9)
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == code_of("CORRUPT_MESSAGE") and part.error_message
    resp = r.call(P(acks=2, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="p", partition_data=[P.PartitionProduceData(index=0, records=good)])]), 3)
    assert resp.responses[0].partition_responses[0].error_code == code_of("INVALID_REQUIRED_ACKS")
    # acks=0: no answer; the next request's answer is the next frame on the wire
    r.send(P(acks=0, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="p", partition_data=[P.PartitionProduceData(index=0, records=good)])]), 12)
    corr = r.send(m.ApiVersionsRequest(), 0)
    got_corr, _ = r.recv(m.ApiVersionsResponse, 0)
    assert got_corr == corr
    assert c.offsets("p", 0).high_watermark == 6
    r.close()


# ------------------------------------------------------------------------------ Fetch

def test_fetch_long_polls_until_data_or_timeout(tiered_cluster):
    c = tiered_cluster
    info = c.create_topic("lp", 1)
    r = Raw(c.port)
    t0 = time.monotonic()
    resp = r.call(fetch_request(12, info, 0, 0, max_wait_ms=300, min_bytes=1), 12)
    waited = time.monotonic() - t0
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0 and len(part.records) == 0 and waited >= 0.25   # it waited, no spinning
    threading.Timer(0.2, lambda: c.append("lp", 0, _batch(2))).start()
    resp = r.call(fetch_request(12, info, 0, 0, max_wait_ms=20_000, min_bytes=1), 12)
    part = resp.responses[0].partitions[0]
    assert part.high_watermark == 2 and batches(part.records) == [(0, [0, 1])]
    r.close()


def test_fetch_sessions_are_answered_sessionless(tiered_cluster):
    c = tiered_cluster
    info = c.create_topic("fs", 1)
    c.append("fs", 0, _batch(1))
    r = Raw(c.port)
    resp = r.call(fetch_request(15, info, 0, 0, session_id=0, session_epoch=0), 15)   # "create a session"
    assert resp.error_code == 0 and resp.session_id == 0 and len(resp.responses[0].partitions[0].records) > 0
    resp = r.call(fetch_request(15, info, 0, 0, session_id=12345, session_epoch=1), 15)
    assert resp.error_code == code_of("FETCH_SESSION_ID_NOT_FOUND")
    # unknown topic id, offset out of range
    bad = type(info)("ghost", uuid_to_str(b"\x02" * 16), 1)
    resp = r.call(fetch_request(13, bad, 0, 0), 13)
    assert resp.responses[0].partitions[0].error_code == code_of("UNKNOWN_TOPIC_ID")
    resp = r.call(fetch_request(4, info, 0, 99), 4)
    assert resp.responses[0].partitions[0].error_code == code_of("OFFSET_OUT_OF_RANGE")
    r.close()


def test_fetch_honours_max_bytes_across_partitions(tiered_cluster):
    c = tiered_cluster
    info = c.create_topic("mb", 2)
    for p in (0, 1):
        for _ in range(5):
            c.append("mb", p, _batch(1, b"x" * 1000))
    one = len(_batch(1, b"x" * 1000))
    F = m.FetchRequest
    req = F(max_wait_ms=0, min_bytes=0, max_bytes=int(one * 2.5), isolation_level=0, topics=[F.FetchTopic(
        topic_id=info.topic_id_bytes, partitions=[
            F.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=one * 4) for p in (0, 1)])])
    r = Raw(c.port)
    resp = r.call(req, 16)
    sizes = [len(p.records) for p in resp.responses[0].partitions]
    assert sizes == [2 * one, 0]
    # the first partition gets at least one whole batch even when it exceeds the limits
    req.max_bytes = 10
    req.topics[0].partitions[0].partition_max_bytes = 10
    resp = r.call(req, 16)
    assert [len(p.records) for p in resp.responses[0].partitions] == [one, 0]
    r.close()


@pytest.fixture
def payments_cluster(cluster_factory):
    c = cluster_factory()
    c.import_log_dir("payments", 0, fixture_segments("payments", 0))
    c.import_log_dir("orders", 0, fixture_segments("orders", 0))
    c.tier()
    return c


def aiven_log_key(topic, topic_id: bytes, partition, base_offset, segment_id: bytes) -> str:
    """The Aiven layout's .log object key, from what the Fetch answer carries (facts.md)."""
    return f"{topic}-{uuid_to_str(topic_id)}/{partition}/{base_offset:020d}-{uuid_to_str(segment_id)}.log"


@pytest.mark.parametrize("version", [12, 18])
def test_kip1248_direct_fetch_hints_and_ranged_read(payments_cluster, version):
    c = payments_cluster
    info = c.topics["payments"]
    o = c.offsets("payments", 0)
    offset = o.local_log_start_offset // 2           # inside a tiered, locally deleted segment
    r = Raw(c.port, client_id="direct-reader")
    resp = r.call(fetch_request(version, info, 0, offset, direct=True, isolation=1, max_bytes=30_000), version)
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0 and len(part.records) == 0
    assert part.storage_format_version == STORAGE_FORMAT
    assert part.high_watermark == o.high_watermark and part.last_stable_offset == o.last_stable_offset
    assert part.log_start_offset == o.log_start_offset and part.aborted_transactions is not None
    seg = next(s for s in c.remote_segments("payments", 0) if s.base_offset <= offset <= s.end_offset)
    assert part.remote_log_segment_id == seg.segment_id_bytes
    assert (part.remote_log_segment_base_offset, part.remote_log_segment_end_offset) == \
        (seg.base_offset, seg.end_offset)
    start, end = part.remote_log_segment_start_position, part.remote_log_segment_end_position
    assert 0 <= start < end <= seg.size_bytes
    assert part.signed_remote_log_segment_location is None        # file:// storage cannot presign
    key = aiven_log_key("payments", info.topic_id_bytes, 0, seg.base_offset, part.remote_log_segment_id)
    data = c.storage.store.get(key, start, end)
    assert len(data) == end - start
    got = batches(data)                     # whole batches, the first one holding the offset
    assert got[0][0] <= offset <= got[0][1][-1]
    assert all(a[1][-1] < b[0] for a, b in pairwise(got))
    assert c.storage.metrics.get("location_grants_total", client_id="direct-reader") == 1

    # without the tags: an ordinary fetch of the same offset, records from remote storage
    resp = r.call(fetch_request(version, info, 0, offset, isolation=1, max_bytes=30_000), version)
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0 and part.remote_log_segment_id == bytes(16) and len(part.records) > 0
    assert batches(part.records)[0] == got[0]
    # a direct request for a local offset: ordinary records, no location
    resp = r.call(fetch_request(version, info, 0, o.local_log_start_offset, direct=True), version)
    part = resp.responses[0].partitions[0]
    assert part.remote_log_segment_id == bytes(16) and len(part.records) > 0
    r.close()


def test_kip1248_aborted_transactions_in_direct_answer(payments_cluster):
    c = payments_cluster
    meta = FIXTURE_META[("payments", 0)]
    aborted = meta["abortedTransactions"]
    o = c.offsets("payments", 0)
    tiered_abort = next(a for a in aborted if a["lastOffset"] < o.local_log_start_offset)
    info = c.topics["payments"]
    r = Raw(c.port)
    resp = r.call(fetch_request(16, info, 0, tiered_abort["firstOffset"], direct=True, isolation=1), 16)
    part = resp.responses[0].partitions[0]
    got = {(a.producer_id, a.first_offset) for a in part.aborted_transactions}
    assert (tiered_abort["producerId"], tiered_abort["firstOffset"]) in got
    # read_uncommitted: no aborted list (null), as Kafka answers
    resp = r.call(fetch_request(16, info, 0, tiered_abort["firstOffset"], direct=True, isolation=0), 16)
    assert resp.responses[0].partitions[0].aborted_transactions is None
    r.close()


# ------------------------------------------------------------------------------ restart, coordinator

def test_restart_keeps_data_offsets_and_producer_state(cluster_factory, tmp_path):
    import confluent_kafka as ck

    data_dir, remote = str(tmp_path / "restart"), f"file://{tmp_path}/restart-remote"
    c = cluster_factory(data_dir=data_dir, remote_storage=remote, segment_bytes=8 * 1024)
    c.create_topic("r", 1)
    p = ck.Producer({"bootstrap.servers": c.bootstrap_servers, "enable.idempotence": True, "linger.ms": 1})
    for i in range(300):
        p.produce("r", value=b"%05d" % i + b"." * 100, partition=0)
    assert p.flush(30) == 0
    c.roll("r", 0)
    assert c.tier()
    before = consume_kafka_python(c.bootstrap_servers, "r", 0)
    O = m.OffsetCommitRequest
    raw = Raw(c.port)
    resp = raw.call(O(group_id="g1", generation_id_or_member_epoch=-1, member_id="", topics=[
        O.OffsetCommitRequestTopic(name="r", partitions=[O.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=123, committed_metadata="m")])]), 8)
    assert resp.topics[0].partitions[0].error_code == 0
    pid1 = raw.call(m.InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
    raw.close()
    del p
    c.stop()

    c2 = cluster_factory(data_dir=data_dir, remote_storage=remote, segment_bytes=8 * 1024)
    assert c2.offsets("r", 0) == c.offsets("r", 0)
    assert consume_kafka_python(c2.bootstrap_servers, "r", 0) == before
    assert consume_confluent(c2.bootstrap_servers, "r", 0) == before
    assert len(before) == 300
    raw = Raw(c2.port)
    F = m.OffsetFetchRequest
    resp = raw.call(F(group_id="g1", topics=[F.OffsetFetchRequestTopic(name="r", partition_indexes=[0, 1])]), 5)
    assert [(p.partition_index, p.committed_offset) for p in resp.topics[0].partitions] == [(0, 123), (1, -1)]
    resp = raw.call(F(groups=[F.OffsetFetchRequestGroup(group_id="g1", topics=None)]), 8)
    assert [(t.name, p.committed_offset, p.metadata) for t in resp.groups[0].topics for p in t.partitions] == \
        [("r", 123, "m")]
    pid2 = raw.call(m.InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
    assert (pid2.producer_id, pid2.producer_epoch) == (pid1.producer_id, pid1.producer_epoch + 1)
    raw.close()


def test_find_coordinator_and_producer_ids(tiered_cluster):
    c = tiered_cluster
    r = Raw(c.port)
    resp = r.call(m.FindCoordinatorRequest(key="g", key_type=0), 3)
    assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 0, "127.0.0.1", c.port)
    resp = r.call(m.FindCoordinatorRequest(key_type=1, coordinator_keys=["a", "b"]), 4)
    assert [(x.key, x.node_id, x.port, x.error_code) for x in resp.coordinators] == \
        [("a", 0, c.port, 0), ("b", 0, c.port, 0)]
    a = r.call(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0), 2)
    b = r.call(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0), 2)
    assert a.error_code == b.error_code == 0 and a.producer_id != b.producer_id
    # a transactional producer that is not the current one is refused
    t1 = r.call(m.InitProducerIdRequest(transactional_id="x", transaction_timeout_ms=1000), 4)
    t2 = r.call(m.InitProducerIdRequest(transactional_id="x", transaction_timeout_ms=1000), 4)
    assert t2.producer_epoch == t1.producer_epoch + 1
    A = m.AddPartitionsToTxnRequest
    c.create_topic("tx", 1)
    resp = r.call(A(v3_and_below_transactional_id="x", v3_and_below_producer_id=t1.producer_id,
                    v3_and_below_producer_epoch=t1.producer_epoch, v3_and_below_topics=[
                        A.AddPartitionsToTxnTopic(name="tx", partitions=[0])]), 3)
    assert resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == \
        code_of("PRODUCER_FENCED")
    resp = r.call(m.EndTxnRequest(transactional_id="x", producer_id=t2.producer_id,
                                  producer_epoch=t2.producer_epoch - 1, committed=True), 3)
    assert resp.error_code == code_of("PRODUCER_FENCED")
    r.close()


# ------------------------------------------------------------------------------ SASL gate

def test_sasl_required_before_other_requests(cluster_factory):
    c = cluster_factory(sasl={"mechanism": "SCRAM-SHA-256", "users": {"alice": "pw-1"}})
    r = Raw(c.port)
    assert r.call(m.ApiVersionsRequest(), 3).error_code == 0
    resp = r.call(m.SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert resp.error_code == code_of("UNSUPPORTED_SASL_MECHANISM") and resp.mechanisms == ["SCRAM-SHA-256"]
    r.close()
    r = Raw(c.port)
    r.send(m.MetadataRequest(topics=None), 12)
    assert r.closed_by_peer()
    r.close()
    assert "pw-1" not in repr(c.config)


# ------------------------------------------------------------------------------ metrics

def test_metrics_after_remote_reads(cluster_factory):
    c = cluster_factory(metrics_port=0)
    c.import_log_dir("orders", 1, fixture_segments("orders", 1))
    c.tier()
    rows = consume_kafka_python(c.bootstrap_servers, "orders", 1, client_id="metrics-reader")
    assert rows == fixture_expected("orders", 1, False)
    text = c.metrics_text()
    line = next(ln for ln in text.splitlines()
                if ln.startswith('kafka_tiered_broker_remote_fetch_requests_total{client_id="metrics-reader",'
                                 'topic="orders"}'))
    assert float(line.rsplit(" ", 1)[1]) >= 1
    assert c.storage.metrics.get("remote_fetch_bytes_total", client_id="metrics-reader") > 0
    requests = c.storage.metrics.get("remote_fetch_requests_total", client_id="metrics-reader")
    hist = 'kafka_tiered_broker_remote_fetch_duration_seconds_count{client_id="metrics-reader",topic="orders"}'
    count = next(ln for ln in text.splitlines() if ln.startswith(hist))
    assert int(count.rsplit(" ", 1)[1]) == requests
    assert 'kafka_tiered_broker_remote_fetch_duration_seconds_bucket{client_id="metrics-reader",' \
           'topic="orders",le="+Inf"}' in text
    with urllib.request.urlopen(c.metrics_url, timeout=10) as resp:
        body = resp.read().decode()
    assert resp.status == 200 and 'client_id="metrics-reader"' in body
    assert "kafka_tiered_broker_remote_fetch_latency_seconds_sum" in body


# ------------------------------------------------------------------------------ command line

def test_cli_broker_runs_until_sigterm(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from kafka_tiered_source.cli import main; sys.exit(main(sys.argv[1:]))",
         "broker", "--data-dir", str(tmp_path / "d"), "--port", "0", "--remote-storage",
         f"file://{tmp_path}/remote", "--topic", "cli-topic:2", "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert line.startswith("bootstrap servers: 127.0.0.1:"), (line, proc.stderr.read() if proc.poll() else "")
        port = int(line.rsplit(":", 1)[1])
        r = Raw(port)
        resp = r.call(m.MetadataRequest(topics=None), 12)
        assert [(t.name, len(t.partitions)) for t in resp.topics] == [("cli-topic", 2)]
        r.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def open_raw_transaction(r, txn_id, topic, timeout_ms):
    """InitProducerId + AddPartitionsToTxn + a transactional batch of 3 records to partition 0."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    init = r.call(m.InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=timeout_ms), 4)
    A = m.AddPartitionsToTxnRequest
    resp = r.call(A(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=init.producer_id,
                    v3_and_below_producer_epoch=init.producer_epoch,
                    v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[0])]), 3)
    assert resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                  producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                                  base_sequence=0, batch_size=1 << 20)
    for i in range(3):
        b.append(i, timestamp=1_700_000_000_000, key=None, value=b"t%d" % i, headers=[])
    P = m.ProduceRequest
    resp = r.call(P(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=bytes(b.build()))])]), 12)
    assert resp.responses[0].partition_responses[0].error_code == 0
    return init


def test_transaction_past_its_timeout_is_aborted_and_producer_fenced(cluster_factory):
    c = cluster_factory()
    c.create_topic("slow", 1)
    r = Raw(c.port)
    init = open_raw_transaction(r, "slow-tx", "slow", 300)
    assert c.offsets("slow", 0).last_stable_offset == 0
    deadline = time.monotonic() + 15
    while c.offsets("slow", 0).last_stable_offset == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    o = c.offsets("slow", 0)
    assert o.last_stable_offset == o.high_watermark == 4            # 3 records + the ABORT marker
    fr = c.read("slow", 0, 0, 1 << 20, 1)
    assert fr.aborted == [(init.producer_id, 0)]
    resp = r.call(m.EndTxnRequest(transactional_id="slow-tx", producer_id=init.producer_id,
                                  producer_epoch=init.producer_epoch, committed=True), 3)
    assert resp.error_code == code_of("PRODUCER_FENCED")
    assert c.coordinator.transaction("slow-tx").state == "CompleteAbort"
    r.close()


def test_sasl_handshake_v0_then_bare_tokens(cluster_factory):
    from kafka_tiered_source.protocol.sasl import ScramClient, plain_initial_response

    c = cluster_factory(sasl={"mechanisms": ["PLAIN", "SCRAM-SHA-512"], "users": {"dan": "d-pw"}})
    c.create_topic("h0", 1)

    def bare(r, token):
        r.sock.sendall(codec.frame(token))
        (size,) = struct.unpack(">i", r._exact(4))
        return r._exact(size)

    r = Raw(c.port)
    assert r.call(m.SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
    assert bare(r, plain_initial_response("dan", "d-pw")) == b""
    assert r.call(m.MetadataRequest(topics=None), 12).topics[0].name == "h0"     # authenticated
    r.close()
    r = Raw(c.port)
    assert r.call(m.SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 0).error_code == 0
    sc = ScramClient("SCRAM-SHA-512", "dan", "d-pw")
    sc.verify(bare(r, sc.final(bare(r, sc.first()))))
    assert r.call(m.MetadataRequest(topics=None), 12).topics[0].name == "h0"
    r.close()
    r = Raw(c.port)                           # a wrong password over v0: the broker hangs up
    assert r.call(m.SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
    r.sock.sendall(codec.frame(plain_initial_response("dan", "nope")))
    assert r.closed_by_peer()
    r.close()


def test_kip1248_presigned_url_from_s3(cluster_factory):
    from storage_servers import S3_KEY_ID, S3_SECRET, MotoS3

    moto = MotoS3().start()
    try:
        moto.client().create_bucket(Bucket="tiered")
        c = cluster_factory(remote_storage="s3://tiered/brokers", presign=True, s3_endpoint_url=moto.endpoint,
                            s3_region="us-east-1", s3_access_key_id=S3_KEY_ID, s3_secret_access_key=S3_SECRET)
        c.import_log_dir("orders", 1, fixture_segments("orders", 1))
        c.tier()
        info = c.topics["orders"]
        offset = c.offsets("orders", 1).log_start_offset + 5
        r = Raw(c.port, client_id="presign-reader")
        resp = r.call(fetch_request(18, info, 1, offset, direct=True, max_bytes=20_000), 18)
        r.close()
        part = resp.responses[0].partitions[0]
        url = part.signed_remote_log_segment_location
        assert url and url.startswith(moto.endpoint) and S3_SECRET not in url
        assert "signed_remote_log_segment_location='***'" in repr(part)
        start, end = part.remote_log_segment_start_position, part.remote_log_segment_end_position
        req = urllib.request.Request(url, headers={"Range": f"bytes={start}-{end - 1}"})
        with urllib.request.urlopen(req, timeout=10) as got:
            data = got.read()
        assert len(data) == end - start
        first = batches(data)[0]
        assert first[0] <= offset <= first[1][-1]
        want = [r["offset"] for r in fixture_expected("orders", 1, False) if r["offset"] >= first[0]]
        assert [o for _, offs in batches(data) for o in offs] == want[:sum(len(x) for _, x in batches(data))]
    finally:
        moto.stop()


def test_random_valid_requests_of_every_advertised_version_are_answered(tiered_cluster, caplog):
    """Every advertised API and version, with random field values (unknown topics, odd offsets,
    nulls): an answer with the right correlation id, and no handler failure logged."""
    import random

    from kafka_tiered_source.protocol.random_values import random_message

    c = tiered_cluster
    c.create_topic("fz", 2)
    c.append("fz", 0, _batch(3))
    rng = random.Random(7)
    answered = 0
    for key, (lo, hi) in sorted(ADVERTISED.items()):
        if key in (17, 36):                  # SASL on a broker without SASL: covered elsewhere
            continue
        for v in range(lo, hi + 1):
            for _ in range(3):
                msg = random_message(m.REQUESTS[key], v, rng)
                if key == 0:
                    msg.acks = 1             # acks=0 has no answer to wait for
                if key == 1:
                    msg.max_wait_ms = min(msg.max_wait_ms, 10)
                r = Raw(c.port, client_id="fuzz")
                try:
                    corr = r.send(msg, v)
                    got, _ = r.recv(type(msg), v)
                    assert got == corr
                    answered += 1
                except ConnectionError:
                    pass                     # refusing a request by closing is allowed
                finally:
                    r.close()
    assert answered > 100
    assert not [rec for rec in caplog.records if rec.levelname == "ERROR"]
    assert api_versions_ok(c.port)


def test_project_client_with_scram_and_kip1248(cluster_factory):
    """The project's own sync client (protocol/client.py) against the broker: SCRAM-SHA-512,
    metadata, ListOffsets, a KIP-1248 location answer and the plain fetch fallback."""
    from kafka_tiered_source.protocol.client import BrokerClient

    c = cluster_factory(sasl={"mechanism": "SCRAM-SHA-512", "users": {"spark": "sp-pw"}})
    c.import_log_dir("payments", 0, fixture_segments("payments", 0))
    c.tier()
    o = c.offsets("payments", 0)
    with BrokerClient({"bootstrap.servers": c.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                       "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "spark", "sasl.password": "sp-pw",
                       "isolation.level": "read_committed"}) as bc:
        assert bc.topic("payments").topic_id == c.topics["payments"].topic_id_bytes
        assert bc.list_offsets("payments", {0: -5})[0].offset == o.highest_tiered_offset
        assert bc.list_offsets("payments", {0: -2})[0].offset == o.log_start_offset
        r = bc.fetch("payments", 0, 100, request_remote_location=True)
        assert r.kip1248_requested and r.has_remote_location and r.version == 18
        loc = c.locate("payments", 0, 100, 1 << 20, 1)
        assert (r.partition.remote_log_segment_start_position, r.partition.remote_log_segment_end_position) == \
            (loc.start_position, loc.end_position)
        assert [(a.producer_id, a.first_offset) for a in r.partition.aborted_transactions] == loc.aborted
        plain = bc.fetch("payments", 0, 100)
        assert not plain.has_remote_location and batches(bytes(plain.partition.records))[0][0] <= 100


def test_half_written_end_txn_is_completed_on_restart(cluster_factory, tmp_path):
    data_dir, remote = str(tmp_path / "half"), f"file://{tmp_path}/half-remote"
    c = cluster_factory(data_dir=data_dir, remote_storage=remote)
    c.create_topic("half", 1)
    r = Raw(c.port)
    init = open_raw_transaction(r, "half-tx", "half", 60_000)
    r.close()
    c.stop()
    # the broker stopped after deciding to commit, before writing the markers
    c.coordinator.end_txn("half-tx", init.producer_id, init.producer_epoch, True)
    assert c.coordinator.transaction("half-tx").state == "PrepareCommit"
    assert c.offsets("half", 0).last_stable_offset == 0
    c2 = cluster_factory(data_dir=data_dir, remote_storage=remote)
    deadline = time.monotonic() + 10
    while c2.coordinator.transaction("half-tx").state != "CompleteCommit" and time.monotonic() < deadline:
        time.sleep(0.05)
    o = c2.offsets("half", 0)
    assert c2.coordinator.transaction("half-tx").state == "CompleteCommit"
    assert o.last_stable_offset == o.high_watermark == 4
    rows = consume_kafka_python(c2.bootstrap_servers, "half", 0, read_committed=True)
    assert [base64.b64decode(x["value"]) for x in rows] == [b"t0", b"t1", b"t2"]


def test_describe_configs_and_offset_for_leader_epoch_fenced_by_the_current_epoch(tiered_cluster):
    """DescribeConfigs of a topic: Kafka's defaults, what the topic was made with, an override
    set as kafka-configs sets it; OffsetForLeaderEpoch fenced with the partition's current
    leader epoch (Partition.localLogWithEpochOrThrow, KIP-320): the project's client, which knew
    the older epoch, is told FENCED_LEADER_EPOCH, refreshes its metadata and asks again."""
    from kafka_tiered_source.errors import BrokerError
    from kafka_tiered_source.protocol.client import BrokerClient
    from kafka_tiered_source.testing.log import StorageError
    c = tiered_cluster
    c.create_topic("cfg", 2, retention_ms=60_000)
    c.append("cfg", 0, _batch(3))
    with BrokerClient({"bootstrap.servers": c.bootstrap_servers}) as bc:
        assert bc.describe_topic_config("cfg", ["retention.ms", "delete.retention.ms", "no.such.key"]) == \
            {"retention.ms": "60000", "delete.retention.ms": "86400000"}
        c.set_topic_config("cfg", delete_retention_ms=3_600_000)
        assert bc.describe_topic_config("cfg", ["delete.retention.ms"]) == {"delete.retention.ms": "3600000"}
        with pytest.raises(StorageError, match="retention.ms"):
            c.set_topic_config("cfg", retention_ms=1)      # the broker acts on it: made with the topic
        with pytest.raises(BrokerError) as info:
            bc.describe_topic_config("no-such-topic", ["retention.ms"])
        assert info.value.error_name == "UNKNOWN_TOPIC_OR_PARTITION"

        asked = []

        def note(key, req):
            if key == m.OffsetForLeaderEpochRequest.API_KEY:
                asked.extend(p.current_leader_epoch for t in req.topics for p in t.partitions)
        c.hold_answers(note)
        assert bc.topic("cfg").partitions[0].leader_epoch == 0
        assert c.bump_leader_epoch("cfg", 0) == 1
        assert bc.offset_for_leader_epoch("cfg", 0, [0]) == {0: (0, 3)}
        assert asked == [0, 1]                   # fenced at the old epoch, then asked at the new one
    R = m.OffsetForLeaderEpochRequest
    r = Raw(c.port)
    try:
        for current, error in ((0, "FENCED_LEADER_EPOCH"), (2, "UNKNOWN_LEADER_EPOCH"), (1, None)):
            r.send(R(replica_id=-1, topics=[R.OffsetForLeaderTopic(topic="cfg", partitions=[
                R.OffsetForLeaderPartition(partition=0, current_leader_epoch=current, leader_epoch=0)])]), 4)
            _, resp = r.recv(m.OffsetForLeaderEpochResponse, 4)
            assert resp.topics[0].partitions[0].error_code == (code_of(error) if error else 0), current
    finally:
        r.close()
