"""Transactions: InitProducerId, AddPartitionsToTxn, EndTxn, the markers they write and the
timeout that aborts a forgotten transaction."""
from __future__ import annotations

import asyncio
import logging

from ...protocol import messages as m
from ..coordinator import CoordinatorError, EndTxnPlan
from ._shared import err

log = logging.getLogger(__name__)


async def _write_markers(broker, plan: EndTxnPlan) -> None:
    for topic, partition in plan.partitions:
        await asyncio.to_thread(broker.storage.write_txn_marker, topic, partition, plan.producer_id,
                                plan.epoch, plan.commit, 0)
        broker.notify(topic, partition)
    broker.coordinator.complete(plan)


async def abort_timed_out_transactions(broker) -> None:
    for plan in broker.coordinator.pending():
        log.info("completing the transaction of %r left half-written by the last run", plan.transactional_id)
        try:
            await _write_markers(broker, plan)
        except Exception:
            log.exception("completing the transaction of %r failed", plan.transactional_id)
    while True:
        await asyncio.sleep(broker.config.txn_timeout_check_s)
        for plan in broker.coordinator.expire():
            log.warning("transaction of %r (producer %d) ran past its timeout: aborting it",
                        plan.transactional_id, plan.producer_id)
            try:
                await _write_markers(broker, plan)
            except Exception:
                log.exception("aborting the timed-out transaction of %r failed", plan.transactional_id)


async def init_producer_id(broker, conn, hdr, req, v):
    R = m.InitProducerIdResponse
    try:
        pid, epoch, plan = broker.coordinator.init_producer_id(
            req.transactional_id, req.transaction_timeout_ms,
            req.producer_id if v >= 3 else -1, req.producer_epoch if v >= 3 else -1)
    except CoordinatorError as exc:
        return R(throttle_time_ms=0, error_code=exc.error_code, producer_id=-1, producer_epoch=-1)
    if plan is not None:
        log.info("transactional id %r re-initialised: aborting its open transaction on %d partition(s)",
                 req.transactional_id, len(plan.partitions))
        await _write_markers(broker, plan)
    return R(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch)


async def add_partitions_to_txn(broker, conn, hdr, req, v):
    R = m.AddPartitionsToTxnResponse
    wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    known = {n: i.partitions for n, i in broker.storage.topics.items()}
    unknown = {(t, p) for t, p in wanted if p < 0 or p >= known.get(t, 0)}
    codes = {}
    if unknown:
        for tp in wanted:
            codes[tp] = err("UNKNOWN_TOPIC_OR_PARTITION") if tp in unknown else err("OPERATION_NOT_ATTEMPTED")
    else:
        try:
            broker.coordinator.add_partitions(req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                            req.v3_and_below_producer_epoch, wanted)
            code = 0
        except CoordinatorError as exc:
            code = exc.error_code
        codes = {tp: code for tp in wanted}
    by_topic: dict[str, list] = {}
    for (t, p), code in codes.items():
        by_topic.setdefault(t, []).append(R.AddPartitionsToTxnPartitionResult(partition_index=p,
                                                                             partition_error_code=code))
    return R(throttle_time_ms=0, results_by_topic_v3_and_below=[
        R.AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()])


async def end_txn(broker, conn, hdr, req, v):
    R = m.EndTxnResponse
    try:
        plan = broker.coordinator.end_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                        req.committed)
    except CoordinatorError as exc:
        return R(throttle_time_ms=0, error_code=exc.error_code)
    if not plan.already_done:
        await _write_markers(broker, plan)
    return R(throttle_time_ms=0, error_code=0)
