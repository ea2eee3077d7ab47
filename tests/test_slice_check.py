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


def walk(start: int, end: int, byte_start: int, copy=(10, 49)) -> SliceCheck:
    seg = RemoteSegment("t", "AAAAAAAAAAAAAAAAAAAAAA", 0, "seg", copy[0], copy[1], len(DATA))
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
