"""``RemoteStorageFetcher``: the consumer side of KIP-1254, in Python.

A fetcher reads byte ranges of a tiered segment's ``.log`` data.  It is built from a frozen
:class:`~.config.FetcherConfig` (plus an optional :class:`~.observer.FetchObserver`) and pickles
by rebuilding from those, so it can be shipped to Spark executors; network clients are created
lazily, per process, on first use.

Ranges are half-open ``[start, end)`` positions in the *original* segment bytes; ``end=None``
reads to the end.  **A range past the end of the segment returns what exists** (possibly
nothing), on every backend: the caller learns the real size from the returned length.

:class:`ObjectStoreFetcher` is the one implementation over object stores, in three layers as
fsspec and pyarrow.fs have them: a byte-range store per backend (:mod:`.store`: one ranged GET,
list, stat; the error table is there), a layout (:mod:`.layouts`: keys, Aiven manifests, chunk
indexes, decryption and decompression), and this class between them: retries with back-off, the
observer's view of every attempt, splitting into parts, coalescing, concurrency.
"""
from __future__ import annotations

import abc
import contextvars
import random
import threading
import time
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ..errors import (ListingNotSupported, RemoteConnectionError, RemoteStorageError, RemoteThrottled)
from ..logs import get_logger
from ..options.storage import FetcherConfig
from .layout import NO_LAYOUT, Layout
from .layouts import layout_for
from .observer import FetchObserver
from .parts import Part, ReadPlan, coalesce, split
from .store import RETRIABLE, THROTTLE_CODES, ByteRangeStore, classify_status

__all__ = ["RemoteStorageFetcher", "ObjectStoreFetcher", "ByteRangeStore", "RemoteConnectionError",
           "ListingNotSupported", "RETRIABLE", "THROTTLE_CODES", "classify_status", "cancel_scope"]

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

log = get_logger(__name__)

#: Set by a reader that may give up on GETs it started (the executor's prefetcher): once the
#: event is set, a GET makes no further attempt and sleeps no further back-off.
cancel_scope: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "kafka_tiered_cancel", default=None)


class RemoteStorageFetcher(abc.ABC):
    """Base of every fetcher (the interface the reader uses).

    ``fetch_log_segment(segment, start, end=None)`` returns a bytes-like object (a memoryview)
    with original segment bytes ``[start, end)``; ``fetch_ranges(segment, ranges)`` returns one
    per range, in order; ``iter_log_segment`` streams parts in order with bounded memory.
    """

    backend = "custom"
    #: Python modules the backend needs, checked by the registry for a clear install hint.
    requires: tuple[str, ...] = ()
    #: A third-party fetcher's own options, ``{"remote.storage.<name>.<setting>": "doc"}``: only
    #: these pass the option validator (None: every ``remote.storage.<name>.*`` passes).
    options: dict | None = None

    def __init__(self, config: FetcherConfig | None = None, observer: FetchObserver | None = None):
        self.config = config if config is not None else FetcherConfig()
        self.observer = observer
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    # Rebuild from constructor arguments: clients, pools and caches never travel.
    def __reduce__(self):
        return (self.__class__, (self.config, self.observer))

    def __repr__(self) -> str:
        c = self.config
        return (f"{self.__class__.__name__}(layout={c.layout!r}, prefix={c.prefix!r}, "
                f"part_size={c.part_size}, concurrency={c.concurrency})")

    # -- the interface -----------------------------------------------------------------------
    def fetch_log_segment(self, segment, start: int = 0, end: int | None = None):
        return self.fetch_ranges(segment, [(start, end)])[0]

    @abc.abstractmethod
    def fetch_ranges(self, segment, ranges: Sequence[tuple[int, int | None]]) -> list:
        """One bytes-like result per half-open range, in the order given."""

    def iter_log_segment(self, segment, start: int = 0, end: int | None = None) -> Iterator:
        yield self.fetch_log_segment(segment, start, end)

    def log_segment_parts(self, segment, start: int = 0, end: int | None = None, *,
                          ramp: tuple = ()) -> list:
        """``[start, end)`` as GETs to run, in order: a list of callables, each returning
        ``(piece, ended)`` where ``piece`` is that part of the range and ``ended`` says the
        object ended inside it (nothing follows).  They may run concurrently and in any order;
        the pieces joined in order are the range.  A reader schedules them itself, across the
        ranges of a task, to keep GETs in flight (:mod:`kafka_tiered_source.executor.prefetch`).
        ``ramp``: the sizes of the first parts, smaller than the rest (a reader asks for them
        where decoding waits for the first bytes); fetchers that do not split ranges have one
        part, the whole range."""
        return [lambda: (self.fetch_log_segment(segment, start, end), True)]

    @abc.abstractmethod
    def fetch_index(self, segment, index: str) -> bytes | None:
        """A segment index (``offset``, ``timestamp``, ``producer_snapshot``, ``leader_epoch``,
        ``transaction``); None when the segment has none of that kind."""

    #: Whether the fetcher reaches any object by its layout key, so it can list the store and
    #: read segments that only a locator (listing, the metadata topic) names.  A presigned-URL
    #: fetcher reads just the objects the broker hands URLs for.
    can_list = False
    #: Where the segment's objects are and how they are read (keys, Aiven manifests): planners
    #: ask it (``fetcher.layout.manifest(segment)``).  A fetcher that resolves objects its own
    #: way has none (no keys, no manifests).
    layout: Layout = NO_LAYOUT

    def list_objects(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """``(key, size)`` of every object whose key starts with ``prefix`` (keys in the same
        space as the layout's, i.e. relative to the bucket / container / root URL), in no
        particular order.  Used by offline planning; a fetcher that cannot list raises
        :class:`ListingNotSupported`."""
        raise ListingNotSupported(f"fetcher {type(self).__name__} cannot list objects, so it cannot "
                                  "discover segments without kafka.bootstrap.servers",
                                  backend=self.backend)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- helpers -----------------------------------------------------------------------------
    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor   # a read's, not a plan's
                self._pool = ThreadPoolExecutor(max_workers=self.config.concurrency,
                                                thread_name_prefix=f"kts-fetch-{self.backend}")
            return self._pool

    def _before_request(self) -> None:
        if self.observer is None:
            return
        try:
            self.observer.before_request()
        except Exception:   # a metrics bug must not fail a read
            log.warning("fetch observer %r failed", self.observer, exc_info=True)

    def _report(self, location, nbytes, latency, error_type, throttled_s) -> None:
        if self.observer is None:
            return
        try:
            self.observer.on_request(self.backend, location, nbytes, latency, error_type, throttled_s)
        except Exception:   # a metrics bug must not fail a read
            log.warning("fetch observer %r failed", self.observer, exc_info=True)


def _check_range(start: int, end: int | None) -> None:
    if not isinstance(start, int) or start < 0:
        raise ValueError(f"range start must be an int >= 0, got {start!r}")
    if end is not None and (not isinstance(end, int) or end < start):
        raise ValueError(f"range end must be None or an int >= start ({start}), got {end!r}")


class ObjectStoreFetcher(RemoteStorageFetcher):
    """A fetcher over a byte-range store through a layout (module docstring).

    A backend is its store: ``class S3Fetcher(ObjectStoreFetcher): store_class = S3Store`` (the
    backend name, requirements and options come from the store), or any
    :class:`~.store.ByteRangeStore` named by ``remote.storage.fetcher.class``, which the
    registry runs in this class.  A subclass that implements ``_get_object_range(key, start,
    end)`` itself (the shape before stores) still works: it is its own store."""

    can_list = True
    #: the backend's store (None: the subclass implements ``_get_object_range`` itself)
    store_class: type[ByteRangeStore] | None = None

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        store = cls.__dict__.get("store_class")
        if store is not None:     # the store says what the backend is, needs and accepts
            for attr in ("backend", "requires", "options", "can_list"):
                if attr not in cls.__dict__:
                    setattr(cls, attr, getattr(store, attr))

    def __init__(self, config: FetcherConfig | None = None, observer: FetchObserver | None = None,
                 store: type[ByteRangeStore] | None = None):
        self._store_class = store if store is not None else self.store_class
        if store is not None:
            self.backend, self.can_list = store.backend, store.can_list
        super().__init__(config, observer)

    def __reduce__(self):
        if self._store_class is not type(self).store_class:
            return (self.__class__, (self.config, self.observer, self._store_class))
        return (self.__class__, (self.config, self.observer))

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self.store = self._store_class(self.config) if self._store_class is not None else _OwnStore(self)
        self.layout = self._make_layout()

    def _make_layout(self) -> Layout:
        return layout_for(self.config, self)

    def __repr__(self) -> str:
        c = self.config
        return (f"{self.__class__.__name__}(store={self.store!r}, layout={c.layout!r}, prefix={c.prefix!r}, "
                f"part_size={c.part_size}, concurrency={c.concurrency})")

    # -- the store, with retries -----------------------------------------------------------------
    def location(self, key: str) -> str:
        """A human, secret-free name of an object for errors and observers."""
        return self.store.location(key)

    def get_object(self, key: str, start: int, end: int | None) -> bytes:
        """Object bytes ``[start, end)``: one GET, retried with back-off on the error table's
        retriable answers; every attempt is reported to the observer."""
        if end is not None and end <= start:
            return b""
        c = self.config
        location = self.location(key)
        cancel = cancel_scope.get()
        attempt = 0
        while True:
            attempt += 1
            if cancel is not None and cancel.is_set():
                raise RemoteStorageError("cancelled: the reader stopped before this GET", location=location,
                                         backend=self.backend)
            self._before_request()
            t0 = time.monotonic()
            try:
                data = self.store.get_range(key, start, end)
            except RemoteStorageError as exc:
                latency = time.monotonic() - t0
                retry = isinstance(exc, RETRIABLE) and attempt < c.retry_max_attempts
                sleep = self._backoff(attempt) if retry else 0.0
                self._report(location, 0, latency, type(exc).__name__,
                             sleep if isinstance(exc, RemoteThrottled) else 0.0)
                if not retry:
                    raise
                log.debug("retrying GET of %s after %s (attempt %d), sleeping %.3fs",
                          location, type(exc).__name__, attempt, sleep)
                if cancel is not None:
                    cancel.wait(sleep)
                else:
                    time.sleep(sleep)
                continue
            self._report(location, len(data), time.monotonic() - t0, None, 0.0)
            return data

    def _backoff(self, attempt: int) -> float:
        # "Equal jitter": half fixed, half random, so clients spread out yet always wait.
        c = self.config
        cap = min(c.retry_backoff_max_ms, c.retry_backoff_ms * (2 ** (attempt - 1))) / 1000.0
        return cap / 2 + random.uniform(0, cap / 2)

    def list_objects(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """``(key, size)`` of every object under ``prefix`` (the store's listing)."""
        return self.store.list(prefix)

    def fetch_index(self, segment, index: str) -> bytes | None:
        return self.layout.fetch_index(segment, index)

    def close(self) -> None:
        super().close()
        self.store.close()

    # -- reading -----------------------------------------------------------------------------
    def fetch_ranges(self, segment, ranges: Sequence[tuple[int, int | None]]) -> list:
        ranges = [(s, e) for s, e in ranges]
        for s, e in ranges:
            _check_range(s, e)
        if not ranges:
            return []
        plan = self.layout.read_plan(segment)
        if plan.size is not None:
            ranges = [(min(s, plan.size), plan.size if e is None else min(e, plan.size)) for s, e in ranges]
        groups = coalesce(ranges, plan, self.config.coalesce_gap)
        buffers = self._read_groups(plan, groups)
        out = []
        for s, e in ranges:
            for (gs, ge), (buf, filled) in zip(groups, buffers, strict=True):
                if gs <= s and (ge is None or (e is not None and e <= ge)):
                    lo = min(s - gs, filled)
                    hi = filled if e is None else min(e - gs, filled)
                    out.append(memoryview(buf)[lo:hi])
                    break
            else:   # pragma: no cover - groups always cover every range
                raise AssertionError(f"range [{s}, {e}) not covered by {groups}")
        return out

    def iter_log_segment(self, segment, start: int = 0, end: int | None = None) -> Iterator[memoryview]:
        """Yield ``[start, end)`` as consecutive pieces, in order, with at most
        ``concurrency + 1`` parts in memory."""
        parts = self.log_segment_parts(segment, start, end)
        if len(parts) == 1:
            piece, _ = parts[0]()
            if len(piece):
                yield piece
            return
        pool = self._executor()
        window = max(1, self.config.concurrency)
        futures = []
        it = iter(parts)
        for part in it:
            futures.append(pool.submit(part))
            if len(futures) >= window:
                break
        try:
            while futures:
                piece, ended = futures.pop(0).result()
                nxt = next(it, None)
                if nxt is not None and not ended:
                    futures.append(pool.submit(nxt))
                if len(piece):
                    yield piece
                if ended:
                    return   # the object ended early: nothing further exists
        finally:
            for fut in futures:
                fut.cancel()

    def log_segment_parts(self, segment, start: int = 0, end: int | None = None, *,
                          ramp: tuple = ()) -> list:
        """See :meth:`RemoteStorageFetcher.log_segment_parts`: one GET per
        ``fetch.remote.part.size.bytes`` of the range (whole chunks for chunked segments); the
        manifest, when the layout needs one and the segment does not carry it, is read now.
        ``ramp``: the sizes of the first parts, smaller than the rest, so that the first bytes
        arrive (and decoding starts) after a short transfer rather than a whole part's."""
        _check_range(start, end)
        plan = self.layout.read_plan(segment)
        if plan.size is not None:
            end = plan.size if end is None else min(end, plan.size)
            start = min(start, end)
        parts = split(plan, start, end, self.config.part_size, ramp)
        last = len(parts) - 1

        def run(i, p):
            data = self._read_part(plan, p)
            lo = max(start - p.orig_start, 0)
            hi = len(data) if end is None else min(len(data), end - p.orig_start)
            ended = i == last or (p.orig_len is not None and len(data) < p.orig_len)
            return memoryview(data)[lo:max(hi, lo)], ended
        return [lambda i=i, p=p: run(i, p) for i, p in enumerate(parts)]

    def _read_part(self, plan: ReadPlan, part: Part):
        return self.layout.read_part(plan, part)

    def _read_into(self, plan: ReadPlan, part: Part, buf: bytearray, rel: int) -> int:
        data = self._read_part(plan, part)
        n = min(len(data), len(buf) - rel, part.orig_len if part.orig_len is not None else len(data))
        buf[rel:rel + n] = memoryview(data)[:n]
        return len(data)

    def _read_groups(self, plan: ReadPlan, groups) -> list[tuple[Any, int]]:
        """Read every group; returns (buffer, valid length) per group.

        A group of several parts gets one preallocated buffer that the worker threads fill in
        place, so memory stays at the result plus at most ``concurrency`` parts in flight.
        """
        plans = [split(plan, gs, ge, self.config.part_size) for gs, ge in groups]
        if len(plans) == 1 and len(plans[0]) == 1:
            data = self._read_part(plan, plans[0][0])
            lo = groups[0][0] - plans[0][0].orig_start
            return [(data, len(data))] if lo == 0 else [(memoryview(data)[lo:], max(len(data) - lo, 0))]
        pool = self._executor()
        jobs = []   # (group index, part, buffer or None, future)
        buffers: list = []
        for (gs, _ge), parts in zip(groups, plans, strict=True):
            if len(parts) == 1 and parts[0].orig_start == gs:
                buffers.append(None)
                jobs.append((len(buffers) - 1, parts[0], pool.submit(self._read_part, plan, parts[0])))
                continue
            # several parts (ge is known: open-ended reads are always a single part)
            start = parts[0].orig_start
            buf = bytearray(parts[-1].orig_start + (parts[-1].orig_len or 0) - start)
            buffers.append((buf, start))
            for p in parts:
                jobs.append((len(buffers) - 1, p, pool.submit(self._read_into, plan, p, buf, p.orig_start - start)))
        results: dict[int, list] = {i: [] for i in range(len(groups))}
        try:
            for gi, p, fut in jobs:
                results[gi].append((p, fut.result()))
        finally:
            for _, _, fut in jobs:
                fut.cancel()
        out = []
        for gi, (gs, _ge) in enumerate(groups):
            if buffers[gi] is None:
                data = results[gi][0][1]
                out.append((data, len(data)))
                continue
            buf, start = buffers[gi]
            filled = 0
            for p, n in results[gi]:
                if p.orig_start - start != filled:   # an earlier part came back short: the object ended
                    break
                filled = p.orig_start - start + min(n, p.orig_len if p.orig_len is not None else n)
            lo = gs - start
            out.append((memoryview(buf)[lo:], max(filled - lo, 0)))
        return out


class _OwnStore(ByteRangeStore):
    """The store of a fetcher subclass that implements ``_get_object_range`` (and optionally
    ``_location``) itself: the shape third-party fetchers had before stores."""

    def __init__(self, fetcher):
        self._fetcher = fetcher
        self.backend = fetcher.backend
        super().__init__(fetcher.config)

    def __reduce__(self):   # pragma: no cover - a fetcher rebuilds its own
        raise TypeError("travels with its fetcher")

    def get_range(self, key: str, start: int, end: int | None) -> bytes:
        return self._fetcher._get_object_range(key, start, end)

    def location(self, key: str) -> str:
        own = getattr(type(self._fetcher), "_location", None)
        return own(self._fetcher, key) if own is not None else key
