"""``__remote_log_metadata`` records and partitioner (kafka_tiered_source.protocol.remote_log_metadata)
against an independent reading of the upstream JSON schemas (apache/kafka
storage/src/main/resources/message/*.json) and kafka-python's murmur2, written here without the
project's codec."""
from __future__ import annotations

import os
import random
import struct
import uuid

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kafka_tiered_source.errors import ProtocolError
from kafka_tiered_source.protocol import messages as m
from kafka_tiered_source.protocol import remote_log_metadata as rlm


# ---- an independent reader, straight from the JSON schemas ------------------------------------
class Reader:
    def __init__(self, data: bytes):
        self.d, self.p = data, 0

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.d[self.p]
            self.p += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def fixed(self, fmt: str):
        (v,) = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        s = self.d[self.p:self.p + n].decode()
        self.p += n
        return s

    def compact_nullable_bytes(self):
        n = self.uvarint()
        if n == 0:
            return None
        b = self.d[self.p:self.p + n - 1]
        self.p += n - 1
        return b

    def uuid(self) -> bytes:
        b = self.d[self.p:self.p + 16]
        self.p += 16
        return b

    def tags(self) -> dict:
        out = {}
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            out[tag] = self.d[self.p:self.p + size]
            self.p += size
        return out

    def topic_id_partition(self) -> tuple:
        t = (self.compact_string(), self.uuid(), self.fixed(">i"))
        self.tags()
        return t


def read_frame(value: bytes):
    r = Reader(value)
    frame, api_key, version = r.uvarint(), r.uvarint(), r.uvarint()
    assert frame == 1
    out = {"api_key": api_key, "version": version}
    if api_key in (0, 1):
        out["tip"] = r.topic_id_partition()
        out["segment_id"] = r.uuid()
        r.tags()                                    # end of RemoteLogSegmentIdEntry
    else:
        out["tip"] = r.topic_id_partition()
    if api_key == 0:
        out.update(start=r.fixed(">q"), end=r.fixed(">q"), broker=r.fixed(">i"), max_ts=r.fixed(">q"),
                   event_ts=r.fixed(">q"))
        epochs = []
        for _ in range(r.uvarint() - 1):
            epochs.append((r.fixed(">i"), r.fixed(">q")))
            r.tags()
        out.update(epochs=epochs, size=r.fixed(">i"), custom=r.compact_nullable_bytes(),
                   state=r.fixed(">b"))
    elif api_key == 1:
        out.update(broker=r.fixed(">i"), event_ts=r.fixed(">q"), custom=r.compact_nullable_bytes(),
                   state=r.fixed(">b"))
    else:
        out.update(broker=r.fixed(">i"), event_ts=r.fixed(">q"), state=r.fixed(">b"))
    out["tags"] = r.tags()
    assert r.p == len(value), "trailing bytes"
    return out


TOPIC_ID = uuid.UUID("3b8a2f2e-1c3d-4e5f-8a9b-0c1d2e3f4a5b").bytes
SEGMENT_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff").bytes
R = rlm.SegmentRecord


def segment_record(**kw):
    rec = R(remote_log_segment_id=R.RemoteLogSegmentIdEntry(
        topic_id_partition=R.TopicIdPartitionEntry(name="orders", id=TOPIC_ID, partition=7), id=SEGMENT_ID),
        start_offset=100, end_offset=199, broker_id=3, max_timestamp_ms=1_700_000_000_123,
        event_timestamp_ms=1_700_000_001_000,
        segment_leader_epochs=[R.SegmentLeaderEpochEntry(leader_epoch=0, offset=100),
                               R.SegmentLeaderEpochEntry(leader_epoch=2, offset=150)],
        segment_size_in_bytes=4096, custom_metadata=b"\x01\x00\x02\xd8\x04", remote_log_segment_state=0)
    for k, v in kw.items():
        setattr(rec, k, v)
    return rec


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("tagged", [False, True])
def test_segment_record_reads_back_with_an_independent_parser(version, tagged):
    extra = {"txn_index_empty": True, "broker_leader_epoch": 5} if tagged else {}
    got = read_frame(rlm.encode_record(segment_record(**extra), version))
    assert (got["api_key"], got["version"]) == (0, version)
    assert got["tip"] == ("orders", TOPIC_ID, 7) and got["segment_id"] == SEGMENT_ID
    assert (got["start"], got["end"], got["broker"], got["max_ts"], got["event_ts"]) == \
        (100, 199, 3, 1_700_000_000_123, 1_700_000_001_000)
    assert got["epochs"] == [(0, 100), (2, 150)]
    assert (got["size"], got["custom"], got["state"]) == (4096, b"\x01\x00\x02\xd8\x04", 0)
    want_tags = {}
    if tagged:
        want_tags[0] = b"\x01"                              # TxnIndexEmpty
        if version >= 1:
            want_tags[1] = struct.pack(">i", 5)            # BrokerLeaderEpoch (v1+)
    assert got["tags"] == want_tags


@pytest.mark.parametrize("version", [0, 1])
def test_update_and_partition_delete_read_back(version):
    U, D = rlm.SegmentUpdate, rlm.PartitionDelete
    upd = U(remote_log_segment_id=U.RemoteLogSegmentIdEntry(
        topic_id_partition=U.TopicIdPartitionEntry(name="orders", id=TOPIC_ID, partition=7), id=SEGMENT_ID),
        broker_id=1, event_timestamp_ms=42, custom_metadata=None,
        remote_log_segment_state=rlm.COPY_SEGMENT_FINISHED, broker_leader_epoch=9, end_offset=199)
    got = read_frame(rlm.encode_record(upd, version))
    assert (got["api_key"], got["broker"], got["event_ts"], got["custom"], got["state"]) == (1, 1, 42, None, 1)
    assert got["tags"] == ({0: struct.pack(">i", 9), 1: struct.pack(">q", 199)} if version else {})
    dele = D(topic_id_partition=D.TopicIdPartitionEntry(name="orders", id=TOPIC_ID, partition=7),
             broker_id=2, event_timestamp_ms=43, remote_partition_delete_state=rlm.DELETE_PARTITION_FINISHED)
    got = read_frame(rlm.encode_record(dele, version))
    assert (got["api_key"], got["tip"], got["broker"], got["state"]) == (2, ("orders", TOPIC_ID, 7), 2, 2)


def _hand_built_segment_record(extra_tags: bytes) -> bytes:
    """A v1 segment record written byte by byte from the JSON schema, with ``extra_tags``."""
    out = bytearray([1, 0, 1])                                    # frame 1, api key 0, version 1
    out += bytes([len("orders") + 1]) + b"orders" + TOPIC_ID + struct.pack(">i", 7) + b"\x00"
    out += SEGMENT_ID + b"\x00"
    out += struct.pack(">qqiqq", 0, 99, 1, 1000, 2000)
    out += bytes([2]) + struct.pack(">iq", 4, 0) + b"\x00"        # one epoch entry
    out += struct.pack(">i", 512) + b"\x00" + struct.pack(">b", 1)   # size, null custom, FINISHED
    return bytes(out) + extra_tags


def test_decode_reads_hand_built_bytes_and_skips_unknown_tags():
    # tags: 0 TxnIndexEmpty=true, 1 BrokerLeaderEpoch=4, 77 unknown (3 bytes): skipped
    tags = bytes([3, 0, 1, 1, 1, 4]) + struct.pack(">i", 4) + bytes([77, 3]) + b"xyz"
    rec = rlm.decode_record(_hand_built_segment_record(tags), where="__remote_log_metadata-3 offset 9")
    assert isinstance(rec, rlm.SegmentRecord)
    assert rec.remote_log_segment_id.topic_id_partition.name == "orders"
    assert bytes(rec.remote_log_segment_id.id) == SEGMENT_ID
    assert (rec.start_offset, rec.end_offset, rec.segment_size_in_bytes) == (0, 99, 512)
    assert [(e.leader_epoch, e.offset) for e in rec.segment_leader_epochs] == [(4, 0)]
    assert rec.custom_metadata is None and rec.remote_log_segment_state == rlm.COPY_SEGMENT_FINISHED
    assert rec.txn_index_empty is True and rec.broker_leader_epoch == 4


@pytest.mark.parametrize("value,fragment", [
    (b"", "truncated"),
    (bytes([2, 0, 0]), "frame version 2"),
    (bytes([1, 9, 0]), "unknown metadata record api key 9"),
    (bytes([1, 0, 7]), "version 7"),
    (bytes([1, 0, 1, 7, 0x6f]), "RemoteLogSegmentMetadataRecord v1"),
])
def test_undecodable_records_name_the_partition_and_offset(value, fragment):
    with pytest.raises(ProtocolError) as info:
        rlm.decode_record(value, where="__remote_log_metadata-12 offset 345")
    assert "__remote_log_metadata-12 offset 345" in str(info.value) and fragment in str(info.value)


@pytest.mark.parametrize("version", [0, 1])
def test_topic_id_is_read_without_decoding_each_kind_of_record(version):
    """Planners pass over other topics' records by their topic id alone."""
    U, D = rlm.SegmentUpdate, rlm.PartitionDelete
    upd = U(remote_log_segment_id=U.RemoteLogSegmentIdEntry(
        topic_id_partition=U.TopicIdPartitionEntry(name="a-much-longer-topic-name", id=TOPIC_ID, partition=7),
        id=SEGMENT_ID), broker_id=1, event_timestamp_ms=42, remote_log_segment_state=1)
    dele = D(topic_id_partition=D.TopicIdPartitionEntry(name="", id=TOPIC_ID, partition=0),
             broker_id=2, event_timestamp_ms=43, remote_partition_delete_state=0)
    for rec in (segment_record(), upd, dele):
        assert rlm.topic_id_of(rlm.encode_record(rec, version)) == TOPIC_ID
    assert rlm.topic_id_of(_hand_built_segment_record(b"\x00")) == TOPIC_ID


@pytest.mark.parametrize("value", [b"", bytes([2, 0, 0]), bytes([1, 9, 0]), bytes([1, 0, 1, 7, 0x6f]),
                                   bytes([1, 0, 1, 1]) + TOPIC_ID[:15]])
def test_topic_id_of_what_is_no_record_is_none(value):
    assert rlm.topic_id_of(value) is None       # decode_record then names what is wrong


# ---- the partitioner ------------------------------------------------------------------------------
def java_objects_hash_of(topic_id: bytes, partition: int) -> int:
    """Java's Objects.hash(Long lsb, Long msb, Integer partition), computed plainly."""
    def to_int32(v):
        v %= 1 << 32
        return v - (1 << 32) if v >= 1 << 31 else v

    def long_hash(v):
        u = v % (1 << 64)
        return to_int32(u ^ (u >> 32))

    msb = int.from_bytes(topic_id[:8], "big", signed=True)
    lsb = int.from_bytes(topic_id[8:], "big", signed=True)
    h = 1
    for element_hash in (long_hash(lsb), long_hash(msb), partition):
        h = to_int32(31 * h + element_hash)
    return h


def test_partitioner_matches_kafkas_rule_computed_independently():
    rng = random.Random(1248)
    for _ in range(2000):
        tid = bytes(rng.getrandbits(8) for _ in range(16))
        partition = rng.randrange(0, 10_000)
        n = rng.choice([1, 3, 50, 64, 100])
        h = java_objects_hash_of(tid, partition)
        want = (kafka_python_murmur2(struct.pack(">i", h)) & 0x7FFFFFFF) % n
        assert rlm.metadata_partition(tid, partition, n) == want


def test_murmur2_agrees_with_kafka_python_on_every_tail_length():
    for n in range(0, 40):
        data = os.urandom(n)
        assert rlm.murmur2(data) % (1 << 32) == kafka_python_murmur2(data) % (1 << 32)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_round_trips(version):
    R = m.OffsetForLeaderEpochRequest
    req = R(replica_id=-1, topics=[R.OffsetForLeaderTopic(topic="t", partitions=[
        R.OffsetForLeaderPartition(partition=3, current_leader_epoch=5, leader_epoch=4)])])
    back = R.decode(req.encode(version), version)
    assert back.topics[0].partitions[0].leader_epoch == 4
    S = m.OffsetForLeaderEpochResponse
    resp = S(throttle_time_ms=0, topics=[S.OffsetForLeaderTopicResult(topic="t", partitions=[
        S.OffsetForLeaderPartitionResult(error_code=0, partition=3, leader_epoch=4, end_offset=1234)])])
    got = S.decode(resp.encode(version), version).topics[0].partitions[0]
    assert (got.leader_epoch, got.end_offset) == (4, 1234)
