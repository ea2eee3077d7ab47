"""ListOffsets: earliest, latest, timestamps and the special timestamps -3 to -6."""
from __future__ import annotations

import asyncio
import logging

from ...protocol import messages as m
from ..log import StorageError
from ._shared import err

log = logging.getLogger(__name__)


# ListOffsets special timestamps and the first version that may carry them
_LIST_OFFSETS_MIN_VERSION = {-3: 7, -4: 8, -5: 9, -6: 11}


def _list_all(storage, asks, isolation_level: int) -> list:
    """``storage.list_offsets`` and the found offset's leader epoch for each ``(topic,
    partition, timestamp)``, in one hop to a worker thread (a hop per partition cost more than
    the look-ups when a planner lists thousands of partitions); a StorageError in its place."""
    out: list = []
    for name, partition, timestamp in asks:
        try:
            off, ts = storage.list_offsets(name, partition, timestamp, isolation_level)
            out.append((off, ts, storage.epoch_for_offset(name, partition, off) if off >= 0 else -1))
        except StorageError as exc:
            out.append(exc)
    return out


async def list_offsets(broker, conn, hdr, req, v):
    R = m.ListOffsetsResponse
    asks = [(t.name, p.partition_index, p.timestamp) for t in req.topics for p in t.partitions
            if not v < _LIST_OFFSETS_MIN_VERSION.get(p.timestamp, v)]
    found = iter(await asyncio.to_thread(_list_all, broker.storage, asks, req.isolation_level if v >= 2 else 0)
                 if asks else ())
    topics_out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            pr = R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0,
                                                timestamp=-1, offset=-1, leader_epoch=-1)
            if v < _LIST_OFFSETS_MIN_VERSION.get(p.timestamp, v):
                pr.error_code = err("UNSUPPORTED_VERSION")
            else:
                got = next(found)
                if isinstance(got, StorageError):
                    pr.error_code = got.error_code
                else:
                    pr.offset, pr.timestamp, pr.leader_epoch = got
            parts.append(pr)
        topics_out.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics_out)


async def offset_for_leader_epoch(broker, conn, hdr, req, v):
    """The end offset of each asked leader epoch on this partition's lineage (the leader-epoch
    cache): the largest epoch at or below it, and where that one ends.  A request that names
    the partition's current leader epoch is fenced as Partition.localLogWithEpochOrThrow does:
    an older one is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (KIP-320)."""
    R = m.OffsetForLeaderEpochResponse
    topics_out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            pr = R.OffsetForLeaderPartitionResult(error_code=0, partition=p.partition, leader_epoch=-1,
                                                  end_offset=-1)
            try:
                current = broker.storage.leader_epoch(t.topic, p.partition)
                if 0 <= p.current_leader_epoch != current:
                    pr.error_code = err("FENCED_LEADER_EPOCH" if p.current_leader_epoch < current
                                        else "UNKNOWN_LEADER_EPOCH")
                else:
                    pr.leader_epoch, pr.end_offset = await asyncio.to_thread(
                        broker.storage.end_offset_for_epoch, t.topic, p.partition, p.leader_epoch)
            except StorageError as exc:
                pr.error_code = exc.error_code
            parts.append(pr)
        topics_out.append(R.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return R(throttle_time_ms=0, topics=topics_out)
