"""The read-time check of a tiered slice (executor/slices.py) on a compacted copy built here with
kafka-python's batch builder: offset gaps inside and between batches, a tail compacted away
(the copy ends at 49, its last batch at 35), slices starting at an offset-index position before
the planned start.  Those are accepted; batches outside the copy's offsets, and a first batch
after the planned start, are a SliceMismatchError naming the object and the offsets."""
from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafka_tiered_source.errors import SliceMismatchError
from kafka_tiered_source.executor.slices import SliceCheck
from kafka_tiered_source.planning.tasks import RemoteRange
from kafka_tiered_source.storage.segment import RemoteSegment


def batch(base: int, deltas) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for d in deltas:
        b.append(d, 1_700_000_000_000 + d, None, b"v%d" % d, [])
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base)       # the base offset is outside the CRC
    return bytes(data)


# what compaction left of a copy [10, 49]: 10 12 14 | 20 23 | 30 35, nothing after 35
BATCHES = [batch(10, (0, 2, 4)), batch(20, (0, 3)), batch(30, (0, 5))]
DATA = b"".join(BATCHES)
POS = [0, len(BATCHES[0]), len(BATCHES[0]) + len(BATCHES[1])]


def walk(start: int, end: int, byte_start: int, copy=(10, 49), broker_positions: bool = False) -> SliceCheck:
    seg = RemoteSegment("t", "AAAAAAAAAAAAAAAAAAAAAA", 0, "seg", copy[0], copy[1], len(DATA),
                        broker_positions=broker_positions)
    r = RemoteRange(seg, byte_start, len(DATA), start, end, len(DATA) - byte_start, end - start)
    check = SliceCheck(r, location="bucket/t-0/seg.log")
    buf = DATA[byte_start:]
    check.walk(buf, len(buf), False)
    return check


@pytest.mark.parametrize("start, byte_start", [
    (10, 0), (12, 0),        # inside the first batch
    (16, 0),                 # in the gap after it, read from the copy's first byte
    (25, POS[1]),            # from an index position: the batch there ends before the planned start
    (21, POS[1]),            # inside a batch, between two of its records
    (23, POS[1]), (36, POS[2]),   # the last batch, and past it: the compacted tail
])
def test_compacted_copies_pass(start, byte_start):
    assert walk(start, 50, byte_start).last == 35


def test_a_copy_whose_head_was_compacted_away_passes():
    assert walk(0, 50, 0, copy=(0, 49)).first == 10


def test_a_kip1248_brokers_position_past_a_gap_passes():
    """A KIP-1248 broker positions a read of 25 at the batch holding it or, 25 being compacted
    away, the next one (30-35): that broker is the authority on its copy."""
    assert walk(25, 50, POS[2], broker_positions=True).first == 30


def test_every_locator_reads_from_inside_a_compaction_gap_without_a_mismatch(cluster_factory):
    """On a real broker: offsets 50-98 compacted away (one key), a read from 60 through each
    locator, positioned by the offset index or by the KIP-1248 broker, reads 99 on directly."""
    from spark_helpers import read_tasks
    from kafka_tiered_source import planning
    from kafka_tiered_source.options import ReadOptions
    c = cluster_factory(layout="kafka-local-tiered", index_interval_bytes=1)
    c.create_topic("gaps")
    for i in range(151):
        c.append("gaps", 0, _keyed(b"x" if 50 <= i < 100 else b"k%d" % i))
        if i == 149:
            c.roll("gaps", 0)
    assert c.compact("gaps", 0) == 49
    c.roll("gaps", 0)
    assert [(m.base_offset, m.end_offset) for m in c.tier("gaps")] == [(0, 149), (150, 150)]
    for locator in ("kip1248", "metadata-topic", "listing"):
        opts = ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "gaps",
                                  "remote.storage.uri": c.storage.remote_storage, "remote.segment.locator": locator,
                                  "remote.storage.layout": "kafka-local-tiered", "fetch.remote.fallback": "never",
                                  "startingOffsets": '{"gaps": {"0": 60}}'})
        plan = planning.plan(opts)
        assert plan.remote_ranges[0].offset_start == 60 and plan.remote_ranges[0].byte_start > 0, locator
        batches, totals = read_tasks(opts, plan.tasks)
        assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(99, 151)), locator
        assert totals.fallbacks == 0


def _keyed(key: bytes) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, 1_700_000_000_000, key, b"v", [])
    return bytes(b.build())


@pytest.mark.parametrize("start, byte_start, copy, fragment, found", [
    (25, POS[2], (10, 49), "its first batch, at byte %d, starts at offset 30, after the planned start 25" % POS[2],
     (30, 35)),
    (0, 0, (0, 9), "a batch of offsets [10, 14], outside the copy's [0, 9]", (10, 14)),
    (30, 0, (30, 49), "a batch of offsets [10, 14], outside the copy's [30, 49]", (10, 14)),
    (20, 0, (10, 29), "a batch of offsets [30, 35], outside the copy's [10, 29]", (30, 35)),
])
def test_batches_not_where_the_plan_put_them_are_named(start, byte_start, copy, fragment, found):
    with pytest.raises(SliceMismatchError) as info:
        walk(start, 50, byte_start, copy)
    msg = str(info.value)
    assert msg.startswith(f"t-0: the slice [{start}, 50) of tiered copy seg [{copy[0]}, {copy[1]}] does not hold")
    assert fragment in msg and "object bucket/t-0/seg.log" in msg
    assert (info.value.planned, info.value.copy, info.value.found) == ((start, 50), copy, found)
