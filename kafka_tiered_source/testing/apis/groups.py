"""FindCoordinator, OffsetCommit and OffsetFetch: a plain committed-offset store (no group
membership)."""
from __future__ import annotations

import logging

from ...protocol import messages as m
from . import admin
from ._shared import NODE_ID, err, nested

log = logging.getLogger(__name__)


async def find_coordinator(broker, conn, hdr, req, v):
    R = m.FindCoordinatorResponse
    host, port = admin.address(broker)
    if req.key_type not in (0, 1):
        code, msg = err("INVALID_REQUEST"), f"coordinator key type {req.key_type} is not supported"
    else:
        code, msg = 0, None
    if v >= 4:
        return R(throttle_time_ms=0, coordinators=[
            R.Coordinator(key=k, node_id=NODE_ID if not code else -1, host=host if not code else "",
                          port=port if not code else -1, error_code=code, error_message=msg)
            for k in req.coordinator_keys])
    return R(throttle_time_ms=0, error_code=code, error_message=msg, node_id=NODE_ID if not code else -1,
             host=host if not code else "", port=port if not code else -1)


async def offset_commit(broker, conn, hdr, req, v):
    R = m.OffsetCommitResponse
    known = {n: i.partitions for n, i in broker.storage.topics.items()}
    rows, topics_out = [], []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            ok = 0 <= p.partition_index < known.get(t.name, 0)
            parts.append(R.OffsetCommitResponsePartition(
                partition_index=p.partition_index,
                error_code=0 if ok else err("UNKNOWN_TOPIC_OR_PARTITION")))
            if ok:
                rows.append((t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                             p.committed_metadata))
        topics_out.append(R.OffsetCommitResponseTopic(name=t.name, partitions=parts))
    if not req.group_id:
        for t in topics_out:
            for p in t.partitions:
                p.error_code = err("INVALID_GROUP_ID")
    elif rows:
        broker.coordinator.commit_offsets(req.group_id, rows)
    return R(throttle_time_ms=0, topics=topics_out)


def _committed_topics(broker, group: str, topics, part_cls, topic_cls):
    committed = broker.coordinator.committed(group)
    if topics is None:
        wanted = [(t, sorted(ps)) for t, ps in sorted(committed.items())]
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in topics]
    out = []
    for name, parts in wanted:
        got = committed.get(name, {})
        ps = []
        for p in parts:
            off, epoch, meta = got.get(p, (-1, -1, ""))
            ps.append(part_cls(partition_index=p, committed_offset=off, committed_leader_epoch=epoch,
                               metadata=meta if meta is not None else "", error_code=0))
        out.append(topic_cls(name=name, partitions=ps))
    return out


async def offset_fetch(broker, conn, hdr, req, v):
    R = m.OffsetFetchResponse
    if v >= 8:
        return R(throttle_time_ms=0, groups=[
            R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=0, topics=_committed_topics(broker, 
                g.group_id, g.topics, nested(R, "OffsetFetchResponsePartitions"),
                R.OffsetFetchResponseTopics))
            for g in req.groups])
    return R(throttle_time_ms=0, error_code=0, topics=_committed_topics(broker, 
        req.group_id, req.topics, nested(R, "OffsetFetchResponsePartition"), R.OffsetFetchResponseTopic))
