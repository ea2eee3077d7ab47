"""The embedded broker where Kafka's code decides the edges: unclean leader elections (checked
before anything changes, followers truncated to the new leader's epoch end, a replica with no
local segment left restarting at the cut) and LogCleaner rounds (what stays of batches and
segments, and what RemoteLogManager then copies).  Expected values come from how the data was
written."""
from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker_fixtures import consume_kafka_python

from kafka_tiered_source.records.header import iter_headers
from kafka_tiered_source.testing.log import StorageError

T = "edges"


def batch(keys, values, *, pid: int = -1, seq: int = -1, txn: bool = False) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=txn, producer_id=pid,
                                  producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, batch_size=1 << 20)
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        b.append(i, timestamp=1_700_000_000_000 + i, key=k, value=v, headers=[])
    return bytes(b.build())


def produce(c, n: int, per_batch: int = 10, topic: str = T) -> None:
    done = 0
    while done < n:
        k = min(per_batch, n - done)
        start = c.offsets(topic, 0).log_end_offset
        c.append(topic, 0, batch([None] * k, [b"v%d" % (start + i) for i in range(k)]))
        done += k


def state(c, topic: str = T) -> tuple:
    """Everything an election could change: offsets, each replica's segments and epochs, the
    files of the partition directory."""
    part = c.storage.partition(topic, 0)
    files = sorted((os.path.relpath(os.path.join(d, f), part.dir), os.path.getsize(os.path.join(d, f)))
                   for d, _, fs in os.walk(part.dir) for f in fs)
    return (c.offsets(topic, 0), part.leader, part.epoch,
            [([(s.base_offset, s.size) for s in r.segments], list(r.epochs.entries)) for r in part.replicas], files)


@pytest.fixture
def tiered(cluster_factory):
    """Offsets 0-99 tiered in batches of 10 (copies [0, 49] and [50, 99], local copies gone),
    100-119 local; a second replica that rolls every ~700 bytes."""
    c = cluster_factory(segment_bytes=1 << 20)
    c.create_topic(T)
    replica = c.add_replica(T, 0, segment_bytes=700)
    produce(c, 50)
    c.roll(T, 0)
    produce(c, 50)
    c.roll(T, 0)
    assert [(m.base_offset, m.end_offset) for m in c.tier(T)] == [(0, 49), (50, 99)]
    produce(c, 20)
    return c, replica


def test_a_refused_election_leaves_the_partition_as_it_was(tiered):
    c, replica = tiered
    before = state(c)
    refusals = [
        (105, None, "OFFSET_OUT_OF_RANGE", "inside the batch at offsets [100, 109] of replica"),
        (75, replica, "OFFSET_OUT_OF_RANGE", "inside the batch at offsets [70, 79] of tiered copy"),
        (121, None, "OFFSET_OUT_OF_RANGE", "the log holds [0, 120)"),
        (110, 7, "NOT_LEADER_OR_FOLLOWER", "no replica 7"),
    ]
    for offset, rep, code, why in refusals:
        with pytest.raises(StorageError) as err:
            c.unclean_leader_election(T, 0, offset, replica=rep)
        assert err.value.error_name == code and why in str(err.value), err.value
        assert state(c) == before, offset
    # and the partition takes a good one, then appends, on every replica
    epoch = c.unclean_leader_election(T, 0, 110, replica=replica)
    produce(c, 5)
    part = c.storage.partition(T, 0)
    assert part.leader == replica and epoch == before[2] + 1
    assert [r.log_end_offset for r in part.replicas] == [115, 115]


def test_followers_truncate_to_the_new_leaders_epoch_end(tiered):
    c, replica = tiered
    part = c.storage.partition(T, 0)
    assert c.move_leader(T, 0, replica) == 1          # epoch 1 from 120, on both replicas
    produce(c, 20)                                     # 120-139 in epoch 1
    epoch = c.unclean_leader_election(T, 0, 130, replica=0)    # replica 0 held up to 130 only
    assert epoch == 2 and part.leader == 0
    leader, follower = part.replicas[0], part.replicas[replica]
    assert leader.epochs.entries == [(0, 0), (1, 120), (2, 130)]
    # OffsetForLeaderEpoch(1) on the new leader ends at 130: the follower truncated there
    assert leader.epochs.end_offset_for(1, leader.log_end_offset) == (1, 130)
    assert follower.log_end_offset == 130 and follower.epochs.entries[-1] == (1, 120)
    produce(c, 3)
    assert follower.log_end_offset == leader.log_end_offset == 133
    assert follower.epochs.entries[-1] == (2, 130)
    got = consume_kafka_python(c.bootstrap_servers, T, 0, start=95)
    assert [r["offset"] for r in got] == list(range(95, 133))


def test_replicas_without_a_local_segment_left_restart_at_the_cut(tiered):
    c, replica = tiered
    part = c.storage.partition(T, 0)
    assert all(r.local_start_offset > 60 for r in part.replicas)
    c.unclean_leader_election(T, 0, 60, replica=replica)
    for r in part.replicas:
        assert [(s.base_offset, s.size) for s in r.segments] == [(60, 0)] and r.log_end_offset == 60
    o = c.offsets(T, 0)
    assert (o.local_log_start_offset, o.log_end_offset, o.highest_tiered_offset) == (60, 60, 59)
    c.append(T, 0, batch([None] * 4, [b"new%d" % i for i in range(4)]))
    got = consume_kafka_python(c.bootstrap_servers, T, 0, start=40)
    # 40-59 from the copy [0, 49] and the lineage part of [50, 99]; never that copy's 60-99
    assert [(r["offset"], r["value"]) for r in got] == \
        [(o, _b64(b"v%d" % o)) for o in range(40, 60)] + [(60 + i, _b64(b"new%d" % i)) for i in range(4)]


def _b64(v: bytes) -> str:
    import base64
    return base64.b64encode(v).decode()


# --- LogCleaner -----------------------------------------------------------------------------------
def segments(c, topic: str = T) -> list[tuple[int, list]]:
    """(base offset, [(base, last, record count, producer id)]) of each of the leader's segments."""
    out = []
    for seg in c.storage.partition(topic, 0).log.segments:
        out.append((seg.base_offset, [(h.base_offset, h.last_offset, h.record_count, h.producer_id)
                                      for h in iter_headers(seg.data())]))
    return out


def test_what_a_cleaner_round_leaves_and_what_is_copied(cluster_factory):
    c = cluster_factory(segment_bytes=330)            # groups of cleaned segments stay small
    c.create_topic(T)
    k = [b"k%d" % i for i in range(4)]
    c.append(T, 0, batch(k, [b"a"] * 4))                                  # 0-3   superseded below
    c.append(T, 0, batch([None, b"k9"], [b"nokey", b"x"]))                # 4-5   keyless 4: invalid
    c.roll(T, 0)
    c.append(T, 0, batch(k, [b"b"] * 4))                                  # 6-9   the latest for k0-k3
    c.append(T, 0, batch([b"p0"], [b"t"], pid=42, seq=0, txn=True))       # 10    aborted below
    c.write_txn_marker(T, 0, 42, 0, False, 0)                            # 11    ABORT
    c.roll(T, 0)
    c.append(T, 0, batch([b"q0", b"q1"], [b"i", b"i"], pid=43, seq=0))    # 12-13 idempotent producer
    c.append(T, 0, batch([b"q0", b"q1"], [None, None]))                   # 14-15 tombstones, last batch
    c.roll(T, 0)
    assert c.compact(T, 0, remove_tombstones=True) == 4 + 1 + 1 + 2 + 2
    assert segments(c) == [
        (0, [(4, 5, 1, -1)]),                     # k0-k3 superseded, the keyless record gone
        (6, [(6, 9, 4, -1),
             (10, 10, 0, 42),                     # aborted, but its producer's last data batch:
                                                  # kept empty (lastDataOffset stays past a marker)
             (11, 11, 1, 42)]),                   # the marker stays
        (12, [(12, 13, 0, 43),                    # an active producer's last data batch: kept empty
              (14, 15, 0, -1)]),                  # the round's last batch: kept empty, its offsets kept
        (16, []),                                 # the active segment
    ]
    got = consume_kafka_python(c.bootstrap_servers, T, 0, start=0)
    assert [(r["offset"], r["value"]) for r in got] == [(5, _b64(b"x"))] + [(o, _b64(b"b")) for o in range(6, 10)]


def test_an_emptied_segment_stays_and_is_copied(cluster_factory):
    c = cluster_factory(segment_bytes=150, local_retention_bytes=-1)    # one batch per cleaned group;
                                                                        # tiered segments stay local
    c.create_topic(T)
    k = [b"k%d" % i for i in range(4)]
    for v in (b"a", b"b", b"c"):
        c.append(T, 0, batch(k, [v] * 4))
        c.roll(T, 0)
    assert c.compact(T, 0) == 8
    assert segments(c) == [(0, []), (4, []), (8, [(8, 11, 4, -1)]), (12, [])]
    # RemoteLogManager copies every closed segment, the empty ones too, ending at the next base - 1
    assert [(m.base_offset, m.end_offset, m.size_bytes) for m in c.tier(T)] == [(0, 3, 0), (4, 7, 0), (8, 11, 101)]
    got = consume_kafka_python(c.bootstrap_servers, T, 0, start=0)
    assert [(r["offset"], r["value"]) for r in got] == [(o, _b64(b"c")) for o in range(8, 12)]
    # a later round leaves alone what is tiered (their copies do not change): only 12-15 is cleaned
    c.append(T, 0, batch(k, [b"d"] * 4))
    c.roll(T, 0)
    assert c.compact(T, 0) == 0
    assert segments(c)[2] == (8, [(8, 11, 4, -1)])


def test_consecutive_small_segments_are_cleaned_into_one(cluster_factory):
    c = cluster_factory(segment_bytes=1 << 20)
    c.create_topic(T)
    for i in range(3):
        c.append(T, 0, batch([b"k%d" % i], [b"v"]))
        c.roll(T, 0)
    assert [s for s, _ in segments(c)] == [0, 1, 2, 3]
    assert c.compact(T, 0) == 0
    assert segments(c) == [(0, [(0, 0, 1, -1), (1, 1, 1, -1), (2, 2, 1, -1)]), (3, [])]
