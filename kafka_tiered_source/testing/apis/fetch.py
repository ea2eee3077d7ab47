"""Fetch: broker-mediated reads (local and remote, as RemoteLogManager serves them, and a remote
read that outlasts ``remote.fetch.max.wait.ms`` answered with nothing, as DelayedRemoteFetch
expires), fencing by ``current_leader_epoch``, the KIP-1248 location answer, long polling and
the KIP-13 consumer quota."""
from __future__ import annotations

import asyncio
import logging
import threading
import time

from ...errors import KafkaTieredError
from ...protocol import messages as m
from ...protocol.kip1248 import MIN_FETCH_VERSION, STORAGE_FORMAT_APACHE_KAFKA_V1
from ..log import StorageError
from . import fetch_body
from ._shared import ZERO_UUID, err

log = logging.getLogger(__name__)

async def fetch(broker, conn, hdr, req, v):
    R = m.FetchResponse
    if req.session_id != 0 or req.session_epoch > 0:
        # we never hand out session ids, so an incremental fetch names a session we lack
        return R(throttle_time_ms=0, error_code=err("FETCH_SESSION_ID_NOT_FOUND"), session_id=0,
                 responses=[])
    # A broker of today's Kafka (kip1248=False) skips the tags it does not know: no locations.
    direct = (broker.config.kip1248 and v >= MIN_FETCH_VERSION and req.remote_log_segment_location_requested
              and STORAGE_FORMAT_APACHE_KAFKA_V1 in (req.supported_storage_format_versions or ()))
    resolved = []           # (request topic, name or None, error code)
    for t in req.topics:
        if v >= 13:
            try:
                resolved.append((t, broker.storage.topic_by_id(t.topic_id).name, 0))
            except StorageError:
                resolved.append((t, None, err("UNKNOWN_TOPIC_ID")))
        else:
            resolved.append((t, t.topic, 0))
    keys = [(name, p.partition) for t, name, _ in resolved if name for p in t.partitions]
    deadline = broker.loop.time() + max(req.max_wait_ms, 0) / 1000
    while True:
        seen = [broker.data_versions.get(k, 0) for k in keys]
        resp, total, errors, remote = await _fetch_once(broker, hdr, req, v, resolved, direct)
        remaining = deadline - broker.loop.time()
        # a read of remote storage is answered as soon as it is done, even with nothing to send
        # (ReplicaManager completes a DelayedRemoteFetch when its remote read completes)
        if total >= max(req.min_bytes, 1) or errors or remote or remaining <= 0 or not keys:
            records = sum(len(p.records or b"") for t in resp.responses for p in t.partitions)
            resp.throttle_time_ms = _throttle(broker, conn, hdr.client_id, records)
            return fetch_body.encode(resp, v) or resp
        if seen != [broker.data_versions.get(k, 0) for k in keys]:
            continue        # data arrived while we read: look again rather than miss the wake-up
        await broker.wait_for_data(keys, remaining)


class LatencyHistogram:
    """Prometheus histogram of broker-mediated remote fetch durations per client id and topic
    (the storage keeps counters and a latency sum; the distribution is kept here, where each
    partition read that went to remote storage is timed as a whole)."""

    NAME = "kafka_tiered_broker_remote_fetch_duration_seconds"
    BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

    def __init__(self):
        self._lock = threading.Lock()
        self._series: dict[tuple[str, str], list] = {}     # -> [bucket counts..., count, sum]

    def observe(self, client_id: str | None, topic: str, seconds: float) -> None:
        with self._lock:
            row = self._series.setdefault((client_id or "", topic), [0] * (len(self.BUCKETS) + 1) + [0.0])
            for i, bound in enumerate(self.BUCKETS):
                if seconds <= bound:
                    row[i] += 1
            row[len(self.BUCKETS)] += 1
            row[-1] += seconds

    def count(self, client_id: str | None = None, topic: str | None = None) -> int:
        with self._lock:
            return sum(row[len(self.BUCKETS)] for (c, t), row in self._series.items()
                       if (client_id is None or c == client_id) and (topic is None or t == topic))

    def prometheus_text(self) -> str:
        def esc(v):
            return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        lines = [f"# HELP {self.NAME} Duration of broker-mediated fetches served from remote storage",
                 f"# TYPE {self.NAME} histogram"]
        with self._lock:
            items = sorted((k, list(v)) for k, v in self._series.items())
        for (c, t), row in items:
            labels = f'client_id="{esc(c)}",topic="{esc(t)}"'
            for i, bound in enumerate(self.BUCKETS):
                lines.append(f'{self.NAME}_bucket{{{labels},le="{bound:g}"}} {row[i]}')
            lines.append(f'{self.NAME}_bucket{{{labels},le="+Inf"}} {row[len(self.BUCKETS)]}')
            lines.append(f"{self.NAME}_sum{{{labels}}} {row[-1]:g}")
            lines.append(f"{self.NAME}_count{{{labels}}} {row[len(self.BUCKETS)]}")
        return "\n".join(lines) + "\n"


def _locate_all(broker, asks, isolation_level, client_id) -> list:
    """``broker.storage.locate`` for each ``(topic, partition, offset, max bytes, current
    leader epoch)``; an error is returned in its place, to be raised where the partition is
    answered.  A partition whose remote half holds its copies' answers (synthetic_tiers.py)
    gives its read_uncommitted answer already written (a ``fetch_body.EncodedPartition``),
    once its leader epoch passes the fencing check the handler makes (then the handler only
    places it, and counts it)."""
    out: list = []
    storage = broker.storage
    for name, partition, offset, limit, current in asks:
        try:
            part = storage.partition(name, partition)
            with part.lock:
                # ReplicaManager.readFromLog -> Partition.localLogWithEpochOrThrow (KIP-320): a
                # fenced partition is not read (nor counted); the handler's own check answers it
                if 0 <= current != part.epoch:
                    out.append(None)
                    continue
                done = (part.remote.location_answer(part, offset, limit)
                        if isolation_level == 0 and part.remote is not None else None)
            if done is not None:
                out.append(done)
                continue
            out.append(storage.locate(name, partition, offset, limit, isolation_level, client_id=client_id))
        except (StorageError, KafkaTieredError) as exc:
            out.append(exc)
    return out


def _fill_location(part, loc) -> None:
    """KIP-1248 answer: no records, the segment location and byte hint, plus what the client
    needs to filter transactions and stop at the right offset."""
    R = m.FetchResponse
    part.records = b""
    part.high_watermark, part.last_stable_offset = loc.high_watermark, loc.last_stable_offset
    part.log_start_offset = loc.log_start_offset
    if loc.aborted is not None:
        part.aborted_transactions = [R.AbortedTransaction(producer_id=pid, first_offset=fo)
                                     for pid, fo in loc.aborted]
    part.remote_log_segment_id = loc.segment_id
    part.remote_log_segment_custom_metadata = loc.custom_metadata
    part.remote_log_segment_start_position = loc.start_position
    part.remote_log_segment_end_position = loc.end_position
    part.remote_log_segment_base_offset = loc.base_offset
    part.remote_log_segment_end_offset = loc.end_offset
    part.storage_format_version = loc.storage_format
    part.signed_remote_log_segment_location = loc.presigned_url


async def _read(broker, name: str, partition: int, offset: int, limit: int, isolation_level: int,
                client_id: str | None):
    """``storage.read`` of one partition as ReplicaManager.fetchMessages serves it; None when a
    read of remote storage outlasted ``remote.fetch.max.wait.ms``.

    An offset below the local log start is read by RemoteLogManager's reader threads
    (ReplicaManager.processRemoteFetch -> RemoteLogManager.asyncRead) under a DelayedRemoteFetch
    whose delay is ``remote.fetch.max.wait.ms`` (KIP-1018).  When it expires first,
    DelayedRemoteFetch.onExpiration cancels the read (``cancel(false)``: one already running goes
    on, its answer unused) and onComplete answers the partition from its local read result:
    empty records, no error, the high watermark as read.  A local read never waits so."""
    read = asyncio.ensure_future(_read_slowly(broker, name, partition, offset, limit, isolation_level, client_id))
    done, _ = await asyncio.wait({read}, timeout=broker.config.remote_fetch_max_wait_ms / 1000)
    if done:
        return read.result()
    o = await asyncio.to_thread(broker.storage.offsets, name, partition)
    if offset >= o.local_log_start_offset:
        return await read
    read.cancel()
    return None


async def _read_slowly(broker, name, partition, offset, limit, isolation_level, client_id):
    """``storage.read``, after the delay a test asked of remote reads
    (``EmbeddedCluster.slow_remote_reads``: a slow object store), which ends early when the
    test lifts it.  The delay waits on the event loop, so waiting reads hold no thread (Kafka's
    local reads do not queue behind its remote reader threads either)."""
    delays = broker.remote_read_delays
    if delays:
        o = await asyncio.to_thread(broker.storage.offsets, name, partition)
        if o.log_start_offset <= offset < o.local_log_start_offset:
            until = broker.loop.time() + max(delays)
            while delays and broker.loop.time() < until:
                await asyncio.sleep(0.005)
    return await asyncio.to_thread(broker.storage.read, name, partition, offset, limit, isolation_level,
                                   client_id=client_id)


def _throttle(broker, conn, client_id: str | None, nbytes: int) -> int:
    """Charge ``nbytes`` to the client's quota; the throttle time in ms (0 within quota)."""
    rate = broker.config.consumer_byte_rate
    if not rate or nbytes <= 0:
        return 0
    now = broker.loop.time()
    key = client_id or ""
    clock = max(broker.quota_clock.get(key, now), now) + nbytes / rate
    broker.quota_clock[key] = clock
    delay = clock - now
    # Kafka allows a quota window's worth of burst before throttling (1 s samples here).
    if delay <= 1.0:
        return 0
    ms = int((delay - 1.0) * 1000)
    conn.muted_until = now + ms / 1000
    broker.throttled_ms_total[key] = broker.throttled_ms_total.get(key, 0) + ms
    return ms


async def _fetch_once(broker, hdr, req, v, resolved, direct):
    R = m.FetchResponse
    P = R.PartitionData
    budget = req.max_bytes
    total = 0
    errors = False
    topics_out = []
    # Today's Kafka serves tiered data one partition per Fetch (RemoteLogManager reads one
    # partition per DelayedRemoteFetch); the embedded broker does so as today's Kafka.
    one_remote = not broker.config.kip1248
    remote_served = False
    # KIP-1248 answers for every partition, worked out in one hop to a worker thread (a hop per
    # partition cost more than the answers themselves when a planner asks about 32 at once).
    # They assume no partition before them returns records; one that does shrinks the budget,
    # and the later answers are worked out again with the smaller limit, in the loop below.
    located = {}
    if direct:
        asks = [(name, fp.partition, fp.fetch_offset, max(min(fp.partition_max_bytes, budget), 1),
                 fp.current_leader_epoch)
                for t, name, terr in resolved if not terr for fp in t.partitions]
        answers = await asyncio.to_thread(_locate_all, broker, asks, req.isolation_level, hdr.client_id)
        located = {ask[:2]: (ask[3], ans) for ask, ans in zip(asks, answers, strict=True)}
    for t, name, terr in resolved:
        parts = []
        granted = [0, 0]        # answers placed written, their bytes: BrokerMetrics.granted
        for fp in t.partitions:
            if located and not terr:
                # written already (see _locate_all), for the same max bytes: only placed
                asked, done = located.get((name, fp.partition), (None, None))
                if done.__class__ is fetch_body.EncodedPartition and asked == max(min(fp.partition_max_bytes,
                                                                                       budget), 1):
                    parts.append(done)
                    total += done.nbytes
                    remote_served = True
                    granted[0] += 1
                    granted[1] += done.nbytes
                    continue
            part = P(partition_index=fp.partition, error_code=0, high_watermark=-1,
                     last_stable_offset=-1, log_start_offset=-1, records=b"",
                     aborted_transactions=None)      # null unless read_committed, as Kafka sends
            parts.append(part)
            if terr:
                part.error_code = terr
                errors = True
                continue
            limit = min(fp.partition_max_bytes, budget)
            try:
                # ReplicaManager.readFromLog -> Partition.localLogWithEpochOrThrow (KIP-320): a
                # request fenced with an older epoch than the leader's is FENCED_LEADER_EPOCH, a
                # newer one UNKNOWN_LEADER_EPOCH
                current = broker.storage.leader_epoch(name, fp.partition)
                if 0 <= fp.current_leader_epoch != current:
                    part.error_code = err("FENCED_LEADER_EPOCH" if fp.current_leader_epoch < current
                                          else "UNKNOWN_LEADER_EPOCH")
                    errors = True
                    continue
                if direct:
                    asked, loc = located.get((name, fp.partition), (None, None))
                    if isinstance(loc, BaseException):
                        raise loc
                    if asked != max(limit, 1) or loc.__class__ is fetch_body.EncodedPartition:
                        loc = await asyncio.to_thread(broker.storage.locate, name, fp.partition, fp.fetch_offset,
                                                      max(limit, 1), req.isolation_level,
                                                      client_id=hdr.client_id)
                    if loc is not None:
                        _fill_location(part, loc)
                        total += loc.end_position - loc.start_position
                        remote_served = True
                        continue
                skip = budget <= 0 and total > 0
                if not skip and one_remote and remote_served:
                    o = await asyncio.to_thread(broker.storage.offsets, name, fp.partition)
                    skip = fp.fetch_offset < o.local_log_start_offset
                if skip:
                    o = await asyncio.to_thread(broker.storage.offsets, name, fp.partition)
                    part.high_watermark, part.last_stable_offset = o.high_watermark, o.last_stable_offset
                    part.log_start_offset = o.log_start_offset
                    continue
                t0 = time.perf_counter()
                r = await _read(broker, name, fp.partition, fp.fetch_offset, max(limit, 1), req.isolation_level,
                                hdr.client_id)
                if r is None:        # the remote read outlasted remote.fetch.max.wait.ms
                    o = await asyncio.to_thread(broker.storage.offsets, name, fp.partition)
                    part.high_watermark, part.last_stable_offset = o.high_watermark, o.last_stable_offset
                    part.log_start_offset = o.log_start_offset
                    remote_served = True
                    continue
                if r.from_remote or r.error_name == "KAFKA_STORAGE_ERROR":
                    broker.remote_fetch_latency.observe(hdr.client_id, name, time.perf_counter() - t0)
                remote_served = remote_served or r.from_remote
            except StorageError as exc:
                part.error_code = exc.error_code
                errors = True
                continue
            except KafkaTieredError as exc:
                # e.g. a remote index the location answer needs cannot be read: Kafka answers a
                # failed remote read with a storage error on that partition, not a dead request
                log.warning("fetch %s-%d offset %d from %r failed: %s", name, fp.partition,
                            fp.fetch_offset, hdr.client_id, exc)
                part.error_code = err("KAFKA_STORAGE_ERROR")
                errors = True
                continue
            part.high_watermark, part.last_stable_offset = r.high_watermark, r.last_stable_offset
            part.log_start_offset = r.log_start_offset
            if r.error_name:
                part.error_code = r.error_code
                errors = True
                log.info("fetch %s-%d offset %d from %r: %s: %s", name, fp.partition, fp.fetch_offset,
                         hdr.client_id, r.error_name, r.error_message)
                continue
            records = r.records
            # Only the first partition with data may exceed the limits (Kafka's minOneMessage)
            if total > 0 and len(records) > limit:
                records = b""
            part.records = records
            if r.aborted is not None:
                part.aborted_transactions = [R.AbortedTransaction(producer_id=pid, first_offset=fo)
                                             for pid, fo in r.aborted]
            total += len(records)
            budget -= len(records)
        if granted[0]:
            broker.storage.metrics.granted(hdr.client_id, name, granted[0], granted[1])
        topics_out.append(R.FetchableTopicResponse(topic=name or "", topic_id=t.topic_id if v >= 13 else ZERO_UUID,
                                                   partitions=parts))
    return R(throttle_time_ms=0, error_code=0, session_id=0, responses=topics_out), total, errors, remote_served
