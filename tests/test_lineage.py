"""The leader-epoch lineage rule (kafka_tiered_source.planning.lineage) against a literal
transcription of RemoteLogManager.isRemoteSegmentWithinLeaderEpochs, which sees the whole
leader-epoch cache.  The code under test sees only what OffsetForLeaderEpoch answers (and the
log start offset, where the cache's first epoch starts); the
answers are computed here from the cache the way a broker's LeaderEpochFileCache.endOffsetFor
does, independently of the code under test."""
from __future__ import annotations

import bisect

from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_tiered_source.planning.lineage import EpochAnswer, Lineage, epochs_to_ask, on_lineage


def _filtered(epochs: dict) -> dict:
    """RemoteLogManager.buildFilteredLeaderEpochMap."""
    items = sorted(epochs.items())
    dup = {items[i][0] for i in range(len(items) - 1) if items[i][1] == items[i + 1][1]}
    return {e: o for e, o in items if e not in dup}


def _higher(m: dict, key):
    keys = sorted(m)
    i = bisect.bisect_right(keys, key)
    return (keys[i], m[keys[i]]) if i < len(keys) else None


def java_rule(segment_epochs: dict, segment_end: int, log_end: int, leader_epochs: dict) -> bool:
    """RemoteLogManager.isRemoteSegmentWithinLeaderEpochs, line by line."""
    seg = _filtered(segment_epochs)
    first, last = min(seg), max(seg)
    if first < min(leader_epochs) or last > max(leader_epochs):
        return False
    for epoch, offset in sorted(seg.items()):
        if epoch not in leader_epochs:
            return False
        if epoch == first and offset < leader_epochs[epoch]:
            return False
        if epoch == last:
            nxt = _higher(leader_epochs, epoch)
            if nxt is not None and segment_end > nxt[1] - 1:
                return False
        if epoch != last and _higher(leader_epochs, epoch) != _higher(seg, epoch):
            return False
    return segment_end < log_end


def end_offset_for(cache: dict, requested: int, log_end: int) -> EpochAnswer:
    """LeaderEpochFileCache.endOffsetFor: the largest epoch <= requested and its end offset."""
    epochs = sorted(cache)
    below = [e for e in epochs if e <= requested]
    if not below:
        return EpochAnswer(-1, -1)
    e = below[-1]
    nxt = _higher(cache, e)
    return EpochAnswer(e, nxt[1] if nxt is not None else log_end)


@st.composite
def scenario(draw):
    # a lineage: increasing epochs (gaps allowed) at non-decreasing start offsets (empty epochs
    # allowed), then a segment whose epochs may or may not follow it
    n = draw(st.integers(1, 5))
    epochs = sorted(draw(st.sets(st.integers(0, 12), min_size=n, max_size=n)))
    starts = sorted(draw(st.lists(st.integers(0, 200), min_size=n, max_size=n)))
    cache = dict(zip(epochs, starts, strict=True))
    log_end = max(starts) + draw(st.integers(1, 60))
    if draw(st.booleans()):
        # a segment cut from the lineage itself
        lo = draw(st.integers(0, log_end - 1))
        hi = draw(st.integers(lo, log_end + 5))
        seg = {e: max(o, lo) for e, o in cache.items() if o <= hi}
        nxt = [e for e in sorted(cache) if cache[e] <= lo]
        seg = {e: o for e, o in seg.items() if not nxt or e >= nxt[-1]}
        if not seg:
            seg = {epochs[0]: lo}
        end = hi
    else:
        m = draw(st.integers(1, 3))
        seg_epochs = sorted(draw(st.sets(st.integers(0, 12), min_size=m, max_size=m)))
        seg_starts = sorted(draw(st.lists(st.integers(0, 220), min_size=m, max_size=m)))
        seg = dict(zip(seg_epochs, seg_starts, strict=True))
        end = max(seg_starts) + draw(st.integers(0, 40))
    return cache, log_end, seg, end


@settings(max_examples=600, deadline=None)
@given(scenario())
def test_matches_remote_log_managers_rule(s):
    cache, log_end, seg, end = s
    # Kafka filters the lineage too (epochs without records) before the check
    expected = java_rule(seg, end, log_end, _filtered(cache))
    asked = epochs_to_ask([tuple(seg.items())])
    lineage = Lineage({e: end_offset_for(cache, e, log_end) for e in asked}, cache[min(cache)], log_end)
    assert on_lineage(tuple(seg.items()), end, lineage) == expected


def test_unclean_reupload_picks_the_copy_on_the_lineage():
    # epoch 3 led from 100; an unclean election made epoch 4 the leader from 150, truncating
    # what epoch 3 had written past 150.  The old leader's copy [100, 199] (epoch 3 only) is
    # off the lineage; the new copy [100, 199] with epochs 3@100, 4@150 is on it.
    cache = {0: 0, 3: 100, 4: 150}
    log_end = 400
    old = ((3, 100),)
    new = ((3, 100), (4, 150))
    lineage = Lineage({e: end_offset_for(cache, e, log_end)
                       for e in epochs_to_ask([old, new, ((0, 0),)])}, 0, log_end)
    assert not on_lineage(old, 199, lineage)
    assert on_lineage(new, 199, lineage)
    assert on_lineage(((0, 0),), 99, lineage)          # an older segment wholly in epoch 0
    assert not on_lineage(((0, 0),), 120, lineage)     # ... but not past epoch 0's end
    assert not on_lineage(((4, 150),), 400, lineage)   # not past the log end
