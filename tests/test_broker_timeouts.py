"""Spark's Kafka source options that bound the broker client: ``kafkaConsumer.pollTimeoutMs``
(how long a fetch of records may take before the task fails, Spark's consumer poll timeout) and
``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs`` (how often an offset look-up is
tried, and how long apart, as Spark's ``KafkaOffsetReaderAdmin.withRetries`` does).

The faults are real answers of the embedded broker, held back or rewritten on their way by the
Kafka-aware proxy of test_faults_broker; what is asserted is counted (requests in the proxy's
log, the offsets of the rows) or bounded from below (a wait the client must have made), never a
wall-clock window a loaded machine could miss.
"""
from __future__ import annotations

import time

import pytest

import test_faults_broker
from spark_helpers import read_tasks
from test_faults_broker import (FETCH, PART, TOPIC, WANT, KafkaProxy, _fetch_with_records,  # noqa: F401
                                assert_exactly, options)

from kafka_tiered_source import planning
from kafka_tiered_source.errors import BrokerError
from kafka_tiered_source.protocol import codec, messages as m

# test_faults_broker's fixtures (orders-0 imported and tiered, and the Kafka-aware proxy in
# front of it), as this module's own
cluster, proxy = test_faults_broker.cluster, test_faults_broker.proxy

LIST_OFFSETS = m.ListOffsetsRequest.API_KEY
UNKNOWN_SERVER_ERROR = -1          # Kafka's Errors.UNKNOWN_SERVER_ERROR: not retriable


def failing_list_offsets(times: int):
    """A fault that turns the first ``times`` ListOffsets answers into UNKNOWN_SERVER_ERROR for
    every partition (a non-retriable error: the client's own retries do not hide it)."""
    state = {"left": times}

    def fault(key, version, frame):
        if key != LIST_OFFSETS or state["left"] == 0:
            return None
        state["left"] -= 1
        cid, resp = codec.decode_response(frame[4:], key, version)
        for t in resp.topics:
            for p in t.partitions:
                p.error_code, p.offset, p.timestamp = UNKNOWN_SERVER_ERROR, -1, -1
        return ("replace", codec.encode_response(resp, version, cid))

    return fault


def list_offsets_times(proxy: KafkaProxy) -> list[float]:
    return [t for (k, _), t in zip(proxy.log, proxy.times, strict=True) if k == LIST_OFFSETS]


def test_offset_lookups_are_tried_fetch_offset_num_retries_times_then_the_read_goes_on(cluster, proxy):
    interval_ms = 200
    opts = options(proxy.bootstrap, cluster, direct=False, **{
        "fetchOffset.numRetries": "3", "fetchOffset.retryIntervalMs": str(interval_ms)})
    proxy.faults.append(failing_list_offsets(2))
    plan = planning.plan(opts)
    # two failed attempts and the third that answered, each a request the broker saw; the
    # attempts are at least fetchOffset.retryIntervalMs apart
    times = list_offsets_times(proxy)
    assert len(proxy.fired) == 2 and len(times) >= 3
    assert times[1] - times[0] >= interval_ms / 1000 and times[2] - times[1] >= interval_ms / 1000
    batches, _ = read_tasks(opts, plan.tasks)
    assert_exactly(batches, WANT)


def test_offset_lookups_fail_after_fetch_offset_num_retries_attempts_naming_the_error(cluster, proxy):
    opts = options(proxy.bootstrap, cluster, direct=False, **{
        "fetchOffset.numRetries": "2", "fetchOffset.retryIntervalMs": "0"})
    proxy.faults.append(failing_list_offsets(2))
    with pytest.raises(BrokerError) as info:
        planning.plan(opts)
    assert info.value.error_name == "UNKNOWN" and info.value.api == "ListOffsets"
    assert f"topic {TOPIC}" in str(info.value)
    # exactly the two attempts numRetries allows: no third request
    assert len(proxy.fired) == 2 and len(list_offsets_times(proxy)) == 2


def _slow_records(seconds: float, times: int = 10**9):
    """Hold the first ``times`` Fetch answers that carry records for ``seconds`` each."""
    state = {"left": times}

    def fault(key, version, frame):
        if state["left"] == 0 or not _fetch_with_records(key, version, frame):
            return None
        state["left"] -= 1
        return ("delay", seconds)
    return fault


def test_a_fetch_slower_than_poll_timeout_fails_the_task_naming_the_offset(cluster, proxy):
    opts = options(proxy.bootstrap, cluster, direct=False, **{"kafkaConsumer.pollTimeoutMs": "300"})
    plan = planning.plan(opts)
    proxy.faults.append(_slow_records(30.0))
    t0 = time.monotonic()
    with pytest.raises(BrokerError) as info:
        read_tasks(opts, plan.tasks)
    waited = time.monotonic() - t0
    text = str(info.value)
    assert info.value.error_name == "REQUEST_TIMED_OUT"
    first = plan.tasks[0].ranges[0]          # the reader's first fetch
    assert f"no answer for offset {first.offset_start} within kafkaConsumer.pollTimeoutMs=300 ms" in text, text
    assert f"topic {TOPIC} partition {PART}" in text
    # it gave up on its own deadline: the held answer (30 s) was not waited for
    assert 0.3 <= waited < 20


def test_poll_timeout_bounds_each_fetch_not_the_task(cluster, proxy):
    """Five answers held 0.4 s each: 2 s of waiting in one task, each fetch within the 1 s."""
    opts = options(proxy.bootstrap, cluster, direct=False, **{"kafkaConsumer.pollTimeoutMs": "1000"})
    plan = planning.plan(opts)
    proxy.faults.append(_slow_records(0.4, times=5))
    batches, _ = read_tasks(opts, plan.tasks)
    assert len(proxy.fired) == 5
    assert_exactly(batches, WANT)
