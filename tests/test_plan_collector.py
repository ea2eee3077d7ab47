"""The cyclic garbage collector around a plan (planning._collector_paused): off while the plan's
objects are made, on again after, the objects made meanwhile left out of the youngest
generation yet still collectable, and objects frozen by someone else left frozen."""
import gc
import weakref

import pytest

from kafka_tiered_source.planning import _collector_paused


class _Node:
    def __init__(self):
        self.other = None


def _cycle_garbage() -> weakref.ref:
    a, b = _Node(), _Node()
    a.other, b.other = b, a          # only the cyclic collector can free these two
    return weakref.ref(a)


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_during_a_plan_and_on_after(collector_on):
    with _collector_paused():
        assert not gc.isenabled()
        kept = [[i] for i in range(100_000)]      # tracked objects, as a plan's ranges are
        dead = _cycle_garbage()
    assert gc.isenabled()
    # the plan's objects are not left for the young collections to walk (the first one after
    # the collector is on again would move them to generation 1): they are in the oldest
    young = len(gc.get_objects(0)) + len(gc.get_objects(1))
    assert young < 50_000, young
    assert any(x is kept[0] for x in gc.get_objects(2))
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert dead() is None                        # a cycle made during the plan is collected
    assert len(kept) == 100_000


def test_a_collector_turned_off_by_the_caller_stays_off(collector_on):
    gc.disable()
    with _collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_objects_frozen_by_someone_else_stay_frozen(collector_on):
    # a tracked object of the caller's, frozen by the caller; other frozen objects may die
    # meanwhile (a suite's worker frees some), so the object itself is looked for, not a count
    theirs = [object()]
    gc.freeze()
    try:
        assert gc.get_freeze_count() > 0
        with _collector_paused():
            made = [[i] for i in range(1_000)]
        # still in the permanent generation: no generation the collector walks holds it
        assert not any(x is theirs for x in gc.get_objects())
        assert gc.get_freeze_count() > 0
        assert gc.isenabled() and len(made) == 1_000
    finally:
        gc.unfreeze()
    assert any(x is theirs for x in gc.get_objects())


def test_the_collector_is_on_again_after_a_failed_plan(collector_on):
    with pytest.raises(RuntimeError), _collector_paused():
        raise RuntimeError("a plan that fails")
    assert gc.isenabled()
