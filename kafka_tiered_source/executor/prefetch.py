"""Fetching ahead of the decoder: a task's tiered ranges, part by part, with GETs in flight
across range and partition boundaries."""
from __future__ import annotations

import contextvars
import queue
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from ..errors import KafkaTieredError
from ..metrics.reader import fetch_scope


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


class RangePrefetcher:
    """Fetches a task's tiered ranges in order, keeping ``concurrency`` GETs in flight and up
    to ``depth`` fetched parts queued ahead of the decoder (one is enough: the GETs in flight
    are the buffer that hides latency; a deeper queue only holds more memory).

    The GETs of one task form one stream: the parts of every range
    (:meth:`~kafka_tiered_source.storage.fetcher.RemoteStorageFetcher.log_segment_parts`), range
    after range, so the next segment's first GETs (and its manifest) are in flight while the
    current one is still arriving and being decoded.  A segment of two parts no longer leaves
    half the connections idle, and a partition boundary no longer empties the pipe: object-store
    latency overlaps with decoding and Spark throughout.

    Each GET is counted under the topic-partition of the range it was made for
    (:func:`~kafka_tiered_source.metrics.reader.fetch_scope`), wherever the reader is.  Each
    partition starts slowly: its later ranges go in flight once a GET of it came back good, and
    after a failure nothing more of it is fetched until the reader has decided (it usually sends
    the rest of the partition through the broker).

    Memory: at most ``concurrency`` parts in flight plus ``depth`` queued, each at most
    ``fetch.remote.part.size.bytes`` (a chunked segment's part: whole chunks up to that size).
    An error travels through the queue and is raised from ``pieces(i)`` of its range."""

    _END = object()

    def __init__(self, fetcher, ranges, concurrency: int, depth: int = 1):
        self._ranges = list(ranges)
        self._keys = [(r.topic, r.partition) for r in self._ranges]
        self._first: dict = {}         # partition -> index of its first range
        for i, key in enumerate(self._keys):
            self._first.setdefault(key, i)
        self._window = max(1, concurrency)
        self._queue = queue.Queue(maxsize=max(1, depth))
        self._skip: set = set()
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._wanted = -1              # the range the reader asked for last
        self._good: set = set()        # partitions with a part delivered
        self._bad: set = set()         # partitions with a failed range
        self._pool = ThreadPoolExecutor(max_workers=self._window, thread_name_prefix="kts-get")
        self._thread = threading.Thread(target=self._run, args=(fetcher,), daemon=True,
                                        name="kafka-tiered-prefetch")
        self._thread.start()

    # -- the prefetch thread ------------------------------------------------------------------
    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _planned(self, fetcher, i: int, ramp: tuple = ()):
        """Range ``i``'s parts (the fetcher reads its manifest now when it needs one), with its
        GETs counted under its own partition."""
        r = self._ranges[i]
        token = fetch_scope.set(self._keys[i])
        try:
            if ramp:
                return fetcher.log_segment_parts(r.segment, r.byte_start, r.byte_end, ramp=ramp)
            return fetcher.log_segment_parts(r.segment, r.byte_start, r.byte_end)
        finally:
            fetch_scope.reset(token)

    def _plan_ahead(self, fetcher, i: int, plans: dict) -> None:
        """Plan the ranges after ``i`` that may go in flight (their partition's first range, or
        a partition with a GET back good) in the pool, so that their manifests are read while
        earlier parts arrive, not one after the other in this thread.  As far ahead as the
        window of GETs."""
        for j in range(i + 1, min(i + 1 + self._window, len(self._ranges))):
            key = self._keys[j]
            if j in plans or j in self._skip:
                continue
            if self._first[key] == j:
                ramp = ramp_sizes(fetcher.config.part_size, False) if fetcher.ramps_parts else ()
                plans[j] = self._pool.submit(self._planned, fetcher, j, ramp)
            elif key in self._good and key not in self._bad:
                plans[j] = self._pool.submit(self._planned, fetcher, j)

    def _run(self, fetcher) -> None:
        inflight: deque = deque()      # (range index, is last part of it, future)
        dead: set = set()              # ranges that failed or ended early: drop their parts
        seen: set = set()
        plans: dict = {}               # range index -> future of its parts (planned ahead)
        try:
            for i in range(len(self._ranges)):
                key = self._keys[i]
                first = key not in seen
                seen.add(key)
                # Slow start per partition: its later ranges start once a GET of it has come
                # back good, and none after one of its ranges failed until the reader decided
                # (usually: the rest of the partition through the broker), so a store that
                # fails sees one failed range per partition, not a pile of them.
                # A GET counts as back good when it completes (_arrived), not when its part is
                # handed to the reader: parts are handed over in order, behind the decoder, and
                # the next partition's first GET is usually done long before its turn.
                while not (first or (key in self._good and key not in self._bad) or self._decided(i)):
                    if inflight and inflight[0][2].done():
                        if not self._drain(inflight, dead, len(inflight) - 1):
                            return
                    else:
                        with self._cond:
                            self._cond.wait_for(
                                lambda key=key, i=i: key in self._good or self._decided(i)
                                or (inflight and inflight[0][2].done()), timeout=0.1)
                if self._stop.is_set():
                    return
                if i in self._skip:
                    plans.pop(i, None)
                    continue
                try:
                    planned = plans.pop(i, None)
                    if planned is not None:
                        parts = planned.result()
                    elif first and fetcher.ramps_parts:
                        ramp = ramp_sizes(fetcher.config.part_size, not inflight)
                        parts = self._planned(fetcher, i, ramp)
                    else:
                        parts = self._planned(fetcher, i)
                except Exception as exc:   # e.g. its manifest: handed to the reader, which decides
                    if not self._drain(inflight, dead, 0) or not self._fail(i, exc, dead):
                        return
                    continue
                self._plan_ahead(fetcher, i, plans)
                ctx = contextvars.copy_context()
                ctx.run(fetch_scope.set, self._keys[i])
                for n, part in enumerate(parts):
                    if not self._drain(inflight, dead, self._window - 1):
                        return
                    if i in dead or i in self._skip:
                        break
                    fut = self._pool.submit(ctx.copy().run, part)
                    fut.add_done_callback(lambda f, key=self._keys[i]: self._arrived(key, f))
                    inflight.append((i, n == len(parts) - 1, fut))
            self._drain(inflight, dead, 0)
        finally:
            for _, _, fut in inflight:
                fut.cancel()
            for fut in plans.values():
                fut.cancel()

    def _arrived(self, key, fut) -> None:
        """A GET of partition ``key`` completed: if it came back good, the partition's later
        ranges may go in flight."""
        if fut.cancelled() or fut.exception() is not None:
            with self._cond:
                self._cond.notify_all()   # the prefetch thread may be waiting for it to drain
            return
        with self._cond:
            self._good.add(key)
            self._cond.notify_all()

    def _decided(self, i: int) -> bool:
        """Stop, or the reader has skipped range ``i`` or asked for it."""
        return self._stop.is_set() or i in self._skip or self._wanted >= i

    def _drain(self, inflight: deque, dead: set, keep: int) -> bool:
        """Hand finished parts to the reader, in order, until at most ``keep`` are in flight.
        False when the prefetcher is stopping."""
        while len(inflight) > keep:
            i, last, fut = inflight.popleft()
            if i in dead or i in self._skip:
                fut.cancel()
                continue
            try:
                piece, ended = fut.result()
            except Exception as exc:
                if not self._fail(i, exc, dead):
                    return False
                continue
            self._good.add(self._keys[i])
            if len(piece) and not self._put((i, piece)):
                return False
            if last or ended:
                dead.add(i)                      # nothing more of this range follows
                if not self._put((i, self._END)):
                    return False
        return not self._stop.is_set()

    def _fail(self, i: int, exc: Exception, dead: set) -> bool:
        dead.add(i)
        self._bad.add(self._keys[i])
        return self._put((i, exc))

    # -- the reader's side --------------------------------------------------------------------
    def skip(self, i: int) -> None:
        """The reader will not read range ``i`` directly (its partition fell back)."""
        with self._cond:
            self._skip.add(i)
            self._cond.notify_all()

    def pieces(self, i: int):
        """The parts of range ``i``, in order; raises the error its fetch ended with."""
        with self._cond:
            self._wanted = i
            self._cond.notify_all()
        while True:
            try:
                j, item = self._queue.get(timeout=1.0)
            except queue.Empty:
                if not self._thread.is_alive():
                    raise KafkaTieredError("the prefetch thread of this task stopped unexpectedly") from None
                continue
            if j < i:
                continue        # the rest of a range the reader finished early, or skipped
            if j > i:
                # the reader gave up on range i before its end (offset bound reached): range j's
                # first item is already out of the queue, so hand it back in front
                raise KafkaTieredError(f"prefetch out of step: range {j} before the end of {i}")
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)
