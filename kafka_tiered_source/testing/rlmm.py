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

Records are version 0, as today's Kafka writes them.  ``kip1266=True`` writes what KIP-1266
proposes for a compacted metadata topic (provisional, not in any release): version 1 records
with the tagged BrokerLeaderEpoch (and EndOffset on updates), a UTF-8 key
``topicId:topicName:partition:endOffset:brokerLeaderEpoch`` (``:UPDATE`` appended on updates),
and tombstones (null values) for both keys once a copy reached DELETE_SEGMENT_FINISHED.

The topic is an ordinary topic of the broker (created with the remote storage, never tiered),
so any client can ``assign()`` and read it.  :class:`RemoteLogMetadataCache` is what a broker
builds from it to serve remote reads (Kafka's class of that name).
"""
from __future__ import annotations

import bisect
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


def record_batch(value: bytes | None, timestamp_ms: int, key: bytes | None = None) -> bytes:
    """A v2 batch of one record (a null key unless given; a null value is a tombstone), as a
    producer sends it (offsets assigned on append, no compression, no producer id)."""
    k = _varint(-1) if key is None else _varint(len(key)) + key
    v = _varint(-1) if value is None else _varint(len(value)) + value
    body = b"\x00" + _varint(0) + _varint(0) + k + v + _varint(0)
    record = _varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, 0, timestamp_ms, timestamp_ms, -1, -1, -1, 1) + record
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc32c.crc32c(after_crc)) + after_crc


class RemoteLogMetadataWriter:
    """Writes the events of one broker.  ``append(partition, batch)`` appends to
    ``__remote_log_metadata``; ``partitions`` is its partition count; ``kip1266``: keyed v1
    records and tombstones (see the module doc).  ``listeners`` get every record written (the
    broker's own cache consumes the topic, as TopicBasedRemoteLogMetadataManager does)."""

    def __init__(self, append, partitions: int, *, broker_id: int = 0, kip1266: bool = False):
        self.append = append
        self.partitions = partitions
        self.broker_id = broker_id
        self.kip1266 = kip1266
        self.version = 1 if kip1266 else 0

    def _write(self, topic_id: str, partition: int, record, key: bytes | None = None) -> None:
        mp = rlm.metadata_partition(uuid_from_str(topic_id), partition, self.partitions)
        now = int(time.time() * 1000)
        self.append(mp, record_batch(rlm.encode_record(record, self.version), now,
                                     key if self.kip1266 else None))

    def _key(self, meta, leader_epoch: int, update: bool = False) -> bytes:
        key = f"{meta.topic_id}:{meta.topic}:{meta.partition}:{meta.end_offset}:{leader_epoch}"
        return (key + (":UPDATE" if update else "")).encode()

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
            broker_leader_epoch=leader_epoch), self._key(meta, meta.copy_epoch))

    def _update(self, meta, state: int, leader_epoch: int, custom=None) -> None:
        self._write(meta.topic_id, meta.partition, U(
            remote_log_segment_id=self._segment_id(meta), broker_id=self.broker_id,
            event_timestamp_ms=int(time.time() * 1000), custom_metadata=custom,
            remote_log_segment_state=state, broker_leader_epoch=leader_epoch, end_offset=meta.end_offset),
            self._key(meta, meta.copy_epoch, update=True))

    def copy_finished(self, meta, leader_epoch: int) -> None:
        self._update(meta, rlm.COPY_SEGMENT_FINISHED, leader_epoch, meta.custom_metadata_bytes)

    def delete_started(self, meta, leader_epoch: int) -> None:
        self._update(meta, rlm.DELETE_SEGMENT_STARTED, leader_epoch)

    def delete_finished(self, meta, leader_epoch: int) -> None:
        self._update(meta, rlm.DELETE_SEGMENT_FINISHED, leader_epoch)
        if self.kip1266:   # the copy is gone: compaction may drop its records
            mp = rlm.metadata_partition(uuid_from_str(meta.topic_id), meta.partition, self.partitions)
            now = int(time.time() * 1000)
            for key in (self._key(meta, meta.copy_epoch), self._key(meta, meta.copy_epoch, update=True)):
                self.append(mp, record_batch(None, now, key))

    def partition_deleted(self, topic: str, topic_id: str, partition: int, leader_epoch: int,
                          end_offset: int) -> None:
        for state in (rlm.DELETE_PARTITION_MARKED, rlm.DELETE_PARTITION_STARTED, rlm.DELETE_PARTITION_FINISHED):
            self._write(topic_id, partition, D(
                topic_id_partition=D.TopicIdPartitionEntry(name=topic, id=uuid_from_str(topic_id),
                                                           partition=partition),
                broker_id=self.broker_id, event_timestamp_ms=int(time.time() * 1000),
                remote_partition_delete_state=state, broker_leader_epoch=leader_epoch,
                end_offset=end_offset), f"{topic_id}:{topic}:{partition}:DELETE_PARTITION".encode())


class RemoteLogMetadataCache:
    """One partition's RemoteLogMetadataCache as a Kafka broker keeps it: per leader epoch a
    RemoteLogLeaderEpochState (``offsetToId``: the epoch's start offset in each finished copy,
    sorted, mapped to the copy; ``highestLogOffset``), fed the copies' state changes in the
    order the metadata topic holds them.  ``metas``: segment id -> the copy's metadata."""

    def __init__(self):
        self.metas: dict = {}
        self.epochs: dict[int, list] = {}          # epoch -> [offsetToId as sorted [(start, id)], highest]

    @staticmethod
    def _epoch_end(meta, epoch: int) -> int:
        """RemoteLogMetadataCache.highestOffsetForEpoch(epoch, segment)."""
        later = sorted(o for e, o in meta.leader_epochs.items() if e > epoch)
        return later[0] - 1 if later else meta.end_offset

    def copy_finished(self, meta) -> None:
        """handleSegmentWithCopySegmentFinishedState, for each of the copy's epochs."""
        self.metas[meta.segment_id] = meta
        for epoch, start in sorted(meta.leader_epochs.items()):
            end = self._epoch_end(meta, epoch)
            state = self.epochs.setdefault(epoch, [[], None])
            offset_to_id, highest = state
            while offset_to_id and offset_to_id[-1][0] >= start and highest <= end:
                offset_to_id.pop()
            i = bisect.bisect_left(offset_to_id, (start, ""))
            if i < len(offset_to_id) and offset_to_id[i][0] == start:   # NavigableMap.put replaces
                offset_to_id[i] = (start, meta.segment_id)
            else:
                offset_to_id.insert(i, (start, meta.segment_id))
            if highest is None or end > highest:
                state[1] = end

    def delete_started(self, meta) -> None:
        """handleSegmentWithDeleteSegmentStartedState: offsetToId.remove(start, id)."""
        for epoch, start in meta.leader_epochs.items():
            state = self.epochs.get(epoch)
            if state is not None and (start, meta.segment_id) in state[0]:
                state[0].remove((start, meta.segment_id))

    def delete_finished(self, meta) -> None:
        self.metas.pop(meta.segment_id, None)

    def lookup(self, epoch: int, offset: int):
        """remoteLogSegmentMetadata(leaderEpoch, offset): the floor entry of the epoch's map,
        if that copy's part of the epoch reaches ``offset``; else None."""
        state = self.epochs.get(epoch)
        if state is None:
            return None
        i = bisect.bisect_right(state[0], (offset, "\uffff")) - 1
        if i < 0:
            return None
        meta = self.metas.get(state[0][i][1])
        if meta is None or offset > self._epoch_end(meta, epoch):
            return None
        return meta

    def highest_offset_for_epoch(self, epoch: int) -> int | None:
        state = self.epochs.get(epoch)
        return None if state is None else state[1]
