"""Grouping work into read tasks (kafka_tiered_source.planning.packing).

The property tests build segments as a list of batches (offsets with compaction gaps, empty
batches, byte positions), derive offset-index checkpoints the way Kafka writes them, plan, and
then *simulate the reader*: a RemoteRange yields the records of the batches that lie wholly in
its byte range and whose offsets are in its offset range.  Every record wanted must come out
exactly once.
"""
from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_tiered_source.errors import PlanningError
from kafka_tiered_source.testing import aiven_writer
from kafka_tiered_source.planning.packing import PartitionWork, SegmentSlice, plan_read_tasks
from kafka_tiered_source.planning.tasks import (AbortedTransaction, BrokerRange, PartitionTxnInfo,
                                                ReadTask, RemoteRange)
from kafka_tiered_source.storage.segment import RemoteSegment


# ---------------------------------------------------------------------------------------------
# A model segment: batches laid out back to back.
# ---------------------------------------------------------------------------------------------
class Batch:
    def __init__(self, position, size, base, last, records):
        self.position, self.size, self.base, self.last = position, size, base, last
        self.records = records          # offsets actually present (compaction leaves gaps)

    @property
    def end(self):
        return self.position + self.size


class ModelSegment:
    def __init__(self, topic, partition, seg_no, batches, index_every):
        self.batches = batches
        self.segment = RemoteSegment(
            topic=topic, topic_id="AAAAAAAAAAAAAAAAAAAAAA", partition=partition,
            segment_id=f"seg{seg_no:018d}AAAA", base_offset=batches[0].base,
            end_offset=batches[-1].last, size_bytes=batches[-1].end)
        # Kafka appends (lastOffset of the batch, batch position) every index interval.
        self.checkpoints = tuple((b.last, b.position) for i, b in enumerate(batches)
                                 if i % index_every == index_every - 1)

    def read(self, r: RemoteRange):
        starts = {b.position for b in self.batches} | {0}
        assert r.byte_start in starts, "a range must start on a batch boundary"
        assert r.byte_end <= self.segment.size_bytes
        out = []
        for b in self.batches:
            if b.position >= r.byte_start and b.end <= r.byte_end:
                out.extend(o for o in b.records if r.offset_start <= o < r.offset_end)
        return out

    def records_in(self, first, end):
        return [o for b in self.batches for o in b.records if first <= o < end]


@st.composite
def model_partition(draw, topic, partition):
    """A few consecutive segments, optional broker tail, and the wanted offset range."""
    n_segments = draw(st.integers(0, 3))
    offset = draw(st.integers(0, 50))
    segments = []
    for seg_no in range(n_segments):
        batches, position = [], 0
        for _ in range(draw(st.integers(1, 12))):
            span = draw(st.integers(1, 6))
            base, last = offset, offset + span - 1
            present = [o for o in range(base, last + 1) if draw(st.booleans()) or o == last]
            if draw(st.integers(0, 9)) == 0:
                present = []            # compaction can leave an empty batch
            size = 61 + 10 * len(present) + draw(st.integers(0, 200))
            batches.append(Batch(position, size, base, last, present))
            position += size
            offset = last + 1 + draw(st.sampled_from([0, 0, 0, 3]))   # gaps between batches
        segments.append(ModelSegment(topic, partition, seg_no + 100 * partition, batches,
                                     draw(st.integers(1, 4))))
    tail = draw(st.integers(0, 40))
    log_end = offset + tail
    if log_end == 0:
        return None
    first = draw(st.integers(0, log_end - 1))
    end = draw(st.integers(first + 1, log_end))
    pieces = []
    for seg in segments:
        lo = max(first, seg.segment.base_offset)
        hi = min(end, seg.segment.end_offset + 1)
        if lo < hi:
            pieces.append(SegmentSlice(seg.segment, lo, hi, seg.checkpoints))
    if end > offset:
        lo = max(first, offset)
        pieces.append(BrokerRange(topic, partition, "AAAAAAAAAAAAAAAAAAAAAA", lo, end,
                                  draw(st.integers(0, 4000))))
    # What a correct reader must produce for this partition.
    wanted = []
    for seg in segments:
        wanted.extend(seg.records_in(first, end))
    wanted.extend(range(max(first, offset), end))
    work = PartitionWork(topic, partition, "AAAAAAAAAAAAAAAAAAAAAA", tuple(pieces))
    return work, segments, wanted


@st.composite
def model_work(draw):
    parts = []
    for p in range(draw(st.integers(1, 4))):
        drawn = draw(model_partition("t", p))
        if drawn is not None:
            parts.append(drawn)
    return parts


def simulate(tasks, parts):
    segs = {seg.segment.segment_id: seg for _, segments, _ in parts for seg in segments}
    got = {}
    for task in tasks:
        for r in task.ranges:
            key = (r.topic, r.partition)
            if isinstance(r, RemoteRange):
                got.setdefault(key, []).extend(segs[r.segment.segment_id].read(r))
            else:
                got.setdefault(key, []).extend(range(r.offset_start, r.offset_end))
    return got


SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(parts=model_work(), target=st.integers(1, 3000),
       min_parts=st.one_of(st.none(), st.integers(1, 40)),
       max_records=st.one_of(st.none(), st.integers(1, 30)))
def test_every_wanted_record_is_read_exactly_once(parts, target, min_parts, max_records):
    tasks = plan_read_tasks([w for w, _, _ in parts], target_bytes=target,
                            min_partitions=min_parts, max_records_per_partition=max_records)
    got = simulate(tasks, parts)
    for work, _, wanted in parts:
        emitted = got.get((work.topic, work.partition), [])
        assert sorted(emitted) == sorted(wanted)
        assert len(emitted) == len(set(emitted)), "a record was emitted twice"


@SETTINGS
@given(parts=model_work(), target=st.integers(1, 3000),
       min_parts=st.one_of(st.none(), st.integers(1, 40)),
       max_records=st.one_of(st.none(), st.integers(1, 30)))
def test_task_shape(parts, target, min_parts, max_records):
    tasks = plan_read_tasks([w for w, _, _ in parts], target_bytes=target,
                            min_partitions=min_parts, max_records_per_partition=max_records)
    assert [t.index for t in tasks] == list(range(len(tasks)))
    for t in tasks:
        assert t.ranges
        # Bytes: within target, unless the task is one range that could not be cut finer.
        assert t.estimated_bytes <= target or len(t.ranges) == 1
        if max_records is not None:
            assert sum(r.offset_end - r.offset_start for r in t.ranges) <= max_records
        # Each partition's ranges in ascending, non-overlapping offset order inside the task.
        last = {}
        for r in t.ranges:
            key = (r.topic, r.partition)
            assert r.offset_start < r.offset_end
            assert r.offset_start >= last.get(key, -1)
            last[key] = r.offset_end
            if isinstance(r, RemoteRange):
                assert 0 <= r.byte_start < r.byte_end <= r.segment.size_bytes
                assert r.estimated_bytes == r.byte_end - r.byte_start
                assert r.estimated_records == r.offset_end - r.offset_start
    if min_parts is not None:
        total_offsets = sum(p.offset_end - p.offset_start
                            for w, _, _ in parts for p in w.pieces)
        # Each task needs at least one offset: that is the only limit on splitting.
        assert len(tasks) >= min(min_parts, total_offsets)


# ---------------------------------------------------------------------------------------------
# Worked examples (numbers computed by hand from the index rules in the module docstring).
# ---------------------------------------------------------------------------------------------
TID = "AAAAAAAAAAAAAAAAAAAAAA"


def seg(base=0, end=99, size=1000, partition=0, sid="S"):
    return RemoteSegment("t", TID, partition, sid, base, end, size_bytes=size)


# Batches of 10 offsets and 100 bytes: batch i holds offsets [10i, 10i+9] at byte 100i.
CHECKPOINTS = tuple((10 * i + 9, 100 * i) for i in range(10))


def test_segment_split_at_index_entries():
    s = seg()
    work = [PartitionWork("t", 0, TID, (SegmentSlice(s, 0, 100, CHECKPOINTS),))]
    tasks = plan_read_tasks(work, target_bytes=300)
    ranges = [t.ranges for t in tasks]
    assert all(len(r) == 1 for r in ranges)
    got = [(r[0].byte_start, r[0].byte_end, r[0].offset_start, r[0].offset_end) for r in ranges]
    # Cut after offset 29 (entry (29, 200)): left reads up to the next entry's position 300,
    # right starts at 200 -- one index interval read twice.
    assert got == [(0, 300, 0, 30), (200, 500, 30, 50), (400, 700, 50, 70),
                   (600, 900, 70, 90), (800, 1000, 90, 100)]


def test_slice_inside_segment_reads_only_its_bytes():
    s = seg()
    work = [PartitionWork("t", 0, TID, (SegmentSlice(s, 35, 62, CHECKPOINTS),))]
    (task,) = plan_read_tasks(work, target_bytes=10_000)
    (r,) = task.ranges
    # start: entry (29, 200) is the largest <= 35; end: entry (69, 600) is the first >= 61,
    # and its successor's position 700 bounds every record < 62.
    assert (r.byte_start, r.byte_end, r.offset_start, r.offset_end) == (200, 700, 35, 62)


def test_segment_without_index_is_one_range_but_can_be_split_by_offsets():
    s = seg()
    work = [PartitionWork("t", 0, TID, (SegmentSlice(s, 0, 100),))]
    (task,) = plan_read_tasks(work, target_bytes=10)
    assert task.ranges[0].byte_start == 0 and task.ranges[0].byte_end == 1000
    tasks = plan_read_tasks(work, target_bytes=10, min_partitions=4)
    assert [(t.ranges[0].offset_start, t.ranges[0].offset_end) for t in tasks] == \
        [(0, 25), (25, 50), (50, 75), (75, 100)]
    assert all((t.ranges[0].byte_start, t.ranges[0].byte_end) == (0, 1000) for t in tasks)


def test_small_partitions_share_a_task():
    work = [PartitionWork("t", p, TID, (BrokerRange("t", p, TID, 0, 10, 100),))
            for p in range(50)]
    tasks = plan_read_tasks(work, target_bytes=1000)
    assert len(tasks) == 5
    assert [len(t.ranges) for t in tasks] == [10] * 5
    assert tasks[0].topic_partitions == tuple(("t", p) for p in range(10))


def test_min_partitions_spreads_small_partitions():
    work = [PartitionWork("t", p, TID, (BrokerRange("t", p, TID, 0, 10, 100),))
            for p in range(50)]
    tasks = plan_read_tasks(work, target_bytes=10**9, min_partitions=7)
    assert len(tasks) >= 7
    assert sum(len(t.ranges) for t in tasks) == 50


def test_max_records_per_partition_splits_like_spark():
    work = [PartitionWork("t", 0, TID, (BrokerRange("t", 0, TID, 100, 350, 2500),))]
    tasks = plan_read_tasks(work, target_bytes=10**9, max_records_per_partition=100)
    spans = [(t.ranges[0].offset_start, t.ranges[0].offset_end) for t in tasks]
    assert spans == [(100, 183), (183, 266), (266, 350)]
    assert sum(t.estimated_bytes for t in tasks) == 2500


def test_broker_tail_after_segment_in_one_task_in_order():
    s = seg(0, 99)
    work = [PartitionWork("t", 0, TID, (SegmentSlice(s, 50, 100, CHECKPOINTS),
                                        BrokerRange("t", 0, TID, 100, 120, 50)))]
    (task,) = plan_read_tasks(work, target_bytes=10_000)
    assert isinstance(task.ranges[0], RemoteRange) and isinstance(task.ranges[1], BrokerRange)
    assert task.ranges[0].offset_end == task.ranges[1].offset_start == 100


def test_read_committed_info_follows_the_partitions_of_each_task():
    txn0 = PartitionTxnInfo("t", 0, 500, (AbortedTransaction(7, 5), AbortedTransaction(8, 400)))
    work = [PartitionWork("t", 0, TID, (BrokerRange("t", 0, TID, 0, 100, 1000),), txn0),
            PartitionWork("t", 1, TID, (BrokerRange("t", 1, TID, 0, 100, 1000),))]
    tasks = plan_read_tasks(work, target_bytes=1000)
    assert len(tasks) == 2
    # The transaction starting at 400 cannot touch offsets < 100: dropped; the one at 5 stays.
    assert tasks[0].txn == (PartitionTxnInfo("t", 0, 500, (AbortedTransaction(7, 5),)),)
    assert tasks[1].txn == ()


def test_tasks_pickle_and_hide_presigned_signatures():
    s = RemoteSegment("t", TID, 0, "S", 0, 99, size_bytes=1000,
                      presigned_url="https://b.example/k?X-Amz-Signature=deadbeef")
    work = [PartitionWork("t", 0, TID, (SegmentSlice(s, 0, 100, CHECKPOINTS),))]
    tasks = plan_read_tasks(work, target_bytes=500)
    assert pickle.loads(pickle.dumps(tasks)) == tasks
    assert "deadbeef" not in repr(tasks)
    assert isinstance(tasks[0], ReadTask)


def test_empty_work_gives_no_tasks():
    assert plan_read_tasks([], target_bytes=1) == []
    assert plan_read_tasks([PartitionWork("t", 0, TID, ())], target_bytes=1) == []


@pytest.mark.parametrize("work, message", [
    ([PartitionWork("t", 0, TID, (BrokerRange("t", 0, TID, 10, 20, 1),
                                  BrokerRange("t", 0, TID, 15, 30, 1)))], "overlap"),
    ([PartitionWork("t", 0, TID, (BrokerRange("t", 1, TID, 0, 20, 1),))], "broker range"),
    ([PartitionWork("t", 0, TID, (SegmentSlice(seg(), 50, 120, CHECKPOINTS),))],
     "outside segment"),
    ([PartitionWork("t", 0, TID, (SegmentSlice(seg(), 0, 10, ((9, 100), (5, 200))),))],
     "ascend"),
    ([PartitionWork("t", 0, TID, (SegmentSlice(seg(), 0, 10, ((9, 1000),)),))],
     "position 1000"),
    ([PartitionWork("t", 0, TID, (SegmentSlice(RemoteSegment("t", TID, 0, "S", 0, 9), 0, 10),))],
     "size_bytes"),
    ([PartitionWork("t", 0, TID, ()), PartitionWork("t", 0, TID, ())], "twice"),
])
def test_inconsistent_input_is_refused_with_the_partition_named(work, message):
    with pytest.raises(PlanningError, match=message) as info:
        plan_read_tasks(work, target_bytes=100)
    assert "t-0" in str(info.value)


def test_bad_limits_are_refused():
    with pytest.raises(PlanningError, match="target_bytes"):
        plan_read_tasks([], target_bytes=0)
    with pytest.raises(PlanningError, match="min_partitions"):
        plan_read_tasks([], target_bytes=1, min_partitions=0)
    with pytest.raises(PlanningError, match="max_records_per_partition"):
        plan_read_tasks([], target_bytes=1, max_records_per_partition=0)


# ---------------------------------------------------------------------------------------------
# Aiven manifests: which ones the planner hands to the tasks (planner.Planner step 5)
# ---------------------------------------------------------------------------------------------
def test_planner_carries_known_manifests_and_reads_those_of_segments_shared_by_tasks():
    from kafka_tiered_source.planning.online import Planner
    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.storage import CountingObserver, aiven, create_fetcher
    from storage_servers import DictFetcher

    def segment(i):
        return RemoteSegment("t", "MWJ6FHTfRYy67jzwZdeqSQ", 0, f"segment{i:015d}", i * 100, i * 100 + 99, 1000)

    known, shared, single, gone = (segment(i) for i in range(4))
    store = {}
    for s in (known, shared, single):   # `gone`: no manifest in the store at all
        _, ci = aiven_writer.transform_chunks(bytes(1000), 300, True)
        _, si = aiven_writer.build_indexes(bytes(8), b"", b"", b"", None)
        store[aiven.segment_object_key(s, "rsm-manifest", "p/")] = aiven.SegmentManifest(ci, si, True).to_json()
        store[aiven.segment_object_key(s, "indexes", "p/")] = bytes(8)
    DictFetcher.STORES["planner-manifests"] = store
    options = ReadOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t",
                                 "remote.storage.fetcher.class": "storage_servers:DictFetcher",
                                 "remote.storage.custom.store": "planner-manifests",
                                 "remote.storage.prefix": "p/"})
    obs = CountingObserver()
    planner = Planner(options, client=None, fetcher=create_fetcher(options.storage, observer=obs))
    planner.reads.checkpoints(SegmentSlice(known, 0, 100, ((0, 0),)))   # reads its offset index
    assert obs.by_location[aiven.segment_object_key(known, "rsm-manifest", "p/")] == 1

    def rr(s, first, end):
        return RemoteRange(s, 0, 1000, first, end, 1000, end - first)
    tasks = [ReadTask(0, (rr(known, 0, 100), rr(shared, 100, 150), rr(gone, 300, 350))),
             ReadTask(1, (rr(shared, 150, 200), rr(single, 200, 300), rr(gone, 350, 400)))]
    obs.reset()
    out = planner.shipping.attach(tasks)
    info = {r.segment.segment_id: r.segment.manifest_info for t in out for r in t.ranges}
    # known: already read, no GET; shared by two tasks: one GET here instead of one per task;
    # read by one task only: left to that task's reader (one GET either way); unreadable: the
    # executors try, with their fallback
    assert info[known.segment_id] is not None and info[shared.segment_id] is not None
    assert info[single.segment_id] is None and info[gone.segment_id] is None
    assert [loc.rsplit("/", 1)[1] for loc in obs.by_location] == \
        [f"00000000000000000100-{shared.segment_id}.rsm-manifest",
         f"00000000000000000300-{gone.segment_id}.rsm-manifest"]
    assert info[shared.segment_id].chunk_index().chunk_count == 4
    # the ranges of one segment share one segment object (pickled once per task)
    assert out[0].ranges[1].segment is out[1].ranges[0].segment
    assert [t.ranges for t in out] == [t.ranges for t in tasks]   # manifest_info is not compared


def test_a_task_holds_a_bounded_number_of_ranges_however_small_the_segments():
    # 3,000 one-offset segments of 10 bytes: by bytes alone, one task would take all of them
    n = 3000
    work = [PartitionWork("t", 0, TID, tuple(SegmentSlice(seg(i, i, 10, sid=f"S{i}"), i, i + 1)
                                             for i in range(n)))]
    tasks = plan_read_tasks(work, target_bytes=128 << 20)
    assert [len(t.ranges) for t in tasks] == [1024, 1024, 952]
    assert [r.offset_start for t in tasks for r in t.ranges] == list(range(n))
    assert max(len(pickle.dumps(t)) for t in tasks) < 1024 * 400


def test_copies_of_one_checkpoint_read_from_it_when_the_slice_starts_at_or_past_it():
    # copy A [0, 99] of 1,000 bytes whose one checkpoint says the batch at byte 400 ends with
    # offset 49; copy B [100, 199] of 500 bytes, the batch at byte 0 ending with offset 100;
    # copy C [200, 299] of 300 bytes, no checkpoint: each slice is read from the checkpoint
    # when it starts at or past the checkpoint's offset, else from byte 0, to the copy's end
    a = seg(0, 99, 1000, sid="A")
    b = seg(100, 199, 500, sid="B")
    c = seg(200, 299, 300, sid="C")
    work = [PartitionWork("t", 0, TID, (SegmentSlice(a, 60, 100, ((49, 400),)),
                                        SegmentSlice(b, 100, 200, ((150, 0),)),
                                        SegmentSlice(c, 200, 300)))]
    (task,) = plan_read_tasks(work, target_bytes=10_000)
    assert [(r.segment.segment_id, r.byte_start, r.byte_end, r.offset_start, r.offset_end, r.estimated_bytes,
             r.estimated_records) for r in task.ranges] == [
        ("A", 400, 1000, 60, 100, 600, 40), ("B", 0, 500, 100, 200, 500, 100), ("C", 0, 300, 200, 300, 300, 100)]
    # the same copies cut to two tasks each by offsets: each part read from what its index says
    tasks = plan_read_tasks(work, target_bytes=10_000, max_records_per_partition=20)
    ranges = [(r.segment.segment_id, r.byte_start, r.byte_end, r.offset_start, r.offset_end)
              for t in tasks for r in t.ranges]
    assert ranges[:2] == [("A", 400, 1000, 60, 80), ("A", 400, 1000, 80, 100)]
    assert sum(r[4] - r[3] for r in ranges) == 240 and ranges[-1] == ("C", 0, 300, 280, 300)


def test_a_copy_serving_two_spans_is_read_from_both_starts():
    # copy A [0, 99] (1,000 bytes) serves [0, 40) and [60, 100), copy B [40, 59] the middle:
    # A's second slice starts at its checkpoint (59, 600), its first at byte 0
    a = seg(0, 99, 1000, sid="A")
    b = seg(40, 59, 100, sid="B")
    work = [PartitionWork("t", 0, TID, (SegmentSlice(a, 0, 40, ((0, 0),)), SegmentSlice(b, 40, 60, ((40, 0),)),
                                        SegmentSlice(a, 60, 100, ((59, 600),))))]
    (task,) = plan_read_tasks(work, target_bytes=10_000)
    assert [(r.segment.segment_id, r.byte_start, r.byte_end, r.offset_start, r.offset_end) for r in task.ranges] == [
        ("A", 0, 1000, 0, 40), ("B", 0, 100, 40, 60), ("A", 600, 1000, 60, 100)]
