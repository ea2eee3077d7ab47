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


async def list_offsets(broker, conn, hdr, req, v):
    R = m.ListOffsetsResponse
    topics_out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            pr = R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0,
                                                timestamp=-1, offset=-1, leader_epoch=-1)
            need = _LIST_OFFSETS_MIN_VERSION.get(p.timestamp)
            if need is not None and v < need:
                pr.error_code = err("UNSUPPORTED_VERSION")
            else:
                try:
                    off, ts = await asyncio.to_thread(broker.storage.list_offsets, t.name, p.partition_index,
                                                      p.timestamp, req.isolation_level if v >= 2 else 0)
                except StorageError as exc:
                    pr.error_code = exc.error_code
                else:
                    pr.offset, pr.timestamp = off, ts
                    pr.leader_epoch = 0 if off >= 0 else -1
            parts.append(pr)
        topics_out.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics_out)
