"""Coverage (kafka_tiered_source.planning.coverage) against a per-offset transcription of what a
Kafka broker does: replay the copies' state changes into RemoteLogLeaderEpochState maps (a
sorted dict per epoch, NavigableMap.floorEntry for the look-up), find each offset's epoch in the
leader-epoch cache, and ask RemoteLogMetadataCache.remoteLogSegmentMetadata for it.  The code
under test works on spans and sees the lineage only through OffsetForLeaderEpoch answers
(computed here as LeaderEpochFileCache.endOffsetFor gives them).  Also the invariant
(check_cover) on hand-made pieces, and the replayed state's round trip through a snapshot."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_tiered_source.errors import PlanningError
from kafka_tiered_source.planning.coverage import Exclusion, check_cover, serving
from kafka_tiered_source.planning.lineage import EpochAnswer, Lineage, epochs_to_ask
from kafka_tiered_source.planning.remote_log_state import (DELETE_FINISHED, DELETE_STARTED, FINISHED,
                                                           STARTED, CopyMeta, PartitionState)
from kafka_tiered_source.storage.segment import RemoteSegment


# --- the per-offset oracle -------------------------------------------------------------------
def end_offset_for(cache: list, requested: int, log_end: int) -> tuple[int, int]:
    """LeaderEpochFileCache.endOffsetFor, branch by branch."""
    if requested < 0 or not cache:
        return -1, -1
    epochs = [e for e, _ in cache]
    if requested == epochs[-1]:
        return requested, log_end
    higher = [(e, o) for e, o in cache if e > requested]
    if not higher:
        return -1, -1
    floor = [(e, o) for e, o in cache if e <= requested]
    if not floor:
        return requested, higher[0][1]
    return floor[-1][0], higher[0][1]


def epoch_for(cache: list, offset: int) -> int | None:
    """LeaderEpochFileCache.epochForOffset."""
    previous = None
    for e, start in cache:
        if start == offset:
            return e
        if start > offset:
            return previous
        previous = e
    return previous


def oracle(events: list, cache: list, log_start: int, log_end: int, start: int, end: int) -> list:
    """The copy id (or None) serving each offset of [start, end), offset by offset."""
    maps: dict = {}            # epoch -> {start offset: id}
    highest: dict = {}         # epoch -> highestLogOffset
    copies: dict = {}          # id -> (copy, finish index), finished and not deleting

    def eend(c, e):
        later = [o for x, o in c.leader_epochs if x > e]
        return min(later) - 1 if later else c.end_offset

    for n, (kind, c) in enumerate(events):
        if kind == "finish":
            copies[c.segment_id] = (c, n)
            for e, s in c.leader_epochs:
                m = maps.setdefault(e, {})
                end_e = eend(c, e)
                while m and max(m) >= s and highest[e] <= end_e:
                    del m[max(m)]
                m[s] = c.segment_id
                highest[e] = max(highest.get(e, end_e), end_e)
        else:
            copies.pop(c.segment_id, None)
            for e, s in c.leader_epochs:
                if maps.get(e, {}).get(s) == c.segment_id:
                    del maps[e][s]
    out = []
    for o in range(start, end):
        e = epoch_for(cache, o)
        got = None
        if e is not None and o >= log_start:
            m = maps.get(e, {})
            keys = [k for k in m if k <= o]
            if keys:
                c, _ = copies[m[max(keys)]]
                if o <= eend(c, e):
                    got = c.segment_id
            if got is None:   # a finished copy holding it, greatest start (then latest) first
                holders = [(s, n, c.segment_id) for c, n in copies.values() for x, s in c.leader_epochs
                           if x == e and s <= o <= eend(c, e)]
                if holders:
                    got = max(holders)[2]
        out.append(got)
    return out


def copy(i: int, start: int, end: int, epochs) -> CopyMeta:
    return CopyMeta(segment_id=f"c{i}", topic="t", topic_id="AAAAAAAAAAAAAAAAAAAAAA", partition=0,
                    start_offset=start, end_offset=end, size_bytes=100, max_timestamp_ms=0,
                    leader_epochs=tuple(epochs), state=STARTED)


def replay(events) -> PartitionState:
    state = PartitionState()
    for n, (kind, c) in enumerate(events):
        if kind == "finish":
            state.add(c)
            state.update(c.segment_id, FINISHED, (0, n))
        else:
            state.update(c.segment_id, DELETE_STARTED, (0, n))
            state.update(c.segment_id, DELETE_FINISHED, (0, n))
    return state


def lineage_of(cache: list, log_start: int, log_end: int, copies) -> Lineage:
    asked = epochs_to_ask(c.leader_epochs for c in copies)
    return Lineage({e: EpochAnswer(*end_offset_for(cache, e, log_end)) for e in asked}, log_start)


def per_offset(spans, start: int, end: int) -> list:
    out = []
    for s, e, c in spans:
        out += [None if c is None else c.segment_id] * (e - s)
    assert len(out) == end - start, spans
    return out


# --- histories: a lineage, copies made along it and off it -----------------------------------
@st.composite
def histories(draw):
    log_end = draw(st.integers(20, 120))
    # the lineage: epochs ascending with strictly ascending starts, the first at 0
    n_epochs = draw(st.integers(1, 4))
    starts = sorted(draw(st.lists(st.integers(1, log_end - 1), min_size=n_epochs - 1,
                                  max_size=n_epochs - 1, unique=True)))
    epoch_ids = sorted(draw(st.lists(st.integers(0, 8), min_size=n_epochs, max_size=n_epochs, unique=True)))
    cache = list(zip(epoch_ids, [0] + starts, strict=True))
    log_start = draw(st.integers(0, max(0, log_end // 4)))
    copies = []
    for i in range(draw(st.integers(0, 7))):
        s = draw(st.integers(0, log_end - 1))
        e = draw(st.integers(s, min(log_end - 1, s + 50)))
        if draw(st.booleans()):        # as a leader copies it: the lineage's epochs of [s, e]
            eps = [(ep, max(o, s)) for j, (ep, o) in enumerate(cache)
                   if o <= e and (j + 1 == len(cache) or cache[j + 1][1] > s)]
        else:                          # any epochs: an unclean leader's, a stale upload's
            k = draw(st.integers(1, 2))
            cut = sorted({s, *draw(st.lists(st.integers(s + 1, e + 1), max_size=k - 1))} - {e + 1})
            eps = list(zip(sorted(draw(st.lists(st.integers(0, 9), min_size=len(cut), max_size=len(cut),
                                                unique=True))), cut, strict=True))
        copies.append(copy(i, s, e, eps))
    events = [("finish", c) for c in copies]
    events = draw(st.permutations(events))
    for c in copies:
        if draw(st.integers(0, 5)) == 0:   # retention or a cleaner deletes it later
            events.append(("delete", c))
    start = draw(st.integers(log_start, log_end))
    end = draw(st.integers(start, log_end))
    return events, cache, log_start, log_end, start, end


@settings(max_examples=400, deadline=None)
@given(histories())
def test_serving_is_what_the_broker_would_serve_offset_by_offset(h):
    events, cache, log_start, log_end, start, end = h
    state = replay(events)
    lineage = lineage_of(cache, log_start, log_end, state.readable())
    spans = serving(start, end, state, lineage)
    assert per_offset(spans, start, end) == oracle(events, cache, log_start, log_end, start, end)
    check_cover("t-0", start, end, [_Piece(s, e) for s, e, _ in spans])


class _Piece:
    def __init__(self, s, e, segment=None):
        self.offset_start, self.offset_end, self.segment = s, e, segment


# --- the cases of issue 24, by name ----------------------------------------------------------
LINEAGE = [(0, 0)]   # one epoch from offset 0


@pytest.mark.parametrize("name, copies, want", [
    # [0, 99] and [100, 199] tiered, then a finished copy of [50, 149]: nothing is dropped
    ("partial overlap", [(0, 99), (100, 199), (50, 149)], [(0, 50, "c0"), (50, 100, "c2"), (100, 200, "c1")]),
    # a copy inside another, finished later: Kafka's floor entry ends too early; the outer holds it
    ("inside", [(0, 199), (50, 99)], [(0, 50, "c0"), (50, 100, "c1"), (100, 200, "c0")]),
    # a copy spanning two (a new leader's superset): it displaces the later one's mapping
    ("spanning two", [(0, 99), (100, 199), (50, 249)], [(0, 50, "c0"), (50, 250, "c2")]),
    ("two overlapping new copies", [(0, 99), (50, 149), (120, 199)],
     [(0, 50, "c0"), (50, 120, "c1"), (120, 200, "c2")]),
    ("duplicate", [(0, 99), (0, 99), (100, 199)], [(0, 100, "c1"), (100, 200, "c2")]),
    ("hole", [(0, 99), (150, 199)], [(0, 100, "c0"), (100, 150, None), (150, 200, "c1")]),
])
def test_named_histories(name, copies, want):
    metas = [copy(i, s, e, [(0, s)]) for i, (s, e) in enumerate(copies)]
    events = [("finish", c) for c in metas]
    state = replay(events)
    spans = serving(0, 200 if name != "spanning two" else 250, state,
                    lineage_of(LINEAGE, 0, 300, state.readable()))
    assert [(s, e, c and c.segment_id) for s, e, c in spans] == want


def test_offsets_of_an_epoch_off_the_lineage_go_to_the_broker():
    # an unclean leader copied [100, 149] in epoch 0; the lineage's epoch 1 starts at 120
    cache = [(0, 0), (1, 120)]
    a, stale, b = copy(0, 0, 99, [(0, 0)]), copy(1, 100, 149, [(0, 100)]), copy(2, 130, 199, [(1, 130)])
    state = replay([("finish", a), ("finish", stale), ("finish", b)])
    spans = serving(0, 200, state, lineage_of(cache, 0, 200, state.readable()))
    assert [(s, e, c and c.segment_id) for s, e, c in spans] == \
        [(0, 100, "c0"), (100, 120, "c1"), (120, 130, None), (130, 200, "c2")]


# --- the invariant ---------------------------------------------------------------------------
def seg(base, end):
    return RemoteSegment("t", "AAAAAAAAAAAAAAAAAAAAAA", 0, "s", base, end, 100)


@pytest.mark.parametrize("pieces, exclusions, fragment", [
    ([(0, 50), (60, 100)], [], "offsets [50, 60) of the range [0, 100) are in no piece"),
    ([(0, 50), (40, 100)], [], "offsets [40, 50) are in two pieces"),
    ([(0, 50)], [], "offsets [50, 100) of the range [0, 100) are in no piece"),
    ([(10, 100)], [], "offsets [0, 10) of the range [0, 100) are in no piece"),
    ([(0, 120)], [], "offsets [100, 120) are planned past the end"),
    ([(0, 50), (50, 100, (0, 80))], [], "offsets [50, 100) are planned from segment s, which holds [0, 80]"),
    ([(0, 50)], [(40, 100)], "offsets [40, 50) are in two pieces"),
])
def test_check_cover_names_the_partition_and_offsets(pieces, exclusions, fragment):
    ps = [_Piece(p[0], p[1], seg(*p[2]) if len(p) > 2 else None) for p in pieces]
    with pytest.raises(PlanningError) as info:
        check_cover("orders-3", 0, 100, ps, [Exclusion(s, e, "filter") for s, e in exclusions])
    assert str(info.value).startswith("orders-3: ") and fragment in str(info.value)


def test_check_cover_accepts_exclusions_and_empty_pieces():
    check_cover("t-0", 0, 100, [_Piece(0, 40), _Piece(40, 40), _Piece(60, 100)], [Exclusion(40, 60, "filter")])
    check_cover("t-0", 5, 5, [])


# --- the replayed state ----------------------------------------------------------------------
def test_state_snapshot_round_trips_and_replays_on():
    a, b = copy(0, 0, 99, [(0, 0)]), copy(1, 50, 149, [(0, 50), (1, 120)])
    state = replay([("finish", a), ("finish", b)])
    again = PartitionState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert again == state
    again.update("c1", DELETE_STARTED, (0, 9))
    assert [c.segment_id for c in again.readable()] == ["c0"]
    assert again.epochs[0].keys == [0] and again.epochs[1].keys == []


def test_invalid_transitions_are_ignored_as_kafka_ignores_them():
    state = PartitionState()
    state.add(copy(0, 0, 99, [(0, 0)]))
    state.update("c0", DELETE_FINISHED, (0, 1))     # STARTED -> DELETE_FINISHED: not valid
    assert state.copies["c0"].state == STARTED
    state.update("nope", FINISHED, (0, 2))          # an update of a copy never seen
    assert list(state.copies) == ["c0"] and state.readable() == []


def test_check_cover_sorts_pieces_in_any_order():
    check_cover("t-0", 0, 100, [_Piece(60, 100), _Piece(0, 40), _Piece(40, 60)])
    with pytest.raises(PlanningError, match=r"offsets \[40, 50\) are in two pieces"):
        check_cover("t-0", 0, 100, [_Piece(40, 100), _Piece(0, 50)])


def test_a_repeated_copy_started_does_not_replace_a_finished_copy():
    """RemoteLogMetadataCache.addCopyInProgressSegment checks the transition: FINISHED ->
    STARTED is refused (the copy stays finished and mapped); STARTED -> STARTED is a retry."""
    state = replay([("finish", copy(0, 0, 99, [(0, 0)]))])
    state.add(copy(0, 0, 120, [(0, 0)]))                      # COPY_SEGMENT_STARTED again
    assert state.copies["c0"].state == FINISHED and state.copies["c0"].end_offset == 99
    assert [(s, e, c and c.segment_id) for s, e, c in serving(0, 100, state, lineage_of(LINEAGE, 0, 300, state.readable()))] \
        == [(0, 100, "c0")]
    state.add(copy(1, 100, 149, [(0, 100)]))
    state.add(copy(1, 100, 199, [(0, 100)]))                  # a retried STARTED: the later one
    assert state.copies["c1"].end_offset == 199 and state.copies["c1"].state == STARTED
    state.update("c1", DELETE_STARTED, (0, 5))
    state.add(copy(1, 100, 199, [(0, 100)]))                  # DELETE_STARTED -> STARTED: refused
    assert state.copies["c1"].state == DELETE_STARTED


def test_the_epoch_map_serves_finished_copies_only():
    """A snapshot (shared, not trusted) whose epoch map names a copy that is not finished: its
    offsets are not served from it."""
    state = replay([("finish", copy(0, 0, 99, [(0, 0)]))])
    doc = state.to_dict()
    doc["copies"][0]["state"] = STARTED
    edited = PartitionState.from_dict(doc)
    assert edited.epochs[0].keys == [0] and edited.readable() == []
    assert serving(0, 100, edited, lineage_of(LINEAGE, 0, 300, [copy(0, 0, 99, [(0, 0)])])) == [(0, 100, None)]
    doc["copies"][0]["state"] = DELETE_STARTED
    edited = PartitionState.from_dict(doc)
    edited.copies["c9"] = replace(edited.copies["c0"], segment_id="c9", state=FINISHED)   # readable, unmapped
    assert [(s, e, c and c.segment_id) for s, e, c in
            serving(0, 100, edited, lineage_of(LINEAGE, 0, 300, edited.readable()))] == [(0, 100, "c9")]
