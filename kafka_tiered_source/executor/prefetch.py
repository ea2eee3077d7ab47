"""Fetching ahead of the decoder: a task's tiered ranges, part by part, with GETs in flight
across range and partition boundaries, in a bounded window of futures the reader owns."""
from __future__ import annotations

import contextvars
import threading
from functools import partial
from collections import deque
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import Iterator, NamedTuple

from ..errors import KafkaTieredError
from ..metrics.reader import fetch_scope
from ..storage.fetcher import cancel_scope


def ramp_sizes(part_size: int, empty: bool = True) -> tuple:
    """The leading parts of a partition's first range in a task.  Its later ranges wait for a
    first GET of it to come back (slow start), so that GET is small: 1/8 of a part brings the
    go-ahead after a fraction of a whole part's transfer.  Where the pipe is ``empty`` (the task
    starts) nothing else is being decoded either, so the parts grow from there: 1/8, 1/4 and 1/2
    (2, 4 and 8 MiB of the default 16 MiB), each arriving about when the decoder is through the
    one before; elsewhere one small part is enough, earlier parts are decoded meanwhile.  None
    for parts under 64 KiB."""
    if part_size < 64 * 1024:
        return ()
    return (part_size // 8, part_size // 4, part_size // 2) if empty else (part_size // 8,)


class PrefetchClosed(KafkaTieredError):
    """The prefetcher was closed while the reader still waited for a part."""


class _Slot(NamedTuple):
    range_index: int
    last: bool          # the range's last part: nothing of it follows
    future: Future      # -> (piece, ended); or the range's planning that failed


class RangePrefetcher:
    """Fetches a task's tiered ranges in order, keeping ``concurrency`` GETs in flight and up to
    ``depth`` fetched parts waiting for the decoder (one is enough: the GETs in flight are the
    buffer that hides latency; a deeper one only holds more memory).

    The GETs of one task form one stream: the parts of every range
    (:meth:`~kafka_tiered_source.storage.fetcher.RemoteStorageFetcher.log_segment_parts`), range
    after range, so the next segment's first GETs (and its manifest) are in flight while the
    current one is still arriving and being decoded: object-store latency overlaps with
    decoding and Spark throughout.

    The stream is a window of futures, in reading order, that this object owns: a GET that
    completes frees its slot for the next (from the pool's completion callback, so the window
    refills while the reader decodes), and :meth:`close` cancels what has not started and waits
    for what has, so no GET of the task runs, or is counted, after it returns.  No thread of its
    own and no polling: the reader blocks on the future it needs, nothing else.

    Each GET is counted under the topic-partition of the range it was made for
    (:func:`~kafka_tiered_source.metrics.reader.fetch_scope`).  Each partition starts slowly:
    its later ranges go in flight once a GET of it came back good, and after a failure nothing
    more of it is fetched until the reader has decided (it usually sends the rest of the
    partition through the broker).

    Memory: at most ``concurrency + depth`` parts fetched or in flight and one being decoded,
    each at most ``fetch.remote.part.size.bytes`` (a chunked segment's part: whole chunks up to
    that size).  A failure is raised from ``pieces(i)`` of its range."""

    def __init__(self, fetcher, ranges, concurrency: int, depth: int = 1):
        self._fetcher = fetcher
        self._ranges = list(ranges)
        self._keys = [(r.topic, r.partition) for r in self._ranges]
        self._first: dict = {}         # partition -> index of its first range
        for i, key in enumerate(self._keys):
            self._first.setdefault(key, i)
        self._concurrency = max(1, concurrency)
        self._size = self._concurrency + max(1, depth)
        self._pool = ThreadPoolExecutor(max_workers=self._concurrency, thread_name_prefix="kts-get")
        self._cancel = threading.Event()          # seen by the fetcher's retry loop
        # One lock for every field below; re-entrant because a future that is already done runs
        # its callback in the thread adding it, which holds the lock.
        self._lock = threading.RLock()
        self._window: deque[_Slot] = deque()
        self._plans: dict[int, Future] = {}       # range -> its parts (planned ahead in the pool)
        self._next = (0, 0)                       # the next part to submit: (range, part)
        self._wanted = -1                         # the range the reader asked for last
        self._good: set = set()                   # partitions with a GET back good
        self._bad: set = set()                    # partitions with a failed GET
        self._dead: set = set()                   # ranges that failed or ended: nothing more of them
        self._skip: set = set()                   # ranges the reader reads elsewhere
        self._closed = False
        self._filling = False                     # _fill is running (in this thread: re-entered)
        self._again = False                       # ... and was asked again meanwhile
        with self._lock:
            self._fill()

    # -- scheduling (always under the lock) -----------------------------------------------------
    def _allowed(self, i: int) -> bool:
        """Whether range ``i``'s GETs may start: the first range of its partition, a partition
        with a GET back good and none failed, or a range the reader has reached."""
        key = self._keys[i]
        return self._first[key] == i or (key in self._good and key not in self._bad) or self._wanted >= i

    def _plan(self, i: int, empty: bool) -> Future:
        fut = self._plans.get(i)
        if fut is None:
            ramp = ramp_sizes(self._fetcher.config.part_size, empty) if self._first[self._keys[i]] == i else ()
            fut = self._plans[i] = self._pool.submit(self._planned, i, ramp)
            fut.add_done_callback(self._refill)
        return fut

    def _planned(self, i: int, ramp: tuple) -> list:
        """Range ``i``'s parts (the fetcher reads its manifest now when it needs one), with its
        GETs counted under its own partition."""
        r = self._ranges[i]
        token, cancel = fetch_scope.set(self._keys[i]), cancel_scope.set(self._cancel)
        try:
            return self._fetcher.log_segment_parts(r.segment, r.byte_start, r.byte_end, ramp=ramp)
        finally:
            cancel_scope.reset(cancel)
            fetch_scope.reset(token)

    def _fill(self) -> None:
        """Submit parts, in order, while the window has room and slow start allows; plan the
        ranges after them ahead, in the pool, so their manifests are read while earlier parts
        arrive.  A future that is already done runs its callback at once, in this thread, which
        asks to fill again: that is done after the pass under way, never inside it."""
        if self._filling:
            self._again = True
            return
        self._filling = True
        try:
            while True:
                self._again = False
                self._fill_once()
                if not self._again:
                    return
        finally:
            self._filling = False

    def _fill_once(self) -> None:
        n_ranges = len(self._ranges)
        while not self._closed and len(self._window) < self._size and self._next[0] < n_ranges:
            i, n = self._next
            if i in self._skip or i in self._dead:
                self._next = (i + 1, 0)
                continue
            if n == 0 and not self._allowed(i):
                break
            plan = self._plan(i, not self._window)
            if not plan.done():
                break                             # its completion fills again
            if plan.cancelled():
                break
            if plan.exception() is not None:      # e.g. its manifest: the reader decides
                self._window.append(_Slot(i, True, plan))
                self._dead.add(i)
                self._next = (i + 1, 0)
                continue
            parts = plan.result()
            if n >= len(parts):
                self._next = (i + 1, 0)
                continue
            ctx = contextvars.copy_context()
            ctx.run(fetch_scope.set, self._keys[i])
            ctx.run(cancel_scope.set, self._cancel)
            fut = self._pool.submit(ctx.run, parts[n])
            self._window.append(_Slot(i, n == len(parts) - 1, fut))
            self._next = (i, n + 1)
            fut.add_done_callback(partial(self._arrived, i))
        start = self._next[0] + 1
        for j in range(start, min(start + self._concurrency, n_ranges)):
            if self._closed:
                break
            if j not in self._plans and j not in self._skip and self._allowed(j):
                self._plan(j, False)

    def _refill(self, _fut=None) -> None:
        with self._lock:
            self._fill()

    def _arrived(self, i: int, fut: Future) -> None:
        """A GET of range ``i`` completed: good, its partition's later ranges may go in flight;
        failed, nothing more of the partition starts until the reader decides; ended early, no
        more of the range exists."""
        with self._lock:
            if not fut.cancelled():
                if fut.exception() is not None:
                    self._bad.add(self._keys[i])
                    self._dead.add(i)
                else:
                    self._good.add(self._keys[i])
                    if fut.result()[1]:
                        self._dead.add(i)
            self._fill()

    # -- the reader's side ----------------------------------------------------------------------
    def skip(self, i: int) -> None:
        """The reader will not read range ``i`` directly (its partition fell back)."""
        with self._lock:
            self._skip.add(i)
            self._drop(lambda s: s.range_index == i)
            self._fill()

    def _drop(self, which) -> None:
        kept: deque[_Slot] = deque()
        for slot in self._window:
            if which(slot):
                slot.future.cancel()
            else:
                kept.append(slot)
        self._window = kept

    def _head(self, i: int) -> _Slot | None:
        """The next slot of range ``i``, waiting for its planning if need be; None when the
        range has no more parts."""
        while True:
            with self._lock:
                if self._closed:
                    raise PrefetchClosed("the prefetcher of this task was closed")
                self._wanted = max(self._wanted, i)
                # what is left of ranges the reader finished early (an offset bound reached)
                self._drop(lambda s: s.range_index < i)
                if self._next[0] < i:
                    self._next = (i, 0)
                self._fill()
                if self._window and self._window[0].range_index == i:
                    return self._window[0]
                if self._next[0] > i or i in self._skip:
                    return None                   # every part of it was handed over
                plan = self._plans.get(i)
            if plan is None:                      # pragma: no cover - _fill plans range i
                raise KafkaTieredError(f"prefetch out of step: range {i} was not planned")
            try:
                plan.result()
            except Exception:                     # handed over through the window by _fill
                pass

    def pieces(self, i: int) -> Iterator:
        """The parts of range ``i``, in order; raises the error its fetch ended with."""
        while True:
            slot = self._head(i)
            if slot is None:
                return
            try:
                piece, ended = slot.future.result()
            except CancelledError:
                raise PrefetchClosed("the prefetcher of this task was closed") from None
            finally:
                with self._lock:
                    if self._window and self._window[0] is slot:
                        self._window.popleft()
                    self._fill()
            if len(piece):
                yield piece
            if slot.last or ended:
                return

    def close(self) -> None:
        """Cancel every GET not started and wait for the ones running: when this returns, no
        GET of this task runs (a GET between retries gives up at once)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._cancel.set()
            for slot in self._window:
                slot.future.cancel()
            for fut in self._plans.values():
                fut.cancel()
            self._window.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
