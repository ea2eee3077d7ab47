"""Fetching ahead of the decoder: a task's tiered ranges in parts, on one thread."""
from __future__ import annotations

import queue
import threading

from ..errors import KafkaTieredError


class RangePrefetcher:
    """Fetches a task's tiered ranges, in order, on one thread, a bounded number of parts ahead
    of the decoder: the next range's first GETs are in flight while the current range is still
    being decoded, so object-store latency overlaps with decoding and Spark.

    It only runs ahead within the partition the reader is in (``pieces(i)`` moves it on), so a
    GET is always counted under the topic-partition it was made for.  Memory: at most
    ``depth`` parts queued, plus the fetcher's own in-flight parts.  A fetch error travels
    through the queue and is raised from ``pieces(i)`` of the range it belongs to."""

    _END = object()

    def __init__(self, fetcher, ranges, depth: int):
        self._keys = [(r.topic, r.partition) for r in ranges]
        self._queue = queue.Queue(maxsize=max(1, depth))
        self._skip: set = set()
        self._stop = threading.Event()
        self._cond = threading.Condition()
        # Nothing is fetched before the reader asks for its first range: by then its metrics
        # scope names that range's partition, so every GET is counted where it belongs.
        self._current = None
        self._wanted = -1         # the range the reader asked for last
        self._thread = threading.Thread(target=self._run, args=(fetcher, ranges), daemon=True,
                                        name="kafka-tiered-prefetch")
        self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, fetcher, ranges) -> None:
        failed = False
        for i, r in enumerate(ranges):
            with self._cond:
                # Stay within the partition being read (metrics attribution), and after a failed
                # fetch wait for the reader's decision: it usually sends the rest of that
                # partition through the broker, and GETs made before it knows are wasted.
                self._cond.wait_for(lambda: self._stop.is_set() or i in self._skip or (
                    self._current == self._keys[i] and (not failed or self._wanted >= i)))
            if self._stop.is_set():
                return
            try:
                if i not in self._skip:
                    failed = False
                    for piece in fetcher.iter_log_segment(r.segment, r.byte_start, r.byte_end):
                        if i in self._skip or not self._put((i, piece)):
                            break
            except Exception as exc:   # handed to the reader, which decides (fallback or raise)
                failed = True
                if not self._put((i, exc)):
                    return
                continue
            if not self._put((i, self._END)):
                return

    def skip(self, i: int) -> None:
        """The reader will not read range ``i`` directly (its partition fell back)."""
        with self._cond:
            self._skip.add(i)
            self._cond.notify_all()

    def pieces(self, i: int):
        """The parts of range ``i``, in order; raises the error its fetch ended with."""
        with self._cond:
            self._current = self._keys[i]
            self._wanted = i
            self._cond.notify_all()
        while True:
            try:
                j, item = self._queue.get(timeout=1.0)
            except queue.Empty:
                if not self._thread.is_alive():
                    raise KafkaTieredError("the prefetch thread of this task stopped unexpectedly")
                continue
            if j < i:
                continue        # the rest of a range the reader finished early, or skipped
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
