"""The embedded broker's RemoteLogManager scheduler: RLMCopyTask and RLMExpirationTask on every
tiered partition, every ``remote.log.manager.task.interval.ms``.

Kafka (RemoteLogManager.doHandleLeaderPartition) schedules each leader partition's copy task on
``rlmCopyThreadPool`` and its expiration task on ``rlmExpirationThreadPool``, each with
``scheduleWithFixedDelay(task, 0, interval)``: a first run at once, then the interval after each
run ends.  Here one thread runs each kind over all partitions in turn; a partition's ``tasks``
lock (:mod:`.copying`) keeps its copy and expiration, and the ``tier()`` / ``expire()`` test
hooks, from running at once.  A failure on one partition is logged and the others go on, as one
failing RLMTask leaves the others scheduled.  :meth:`RemoteLogManagerTasks.stop` ends the
threads: a copy stops between two segments (a cancelled RLMTask checks ``isCancelled``).

Kafka runs local retention from LogManager's cleanup every ``log.retention.check.interval.ms``
(5 minutes by default); here it follows each copy task, so a copied segment's local copy goes
within one interval.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable

from ..errors import ConfigError
from . import copying

if TYPE_CHECKING:
    from .partition import Partition
    from .storage import BrokerStorage

log = logging.getLogger(__name__)


class RemoteLogManagerTasks:
    """The copy and expiration threads of one broker's storage."""

    def __init__(self, storage: "BrokerStorage", interval_ms: int, on_change: Callable[[], object] = lambda: None):
        # on_change(): after a partition's task copied or deleted something (the broker then
        # wakes fetches waiting on __remote_log_metadata, which the task wrote to)
        if interval_ms <= 0:
            raise ConfigError(f"remote.log.manager.task.interval.ms must be > 0, got {interval_ms}",
                              option="remote_log_manager_task_interval_ms")
        self.storage = storage
        self.interval_ms = interval_ms
        self.on_change = on_change
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._done = threading.Condition()
        self.rounds = {"copy": 0, "expiration": 0}     # finished runs over all partitions

    def start(self) -> "RemoteLogManagerTasks":
        for kind, task in (("copy", self._copy), ("expiration", self._expire)):
            t = threading.Thread(target=self._loop, args=(kind, task), name=f"kafka-tiered-rlm-{kind}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout_s)
        self._threads = []

    def wait_rounds(self, kind: str, n: int, timeout_s: float) -> bool:
        """Wait until ``n`` runs of ``kind`` ("copy", "expiration") have finished in all."""
        with self._done:
            return self._done.wait_for(lambda: self.rounds[kind] >= n, timeout_s)

    def _loop(self, kind: str, task: Callable[["Partition"], object]) -> None:
        while not self._stop.is_set():
            for part in self.storage.tiered_partitions():
                if self._stop.is_set():
                    return
                try:
                    if task(part):
                        self.on_change()
                except Exception:   # the partition's next run tries again
                    log.exception("RemoteLogManager %s task on %s-%d failed", kind, part.topic.name, part.partition)
            with self._done:
                self.rounds[kind] += 1
                self._done.notify_all()
            self._stop.wait(self.interval_ms / 1000)

    def _copy(self, part: "Partition") -> list:
        return copying.tier(self.storage, [part], self._stop.is_set)

    def _expire(self, part: "Partition") -> list:
        return copying.expire(self.storage, [part], int(time.time() * 1000))
