"""The totals of this process's scans, for ``last_read_stats()`` and ``read_history()`` without a
Spark session.  A scan's tasks run in this process, so their totals are merged here as each
task ends (the channel a Spark read needs an accumulator or a metrics directory for)."""
from __future__ import annotations

import logging
import threading
from typing import Any

from ..metrics.reader import ReadHistory, ReadTotals

log = logging.getLogger("kafka_tiered_source")

_lock = threading.Lock()
_history = ReadHistory()
KEPT = 1000          # scans remembered; a long-lived process forgets the oldest


class ScanTotals:
    """Where one scan's tasks add their totals (``finish_task`` calls :meth:`add`, as it does a
    Spark accumulator's); the storage check's GETs are in from the start."""

    def __init__(self, read_id: str, tasks_planned: int, carried: ReadTotals | None, cost: Any = None):
        self.read_id = read_id
        first = ReadTotals(read_id=read_id, cost=cost, tasks_planned=tasks_planned)
        if carried is not None:
            first.merge(carried)
        with _lock:
            _history.add(first)
            while len(_history.reads) > KEPT:
                del _history.reads[next(iter(_history.reads))]

    def add(self, totals: ReadTotals) -> None:
        totals.read_id = self.read_id
        with _lock:
            _history.add(totals)

    def finished(self) -> None:
        """The scan ended (read to the end, closed or failed): say so in one line if any of it
        went through the brokers instead of storage."""
        with _lock:
            totals = _history.reads.get(self.read_id)
            line = totals.fallback_line() if totals is not None else None
        if line:
            log.warning("%s", line)


def history() -> ReadHistory:
    """A copy of every scan's totals in this process, oldest first."""
    with _lock:
        return ReadHistory({k: ReadTotals().merge(v) for k, v in _history.reads.items()})


def last() -> ReadTotals | None:
    return history().last()
