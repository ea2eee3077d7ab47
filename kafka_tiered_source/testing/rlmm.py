"""The embedded broker's ``__remote_log_metadata`` topic, written as Kafka's
TopicBasedRemoteLogMetadataManager writes it, so readers can find tiered segments the way
today's brokers do.

Each event is one record with a null key in the partition Kafka's partitioner picks for the
topic-partition (:func:`~kafka_tiered_source.protocol.remote_log_metadata.metadata_partition`):

* a copy: a segment record in state COPY_SEGMENT_STARTED before any object is written, then an
  update to COPY_SEGMENT_FINISHED carrying the RemoteStorageManager's custom metadata;
* a deletion (retention, DeleteRecords): DELETE_SEGMENT_STARTED before the objects go, then
  DELETE_SEGMENT_FINISHED;
* a deleted topic: partition delete records DELETE_PARTITION_MARKED, _STARTED, _FINISHED.

The topic is an ordinary topic of the broker (created with the remote storage, never tiered),
so any client can ``assign()`` and read it.
"""
from __future__ import annotations

import struct
import time

import crc32c

from ..ids import uuid_from_str
from ..protocol import remote_log_metadata as rlm
from ..protocol.primitives import write_varlong

R = rlm.SegmentRecord
U = rlm.SegmentUpdate
D = rlm.PartitionDelete


def _varint(n: int) -> bytes:
    out = bytearray()
    write_varlong(out, n)
    return bytes(out)


def record_batch(value: bytes, timestamp_ms: int) -> bytes:
    """A v2 batch of one record with a null key, as a producer sends it (offsets assigned on
    append, no compression, no producer id)."""
    body = b"\x00" + _varint(0) + _varint(0) + _varint(-1) + _varint(len(value)) + value + _varint(0)
    record = _varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, 0, timestamp_ms, timestamp_ms, -1, -1, -1, 1) + record
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc32c.crc32c(after_crc)) + after_crc


class RemoteLogMetadataWriter:
    """Writes the events of one broker.  ``append(partition, batch)`` appends to
    ``__remote_log_metadata``; ``partitions`` is its partition count."""

    def __init__(self, append, partitions: int, *, broker_id: int = 0, version: int = 1):
        self.append = append
        self.partitions = partitions
        self.broker_id = broker_id
        self.version = version

    def _write(self, topic_id: str, partition: int, record) -> None:
        mp = rlm.metadata_partition(uuid_from_str(topic_id), partition, self.partitions)
        now = int(time.time() * 1000)
        self.append(mp, record_batch(rlm.encode_record(record, self.version), now))

    @staticmethod
    def _segment_id(meta):
        return R.RemoteLogSegmentIdEntry(
            topic_id_partition=R.TopicIdPartitionEntry(name=meta.topic, id=uuid_from_str(meta.topic_id),
                                                       partition=meta.partition),
            id=uuid_from_str(meta.segment_id))

    def copy_started(self, meta, leader_epoch: int) -> None:
        self._write(meta.topic_id, meta.partition, R(
            remote_log_segment_id=self._segment_id(meta), start_offset=meta.base_offset,
            end_offset=meta.end_offset, broker_id=self.broker_id, max_timestamp_ms=meta.max_timestamp,
            event_timestamp_ms=int(time.time() * 1000),
            segment_leader_epochs=[R.SegmentLeaderEpochEntry(leader_epoch=e, offset=o)
                                   for e, o in sorted(meta.leader_epochs.items())],
            segment_size_in_bytes=meta.size_bytes, custom_metadata=None,
            remote_log_segment_state=rlm.COPY_SEGMENT_STARTED, txn_index_empty=meta.txn_index_empty,
            broker_leader_epoch=leader_epoch))

    def _update(self, meta, state: int, leader_epoch: int, custom=None) -> None:
        self._write(meta.topic_id, meta.partition, U(
            remote_log_segment_id=self._segment_id(meta), broker_id=self.broker_id,
            event_timestamp_ms=int(time.time() * 1000), custom_metadata=custom,
            remote_log_segment_state=state, broker_leader_epoch=leader_epoch, end_offset=meta.end_offset))

    def copy_finished(self, meta, leader_epoch: int) -> None:
        self._update(meta, rlm.COPY_SEGMENT_FINISHED, leader_epoch, meta.custom_metadata_bytes)

    def delete_started(self, meta, leader_epoch: int) -> None:
        self._update(meta, rlm.DELETE_SEGMENT_STARTED, leader_epoch)

    def delete_finished(self, meta, leader_epoch: int) -> None:
        self._update(meta, rlm.DELETE_SEGMENT_FINISHED, leader_epoch)

    def partition_deleted(self, topic: str, topic_id: str, partition: int, leader_epoch: int,
                          end_offset: int) -> None:
        for state in (rlm.DELETE_PARTITION_MARKED, rlm.DELETE_PARTITION_STARTED, rlm.DELETE_PARTITION_FINISHED):
            self._write(topic_id, partition, D(
                topic_id_partition=D.TopicIdPartitionEntry(name=topic, id=uuid_from_str(topic_id),
                                                           partition=partition),
                broker_id=self.broker_id, event_timestamp_ms=int(time.time() * 1000),
                remote_partition_delete_state=state, broker_leader_epoch=leader_epoch,
                end_offset=end_offset))
