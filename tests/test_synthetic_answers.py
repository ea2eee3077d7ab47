"""The KIP-1248 answers a synthesized partition writes from the copies it holds once
(testing/synthetic_tiers.py ``location_answer``, fetch_body.location_partition): byte for byte
what BrokerStorage.locate's answer, filled into the handler's PartitionData, encodes to through
the codec, for every offset and max bytes, both layouts, a lineage of two leader epochs; the
broker counts them as it counts the others; and where that path would answer differently (a
presigned URL, read_committed, a fenced leader epoch, a lineage cut by an unclean election, an
offset of the local log) the partition answers through BrokerStorage.locate.

Expected values come from the shape the partition was synthesized with (copy ``i`` holds
offsets ``i*RPS ..``, batch ``k`` of a copy starts at ``k*B``)."""
from __future__ import annotations

import pytest

from kafka_tiered_source.errors import BrokerError
from kafka_tiered_source.protocol import codec, messages as m
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source.testing.apis import fetch, fetch_body
from kafka_tiered_source.testing.synthetic_tiers import SyntheticTiers, synthesize

RPB, BPS, SEGMENTS, B = 2, 4, 5, 100    # records per batch, batches per copy, copies, batch bytes
RPS = RPB * BPS
BUMP = 2 * RPS + RPB                    # leader epoch 1 from here (a batch boundary inside copy 2)
END = SEGMENTS * RPS
TOPIC_ID = b"\x01" * 16


def _synth(cluster_factory, **kw):
    c = cluster_factory(**kw)
    c.create_topic("t", 1)
    synthesize(c.storage, "t", SyntheticTiers(SEGMENTS, BPS, RPB, B, leader_epochs=((0, 0), (1, BUMP))))
    return c


def _held(c, offset: int, max_bytes: int):
    part = c.storage.partition("t", 0)
    with part.lock:
        return part.remote.location_answer(part, offset, max_bytes)


def _through_codec(c, offset: int, max_bytes: int, version: int) -> bytes:
    """The answer as BrokerStorage.locate and the handler's PartitionData give it, encoded by
    the codec: the partition's bytes within a one-partition response."""
    R = m.FetchResponse
    loc = c.storage.locate("t", 0, offset, max_bytes, 0)
    part = R.PartitionData(partition_index=0, error_code=0, high_watermark=-1, last_stable_offset=-1,
                           log_start_offset=-1, records=b"", aborted_transactions=None)
    fetch._fill_location(part, loc)
    resp = R(throttle_time_ms=0, error_code=0, session_id=0,
             responses=[R.FetchableTopicResponse(topic="t", topic_id=TOPIC_ID, partitions=[part])])
    return codec.encode_response(resp, version, 7, framed=False)


def _written(held, version: int) -> bytes:
    R = m.FetchResponse
    resp = R(throttle_time_ms=0, error_code=0, session_id=0,
             responses=[R.FetchableTopicResponse(topic="t", topic_id=TOPIC_ID, partitions=[held])])
    return fetch_body.encode(resp, version).body


@pytest.mark.parametrize("layout", ["aiven", "kafka-local-tiered"])
def test_held_answers_are_the_codecs_bytes(cluster_factory, layout):
    c = _synth(cluster_factory, layout=layout)
    for max_bytes in (1, B - 1, B, 2 * B + 1, BPS * B, 2**31 - 1):
        for o in range(END):
            held = _held(c, o, max_bytes)
            assert held is not None, (o, max_bytes)
            first = (o % RPS) // RPB
            assert held.nbytes == max(1, min(BPS - first, max_bytes // B)) * B, (o, max_bytes)
            for version in (12, 13, 16, 18):
                assert _written(held, version) == _through_codec(c, o, max_bytes, version)[5:], (o, max_bytes, version)
    # past the copies (where the local log starts): not theirs
    assert _held(c, END, 2**31 - 1) is None


def test_what_the_held_answers_leave_to_locate(cluster_factory):
    c = _synth(cluster_factory, presign=True)
    assert _held(c, 0, 2**31 - 1) is None          # a presigned URL is made per answer
    c = _synth(cluster_factory)
    with BrokerClient({"bootstrap.servers": c.bootstrap_servers}) as bc:
        p = bc.fetch("t", 0, RPS + 1, request_remote_location=True, isolation_level=1).partition
        # read_committed: the copies hold no transaction, an empty aborted list, through locate
        assert (p.remote_log_segment_base_offset, p.aborted_transactions) == (RPS, [])
        assert p.remote_log_segment_start_position == 0
        with pytest.raises(BrokerError, match="FENCED_LEADER_EPOCH"):     # epoch 1 leads: not read, not counted
            bc.fetch("t", 0, 0, request_remote_location=True, current_leader_epoch=0)
        got = [bc.fetch("t", 0, o, request_remote_location=True, current_leader_epoch=1).partition
               for o in range(0, END, RPB)]
    assert [(p.remote_log_segment_base_offset, p.remote_log_segment_start_position) for p in got] == \
        [((o // RPS) * RPS, (o % RPS) // RPB * B) for o in range(0, END, RPB)]
    # counted as BrokerStorage.locate counts: one grant each, the bytes granted (all batches
    # from the offset's to the copy's end: the default max bytes hold them)
    grants = c.storage.metrics.get("location_grants_total", topic="t")
    granted = c.storage.metrics.get("location_granted_bytes_total", topic="t")
    assert grants == 1 + len(got)
    assert granted == BPS * B - (RPS + 1) % RPS // RPB * B + sum(BPS * B - (o % RPS) // RPB * B
                                                                  for o in range(0, END, RPB))


def test_a_new_epoch_keeps_them_a_moved_log_start_leaves_them(cluster_factory):
    c = _synth(cluster_factory)
    c.storage.bump_leader_epoch("t", 0)      # epoch 2 from the tiered end: the copies' lineage holds
    assert _held(c, 0, 2**31 - 1) is not None
    # DeleteRecords: the log start moves into copy 0 (none is wholly below it: none deleted), the
    # epoch cache is truncated from the start (UnifiedLog.maybeIncrementLogStartOffset): no
    # longer the lineage the copies were held on
    c.storage.delete_records("t", 0, RPB)
    assert _held(c, RPB, 2**31 - 1) is None
    with BrokerClient({"bootstrap.servers": c.bootstrap_servers}) as bc:
        p = bc.fetch("t", 0, RPB, request_remote_location=True).partition
        assert (p.log_start_offset, p.remote_log_segment_base_offset, p.remote_log_segment_start_position,
                p.remote_log_segment_end_position) == (RPB, 0, B, BPS * B)
        with pytest.raises(BrokerError, match="OFFSET_OUT_OF_RANGE"):
            bc.fetch("t", 0, 0, request_remote_location=True)
