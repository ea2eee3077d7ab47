"""A window of read tasks in flight: ``workers`` threads each run one task at a time, and one
consumer takes their batches with every partition's batches in offset order.

Threads, not processes: the native decoder releases the GIL while it decompresses and parses
records, the prefetcher's GETs wait on sockets, and a batch made in a thread reaches the
consumer without a copy (a process would send every batch through a pipe).  BENCHMARKS.md
("scan") has the measurements.

Order.  The planner's tasks are in offset order per partition, and a partition's offsets may
span several tasks.  A task whose partitions no earlier unfinished task holds ("free") streams
its batches straight to the consumer; any other buffers them until the earlier tasks of its
partitions are through, then hands the buffer over and streams.  Free tasks are started first,
so the threads keep busy on different partitions; only when none is free does the next task in
plan order start, buffering.  It never waits on a task that has not started: a task is started
out of order only when free, and the lowest unfinished task is always free.

Memory.  At most ``workers`` tasks run (each a :class:`~kafka_tiered_source.executor.TaskReader`
with its parts in flight), each buffering at most ``buffer_bytes`` of Arrow batches (one
batch more), plus ``queue_batches`` batches handed over and not yet taken.  A worker that
cannot put its batch down waits: the consumer's pace is the scan's pace.

Stopping.  :meth:`close` (the consumer is done, the reader was closed, or a task failed) stops
every worker at its next batch: its task's generator is closed (the task's reader closes its
prefetcher and connections, and its metrics are reported as stopped).  A task's error stops the
others and is raised to the consumer.
"""
from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any, Callable, Iterator, Sequence

log = logging.getLogger(__name__)

BUFFER_BYTES = 64 << 20      # Arrow bytes a task waiting for an earlier one may hold
JOIN_TIMEOUT_S = 30.0        # how long close() waits for a worker to reach its next batch


class TaskWindow:
    """Runs ``run(task)`` (an iterator of ``pyarrow.RecordBatch``) for every task of ``tasks``
    (:class:`~kafka_tiered_source.planning.tasks.ReadTask`), ``workers`` at a time;
    :meth:`batches` yields what they make."""

    def __init__(self, tasks: Sequence[Any], run: Callable[[Any], Iterator[Any]], workers: int,
                 buffer_bytes: int = BUFFER_BYTES, queue_batches: int | None = None):
        self._tasks = list(tasks)
        self._run = run
        self._workers = max(1, min(workers, len(self._tasks) or 1))
        self._limit = buffer_bytes
        self._queue_limit = queue_batches or 2 * self._workers
        # the task each one waits for per partition: the last earlier task holding it (that
        # one in turn waits for the earlier ones)
        last: dict = {}
        self._deps: list[set] = []
        for k, task in enumerate(self._tasks):
            keys = {(r.topic, r.partition) for r in task.ranges}
            self._deps.append({last[key] for key in keys if key in last})
            for key in keys:
                last[key] = k
        n = len(self._tasks)
        self._cond = threading.Condition()
        self._pending = list(range(n))          # not started, in plan order
        self._done = [False] * n                # finished and every batch handed over
        self._ended = [False] * n               # its generator is through
        self._buffer: list[deque] = [deque() for _ in range(n)]
        self._buffered = [0] * n                # Arrow bytes in _buffer
        self._ready = [not d for d in self._deps]   # every earlier task of its partitions done
        self._out: deque = deque()
        self._left = n                          # tasks not done
        self._error: BaseException | None = None
        self._stopped = False
        self._threads: list[threading.Thread] = []

    # -- the consumer side ---------------------------------------------------------------------
    def batches(self) -> Iterator[Any]:
        """Every batch of every task; per partition in offset order.  Closing this generator (or
        not taking everything) stops the workers."""
        self._start()
        try:
            while True:
                with self._cond:
                    while not self._out and self._left and self._error is None:
                        self._cond.wait()
                    if self._error is not None:
                        raise self._error
                    if not self._out:
                        return
                    batch = self._out.popleft()
                    self._cond.notify_all()
                yield batch
        finally:
            self.close()

    def close(self) -> None:
        """Stop every worker at its next batch and wait for them (up to :data:`JOIN_TIMEOUT_S`
        each: one may be inside a GET or a broker fetch)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        me = threading.current_thread()
        for t in self._threads:
            if t is not me:
                t.join(JOIN_TIMEOUT_S)
                if t.is_alive():
                    log.warning("kafka-tiered scan: worker %s still busy %.0f s after the scan was closed; "
                                "it stops after its current request", t.name, JOIN_TIMEOUT_S)

    # -- the workers -----------------------------------------------------------------------------
    def _start(self) -> None:
        for i in range(self._workers):
            t = threading.Thread(target=self._work, name=f"kafka-tiered-scan-{i}", daemon=True)
            self._threads.append(t)
            t.start()

    def _next_task(self) -> int | None:
        """Under the lock: the first free task not started, else the first not started."""
        if not self._pending:
            return None
        pick = next((k for k in self._pending if self._ready[k]), self._pending[0])
        self._pending.remove(pick)
        return pick

    def _work(self) -> None:
        while True:
            with self._cond:
                if self._stopped or self._error is not None:
                    return
                k = self._next_task()
            if k is None:
                return
            try:
                self._one(k)
            except BaseException as exc:   # a task's error ends the scan, raised to the consumer
                with self._cond:
                    if self._error is None and not self._stopped:
                        self._error = exc
                    self._stopped = True
                    self._cond.notify_all()
                return

    def _one(self, k: int) -> None:
        gen = self._run(self._tasks[k])
        try:
            for batch in gen:
                if not self._put(k, batch):
                    return
        finally:
            close = getattr(gen, "close", None)
            if close is not None:
                close()   # a task stopped early reports its metrics as such
        with self._cond:
            self._ended[k] = True
            self._settle()
            while not self._done[k] and not self._stopped:
                self._cond.wait()

    def _put(self, k: int, batch: Any) -> bool:
        """Hand ``batch`` of task ``k`` over, or buffer it; False when the scan stopped."""
        size = batch.nbytes
        with self._cond:
            while not self._stopped:
                if self._ready[k]:
                    if len(self._out) < self._queue_limit:
                        self._out.append(batch)
                        self._cond.notify_all()
                        return True
                elif self._buffered[k] < self._limit:
                    self._buffer[k].append(batch)
                    self._buffered[k] += size
                    return True
                self._cond.wait()
            return False

    def _settle(self) -> None:
        """Under the lock: hand over the buffers of tasks whose earlier tasks are done; mark
        the ended ones done, which may free later ones in turn."""
        changed = True
        while changed:
            changed = False
            for k in range(len(self._tasks)):
                if self._done[k]:
                    continue
                if not self._ready[k] and all(self._done[j] for j in self._deps[k]):
                    self._ready[k] = True
                    changed = True
                if self._ready[k] and self._buffer[k]:
                    self._out.extend(self._buffer[k])
                    self._buffer[k].clear()
                    self._buffered[k] = 0
                if self._ready[k] and self._ended[k]:
                    self._done[k] = True
                    self._left -= 1
                    changed = True
        self._cond.notify_all()
