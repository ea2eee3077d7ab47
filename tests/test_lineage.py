"""The leader-epoch lineage as the planner learns it (kafka_tiered_source.planning.lineage): from
OffsetForLeaderEpoch answers alone (computed here as LeaderEpochFileCache.endOffsetFor gives
them, test_coverage.end_offset_for), each offset of the log must get the epoch that wrote it,
as the broker's cache says (LeaderEpochFileCache.epochForOffset, test_coverage.epoch_for), for
every epoch a copy may name; an epoch off the lineage gets no offset."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from test_coverage import end_offset_for, epoch_for

from kafka_tiered_source.planning.coverage import lineage_spans
from kafka_tiered_source.planning.lineage import EpochAnswer, Lineage, epochs_to_ask


@st.composite
def lineages(draw):
    """A leader-epoch cache (ascending epochs, gaps allowed, at strictly ascending starts from
    0), a log start and end, and the epochs some copies name (on the lineage or not)."""
    n = draw(st.integers(1, 5))
    epochs = sorted(draw(st.sets(st.integers(0, 12), min_size=n, max_size=n)))
    starts = [0] + sorted(draw(st.sets(st.integers(1, 150), min_size=n - 1, max_size=n - 1)))
    cache = list(zip(epochs, starts, strict=True))
    log_end = starts[-1] + draw(st.integers(1, 40))
    log_start = draw(st.integers(0, log_end - 1))
    named = draw(st.sets(st.integers(0, 14), min_size=1, max_size=5))
    return cache, log_start, log_end, named


@settings(max_examples=200, deadline=None)
@given(lineages())
def test_each_offset_gets_the_epoch_that_wrote_it(s):
    cache, log_start, log_end, named = s
    # the epochs as one copy would carry them: epochs_to_ask adds the one before each
    asked = epochs_to_ask([tuple((e, i) for i, e in enumerate(sorted(named)))])
    lineage = Lineage({e: EpochAnswer(*end_offset_for(cache, e, log_end)) for e in asked}, log_start)
    got = {o: e for lo, hi, e in lineage_spans(lineage, named) for o in range(lo, hi)}
    want = {o: epoch_for(cache, o) for o in range(log_start, log_end)}
    assert got == {o: e for o, e in want.items() if e in named}


def test_an_unclean_leaders_epoch_is_off_the_lineage():
    # epoch 3 led from 100; an unclean election made epoch 4 the leader from 150, and the old
    # leader's epoch 5 (written past 150 before it lost leadership) is nowhere on the lineage
    cache, log_end = [(0, 0), (3, 100), (4, 150)], 400
    asked = epochs_to_ask([((0, 0), (3, 100), (4, 150), (5, 160))])
    lineage = Lineage({e: EpochAnswer(*end_offset_for(cache, e, log_end)) for e in asked}, 0)
    assert lineage_spans(lineage, {0, 3, 4, 5}) == [(0, 100, 0), (100, 150, 3), (150, 400, 4)]
    assert not lineage.has(5) and not lineage.has(2)
