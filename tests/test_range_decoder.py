"""A tiered range decoded part by part (executor/range_decoder.py) as the prefetcher hands it
over: parts and decode units of any size, a record batch cut anywhere, give every record once,
in order, in Arrow batches of the target size (one builder across the parts, a batch cut by a
part's end joined to the records around it); a slice mismatch keeps back the rows of the unit
that failed and hands out those decoded before it.  Records: Kafka 3.9.1's own segments
(tests/fixtures) and batches built with kafka-python (test_slice_check.batch)."""
from __future__ import annotations

import random

import pytest

from kafka_tiered_source.errors import SliceMismatchError
from kafka_tiered_source.executor import range_decoder
from kafka_tiered_source.executor.range_decoder import RangeDecoder
from kafka_tiered_source.executor.slices import SliceCheck
from kafka_tiered_source.planning.tasks import RemoteRange
from kafka_tiered_source.records import iter_headers
from test_slice_check import batch   # one v2 batch at a base offset, as the slice checks build it
from kafka_tiered_source.storage.segment import RemoteSegment
from test_records_fixtures import PARTITIONS, expected, filter_for, rows_of, segments

pytestmark = pytest.mark.decoder


def decoder(data: bytes, topic: str, partition: int, copy, start: int, end: int, flt=None, rows=None):
    seg = RemoteSegment(topic, "AAAAAAAAAAAAAAAAAAAAAA", partition, "seg", copy[0], copy[1], len(data))
    r = RemoteRange(seg, 0, len(data), start, end, len(data), end - start)
    counted: list = []
    dec = RangeDecoder(r, SliceCheck(r), flt, True, lambda **kw: counted.append(kw), rows=rows)
    return dec, counted


@pytest.mark.parametrize("tp, level", [("payments-0", "read_committed"),
                                       ("payments-0", "read_uncommitted")])
def test_parts_and_units_of_any_size_give_every_record_once_in_batches_of_the_target(monkeypatch, tp, level):
    monkeypatch.setattr(range_decoder, "DECODE_UNIT", 3000)   # units that cut batches, and batches longer than a unit
    m = PARTITIONS[tp]
    data = b"".join(segments(tp))
    most = max(h.record_count for h in iter_headers(data))   # records of the largest Kafka batch
    dec, _ = decoder(data, m["topic"], m["partition"], (0, 2**62), 0, 2**62, filter_for(m, level), rows=300)
    rnd = random.Random(tp + level)
    batches, at = [], 0
    while at < len(data) and not dec.done:
        n = rnd.choice([1, 5, 11, 700, 2900, 3001, 9000, 70000])
        batches += dec.feed(data[at:at + n])
        at += n
    batches += dec.finish()
    got = [row for b in batches for row in rows_of(b, m["topic"], m["partition"])]
    assert got == expected(tp, level)
    assert all(300 <= b.num_rows < 300 + most for b in batches[:-1])   # flushed at a Kafka batch's end
    assert 0 < batches[-1].num_rows < 300 + most
    assert dec.whole and dec.reached == (m["lastStableOffset"] if level == "read_committed" else
                                         max(r["offset"] for r in expected(tp, level)) + 1)


# a copy [10, 49] whose third batch is not its own (60, 61): the plan's bytes are wrong there
GOOD1, GOOD2, BAD = batch(10, (0, 2, 4)), batch(20, (0, 3)), batch(60, (0, 1))


def offsets(batches) -> list[int]:
    return [o for b in batches for o in b.column("offset").to_pylist()]


@pytest.mark.parametrize("parts, rows, out, checked, reached", [
    # the good batches in earlier parts, pending in the builder: handed out after the mismatch
    ([GOOD1 + GOOD2, BAD], 100, [], [10, 12, 14, 20, 23], 24),
    # a batch filled in the failing unit holds rows of both: only those before it go out
    ([GOOD1, GOOD2 + BAD], 4, [], [10, 12, 14], 15),
    ([GOOD1, GOOD2, BAD], 2, [[10, 12, 14], [20, 23]], [], 24),
    # the failing unit is the first: nothing goes out
    ([GOOD1 + GOOD2 + BAD], 100, [], [], 10),
])
def test_a_slice_mismatch_hands_out_only_the_rows_decoded_before_its_unit(parts, rows, out, checked, reached):
    dec, _ = decoder(b"".join(parts), "t", 0, (10, 49), 10, 100, rows=rows)
    got = []
    with pytest.raises(SliceMismatchError, match=r"\[60, 61\], outside the copy's \[10, 49\]"):
        for p in parts:
            got += [offsets([b]) for b in dec.feed(p)]
    assert got == out
    assert offsets(dec.checked) == checked
    assert dec.reached == reached      # the broker reads on from here: every row below went out once
