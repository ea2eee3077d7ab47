"""The replay of ``__remote_log_metadata`` rows in C (native/rlm_replay.c, ``RemoteLogState.apply_rows``)
against its pure-Python reference (``RemoteLogState.apply_row``, row by row) on the same random
histories: repeated and illegal transitions, updates of unknown copies, partition deletes,
several leader epochs, copies that displace others in an epoch's map, and plans taking copies of
the state between answers (copy on write).  Where outcomes are asserted, they come from how the
history was made: which copies it finished and did not delete."""
from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_tiered_source.planning.remote_log_state import (DELETE_FINISHED, DELETE_STARTED, FINISHED, STARTED,
                                                           RemoteLogState)

pytest.importorskip("kafka_tiered_source._native", reason="the native extension is what is compared")

TID = "AAAAAAAAAAAAAAAAAAAAAA"
TOPIC = "t"


def sid(i: int) -> str:
    return f"{i:022d}"


def segment_row(offset: int, p: int, i: int, start: int, end: int, epochs, state: int = STARTED,
                custom: bytes | None = None) -> tuple:
    return (0, offset, TID, p, TOPIC, sid(i), start, end, 1000 + end, 100 * (end - start + 1), tuple(epochs),
            custom, bool(i % 2), state, -1)


def update_row(offset: int, p: int, i: int, state: int, custom: bytes | None = None, end: int = -1) -> tuple:
    return (1, offset, TID, p, sid(i), state, custom, end)


OPS = st.tuples(st.sampled_from([0, 0, 1, 1, 1, 1, 2]), st.integers(0, 1), st.integers(0, 7), st.integers(0, 40),
                st.integers(0, 20), st.integers(0, 8),
                st.sampled_from([STARTED, STARTED, STARTED, FINISHED, FINISHED, DELETE_STARTED, DELETE_FINISHED, 9]),
                st.booleans(), st.sampled_from([-1, -1, 30, 70]))


def row_of_op(offset: int, op: tuple) -> tuple:
    kind, p, i, start, length, seed, state, custom, end = op
    if kind == 0:
        # 1-3 leader epochs, ascending, starting at the copy's start (several overlap others)
        step = max(1, (length + 1) // (1 + seed % 3))
        cuts = list(range(start, start + length + 1, step))[:1 + seed % 3]
        epochs = [(seed // 3 + j, c) for j, c in enumerate(cuts)]
        # mostly COPY_SEGMENT_STARTED, as brokers write them; any other state is refused
        return segment_row(offset, p, i, start, start + length, epochs, state if seed == 8 else STARTED,
                           b"m" if custom else None)
    if kind == 1:
        return update_row(offset, p, i, state, b"x" if custom else None, end)
    return (2, offset, TID, p)


@st.composite
def histories(draw):
    """Rows in answers: each answer a list of rows; ``copies`` between answers says whether a
    plan took a copy of the state there (which makes its copies shared)."""
    rows, last = [], {}
    for offset, op in enumerate(draw(st.lists(OPS, max_size=60))):
        kind, p, i, *rest = op
        seed = rest[2]
        if kind != 2 and seed < 6:
            # mostly a copy's next step, as a broker writes them (the rest at random)
            was = last.get((p, i))
            step = {None: STARTED, STARTED: FINISHED, FINISHED: DELETE_STARTED,
                    DELETE_STARTED: DELETE_FINISHED, DELETE_FINISHED: STARTED}[was]
            op = (0 if step == STARTED else 1, p, i, *rest[:3], step, *rest[4:])
            last[(p, i)] = step
        rows.append(row_of_op(offset, op))
    cuts = sorted(set(draw(st.lists(st.integers(0, len(rows)), max_size=4))))
    answers = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    return answers, draw(st.lists(st.booleans(), min_size=len(answers), max_size=len(answers)))


def replayed(answers, copies, native: bool):
    state = RemoteLogState()
    held = []
    for rows, take in zip(answers, copies, strict=True):
        state.apply_rows(list(rows), 3, native=native)
        if take:     # a plan holds the partitions as they stand (catalog.partition)
            held.append({k: (s.copy(), copy.deepcopy(s.to_dict())) for k, s in state.partitions.items()})
    return state, held


def view(state: RemoteLogState) -> dict:
    return {k: (s.to_dict(), [c.segment_id for c in s.readable()]) for k, s in state.partitions.items()}


@settings(max_examples=80, deadline=None)
@given(histories())
def test_the_native_replay_makes_the_state_the_reference_makes(h):
    answers, copies = h
    native, held_n = replayed(answers, copies, native=True)
    pure, held_p = replayed(answers, copies, native=False)
    assert view(native) == view(pure)
    # what the plans held did not change under them, and is the same both ways
    for a, b in zip(held_n, held_p, strict=True):
        assert {k: s.to_dict() for k, (s, _) in a.items()} == {k: d for k, (_, d) in a.items()}
        assert {k: d for k, (_, d) in a.items()} == {k: d for k, (_, d) in b.items()}


@st.composite
def lifecycles(draw):
    """Well-formed lives of copies, interleaved: STARTED, FINISHED, maybe DELETE_STARTED and
    DELETE_FINISHED, in order per copy; one leader epoch each, consecutive offsets."""
    n = draw(st.integers(1, 12))
    lives = []
    for _ in range(n):
        steps = [STARTED, FINISHED][:draw(st.integers(1, 2))]
        if len(steps) == 2:
            steps += [DELETE_STARTED, DELETE_FINISHED][:draw(st.integers(0, 2))]
        lives.append(steps)
    order = draw(st.permutations([i for i, steps in enumerate(lives) for _ in steps]))
    return lives, order


@settings(max_examples=40, deadline=None)
@given(lifecycles())
def test_readable_copies_are_those_the_history_finished_and_did_not_delete(h):
    lives, order = h
    rows, at = [], [0] * len(lives)
    for offset, i in enumerate(order):
        step = lives[i][at[i]]
        at[i] += 1
        rows.append(segment_row(offset, 0, i, 10 * i, 10 * i + 9, [(0, 10 * i)]) if step == STARTED
                    else update_row(offset, 0, i, step))
    state = RemoteLogState()
    state.apply_rows(rows, 0, native=True)
    part = state.partition(TID, 0)
    finished = [sid(i) for i, steps in enumerate(lives) if steps[-1] == FINISHED]
    assert [c.segment_id for c in part.readable()] == finished
    assert sorted(part.copies) == sorted(sid(i) for i, steps in enumerate(lives) if steps[-1] != DELETE_FINISHED)
    # the epoch map holds each finished copy at its start, in offset order
    es = part.epochs.get(0)
    assert (es.ids if es else []) == finished
    assert (es.keys if es else []) == [10 * int(s) for s in finished]


def test_illegal_transitions_are_ignored_natively_as_kafka_ignores_them():
    rows = [segment_row(0, 0, 1, 0, 9, [(0, 0)]),
            update_row(1, 0, 1, DELETE_FINISHED),          # STARTED -> DELETE_FINISHED: illegal
            update_row(2, 0, 1, FINISHED),
            update_row(3, 0, 1, STARTED),                  # FINISHED -> STARTED: illegal
            segment_row(4, 0, 1, 0, 9, [(0, 0)]),          # a repeated segment record: the copy stays finished
            update_row(5, 0, 2, FINISHED),                 # a copy never seen: nothing
            segment_row(6, 0, 3, 10, 19, [(0, 10)]),
            update_row(7, 0, 3, FINISHED),
            update_row(8, 0, 3, DELETE_STARTED),
            update_row(9, 0, 3, FINISHED)]                 # DELETE_STARTED -> FINISHED: illegal
    state = RemoteLogState()
    state.apply_rows(rows, 0, native=True)
    part = state.partition(TID, 0)
    assert [c.segment_id for c in part.readable()] == [sid(1)]
    assert part.copies[sid(1)].order == (0, 2) and part.copies[sid(3)].state == DELETE_STARTED
    assert part.epochs[0].keys == [0] and part.epochs[0].ids == [sid(1)]
    state.apply_rows([(2, 10, TID, 0)], 0, native=True)       # a partition delete
    assert state.partition(TID, 0).readable() == []


def test_slots_maker_makes_what_init_makes():
    from kafka_tiered_source.planning.packing import SegmentSlice
    from kafka_tiered_source.planning.tasks import RemoteRange
    from kafka_tiered_source.records.backend import slots_maker
    from kafka_tiered_source.storage.segment import RemoteSegment
    seg = RemoteSegment(topic="t", topic_id=TID, partition=3, segment_id=sid(1), base_offset=10, end_offset=19,
                        size_bytes=500, custom_metadata=b"c", max_timestamp=1234)
    made = slots_maker(RemoteSegment)("t", TID, 3, sid(1), 10, 19, 500, b"c", None, "ApacheKafkaV1", None, 1234, False)
    assert made == seg and repr(made) == repr(seg) and made.max_timestamp == 1234 and made.broker_positions is False
    with pytest.raises(AttributeError):
        made.topic = "u"          # still frozen
    r = slots_maker(RemoteRange)(seg, 0, 500, 10, 20, 500, 10)
    assert r == RemoteRange(seg, 0, 500, 10, 20, 500, 10)
    assert slots_maker(SegmentSlice)(seg, 12, 15, ((12, 40),)) == SegmentSlice(seg, 12, 15, ((12, 40),))
    with pytest.raises(TypeError):
        slots_maker(RemoteSegment)("t", TID)
