"""Planning (driver side): where each offset of a read lives, and the read tasks.

``plan(options) -> Plan`` is the one entry point, for the Spark source, ``estimate()`` and the
CLI alike.  With a broker, :mod:`.online` resolves topics and offsets through it and locates the
tiered segments with a locator (:mod:`.locate`); without one, :mod:`.offline` lists the object
store.  Both resolve offset bounds with :mod:`.bounds`, pack tasks with :mod:`.packing` and hand
read_committed readers their aborted transactions with :mod:`.txn`.

Example (against the embedded broker)::

    from kafka_tiered_source.planning import plan
    from kafka_tiered_source.options import ReadOptions
    p = plan(ReadOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}))
    print(len(p.tasks), p.remote_segments, p.locators)
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from ..logs import get_logger
from .plan import PartitionRange, Plan
from .tasks import AbortedTransaction, BrokerRange, PartitionTxnInfo, ReadTask, RemoteRange

log = get_logger(__name__)

__all__ = ["plan", "Plan", "PartitionRange", "ReadTask", "RemoteRange", "BrokerRange",
           "AbortedTransaction", "PartitionTxnInfo"]


def plan(options, row_filter=None, *, refresh: bool = False) -> Plan:
    """Plan a read described by parsed options (a ``ReadOptions``), reading only what can
    match ``row_filter`` (pushed-down filters, :class:`.filters.RowFilter`; the executor still
    applies it to every row).  ``refresh``: the ``__remote_log_metadata`` catalog reads the
    metadata partitions the plan needs from their start instead of from where it stands
    (:mod:`.catalog`)."""
    with _collector_paused():
        return _plan(options, row_filter, refresh)


_paused = 0
_paused_lock = threading.Lock()


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a plan is made (and on again after the last of
    concurrent plans, if it was on).  A plan of a million copies makes millions of objects that
    form no cycles, beside a catalog of millions more; each full collection the allocations
    trigger walks all of them, which cost a plan of 100k copies ~40 % of its time.

    While it is off every object made still joins the youngest generation, so the first
    collection after it is on again (at the next allocation: inside the plan) would walk all of
    them, ~10 M at a million copies (1.4 CPU-s), and a generation-1 collection later walks them
    again.  So they are handed to the oldest generation first (``gc.freeze()`` then
    ``gc.unfreeze()``, both list splices): only a full collection walks them, when the
    collector's own rule calls one; nothing is exempt from it, so a cycle made meanwhile is
    still collected.  Not done when something else froze objects (the permanent generation is
    not empty: unfreezing would release its objects)."""
    import gc
    global _paused
    with _paused_lock:
        if _paused == 0 and not gc.isenabled():
            owner = False              # someone else turned it off: leave it so
        else:
            owner = True
            _paused += 1
            gc.disable()
    try:
        yield
    finally:
        if owner:
            with _paused_lock:
                _paused -= 1
                if _paused == 0:
                    if gc.get_freeze_count() == 0:
                        gc.freeze()
                        gc.unfreeze()
                    gc.enable()


def _plan(options, row_filter, refresh: bool) -> Plan:
    if options.offline:
        from .offline import plan_offline
        return plan_offline(options, row_filter)
    from ..protocol.client import BrokerClient
    from ..storage.observer import CountingObserver
    from ..storage.registry import create_fetcher
    from .online import Planner
    storage = options.storage
    if options.fetch_remote_enabled and not storage.configured:
        log.warning("no remote.storage.fetcher is set: tiered segments are read directly only where "
                    "the broker hands out presigned URLs; the rest is fetched through the brokers")
    with BrokerClient.for_read(options) as client:
        # the observer counts planning's own GETs (what read_committed spends past the ends)
        fetcher = (create_fetcher(storage, observer=CountingObserver())
                   if options.fetch_remote_enabled and storage.configured else None)
        try:
            return Planner(options, client, fetcher, row_filter, refresh=refresh).plan()
        finally:
            if fetcher is not None:
                fetcher.close()
