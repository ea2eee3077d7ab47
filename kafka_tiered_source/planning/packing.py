"""Task packing: the pure function that groups the planner's work into read tasks.

The planner (driver side) knows, per topic-partition, which offsets to read and where they live:
tiered segments (with their offset-index checkpoints) and a tail still on the brokers.  This
module turns that into few, large :class:`ReadTask` objects, because Spark's per-task cost is
high (2,000 one-row tasks took ~50 s): a task may hold several ranges of several partitions.

Byte sub-ranges of a segment come from its offset index.  An index entry ``(O, P)`` says the
batch (or append) starting at byte ``P`` ends with offset ``O``; so every record before ``P``
has an offset ``<= O`` and every record at or after the next entry's position has an offset
``> O``.  Cutting a segment's offsets at ``c = O_k + 1`` therefore gives two byte ranges that
each hold every record they must emit:

* the left part reads ``[start, P_{k+1})`` and emits offsets ``< c``;
* the right part reads ``[P_k, end)`` and emits offsets ``>= c``.

The overlap ``[P_k, P_{k+1})`` (one index interval, 4 KiB by default) is read twice and
filtered by offset; that is the price of not knowing where the batch at ``P_k`` ends.  A
range's end may fall inside a batch: that tail is leftover for the reader, never an error.
Cuts at arbitrary offsets (for ``maxRecordsPerPartition``) use the same two rules, with wider
byte ranges when checkpoints are sparse.

Differences from Spark's Kafka source (``KafkaOffsetRangeCalculator``): Spark gives each
topic-partition range its own task and splits by offset counts; here tasks are packed by
estimated *bytes*, several small partitions share a task, and ``minPartitions`` is a lower bound
on the number of tasks (met by splitting by bytes, then by offsets, while anything can still be
split).  ``maxRecordsPerPartition`` bounds the offsets spanned by each task, exactly as Spark's
bound on each Spark partition.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from typing import Iterable, Sequence, Union

from ..dataclass import dataclass
from ..errors import PlanningError
from ..records.backend import slots_maker
from ..storage.segment import RemoteSegment
from .tasks import BrokerRange, PartitionTxnInfo, Range, ReadTask, RemoteRange


# ---------------------------------------------------------------------------------------------
# Planner input.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """The records ``[offset_start, offset_end)`` wanted from one tiered segment.

    ``checkpoints`` are the segment's offset-index entries as absolute ``(offset, position)``
    pairs, both strictly ascending (``offset`` = last offset of the batch starting at
    ``position``).  Empty means "no index": the slice is read whole.  The segment's
    ``size_bytes`` must be known."""
    segment: RemoteSegment
    offset_start: int
    offset_end: int
    checkpoints: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class PartitionWork:
    """Everything to read from one topic-partition: segment slices and broker ranges in
    ascending, non-overlapping offset order, plus read_committed info when needed."""
    topic: str
    partition: int
    topic_id: str
    pieces: tuple[Union[SegmentSlice, BrokerRange], ...]
    txn: PartitionTxnInfo | None = None


# ---------------------------------------------------------------------------------------------
# Byte positions from the offset index.
# ---------------------------------------------------------------------------------------------
class _SegmentIndex:
    __slots__ = ("segment", "offsets", "positions", "size")
    offsets: Sequence[int]
    positions: Sequence[int]

    def __init__(self, piece: SegmentSlice, where: str):
        seg = piece.segment
        if seg.size_bytes is None or seg.size_bytes <= 0:
            raise PlanningError(f"{where}: segment {seg.segment_id} has no size_bytes")
        if len(piece.checkpoints) == 1:      # most slices: the one entry where the slice starts
            ((offset, position),) = piece.checkpoints
            if seg.base_offset <= offset <= seg.end_offset and 0 <= position < seg.size_bytes:
                self.segment, self.offsets, self.positions, self.size = seg, (offset,), (position,), seg.size_bytes
                return
        offsets: list[int] = []
        positions: list[int] = []
        for offset, position in piece.checkpoints:
            if not seg.base_offset <= offset <= seg.end_offset:
                raise PlanningError(f"{where}: checkpoint offset {offset} outside segment "
                                    f"[{seg.base_offset}, {seg.end_offset}]")
            if not 0 <= position < seg.size_bytes:
                raise PlanningError(f"{where}: checkpoint position {position} outside "
                                    f"[0, {seg.size_bytes})")
            if offsets and (offset <= offsets[-1] or position <= positions[-1]):
                raise PlanningError(f"{where}: checkpoints must ascend strictly; "
                                    f"({offset}, {position}) follows "
                                    f"({offsets[-1]}, {positions[-1]})")
            offsets.append(offset)
            positions.append(position)
        self.segment = seg
        self.offsets = offsets
        self.positions = positions
        self.size = seg.size_bytes

    def joined(self, piece: SegmentSlice, where: str) -> "_SegmentIndex":
        """This index with ``piece``'s checkpoints too (those that keep both ascending)."""
        points: list[tuple[int, int]] = []
        for offset, position in sorted({*zip(self.offsets, self.positions, strict=True), *piece.checkpoints}):
            if not points or (offset > points[-1][0] and position > points[-1][1]):
                points.append((offset, position))
        return _SegmentIndex(SegmentSlice(self.segment, piece.offset_start, piece.offset_end, tuple(points)), where)

    def start_pos(self, first: int) -> int:
        """A batch boundary before which every record's offset is < ``first``."""
        i = bisect_right(self.offsets, first) - 1
        return self.positions[i] if i >= 0 else 0

    def end_pos(self, end: int) -> int:
        """A position before which every record with offset < ``end`` lies."""
        i = bisect_left(self.offsets, end - 1)
        return self.positions[i + 1] if i + 1 < len(self.offsets) else self.size

    def range(self, first: int, end: int) -> RemoteRange:
        offsets = self.offsets
        if len(offsets) < 2:    # most copies: start_pos and end_pos of at most one entry, no search
            start = self.positions[0] if offsets and offsets[0] <= first else 0
            stop = self.size
        else:
            start, stop = self.start_pos(first), self.end_pos(end)
        return slots_maker(RemoteRange)(self.segment, start, stop, first, end, stop - start, end - first)

    def cuts(self, first: int, end: int) -> tuple[int, int]:
        """Indices ``[lo, hi)`` of checkpoints k whose cut ``O_k + 1`` lies strictly inside
        ``(first, end)`` and that have a successor (else the cut saves no bytes)."""
        lo = bisect_left(self.offsets, first)            # O_k >= first  ->  cut > first
        hi = bisect_right(self.offsets, end - 2)         # O_k <= end-2  ->  cut < end
        return lo, min(hi, len(self.offsets) - 1)

    def split_by_bytes(self, first: int, end: int, target: int) -> list[RemoteRange]:
        out = []
        while True:
            start = self.start_pos(first)
            if self.end_pos(end) - start <= target:
                break
            lo, hi = self.cuts(first, end)
            if lo >= hi:
                break
            # The furthest cut whose left part fits the target: P_{k+1} <= start + target.
            k = bisect_right(self.positions, start + target) - 2
            k = max(lo, min(k, hi - 1))
            cut = self.offsets[k] + 1
            out.append(self.range(first, cut))
            first = cut
        out.append(self.range(first, end))
        return out

    def split_in_two(self, r: RemoteRange) -> tuple[RemoteRange, RemoteRange] | None:
        lo, hi = self.cuts(r.offset_start, r.offset_end)
        if lo < hi:
            # The checkpoint cut that best halves the bytes.
            middle = (r.byte_start + r.byte_end) / 2
            best = min(range(lo, hi), key=lambda k: abs(self.positions[k + 1] - middle))
            cut = self.offsets[best] + 1
        elif r.offset_end - r.offset_start >= 2:
            cut = (r.offset_start + r.offset_end) // 2
        else:
            return None
        return self.range(r.offset_start, cut), self.range(cut, r.offset_end)


def _broker_part(r: BrokerRange, first: int, end: int, total: int, span: int) -> BrokerRange:
    # Share the estimate in proportion to offsets; cumulative rounding keeps the sum exact.
    lo = total * (first - r.offset_start) // span
    hi = total * (end - r.offset_start) // span
    return BrokerRange(r.topic, r.partition, r.topic_id, first, end, hi - lo,
                       tuple(t for t in r.tiered if t[0] < end and t[1] > first))


def _split_broker(r: BrokerRange, parts: int) -> list[BrokerRange]:
    span = r.offset_end - r.offset_start
    parts = max(1, min(parts, span))
    bounds = [r.offset_start + span * i // parts for i in range(parts + 1)]
    return [_broker_part(r, bounds[i], bounds[i + 1], r.estimated_bytes, span)
            for i in range(parts)]


def _split_by_records(r: Range, limit: int, index: _SegmentIndex | None) -> list[Range]:
    span = r.offset_end - r.offset_start
    if span <= limit:
        return [r]
    parts = -(-span // limit)
    bounds = [r.offset_start + span * i // parts for i in range(parts + 1)]
    if isinstance(r, RemoteRange):
        if index is None:      # pragma: no cover - a remote range is cut from an indexed slice
            raise PlanningError(f"{r.segment.topic}-{r.segment.partition}: remote range [{r.offset_start}, {r.offset_end}) "
                                f"has no segment index to split it by")
        return [index.range(bounds[i], bounds[i + 1]) for i in range(parts)]
    total, whole = r.estimated_bytes, span
    return [_broker_part(r, bounds[i], bounds[i + 1], total, whole) for i in range(parts)]


# ---------------------------------------------------------------------------------------------
# Grouping.
# ---------------------------------------------------------------------------------------------
def _validate(work: Sequence[PartitionWork]) -> tuple[dict, bool]:
    """Every piece checked (a PlanningError naming the partition otherwise); the segments'
    indexes by (topic, partition, segment id), and whether a segment serves two slices."""
    indexes: dict = {}
    seen = set()
    joined = False
    for w in work:
        topic, partition = w.topic, w.partition
        tp = (topic, partition)
        where = f"{topic}-{partition}"
        if tp in seen:
            raise PlanningError(f"{where} is listed twice")
        seen.add(tp)
        if w.txn is not None and (w.txn.topic, w.txn.partition) != tp:
            raise PlanningError(f"{where}: txn info is for {w.txn.topic}-{w.txn.partition}")
        previous_end = None
        for piece in w.pieces:
            first, end = piece.offset_start, piece.offset_end
            if first > end:
                raise PlanningError(f"{where}: range [{first}, {end}) ends before it starts")
            if previous_end is not None and first < previous_end:
                raise PlanningError(f"{where}: ranges overlap or are out of order at offset {first}")
            previous_end = end
            if isinstance(piece, SegmentSlice):
                seg = piece.segment
                if seg.partition != partition or seg.topic != topic:
                    raise PlanningError(f"{where}: segment {seg.segment_id} belongs to "
                                        f"{seg.topic}-{seg.partition}")
                if not (seg.base_offset <= first and end <= seg.end_offset + 1):
                    raise PlanningError(f"{where}: slice [{first}, {end}) outside segment "
                                        f"[{seg.base_offset}, {seg.end_offset}]")
                key = (topic, partition, seg.segment_id)
                known = indexes.get(key)
                if known is None:
                    # Most slices (one per copy, at most one checkpoint, valid): the slice stands
                    # for its index until one is needed (_index), so a million copies make no
                    # million index objects; any other is checked by _SegmentIndex, as before.
                    cps = piece.checkpoints
                    size = seg.size_bytes
                    indexes[key] = (piece if size is not None and size > 0 and (
                        not cps or (len(cps) == 1 and seg.base_offset <= cps[0][0] <= seg.end_offset
                                    and 0 <= cps[0][1] < size))
                        else _SegmentIndex(piece, where))
                else:    # a copy serving two spans (another copy inside it): both starts count
                    indexes[key] = _index(indexes, key).joined(piece, where)
                    joined = True
            elif isinstance(piece, BrokerRange):
                if (piece.topic, piece.partition) != tp:
                    raise PlanningError(f"{where}: broker range for "
                                        f"{piece.topic}-{piece.partition}")
                if piece.estimated_bytes < 0:
                    raise PlanningError(f"{where}: negative estimated_bytes")
            else:
                raise PlanningError(f"{where}: unexpected piece {type(piece).__name__}")
    return indexes, joined


def _index(indexes: dict, key: tuple) -> _SegmentIndex:
    """The segment's index, made from the slice standing for it if it is not made yet."""
    got = indexes[key]
    if isinstance(got, SegmentSlice):      # checked by _validate: cannot fail
        got = indexes[key] = _SegmentIndex(got, f"{key[0]}-{key[1]}")
    return got


def _index_of(indexes: dict, r: RemoteRange) -> _SegmentIndex:
    s = r.segment
    return _index(indexes, (s.topic, s.partition, s.segment_id))


def _units(work, indexes, joined: bool, target: int, max_records: int | None) -> list[Range]:
    units: list[Range] = []
    make_range = slots_maker(RemoteRange)
    pieces: Sequence[Range]
    for w in work:
        for piece in w.pieces:
            first, end = piece.offset_start, piece.offset_end
            if first == end:
                continue
            if isinstance(piece, SegmentSlice):
                seg = piece.segment
                cps = piece.checkpoints
                # the slice stands for its index (_validate: at most one checkpoint, and no other
                # slice of its segment, as when no segment serves two): _SegmentIndex.range's
                # answer without the index, from the checkpoint where it is at or before the
                # first offset, to the end of the copy
                if not max_records and len(cps) < 2 and (
                        not joined or indexes[(seg.topic, seg.partition, seg.segment_id)] is piece):
                    start = cps[0][1] if cps and cps[0][0] <= first else 0
                    size: int = seg.size_bytes    # type: ignore[assignment]  # _validate: > 0
                    units.append(make_range(seg, start, size, first, end, size - start, end - first))
                    continue
                index = _index(indexes, (seg.topic, seg.partition, seg.segment_id))
                if len(index.offsets) < 2:     # no cut saves bytes (most copies: read from one entry)
                    one = index.range(first, end)
                    if not max_records:
                        units.append(one)
                        continue
                    pieces = [one]
                else:
                    pieces = index.split_by_bytes(piece.offset_start, piece.offset_end, target)
            else:
                parts = max(1, -(-piece.estimated_bytes // target))
                pieces = _split_broker(piece, parts)
                index = None
            for p in pieces:
                units.extend(_split_by_records(p, max_records, index) if max_records else [p])
    return units


# At most this many ranges in one task, however small its segments: what travels to an executor
# (about 160 pickled bytes a range) stays bounded, and so does a task's run of GETs.  A plan of
# small copies (a million of 1 KiB) would otherwise put thousands of ranges in each 128 MiB task.
MAX_RANGES_PER_TASK = 1024


def _pack(units: Iterable[Range], target: int, max_records: int | None) -> list[list[Range]]:
    tasks: list[list[Range]] = []
    current: list[Range] = []
    size = records = 0
    for u in units:
        if current and (size + u.estimated_bytes > target or len(current) >= MAX_RANGES_PER_TASK
                        or (max_records is not None and records + u.estimated_records > max_records)):
            tasks.append(current)
            current, size, records = [], 0, 0
        current.append(u)
        size += u.estimated_bytes
        records += u.estimated_records
    if current:
        tasks.append(current)
    return tasks


def _merge(ranges: list[Range], indexes: dict) -> list[Range]:
    """Join ranges of one segment (or of one broker partition) that meet end to start."""
    out: list[Range] = []
    for r in ranges:
        if out and out[-1].offset_end == r.offset_start:
            last = out[-1]
            if isinstance(r, RemoteRange):
                if isinstance(last, RemoteRange) and (
                        last.segment is r.segment or (last.segment.segment_id == r.segment.segment_id
                                                      and last.segment == r.segment)):
                    out[-1] = _index_of(indexes, r).range(last.offset_start, r.offset_end)
                    continue
            elif (isinstance(last, BrokerRange) and isinstance(r, BrokerRange)
                    and (last.topic, last.partition) == (r.topic, r.partition)):
                out[-1] = BrokerRange(r.topic, r.partition, r.topic_id, last.offset_start,
                                      r.offset_end, last.estimated_bytes + r.estimated_bytes,
                                      last.tiered + r.tiered)
                continue
        out.append(r)
    return out


def _split_task(ranges: list[Range], indexes: dict) -> tuple[list[Range], list[Range]] | None:
    if len(ranges) >= 2:
        total = sum(r.estimated_bytes for r in ranges)
        running, best, best_gap = 0, 1, None
        for i in range(1, len(ranges)):
            running += ranges[i - 1].estimated_bytes
            gap = abs(2 * running - total)
            if best_gap is None or gap < best_gap:
                best, best_gap = i, gap
        return ranges[:best], ranges[best:]
    (r,) = ranges
    if isinstance(r, RemoteRange):
        halves = _index_of(indexes, r).split_in_two(r)
        return None if halves is None else ([halves[0]], [halves[1]])
    if r.offset_end - r.offset_start < 2:
        return None
    a, b = _split_broker(r, 2)
    return [a], [b]


def _txn_for(ranges: Sequence[Range], txn: dict) -> tuple[PartitionTxnInfo, ...]:
    if not txn:           # read_uncommitted: no partition has any
        return ()
    out = []
    ends: dict = {}
    for r in ranges:
        key = (r.topic, r.partition)
        ends[key] = max(ends.get(key, r.offset_end), r.offset_end)
    for key, end in ends.items():
        info = txn.get(key)
        if info is None:
            continue
        # An aborted transaction that starts at or past the last offset read cannot touch this
        # task; earlier ones may still cover records in it, so they stay.
        aborted = tuple(a for a in info.aborted if a.first_offset < end)
        out.append(PartitionTxnInfo(info.topic, info.partition, info.last_stable_offset, aborted))
    return tuple(out)


def plan_read_tasks(work: Sequence[PartitionWork], *, target_bytes: int,
                    min_partitions: int | None = None,
                    max_records_per_partition: int | None = None) -> list[ReadTask]:
    """Group the work into read tasks.

    * Each task's estimated bytes stay <= ``target_bytes`` unless the task is a single range
      that cannot be cut finer (a segment without index entries inside it, one broker offset).
    * Each task spans at most ``max_records_per_partition`` offsets (always achievable).
    * Each task holds at most :data:`MAX_RANGES_PER_TASK` ranges as packed (ranges of one
      segment that meet are joined after).
    * At least ``min_partitions`` tasks when the work can be cut that finely.
    * Every wanted offset of every partition is in exactly one range of one task.
    """
    if target_bytes < 1:
        raise PlanningError(f"target_bytes must be positive, got {target_bytes}")
    if min_partitions is not None and min_partitions < 1:
        raise PlanningError(f"min_partitions must be positive, got {min_partitions}")
    if max_records_per_partition is not None and max_records_per_partition < 1:
        raise PlanningError(f"max_records_per_partition must be positive, "
                            f"got {max_records_per_partition}")
    indexes, joined = _validate(work)
    units = _units(work, indexes, joined, target_bytes, max_records_per_partition)
    if not units:
        return []
    tasks = _pack(units, target_bytes, max_records_per_partition)

    if min_partitions and len(tasks) < min_partitions:
        # Smaller target first: it keeps tasks balanced by bytes.
        total = sum(u.estimated_bytes for u in units)
        smaller = max(1, min(target_bytes, total // min_partitions))
        units = _units(work, indexes, joined, smaller, max_records_per_partition)
        tasks = _pack(units, smaller, max_records_per_partition)

    tasks = [_merge(t, indexes) for t in tasks]

    if min_partitions and len(tasks) < min_partitions:
        # Still short (segments without index entries): halve the biggest tasks, by offsets
        # when bytes cannot be cut, until there are enough or nothing can be cut.
        # Each task carries its position as a path: halves of (3,) become (3, 0) and (3, 1), so
        # sorting the paths restores the planner's order (and keys the heap uniquely).
        heap: list[tuple[int, int, tuple[int, ...], list[Range]]] = [
            (-_bytes(t), -_records(t), (i,), t) for i, t in enumerate(tasks)]
        heapq.heapify(heap)
        done: list[tuple[tuple, list[Range]]] = []
        while heap and len(heap) + len(done) < min_partitions:
            _, _, path, t = heapq.heappop(heap)
            halves = _split_task(t, indexes)
            if halves is None:
                done.append((path, t))
                continue
            for n, half in enumerate(halves):
                heapq.heappush(heap, (-_bytes(half), -_records(half), path + (n,), half))
        ordered = sorted(done + [(path, t) for _, _, path, t in heap], key=lambda pair: pair[0])
        tasks = [t for _, t in ordered]

    txn = {(w.topic, w.partition): w.txn for w in work if w.txn is not None}
    return [ReadTask(i, tuple(t), _txn_for(t, txn)) for i, t in enumerate(tasks)]


def _bytes(ranges: Sequence[Range]) -> int:
    return sum(r.estimated_bytes for r in ranges)


def _records(ranges: Sequence[Range]) -> int:
    return sum(r.estimated_records for r in ranges)


def index_checkpoints(seg: RemoteSegment, entries, points=()) -> tuple[tuple[int, int], ...]:
    """``points`` extended with the segment's offset-index entries (absolute ``(offset,
    position)``) that keep both strictly ascending and lie inside the segment."""
    out = list(points)
    size = seg.size_bytes or 0
    for off, pos in entries:
        if out and (off <= out[-1][0] or pos <= out[-1][1]):
            continue
        if seg.base_offset <= off <= seg.end_offset and 0 <= pos < size:
            out.append((off, pos))
    return tuple(out)
