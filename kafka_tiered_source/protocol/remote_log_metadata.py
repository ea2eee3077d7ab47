"""``__remote_log_metadata``: the records today's brokers keep their tiered segments in
(Kafka 3.6+, TopicBasedRemoteLogMetadataManager), declared once as data and read and written
with the same codec as the wire protocol.

Transcribed from apache/kafka ``storage/src/main/resources/message/``
(RemoteLogSegmentMetadataRecord.json, RemoteLogSegmentMetadataUpdateRecord.json,
RemotePartitionDeleteMetadataRecord.json).  A record's value is a frame
(``AbstractApiMessageSerde``): unsigned varint frame version (1), unsigned varint api key,
unsigned varint record version, then the record, flexible-encoded (tagged fields; unknown
tags are skipped, so newer brokers' records still read).  Keys are null.

Which partition of the topic holds a topic-partition's records is
:func:`metadata_partition` (``RemoteLogMetadataTopicPartitioner``): Kafka's murmur2 over the
four big-endian bytes of Java's ``Objects.hash(topicId LSB, topicId MSB, partition)``, made
positive, modulo the topic's partition count (50 by default; take it from Metadata).
"""
from __future__ import annotations

from typing import Any

from ..dataclass import dataclass
from ..errors import ProtocolError
from ..ids import uuid_from_str, uuid_to_str
from .primitives import read_uvarint, write_uvarint
from .schema import Field as F, Message
from .structs import build_message_class

FRAME_VERSION = 1
TOPIC = "__remote_log_metadata"
DEFAULT_PARTITIONS = 50

# RemoteLogSegmentState ids
COPY_SEGMENT_STARTED = 0
COPY_SEGMENT_FINISHED = 1
DELETE_SEGMENT_STARTED = 2
DELETE_SEGMENT_FINISHED = 3
SEGMENT_STATES = {COPY_SEGMENT_STARTED: "COPY_SEGMENT_STARTED", COPY_SEGMENT_FINISHED: "COPY_SEGMENT_FINISHED",
                  DELETE_SEGMENT_STARTED: "DELETE_SEGMENT_STARTED",
                  DELETE_SEGMENT_FINISHED: "DELETE_SEGMENT_FINISHED"}
# RemotePartitionDeleteState ids
DELETE_PARTITION_MARKED = 0
DELETE_PARTITION_STARTED = 1
DELETE_PARTITION_FINISHED = 2


def _topic_id_partition() -> list[F]:
    return [F("Name", "string", "0+"), F("Id", "uuid", "0+"), F("Partition", "int32", "0+")]


def _segment_id() -> list[F]:
    return [F("TopicIdPartition", "TopicIdPartitionEntry", "0+", fields=_topic_id_partition()),
            F("Id", "uuid", "0+")]


SEGMENT_RECORD = Message("RemoteLogSegmentMetadataRecord", 0, "metadata", valid="0-1", flexible="0+", fields=[
    F("RemoteLogSegmentId", "RemoteLogSegmentIdEntry", "0+", fields=_segment_id()),
    F("StartOffset", "int64", "0+"),
    F("EndOffset", "int64", "0+"),
    F("BrokerId", "int32", "0+"),
    F("MaxTimestampMs", "int64", "0+"),
    F("EventTimestampMs", "int64", "0+"),
    F("SegmentLeaderEpochs", "[]SegmentLeaderEpochEntry", "0+", fields=[
        F("LeaderEpoch", "int32", "0+"),
        F("Offset", "int64", "0+"),
    ]),
    F("SegmentSizeInBytes", "int32", "0+"),
    F("CustomMetadata", "bytes", "0+", nullable="0+", default=None),
    F("RemoteLogSegmentState", "int8", "0+"),
    F("TxnIndexEmpty", "bool", "0+", tag=0, tagged="0+"),
    F("BrokerLeaderEpoch", "int32", "1+", tag=1, tagged="1+"),
])

UPDATE_RECORD = Message("RemoteLogSegmentMetadataUpdateRecord", 1, "metadata", valid="0-1", flexible="0+", fields=[
    F("RemoteLogSegmentId", "RemoteLogSegmentIdEntry", "0+", fields=_segment_id()),
    F("BrokerId", "int32", "0+"),
    F("EventTimestampMs", "int64", "0+"),
    F("CustomMetadata", "bytes", "0+", nullable="0+", default=None),
    F("RemoteLogSegmentState", "int8", "0+"),
    F("BrokerLeaderEpoch", "int32", "1+", default=-1, tag=0, tagged="1+"),
    F("EndOffset", "int64", "1+", default=-1, tag=1, tagged="1+"),
])

PARTITION_DELETE_RECORD = Message("RemotePartitionDeleteMetadataRecord", 2, "metadata", valid="0-1",
                                  flexible="0+", fields=[
    F("TopicIdPartition", "TopicIdPartitionEntry", "0+", fields=_topic_id_partition()),
    F("BrokerId", "int32", "0+"),
    F("EventTimestampMs", "int64", "0+"),
    F("RemotePartitionDeleteState", "int8", "0+"),
    F("BrokerLeaderEpoch", "int32", "1+", tag=0, tagged="1+"),
    F("EndOffset", "int64", "1+", tag=1, tagged="1+"),
])

# Built from their declarations at import: their fields are attributes mypy cannot see.
SegmentRecord: Any = build_message_class(SEGMENT_RECORD, __name__)
SegmentUpdate: Any = build_message_class(UPDATE_RECORD, __name__)
PartitionDelete: Any = build_message_class(PARTITION_DELETE_RECORD, __name__)
BY_API_KEY: dict[int, Any] = {cls.API_KEY: cls for cls in (SegmentRecord, SegmentUpdate, PartitionDelete)}


def encode_record(record: Any, version: int | None = None) -> bytes:
    """The value of a metadata record: frame, api key, version, body.  ``version`` defaults to
    the highest (1)."""
    cls = type(record)
    version = cls.max_version() if version is None else version
    out = bytearray()
    for v in (FRAME_VERSION, cls.API_KEY, version):
        write_uvarint(out, v)
    return bytes(out) + record.encode(version)


def decode_record(value: Any, *, where: str) -> Any:
    """A metadata record from its value.  Anything that is not a record this code reads is a
    :class:`ProtocolError` naming ``where`` (the metadata partition and offset)."""
    buf = memoryview(value) if not isinstance(value, memoryview) else value
    try:
        frame, pos = read_uvarint(buf, 0)
        api_key, pos = read_uvarint(buf, pos)
        version, pos = read_uvarint(buf, pos)
    except ProtocolError as exc:
        raise ProtocolError(f"{where}: truncated metadata record header: {exc}") from None
    if frame != FRAME_VERSION:
        raise ProtocolError(f"{where}: metadata record frame version {frame}, expected {FRAME_VERSION}")
    cls = BY_API_KEY.get(api_key)
    if cls is None:
        raise ProtocolError(f"{where}: unknown metadata record api key {api_key} "
                            f"(known: {', '.join(f'{k} {c.NAME}' for k, c in BY_API_KEY.items())})")
    if version not in cls.VALID_VERSIONS:
        raise ProtocolError(f"{where}: {cls.NAME} version {version} is not readable "
                            f"(versions {cls.VALID_VERSIONS})")
    try:
        return cls.decode(buf[pos:], version, keep_unknown_tags=False)
    except ProtocolError as exc:
        raise ProtocolError(f"{where}: {cls.NAME} v{version}: {exc}") from None


def row_of(record: Any, offset: int) -> tuple:
    """A decoded metadata record as the compact row the planner replays
    (:meth:`~kafka_tiered_source.planning.remote_log_state.RemoteLogState.apply_row`); the native
    walk (native/rlm_rows.c) makes the same rows straight from the bytes::

        (0, offset, topic id, partition, topic name, segment id, start offset, end offset,
         max timestamp ms, segment size, ((leader epoch, offset), ...) ascending, custom metadata,
         txn index empty, state, broker leader epoch)          a segment record
        (1, offset, topic id, partition, segment id, state, custom metadata, end offset)   an update
        (2, offset, topic id, partition)                                     a partition delete

    ids are Kafka's Uuid strings."""
    if isinstance(record, SegmentRecord):
        sid = record.remote_log_segment_id
        tip = sid.topic_id_partition
        return (0, offset, uuid_to_str(bytes(tip.id)), tip.partition, tip.name, uuid_to_str(bytes(sid.id)),
                record.start_offset, record.end_offset, record.max_timestamp_ms, record.segment_size_in_bytes,
                tuple(sorted((e.leader_epoch, e.offset) for e in record.segment_leader_epochs)),
                _bytes(record.custom_metadata), bool(record.txn_index_empty), record.remote_log_segment_state,
                record.broker_leader_epoch)
    if isinstance(record, SegmentUpdate):
        sid = record.remote_log_segment_id
        tip = sid.topic_id_partition
        return (1, offset, uuid_to_str(bytes(tip.id)), tip.partition, uuid_to_str(bytes(sid.id)),
                record.remote_log_segment_state, _bytes(record.custom_metadata), record.end_offset)
    if isinstance(record, PartitionDelete):
        tip = record.topic_id_partition
        return (2, offset, uuid_to_str(bytes(tip.id)), tip.partition)
    raise TypeError(f"not a metadata record: {type(record).__name__}")


def _bytes(v: Any) -> bytes | None:
    return None if v is None else bytes(v)


def topic_id_of(value: Any) -> bytes | None:
    """The id of the topic a metadata record is about, read without decoding the record: every
    record starts with its TopicIdPartition (name, then id), so a planner can pass over the
    records of other topics, which share the metadata partitions and usually outnumber its own.
    None when the bytes are not a record this code reads (:func:`decode_record` then says what
    is wrong)."""
    buf = memoryview(value) if not isinstance(value, memoryview) else value
    try:
        frame, pos = read_uvarint(buf, 0)
        api_key, pos = read_uvarint(buf, pos)
        _, pos = read_uvarint(buf, pos)
        if frame != FRAME_VERSION or api_key not in BY_API_KEY:
            return None
        size, pos = read_uvarint(buf, pos)         # the topic name: a compact string
    except ProtocolError:
        return None
    pos += max(size - 1, 0)
    return bytes(buf[pos:pos + 16]) if len(buf) >= pos + 16 else None


@dataclass(frozen=True)
class TombstoneKey:
    """The copy a KIP-1266 tombstone ends, as its key names it: ``segment_id`` (the binary
    form), or ``end_offset`` and ``broker_epoch`` (the UTF-8 form, which names no segment id:
    the copy the leader of that epoch made of the segment ending there)."""
    topic_id: bytes
    partition: int
    segment_id: bytes | None = None
    end_offset: int | None = None
    broker_epoch: int | None = None


def tombstone_key(key: bytes | None) -> TombstoneKey | None:
    """What a tombstone's key names, in either form KIP-1266's pull requests propose (the KIP
    is under discussion; provisional): UTF-8 ``topicId:topicName:partition:endOffset:
    brokerLeaderEpoch`` (``:UPDATE`` appended for the update record's key), or 37 bytes: topic
    id, partition (int32), segment id, state (int8).  None for any other key."""
    if key is None:
        return None
    if len(key) == 37:
        return TombstoneKey(bytes(key[:16]), int.from_bytes(key[16:20], "big", signed=True), bytes(key[20:36]))
    try:
        parts = bytes(key).decode("utf-8").split(":")
        if len(parts) == 6 and parts[5] == "UPDATE":
            parts.pop()
        if len(parts) != 5:
            return None
        return TombstoneKey(uuid_from_str(parts[0]), int(parts[2]), None, int(parts[3]), int(parts[4]))
    except ValueError:   # UnicodeDecodeError included: not a key of either form
        return None


# -- which metadata partition --------------------------------------------------------------------
def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def _java_long_hash(v: int) -> int:
    """``Long.hashCode``: ``(int)(v ^ (v >>> 32))``."""
    u = v & 0xFFFFFFFFFFFFFFFF
    return _int32(u ^ (u >> 32))


def _java_objects_hash(*ints_and_longs: tuple[int, bool]) -> int:
    """``Objects.hash(...)`` of (value, is_long) pairs: 31 * h + element hash, int32 arithmetic."""
    h = 1
    for value, is_long in ints_and_longs:
        h = _int32(31 * h + (_java_long_hash(value) if is_long else _int32(value)))
    return h


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c), as a signed int32."""
    m, r = 0x5BD1E995, 24
    n = len(data)
    h = (0x9747B28C ^ n) & 0xFFFFFFFF
    for i in range(0, n - n % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = n % 4
    base = n - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return _int32(h)


def metadata_partition(topic_id: bytes, partition: int, partitions: int) -> int:
    """The ``__remote_log_metadata`` partition holding ``(topic_id, partition)``'s records."""
    if len(topic_id) != 16:
        raise ValueError(f"a topic id is 16 bytes, got {len(topic_id)}")
    msb = int.from_bytes(topic_id[:8], "big", signed=True)
    lsb = int.from_bytes(topic_id[8:], "big", signed=True)
    h = _java_objects_hash((lsb, True), (msb, True), (partition, False))
    return (murmur2(_int32(h).to_bytes(4, "big", signed=True)) & 0x7FFFFFFF) % partitions
