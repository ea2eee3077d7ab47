"""Executor side: run one :class:`~kafka_tiered_source.planning.tasks.ReadTask`.

For each range of the task, in order:

* a :class:`RemoteRange` is read with one ranged fetch through the configured
  ``RemoteStorageFetcher`` and decoded (offset bounds, read_committed) into Arrow;
* a :class:`BrokerRange` is read with ordinary sessionless Fetch requests;
* when a direct read fails (timeout, refused, object missing, throttled past the retries,
  a manifest it cannot read) or comes back short of what the broker's hints promised, the rest
  of that range is fetched through the broker instead — same offsets, same filter, same rows —
  and the fallback is counted with its reason.  ``fetch.remote.fallback`` decides: ``auto``
  falls back so (but never on an encrypted segment this reader cannot open: its keys are this
  reader's configuration, and a chunk that fails its GCM tag fails the task as a bad CRC does),
  ``never`` fails the task instead (Spark retries it), ``always`` reads every tiered range
  through the brokers on purpose.  Past ``fetch.remote.fallback.max.bytes`` bytes fetched
  because of failed direct reads, the task fails (:class:`FallbackLimitError`).

Every batch yielded has exactly Spark's Kafka schema.  Nothing here is Spark-specific, so a
task can be run (and tested) without Spark.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Iterator

from ..errors import (BrokerError, DataLossError, FallbackLimitError, KafkaTieredError, NoRecordsError,
                      RemoteStorageError, SegmentDecryptionError, SliceMismatchError)
from .prefetch import PrefetchClosed, RangePrefetcher
from .range_decoder import RangeDecoder
from .slices import SliceCheck
from .tails import EmptyAnswers, Tails

if TYPE_CHECKING:
    from ..protocol.client import BrokerClient
    from ..storage.fetcher import RemoteStorageFetcher

log = logging.getLogger(__name__)


class TaskReader:
    """Reads tasks for one query.  Picklable: it travels as its options and rebuilds its
    fetcher and broker client lazily in the process that reads."""

    def __init__(self, options, metrics=None, tasks_planned: int = 1, row_filter=None):
        self.options = options
        self.tasks_planned = tasks_planned
        # pushed-down filters (planning.filters.RowFilter): applied to every batch, exactly
        self.row_filter = row_filter if row_filter else None
        if metrics is None:
            from ..metrics.reader import ReaderMetrics
            from ..quota import ReaderQuota
            metrics = ReaderMetrics(options.client_id, backend_name(options),
                                    ReaderQuota.for_task(options.quota, tasks_planned))
        metrics.tasks_planned = tasks_planned
        self.metrics = metrics
        self._fetcher: RemoteStorageFetcher | None = None
        self._client: BrokerClient | None = None
        self._prefetchers: set = set()   # of reads under way: close() stops their GETs
        self._reading = 0                # reads under way
        self._stopped = False            # close() was called while a read was under way
        self._fallback_bytes = 0      # bytes through brokers because direct reads failed
        self._decoder: Any = None     # typed keys and values (values.decoder.BatchDecoder), made once
        self._tails: Tails | None = None   # what proves an empty answer a compacted tail (tails.py)

    def __reduce__(self):
        return (self.__class__, (self.options, None, self.tasks_planned, self.row_filter))

    def finish(self, **context):
        """Report this reader's metrics (accumulator, JSON lines, KIP-714 push); see
        :func:`kafka_tiered_source.executor.finish.finish_task`."""
        from .finish import finish_task
        return finish_task(self, **context)

    # -- lazily built parts --------------------------------------------------------------------
    @property
    def fetcher(self) -> RemoteStorageFetcher:
        if self._fetcher is None:
            from ..storage.registry import create_fetcher
            config = self.options.storage
            if not config.configured:
                # the planner only plans direct reads of segments with a presigned URL then
                config = config.replace(fetcher="presigned")
            quota = self.metrics.quota
            if quota is not None and quota.bytes_per_second:
                # The quota is charged after each GET; parts fetched in parallel would all be
                # in flight before the first is charged.  One at a time, each GET waits its turn.
                config = config.replace(concurrency=1)
            self._fetcher = create_fetcher(config, observer=self.metrics)
        return self._fetcher

    @property
    def client(self) -> BrokerClient:
        if self._client is None:
            if self.options.offline:
                raise KafkaTieredError("this read has no kafka.bootstrap.servers, so nothing can be "
                                       "fetched through a broker")
            from ..protocol.client import BrokerClient
            self._client = BrokerClient.for_read(self.options)
        return self._client

    def open_connections(self) -> list:
        """The broker connections this reader has open (none is opened here)."""
        return self._client.open_connections() if self._client is not None else []

    def close(self) -> None:
        """Stop every read under way (GETs not started are cancelled, running ones waited for:
        none runs after this returns) and close the fetcher and the broker connections.  Safe
        from another thread than the one iterating :meth:`read`, which then raises."""
        if self._reading:
            self._stopped = True
        for prefetch in list(self._prefetchers):
            prefetch.close()
        if self._fetcher is not None:
            self._fetcher.close()
            self._fetcher = None
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- reading -------------------------------------------------------------------------------
    def read(self, task) -> Iterator:
        """Yield ``pyarrow.RecordBatch`` objects for every record of the task."""
        from ..planning.tasks import RemoteRange
        from ..records import ReadCommittedFilter

        committed = self.options.read_committed
        txn = {(i.topic, i.partition): i for i in task.txn}
        filters: dict = {}
        broker_only: set = set()    # partitions that fell back: the rest of them goes via broker
        on_purpose = self.options.fetch_remote_fallback == "always"
        remote = [] if on_purpose else [r for r in task.ranges if isinstance(r, RemoteRange)]
        self._stopped = False
        self._reading += 1
        prefetch = None
        index = 0                   # position of the next tiered range in ``remote``
        try:
            if remote:   # the fetcher's concurrency, not the option's: a byte-rate quota makes it one
                prefetch = RangePrefetcher(self.fetcher, remote, self.fetcher.config.concurrency)
                self._prefetchers.add(prefetch)
            for r in task.ranges:
                self._check_stopped()
                key = (r.topic, r.partition)
                self.metrics.scope(r.topic, r.partition)
                if isinstance(r, RemoteRange) and on_purpose:
                    i = None
                    self.metrics.fell_back(ALWAYS)
                elif isinstance(r, RemoteRange):
                    i, index = index, index + 1
                    assert prefetch is not None          # every tiered range is in it
                    if key in broker_only:
                        prefetch.skip(i)
                else:
                    i = None
                if i is not None and key not in broker_only:
                    flt = None
                    if committed:
                        if key not in filters:
                            info = txn.get(key)
                            filters[key] = ReadCommittedFilter(
                                [(a.producer_id, a.first_offset) for a in info.aborted] if info else (),
                                info.last_stable_offset if info else None)
                        flt = filters[key]
                    assert prefetch is not None
                    next_offset = yield from self._read_remote(r, flt, prefetch.pieces(i))
                    if next_offset is not None:
                        broker_only.add(key)
                        yield from self._read_broker(r.topic, r.partition, next_offset, r.offset_end,
                                                     fallback=True, tiered=_spans(r))
                else:
                    self.metrics.count(ranges_broker=1)
                    yield from self._read_broker(r.topic, r.partition, r.offset_start, r.offset_end,
                                                 fallback=isinstance(r, RemoteRange), feeds=filters.get(key),
                                                 tiered=_spans(r))
        finally:
            self._reading -= 1
            if prefetch is not None:
                prefetch.close()
                self._prefetchers.discard(prefetch)

    def _check_stopped(self) -> None:
        if self._stopped:
            raise PrefetchClosed("this task's reader was closed while it read")

    def _read_remote(self, r, flt, pieces):
        """Generator: yields batches; returns None when done, or the offset to continue from
        through the broker after a failed or short direct read.

        The range streams in parts (``fetch.remote.part.size.bytes``) from the task's
        :class:`RangePrefetcher`, which fetches ahead while this part is decoded (the native
        decoder releases the GIL), so Spark gets rows after the first part instead of after the
        whole range.  The parts are decoded by one :class:`RangeDecoder`: Arrow batches of
        about the size Spark takes best, a batch cut by a part boundary carried into the next."""
        seg = r.segment
        check = SliceCheck(r, *self._object_of(seg))
        self.metrics.count(ranges_remote=1)
        dec = RangeDecoder(r, check, flt, self.options.include_headers, self.metrics.count)
        received = 0
        waited = 0.0
        clock = time.perf_counter
        try:
            parts = iter(pieces)
            while not dec.done:
                t = clock()
                part = next(parts, None)
                waited += clock() - t
                if part is None:
                    break
                received += len(part)
                yield from self._out(dec.feed(part))
        except SliceMismatchError as exc:
            yield from self._out(dec.checked)     # the rows decoded before the mismatch
            return self._fallback(r, dec.reached, exc, SLICE_MISMATCH)
        except RemoteStorageError as exc:
            yield from self._out(dec.finish())
            return self._fallback(r, dec.reached, exc)
        finally:
            self.metrics.count(remote_wait_s=waited)
        yield from self._out(dec.finish())
        reached = dec.reached
        if dec.done or reached >= r.offset_end:
            return None
        if (r.byte_end == seg.size_bytes and received == r.byte_end - r.byte_start and dec.whole):
            # Read to the segment's last byte: its copy ends at the next local segment's base
            # - 1 (RemoteLogManager.copyLogSegment), so the offsets past its last batch hold no
            # record (compaction removed them).
            return None
        # The hinted bytes did not hold the offsets they were said to hold: an object smaller
        # than the hint, or a hint that ends too early.  The broker can still serve them.
        return self._fallback(r, reached, check.short(reached, received), SHORT_READ)

    def _object_of(self, seg) -> tuple[str | None, str | None]:
        """The segment's ``.log`` object, secret-free, and the backend, for errors: what the
        fetcher's layout names (None where a fetcher has no layout or cannot name it)."""
        fetcher = self.fetcher
        layout, backend = getattr(fetcher, "layout", None), getattr(fetcher, "backend", None)
        if layout is None or not hasattr(fetcher, "location"):
            return None, backend
        try:
            return fetcher.location(layout.log_key(seg)), backend
        except KafkaTieredError:          # e.g. no presigned URL: the read itself will say so
            return None, backend

    def _out(self, batches):
        """Generator: ``batches`` as they come, each with only the rows kept (:meth:`_kept`),
        counted; empty ones are not handed out."""
        for b in batches:
            for k in self._kept((b,)):
                if k.num_rows:
                    self.metrics.count(records=k.num_rows)
                    yield k

    def _kept(self, batches):
        """The batches with only the rows the pushed-down filters keep (filters on Kafka's
        columns, before any value is decoded), with their keys and values typed as
        ``key.format``/``value.format`` say."""
        if self.row_filter is not None:
            batches = [self.row_filter.apply(b) for b in batches]
        if self.options.values.typed:
            decode = self._values_decoder()
            batches = [decode(b) for b in batches]
        return batches

    def _values_decoder(self):
        if self._decoder is None:
            from ..values.decoder import BatchDecoder
            from ..values.readers import resolve_readers, sasl_of
            # resolved on the driver; a reader made without it (a test, a hand-built task) resolves here
            options = resolve_readers(self.options)
            self._decoder = BatchDecoder(options.values, options.include_headers, sasl_of(options))
        return self._decoder

    def _fallback(self, r, offset: int, exc: Exception, reason: str | None = None) -> int:
        policy = self.options.fetch_remote_fallback
        if self.options.offline or policy == "never" or isinstance(exc, SegmentDecryptionError):
            raise exc
        reason = reason or fallback_reason(exc)
        limit = self.options.fetch_remote_fallback_max_bytes
        if limit == 0:
            raise FallbackLimitError(
                f"the direct read of {r.topic}-{r.partition} offsets [{offset}, {r.offset_end}) failed "
                f"({reason}) and fetch.remote.fallback.max.bytes=0 allows no bytes through the brokers; "
                f"fix the storage access, or allow fallbacks") from exc
        log.warning("falling back to broker fetch for %s-%d offsets [%d, %d): %s",
                    r.topic, r.partition, offset, r.offset_end, exc)
        self.metrics.fell_back(reason)
        return offset

    def _count_fallback_bytes(self, size: int) -> None:
        self._fallback_bytes += size
        limit = self.options.fetch_remote_fallback_max_bytes
        if limit is not None and self._fallback_bytes > limit:
            total = self.metrics.total()
            why = "; ".join(f"{k} x{n}" for k, n in total.fallback_reasons.most_common())
            raise FallbackLimitError(
                f"this task moved {self._fallback_bytes:,} bytes through the brokers after direct reads "
                f"failed ({total.fallbacks} ranges: {why}), more than fetch.remote.fallback.max.bytes="
                f"{limit:,}; fix the storage access, raise the limit, or set fetch.remote.fallback=always "
                f"to read through the brokers on purpose")

    def _read_broker(self, topic: str, partition: int, start: int, end: int, *, fallback: bool, feeds=None,
                     tiered: tuple = ()):
        """Generator: the records of ``[start, end)`` fetched through the brokers.  ``feeds``:
        the task's read_committed filter of the partition, shown these batches too, so a tiered
        range after them starts from the right state (an ABORT marker read here ends its
        transaction there as well).  ``tiered``: the spans tiered copies serve
        (:attr:`BrokerRange.tiered`), where an answer with no records may be a compacted tail
        (see :meth:`_no_records`)."""
        from ..records import ReadCommittedFilter, decode_batches
        committed = self.options.read_committed
        offset = start
        empty = EmptyAnswers()
        while offset < end:
            self._check_stopped()
            t0 = time.monotonic()
            try:
                # fenced with the leader epoch (KIP-320): an empty answer's broker and epoch are known
                fr = self.client.fetch(topic, partition, offset, isolation_level=1 if committed else 0,
                                       request_remote_location=False, fenced=True)
            except BrokerError as exc:
                if exc.error_name != "OFFSET_OUT_OF_RANGE":
                    raise
                offset = self._after_data_loss(topic, partition, offset, exc)
                continue
            part = fr.partition
            records = fr.records
            size = len(records) if records is not None else 0
            flt = None
            if committed:
                # each answer's aborted list is valid from its fetch offset, as in Kafka's consumer
                flt = ReadCommittedFilter([(a.producer_id, a.first_offset)
                                           for a in (part.aborted_transactions or ())],
                                          part.last_stable_offset, feeds=feeds)
            res = decode_batches(records if records is not None else b"", topic=topic,
                                 partition=partition, start_offset=offset, end_offset=end,
                                 filter=flt, include_headers=self.options.include_headers)
            self.metrics.count(broker_fetches=1, broker_bytes=size, broker_equivalent_bytes=size,
                               broker_throttled_s=fr.throttle_time_ms / 1000,
                               **({"fallback_bytes": size} if fallback else {}))
            if fallback and self.options.fetch_remote_fallback == "auto":
                self._count_fallback_bytes(size)
            yield from self._out(res.batches)
            if res.done:
                return
            if res.next_offset is None or res.next_offset <= offset:
                bound = part.last_stable_offset if committed else part.high_watermark
                if offset >= bound:
                    # nothing more is readable: the planned end lies past what the broker has
                    if committed:
                        return   # the rest is not yet stable; Spark's source stops here too
                    raise DataLossError(f"{topic}-{partition}: offsets [{offset}, {end}) were "
                                        f"planned but the high watermark is now {bound}")
                if size:
                    raise BrokerError(f"fetch at offset {offset} returned no complete record batch "
                                      f"({size} bytes)", api="Fetch", topic=topic, partition=partition)
                offset = self._no_records(topic, partition, offset, bound, tiered, empty, fr,
                                          time.monotonic() - t0)
                continue
            empty.reset()
            offset = res.next_offset

    def _no_records(self, topic, partition, offset: int, bound: int, tiered: tuple, empty: EmptyAnswers, fr,
                    elapsed_s: float) -> int:
        """A broker answered ``offset``, below its high watermark (or LSO), with no records and
        no error (``fr``, ``elapsed_s`` after the request was sent); the offset to fetch next.

        Kafka answers so when the tiered copy serving the offset, and every copy after it, hold
        no batch at or after it (a tail compaction left: RemoteLogManager.read), but also when a
        remote read outlasts ``remote.fetch.max.wait.ms`` (DelayedRemoteFetch completes with
        what it has: nothing), among others (:mod:`.tails`).  Where the plan knows a copy serves
        the offset (``tiered``) and the copy's bytes or the answers' timing prove its tail empty,
        the read goes on at the span's end.  Otherwise the fetch is asked again, backing off,
        and after ``kafkaConsumer.pollTimeoutMs`` the read fails, naming the partition, the
        offset and why (Spark's Kafka source fails there too: "Cannot fetch record for
        offset").  Nothing is skipped unproven, and nothing spins."""
        span = _tiered_span(tiered, offset)
        poll_ms = self.options.poll_timeout_ms
        attempt = empty.seen(offset, poll_ms)
        if span is not None:
            if self._tails is None:
                self._tails = Tails(self)
            proof = self._tails.prove(empty, offset, span[1], span[2], fr, elapsed_s)
            if proof is not None:
                log.info("%s-%d: no record at offsets [%d, %d): %s (a compacted tail); reading on from %d",
                         topic, partition, offset, span[1], proof, span[1])
                empty.reset()
                return span[1]
        if empty.expired():
            head = (f"{topic}-{partition}: the broker answered offset {offset} with no records for "
                    f"{poll_ms} ms (kafkaConsumer.pollTimeoutMs), below its high watermark {bound}. Kafka "
                    f"answers so where the tiered copies serving the offset hold no record at or after it "
                    f"(a compacted tail) and where a remote read outlasts remote.fetch.max.wait.ms; ")
            why = ("this plan knows no tiered copy there, so the offsets cannot be proven empty" if span is None
                   else empty.why(offset, span[1], span[2]))
            raise NoRecordsError(head + why, offset=offset, api="Fetch", topic=topic, partition=partition)
        self._check_stopped()
        self.client.backoff(min(attempt, 8))
        return offset

    def _after_data_loss(self, topic, partition, offset, exc) -> int:
        earliest = self.client.list_offsets(topic, {partition: -2})[partition].offset
        if earliest <= offset:
            raise exc
        if self.options.fail_on_data_loss:
            raise DataLossError(f"{topic}-{partition}: offsets [{offset}, {earliest}) were deleted "
                                f"(retention) after the query was planned; set failOnDataLoss=false "
                                f"to skip them") from exc
        log.warning("%s-%d: offsets [%d, %d) were deleted; skipping them", topic, partition, offset,
                    earliest)
        return earliest


def _spans(r) -> tuple:
    """The tiered spans a range read through the brokers knows: a tiered slice's own (its copy
    serves all of it), a broker range's :attr:`~..planning.tasks.BrokerRange.tiered`."""
    if hasattr(r, "tiered"):
        return r.tiered
    return ((r.offset_start, r.offset_end, r.segment),)


def _tiered_span(tiered: tuple, offset: int) -> tuple | None:
    """``(start, end, copy or None)`` of the span holding ``offset``, if any."""
    for t in tiered:
        if t[0] <= offset < t[1]:
            return (t[0], t[1], t[2] if len(t) > 2 else None)
    return None


ALWAYS = "fetch.remote.fallback=always"
SHORT_READ = "short read: the object held fewer bytes than planned"
SLICE_MISMATCH = "slice mismatch: the object's batches are not the offsets planned"


def fallback_reason(exc: Exception) -> str:
    """Why a direct read fell back, as it is counted and shown: the error's class and its
    message without the object (so ranges that failed the same way add up)."""
    text = str(exc).split(" (backend ", 1)[0].split(" (object ", 1)[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def backend_name(options) -> str:
    """The storage backend tag of a reader's metrics (the fetcher class's ``backend``)."""
    storage = options.storage
    if not options.fetch_remote_enabled or not storage.configured:
        return "none"
    try:
        from ..storage.registry import fetcher_class
        return fetcher_class(storage.fetcher, class_path=storage.fetcher_class).backend
    except Exception:   # checked when the DataFrame was created; a tag must not fail a read
        return storage.fetcher or "custom"
