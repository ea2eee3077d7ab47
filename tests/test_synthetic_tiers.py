"""testing/synthetic_tiers.py, the benchmark-scale partitions: a synthesized partition answers
KIP-1248 Fetch, ListOffsets, Metadata and OffsetForLeaderEpoch as a partition really tiered
from the same appends does, and the answers are those the appends call for (offsets, segment
bounds and byte positions worked out from what was appended)."""
from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafka_tiered_source.errors import BrokerError
from kafka_tiered_source.ids import uuid_to_str
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source.storage import aiven
from kafka_tiered_source.storage.aiven_keys import decode_custom_metadata
from kafka_tiered_source.testing.synthetic_tiers import SyntheticTiers, synthesize

T0 = 1_760_000_000_000
RPB, BPS, SEGMENTS = 5, 3, 4        # records per batch, batches per segment, tiered segments
RPS = RPB * BPS                      # records per segment
BUMP = 25                            # leader epoch 1 from this offset (a batch boundary)
TAIL = 2                             # batches appended after the copies, still local
INTERVAL = 150                       # index.interval.bytes: a few offset-index entries per copy


def batch(base: int) -> bytes:
    """RPB records at offsets base.., record o written at T0 + o: every batch the same size."""
    b = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for i in range(RPB):
        b.append(i, T0 + base + i, b"k%d" % i, b"value-%06d" % (base + i), [])
    return bytes(b.build())


B = len(batch(0))
assert len(batch(10 ** 5)) == B


def _pair(cluster_factory):
    """The same topic twice: appended, rolled and tiered for real; and synthesized."""
    kw = dict(index_interval_bytes=INTERVAL)
    real = cluster_factory(**kw)
    real.create_topic("t", 1)
    offset = 0
    for _ in range(SEGMENTS):
        for _ in range(BPS):
            if offset == BUMP:
                real.storage.bump_leader_epoch("t", 0)
            real.append("t", 0, batch(offset))
            offset += RPB
        real.roll("t", 0)
    for _ in range(TAIL):
        real.append("t", 0, batch(offset))
        offset += RPB
    assert len(real.tier("t")) == SEGMENTS
    synth = cluster_factory(**kw)
    synth.create_topic("t", 1)
    synthesize(synth.storage, "t", SyntheticTiers(SEGMENTS, BPS, RPB, B, T0, 1, ((0, 0), (1, BUMP))))
    for k in range(TAIL):
        synth.append("t", 0, batch(SEGMENTS * RPS + k * RPB))
    return real, synth


def _answers(cluster) -> dict:
    out: dict = {}
    with BrokerClient({"bootstrap.servers": cluster.bootstrap_servers}) as bc:
        out["epoch"] = bc.topic("t").partitions[0].leader_epoch
        out["list"] = {ts: bc.list_offsets("t", {0: ts})[0].offset for ts in (-2, -4, -1, -5, -6)}
        out["epochs"] = bc.offset_for_leader_epoch("t", 0, [0, 1])
        out["locations"] = []
        for max_bytes in (2**31 - 1, 2 * B - 1):
            for o in range(SEGMENTS * RPS):
                p = bc.fetch("t", 0, o, max_bytes=max_bytes, partition_max_bytes=max_bytes,
                             request_remote_location=True).partition
                out["locations"].append((o, max_bytes, bytes(p.remote_log_segment_id),
                                         p.remote_log_segment_base_offset, p.remote_log_segment_end_offset,
                                         p.remote_log_segment_start_position, p.remote_log_segment_end_position,
                                         bytes(p.remote_log_segment_custom_metadata), p.high_watermark,
                                         p.log_start_offset))
    with BrokerClient({"bootstrap.servers": cluster.bootstrap_servers, "retries": "0"}) as bc:
        try:
            out["plain"] = bc.fetch("t", 0, 3).partition.error_code
        except BrokerError as exc:
            out["plain"] = exc.error_name
    return out


def test_synthesized_partition_answers_as_a_tiered_one(cluster_factory):
    real, synth = _pair(cluster_factory)
    end, leo = SEGMENTS * RPS, SEGMENTS * RPS + TAIL * RPB
    got = {"real": _answers(real), "synth": _answers(synth)}
    for name, a in got.items():
        assert a["epoch"] == 1, name
        assert a["list"] == {-2: 0, -4: end, -1: leo, -5: end - 1, -6: end}, name
        assert a["epochs"] == {0: (0, BUMP), 1: (1, leo)}, name
        ids: dict = {}
        for o, max_bytes, seg_id, base, last, start, stop, custom, hw, lso in a["locations"]:
            i = o // RPS
            assert (base, last, hw, lso) == (i * RPS, i * RPS + RPS - 1, leo, 0), (name, o)
            first = (o - i * RPS) // RPB           # the batch holding o
            assert start == first * B, (name, o)
            # all batches to the copy's end, or as many as fit the max bytes (at least one)
            assert stop == (BPS * B if max_bytes > BPS * B else (first + 1) * B), (name, o, max_bytes)
            assert ids.setdefault(i, seg_id) == seg_id, (name, o)
            assert decode_custom_metadata(custom)["object_key"] == aiven.main_path(
                "t", real.topics["t"].topic_id if name == "real" else synth.topics["t"].topic_id, 0, base,
                uuid_to_str(seg_id)), (name, o)
        assert len(set(ids.values())) == SEGMENTS, name
    # what differs is only what a real copy draws at random: its segment id (and the object key
    # naming it); its sizes, REMOTE_SIZE included, are the same
    for r, s in zip(got["real"]["locations"], got["synth"]["locations"], strict=True):
        assert r[:2] + r[3:7] + r[8:] == s[:2] + s[3:7] + s[8:]
        assert decode_custom_metadata(r[7])["remote_size"] == decode_custom_metadata(s[7])["remote_size"]
    # a plain fetch of a tiered offset: records from the real copy; the synthesized one has no
    # bytes and says so with a storage error, as a failed remote read is answered
    assert got["real"]["plain"] == 0
    assert got["synth"]["plain"] == "KAFKA_STORAGE_ERROR"


def test_only_new_partitions_are_synthesized(cluster_factory):
    c = cluster_factory()
    c.create_topic("t", 1)
    c.append("t", 0, batch(0))
    with pytest.raises(Exception, match="not empty"):
        synthesize(c.storage, "t", SyntheticTiers(2))
