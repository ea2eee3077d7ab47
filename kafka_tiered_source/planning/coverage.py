"""Which tiered copy serves each offset of a partition's range, and the invariant every plan is
checked against.

**Coverage, as Kafka decides it.**  A broker serves offset ``o`` from remote storage with
``RemoteLogMetadataCache.remoteLogSegmentMetadata(epoch, o)``: ``epoch`` is the leader epoch
that wrote ``o`` on the partition's current lineage (the leader-epoch cache; a client learns it
from OffsetForLeaderEpoch, :mod:`.lineage`), and the answer is the finished copy whose start
offset for that epoch is the greatest one <= ``o`` in the epoch's offset map
(:class:`~.remote_log_state.EpochState`), provided that copy's part of the epoch reaches ``o``.
:func:`serving` computes that answer for a whole range at once, as spans.  So:

* overlapping copies are trimmed per offset, never dropped whole: of copies ``[0, 99]`` and
  ``[50, 149]`` (a new leader's first copy starts at its own segment holding the highest copied
  offset + 1) the first serves 0-49 and the second 50-149;
* a copy's offsets whose epoch is not the lineage's epoch at that offset are never served from
  it (an unclean leader's records, truncated away on the lineage);
* where the epoch's map answers nothing although a finished copy holds the offset in that
  epoch (a copy inside another that finished later: Kafka's floor entry then ends too early),
  the copy that holds it with the greatest start serves it — Kafka's broker would refuse those
  offsets (OFFSET_OUT_OF_RANGE), the records are in a finished copy on the lineage all the same;
* every other offset — a hole between copies, an epoch no copy holds, past the last copy — is
  the broker's: it serves it or says why.  Nothing is skipped as "compaction": Kafka's copies
  end at the next local segment's base offset - 1, so compaction never leaves a hole between
  copies (a compacted tail is inside the copy that ends there).

**The invariant.**  :func:`check_cover`: every offset of ``[start, end)`` is in exactly one
piece (a slice of a tiered copy inside that copy, or a broker range) or in an
:class:`Exclusion` (a pushed-down filter proved no record of a segment can match).  Anything
else is a :class:`~kafka_tiered_source.errors.PlanningError` naming the partition and offsets;
it runs on every plan of every locator, before packing.
"""
from __future__ import annotations

import heapq
from bisect import bisect_right
from itertools import pairwise
from typing import Iterable, Optional, Sequence

from ..dataclass import dataclass
from ..errors import PlanningError
from .lineage import Lineage
from .remote_log_state import FINISHED, CopyMeta, PartitionState

# (start, end exclusive, the copy serving it or None for the broker)
Served = tuple[int, int, Optional[CopyMeta]]
_INF = float("inf")


@dataclass(frozen=True)
class Exclusion:
    """Offsets ``[start, end)`` a plan reads nowhere, and why (a reason a user would accept)."""
    start: int
    end: int
    reason: str


def serving(start: int, end: int, state: PartitionState, lineage: Lineage) -> list[Served]:
    """``[start, end)`` as contiguous spans, each served by one copy of ``state`` or (None) by
    the broker; see the module doc for the rule."""
    if start >= end:
        return []
    readable = state.readable()
    if not readable:
        return [(start, end, None)]
    out: list[Served] = []
    fallback: dict[int, list] = {}
    epochs = {e for c in readable for e, _ in c.leader_epochs}
    for ls, le, epoch in lineage_spans(lineage, epochs):
        lo, hi = max(ls, start), min(le, end)
        if lo >= hi:
            continue
        pos = lo
        for s, e, copy in _mapped(state, epoch, lo, hi):
            if s > pos:
                out += _strongest(pos, s, _fallback(fallback, readable, epoch))
            out.append((s, e, copy))
            pos = e
        if pos < hi:
            out += _strongest(pos, hi, _fallback(fallback, readable, epoch))
    return _filled(start, end, out)


def serving_all(client, prs: Sequence, states: dict, *, past_end: bool = False) -> dict:
    """:func:`serving` for each partition range of ``prs`` (``states`` by (topic, partition)),
    with the lineages of every partition that has readable copies asked at once
    (:func:`~.lineage.ask_lineages`): ``{(topic, partition): [Served, ...]}``.  ``past_end``
    (read_committed): the spans go on from the range's end to its ``latest`` (the LSO), where
    the markers of transactions open at the end lie (:func:`split_at` parts them)."""
    from .lineage import ask_lineages
    keyed = [((pr.topic, pr.partition), pr) for pr in prs]
    lineages = ask_lineages(client, {
        key: (pr.log_start, [c.leader_epochs for c in states[key].readable()])
        for key, pr in keyed if pr.start < pr.end and states[key].readable()})
    # a partition without a lineage was not asked: its range is empty or no copy is readable
    out = {}
    for key, pr in keyed:
        stop = max(pr.end, pr.latest) if past_end and pr.start < pr.end else pr.end
        out[key] = (serving(pr.start, stop, states[key], lineages[key]) if key in lineages
                    else _filled(pr.start, stop, ()))
    return out


def split_at(spans: Sequence[tuple], offset: int) -> tuple[list, list]:
    """Spans ``(start, end, x)`` in offset order cut at ``offset``: those below, those from it."""
    before: list = []
    after: list = []
    for s, e, c in spans:
        if s < offset:
            before.append((s, min(e, offset), c))
        if e > offset:
            after.append((max(s, offset), e, c))
    return before, after


def lineage_spans(lineage: Lineage, epochs: Iterable[int]) -> list[tuple[int, int, int]]:
    """``(start, end exclusive, epoch)`` of each of ``epochs`` that is on the lineage, by start."""
    spans = []
    for e in sorted(epochs):
        if lineage.has(e):
            s, t = max(lineage.start(e), lineage.log_start_offset), lineage.end(e)
            if s < t:
                spans.append((s, t, e))
    spans.sort()
    out: list[tuple[int, int, int]] = []
    for s, t, e in spans:   # OffsetForLeaderEpoch answers never overlap; be safe if one did
        if out and s < out[-1][1]:
            s = out[-1][1]
        if s < t:
            out.append((s, t, e))
    return out


def _mapped(state: PartitionState, epoch: int, lo: int, hi: int) -> list[Served]:
    """What the epoch's offset map answers for ``[lo, hi)``: floor entry, if it reaches."""
    es = state.epochs.get(epoch)
    if es is None or not es.keys:
        return []
    keys, ids = es.keys, es.ids
    copies = state.copies
    out: list[Served] = []
    n = len(keys)
    for i in range(max(bisect_right(keys, lo) - 1, 0), n):
        k = keys[i]
        if k >= hi:
            break
        copy = copies.get(ids[i])
        if copy is not None and copy.state == FINISHED:    # RemoteLogMetadataCache serves finished copies only
            # [max(k, lo), min(next key, the copy's last offset in the epoch + 1, hi)), in
            # comparisons (a plan of a million copies takes this step a million times)
            e = keys[i + 1] if i + 1 < n else hi
            last = (copy.end_offset if len(copy.leader_epochs) == 1 else copy.epoch_end(epoch)) + 1
            if last < e:
                e = last
            if hi < e:
                e = hi
            s = k if k > lo else lo
            if s < e:
                out.append((s, e, copy))
    return out


def _fallback(cache: dict, readable: Sequence[CopyMeta], epoch: int) -> list:
    if epoch not in cache:
        ivs = []
        for c in readable:
            for e, start in c.leader_epochs:
                if e == epoch:
                    s = max(start, c.start_offset)
                    ivs.append((s, c.epoch_end(e) + 1, (s, c.order), c))
        cache[epoch] = ivs
    return cache[epoch]


def _strongest(lo: int, hi: int, intervals: Sequence[tuple]) -> list[Served]:
    """For each offset of ``[lo, hi)``, the copy of the greatest key among ``intervals``
    (``(start, end exclusive, key, copy)``) that hold it; None where none does."""
    ivs = sorted((max(s, lo), min(e, hi), k, c) for s, e, k, c in intervals if s < hi and e > lo)
    if not ivs:
        return [(lo, hi, None)]
    points = sorted({lo, hi, *(s for s, *_ in ivs), *(e for _, e, *_ in ivs)})
    heap: list = []
    out: list[Served] = []
    i = 0
    for p, q in pairwise(points):
        while i < len(ivs) and ivs[i][0] <= p:
            s, e, key, copy = ivs[i]
            heapq.heappush(heap, (_neg(key), i, e, copy))
            i += 1
        while heap and heap[0][2] <= p:
            heapq.heappop(heap)
        out.append((p, q, heap[0][3] if heap else None))
    return _merged(out)


def _neg(key: tuple) -> tuple:
    start, order = key
    return (-start, tuple(-x for x in order))


def _merged(spans: Iterable[Served]) -> list[Served]:
    out: list[Served] = []
    for s, e, c in spans:
        if s >= e:
            continue
        if out and out[-1][1] == s and out[-1][2] is c:
            out[-1] = (out[-1][0], e, c)
        else:
            out.append((s, e, c))
    return out


def _filled(start: int, end: int, spans: Iterable[Served]) -> list[Served]:
    """``spans`` (ascending, not overlapping) clipped to ``[start, end)`` with the offsets
    between them given to the broker."""
    # _merged's joins made as the spans are added: each span added starts where the last ends
    out: list[Served] = []
    pos = start
    for s, e, c in spans:            # ascending already: one lineage epoch after another
        if s < pos:
            s = pos
        if e > end:
            e = end
        if s >= e:
            continue
        if s > pos:
            if out and out[-1][2] is None:
                out[-1] = (out[-1][0], s, None)
            else:
                out.append((pos, s, None))
        if out and out[-1][2] is c:
            out[-1] = (out[-1][0], e, c)
        else:
            out.append((s, e, c))
        pos = e
    if pos < end:
        if out and out[-1][2] is None:
            out[-1] = (out[-1][0], end, None)
        else:
            out.append((pos, end, None))
    return out


# ---------------------------------------------------------------------------------------------
# The invariant.
# ---------------------------------------------------------------------------------------------
def check_cover(where: str, start: int, end: int, pieces: Sequence, exclusions: Sequence[Exclusion] = ()) -> None:
    """Every offset of ``[start, end)`` in exactly one of ``pieces`` (objects with
    ``offset_start``/``offset_end``; tiered slices with a ``segment`` must lie inside it) or
    ``exclusions``; else a PlanningError naming ``where`` (topic-partition) and the offsets."""
    items = [(p.offset_start, p.offset_end, p) for p in pieces] + [(x.start, x.end, x) for x in exclusions]
    items.sort(key=lambda t: (t[0], t[1]))
    pos = start
    for s, e, item in items:
        if e < s:
            raise PlanningError(f"{where}: a piece [{s}, {e}) ends before it starts")
        if s == e:
            continue
        if s > pos:
            raise PlanningError(f"{where}: offsets [{pos}, {min(s, end)}) of the range [{start}, {end}) "
                                f"are in no piece of the plan: they would not be read")
        if s < pos:
            raise PlanningError(f"{where}: offsets [{s}, {min(e, pos)}) are in two pieces of the plan: "
                                f"they would be read twice")
        seg = getattr(item, "segment", None)
        if seg is not None and not (seg.base_offset <= s and e <= seg.end_offset + 1):
            raise PlanningError(f"{where}: offsets [{s}, {e}) are planned from segment {seg.segment_id}, "
                                f"which holds [{seg.base_offset}, {seg.end_offset}]")
        pos = e
    if pos < end:
        raise PlanningError(f"{where}: offsets [{pos}, {end}) of the range [{start}, {end}) are in no "
                            f"piece of the plan: they would not be read")
    if pos > end:
        raise PlanningError(f"{where}: offsets [{end}, {pos}) are planned past the end of the range "
                            f"[{start}, {end})")
