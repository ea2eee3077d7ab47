"""Produce: append producer batches (idempotent and transactional) to the partition logs."""
from __future__ import annotations

import asyncio
import logging

from ...protocol import messages as m
from ..log import StorageError
from ._shared import err

log = logging.getLogger(__name__)

async def produce(broker, conn, hdr, req, v):
    R = m.ProduceResponse
    acks_ok = req.acks in (0, 1, -1)
    topics_out = []
    for td in req.topic_data:
        parts = []
        for pd in td.partition_data:
            pr = R.PartitionProduceResponse(index=pd.index, error_code=0, base_offset=-1)
            if not acks_ok:
                pr.error_code = err("INVALID_REQUIRED_ACKS")
            elif pd.records is None or len(pd.records) == 0:
                pr.error_code = err("CORRUPT_MESSAGE")
                pr.error_message = "produce request without record batches"
            else:
                try:
                    r = await asyncio.to_thread(broker.storage.append, td.name, pd.index, bytes(pd.records))
                except StorageError as exc:
                    pr.error_code = exc.error_code
                    pr.error_message = str(exc)
                    log.info("produce to %s-%d from %r refused: %s", td.name, pd.index, hdr.client_id, exc)
                else:
                    pr.base_offset = r.base_offset
                    pr.log_append_time_ms = r.log_append_time
                    pr.log_start_offset = r.log_start_offset
                    broker.notify(td.name, pd.index)
            parts.append(pr)
        topics_out.append(R.TopicProduceResponse(name=td.name, partition_responses=parts))
    if req.acks == 0:
        return None
    return R(responses=topics_out, throttle_time_ms=0)
