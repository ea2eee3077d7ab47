"""The embedded broker's network side: an asyncio Kafka-protocol server over :class:`BrokerStorage`.

One node (id 0) leads every partition.  Each connection is served the way Kafka's SocketServer
does it: one request at a time, responses in request order (clients pipeline; a long-polling
Fetch holds back the requests queued behind it, as a muted Kafka channel does).  Storage calls
do blocking file and object-store I/O, so they run in worker threads (``asyncio.to_thread``);
the storage has per-partition locks.

What is served (and advertised in ApiVersions, nothing more): Produce, Fetch (broker-mediated and
KIP-1248 direct), ListOffsets, Metadata, OffsetCommit/OffsetFetch (a plain offset store, no group
membership), FindCoordinator, SaslHandshake/SaslAuthenticate, ApiVersions, InitProducerId,
AddPartitionsToTxn (client versions 0-3), EndTxn, GetTelemetrySubscriptions/PushTelemetry.

Fetch sessions (KIP-227) are refused the way Kafka allows: every answer carries session id 0,
which tells a client the broker keeps no session, so its next fetch is a full one again.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import ssl as _ssl
import struct
import threading
import time
from dataclasses import dataclass, field

from ..errors import ConfigError, KafkaTieredError, ProtocolError
from ..ids import random_uuid, uuid_to_str
from ..protocol import codec
from ..protocol import messages as m
from ..protocol.errors import code_of
from ..protocol.kip1248 import MIN_FETCH_VERSION, STORAGE_FORMAT_APACHE_KAFKA_V1
from ..protocol.sasl import MECHANISMS, SaslError, ScramCredential, ScramServer, parse_plain
from ..redact import Secret
from .coordinator import Coordinator, CoordinatorError, EndTxnPlan
from .log import StorageError
from .storage import BrokerStorage

log = logging.getLogger(__name__)

NODE_ID = 0
#: Kafka's socket.request.max.bytes default; a bigger size prefix is a broken or hostile frame
MAX_FRAME_BYTES = 100 * 1024 * 1024
ZERO_UUID = bytes(16)

# What this broker advertises: (min, max) per API key.  Narrower than the codec where a higher
# version would promise semantics not implemented here: Produce/OffsetFetch/OffsetCommit topic ids
# (13 / 10 / 10), AddPartitionsToTxn 4+ (broker-to-broker), EndTxn 5 and InitProducerId 6
# (transaction version 2 and two-phase commit).
ADVERTISED: dict[int, tuple[int, int]] = {
    0: (3, 12),      # Produce
    1: (4, 18),      # Fetch
    2: (1, 11),      # ListOffsets
    3: (1, 13),      # Metadata
    8: (2, 9),       # OffsetCommit
    9: (1, 9),       # OffsetFetch
    10: (0, 6),      # FindCoordinator
    17: (0, 1),      # SaslHandshake
    18: (0, 4),      # ApiVersions
    22: (0, 5),      # InitProducerId
    24: (0, 3),      # AddPartitionsToTxn
    26: (0, 4),      # EndTxn
    36: (0, 2),      # SaslAuthenticate
    71: (0, 0),      # GetTelemetrySubscriptions
    72: (0, 0),      # PushTelemetry
}
_SASL_APIS = (17, 18, 36)     # allowed before authentication

# ListOffsets special timestamps and the first version that may carry them
_LIST_OFFSETS_MIN_VERSION = {-3: 7, -4: 8, -5: 9, -6: 11}


def _err(name: str) -> int:
    return code_of(name)


@dataclass(frozen=True, repr=False)
class SaslConfig:
    """SASL the broker demands: ``mechanisms`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and
    ``users`` name -> password (kept as :class:`Secret`; SCRAM credentials are derived once)."""

    mechanisms: tuple
    users: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.mechanisms:
            raise ConfigError("sasl: at least one mechanism is needed", option="sasl.mechanism")
        for mech in self.mechanisms:
            if mech not in MECHANISMS:
                raise ConfigError(f"sasl: unsupported mechanism {mech!r}; supported: {', '.join(MECHANISMS)}",
                                  option="sasl.mechanism")
        object.__setattr__(self, "users", {u: p if isinstance(p, Secret) else Secret(p)
                                           for u, p in dict(self.users).items()})

    @classmethod
    def of(cls, value) -> "SaslConfig | None":
        """From a SaslConfig, or a dict ``{"mechanism": "SCRAM-SHA-256" | "mechanisms": [...],
        "users": {name: password}}``."""
        if value is None or isinstance(value, SaslConfig):
            return value
        if not isinstance(value, dict):
            raise ConfigError("sasl must be a dict with 'mechanism(s)' and 'users'", option="sasl")
        unknown = set(value) - {"mechanism", "mechanisms", "users"}
        if unknown:
            raise ConfigError(f"sasl: unknown keys {sorted(unknown)}", option="sasl")
        mechs = value.get("mechanisms") or value.get("mechanism")
        if isinstance(mechs, str):
            mechs = (mechs,)
        return cls(tuple(mechs or ()), value.get("users") or {})

    def __repr__(self):
        return f"SaslConfig(mechanisms={self.mechanisms}, users={sorted(self.users)})"


@dataclass(frozen=True)
class SslConfig:
    certfile: str
    keyfile: str | None = None

    @classmethod
    def of(cls, value) -> "SslConfig | None":
        if value is None or isinstance(value, SslConfig):
            return value
        if not isinstance(value, dict) or "certfile" not in value:
            raise ConfigError("ssl must be a dict with 'certfile' (and 'keyfile')", option="ssl")
        unknown = set(value) - {"certfile", "keyfile"}
        if unknown:
            raise ConfigError(f"ssl: unknown keys {sorted(unknown)}", option="ssl")
        return cls(value["certfile"], value.get("keyfile"))

    def context(self) -> _ssl.SSLContext:
        ctx = _ssl.SSLContext(_ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.certfile, self.keyfile)
        return ctx


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 0
    sasl: SaslConfig | None = None
    ssl: SslConfig | None = None
    metrics_port: int | None = None
    auto_create_topics: bool = False
    auto_create_partitions: int = 1
    cluster_id: str = "kafka-tiered-embedded"
    #: KIP-714 subscription handed to clients: metric name prefixes (``("",)`` = all metrics;
    #: empty = none, so clients do not push).
    telemetry_metrics: tuple = ()
    telemetry_push_interval_ms: int = 5000
    max_frame_bytes: int = MAX_FRAME_BYTES
    #: how often open transactions are checked against their timeout (Kafka: 10 s)
    txn_timeout_check_s: float = 1.0
    #: KIP-13 consumer quota: record bytes per second a client-id may fetch (None = no quota).
    #: Over it, Fetch answers carry throttle_time_ms and the connection is muted that long.
    consumer_byte_rate: int | None = None


@dataclass(frozen=True)
class TelemetryPush:
    """The latest PushTelemetry payload of one client instance (OTLP protobuf bytes)."""
    client_instance_id: str
    client_id: str | None
    subscription_id: int
    compression_type: int
    metrics: bytes
    terminating: bool
    received_at: float


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


class _Connection:
    __slots__ = ("peer", "authenticated", "mechanism", "scram", "raw_sasl", "close_after", "user",
                 "muted_until")

    def __init__(self, peer, needs_auth: bool):
        self.peer = peer
        self.authenticated = not needs_auth
        self.mechanism = None
        self.scram = None
        self.raw_sasl = False      # SaslHandshake v0: bare tokens follow, no Kafka headers
        self.close_after = False
        self.user = None
        self.muted_until = 0.0     # loop time before which no request is read (quota throttle)


_CLOSE = object()


class BrokerServer:
    """The asyncio server.  ``await start()`` binds (``.port`` is then known), ``await stop()``
    closes listeners and connections.  Everything runs on one event loop."""

    def __init__(self, storage: BrokerStorage, coordinator: Coordinator, config: ServerConfig):
        self.storage = storage
        self.coordinator = coordinator
        self.config = config
        self.port = None
        self.metrics_port = None
        self._server = None
        self._metrics_server = None
        self._conn_tasks: set = set()
        self._waiters: dict[tuple[str, int], set] = {}
        self._versions: dict[tuple[str, int], int] = {}    # bumped by notify()
        self._loop = None
        self._txn_reaper = None
        self._scram_creds = {}
        if config.sasl:
            for mech in config.sasl.mechanisms:
                if mech.startswith("SCRAM-"):
                    for user, pw in config.sasl.users.items():
                        self._scram_creds[(mech, user)] = ScramCredential.from_password(pw.get(), mech)
        self.telemetry: dict[str, TelemetryPush] = {}
        self.remote_fetch_latency = LatencyHistogram()
        # client id -> loop time at which its fetched bytes so far fit the quota (KIP-13)
        self._quota_clock: dict[str, float] = {}
        self.throttled_ms_total: dict[str, int] = {}
        self._telemetry_subscription = 1
        self._handlers = {
            0: self._produce, 1: self._fetch, 2: self._list_offsets, 3: self._metadata,
            8: self._offset_commit, 9: self._offset_fetch, 10: self._find_coordinator,
            17: self._sasl_handshake, 18: self._api_versions, 22: self._init_producer_id,
            24: self._add_partitions_to_txn, 26: self._end_txn, 36: self._sasl_authenticate,
            71: self._get_telemetry_subscriptions, 72: self._push_telemetry,
        }
        assert set(self._handlers) == set(ADVERTISED)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        ctx = self.config.ssl.context() if self.config.ssl else None
        self._server = await asyncio.start_server(self._serve, self.config.host, self.config.port,
                                                  ssl=ctx, limit=1 << 20)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.config.metrics_port is not None:
            self._metrics_server = await asyncio.start_server(self._serve_metrics, self.config.host,
                                                              self.config.metrics_port)
            self.metrics_port = self._metrics_server.sockets[0].getsockname()[1]
        self._txn_reaper = asyncio.create_task(self._abort_timed_out_transactions())
        log.info("embedded broker listening on %s:%d", self.config.host, self.port)

    async def stop(self) -> None:
        if self._txn_reaper is not None:
            self._txn_reaper.cancel()
            await asyncio.gather(self._txn_reaper, return_exceptions=True)
        for srv in (self._server, self._metrics_server):
            if srv is not None:
                srv.close()
        tasks = list(self._conn_tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for srv in (self._server, self._metrics_server):
            if srv is not None:
                await srv.wait_closed()

    # ------------------------------------------------------------------ data arrival (long poll)
    def notify(self, topic: str, partition: int) -> None:
        """New data (or a moved LSO) on a partition: wake fetches waiting on it.  Loop thread only."""
        key = (topic, partition)
        self._versions[key] = self._versions.get(key, 0) + 1
        for fut in self._waiters.pop(key, ()):
            if not fut.done():
                fut.set_result(None)

    async def _wait_for_data(self, keys, timeout: float) -> None:
        fut = self._loop.create_future()
        for k in keys:
            self._waiters.setdefault(k, set()).add(fut)
        try:
            await asyncio.wait([fut], timeout=timeout)
        finally:
            for k in keys:
                s = self._waiters.get(k)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiters[k]

    # ------------------------------------------------------------------ connections
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._conn_tasks.add(task)
        peer = writer.get_extra_info("peername")
        conn = _Connection(peer, self.config.sasl is not None)
        try:
            while True:
                try:
                    head = await reader.readexactly(4)
                except asyncio.IncompleteReadError:
                    break
                (size,) = struct.unpack(">i", head)
                if size <= 0 or size > self.config.max_frame_bytes:
                    log.warning("closing connection from %s: malformed frame (size prefix %d, limit %d)",
                                peer, size, self.config.max_frame_bytes)
                    break
                data = await reader.readexactly(size)
                out = await self._handle(conn, data)
                if out is _CLOSE:
                    break
                if out:
                    writer.write(out)
                    await writer.drain()
                # KIP-219: the answer goes out at once, then the channel is muted for the
                # throttle time, so a client that ignores throttle_time_ms still waits.
                pause = conn.muted_until - self._loop.time()
                if pause > 0:
                    await asyncio.sleep(pause)
                if conn.close_after:
                    await _linger_close(reader, writer)
                    break
        except (asyncio.IncompleteReadError, ConnectionError, _ssl.SSLError) as exc:
            log.debug("connection from %s ended: %s", peer, exc)
        except asyncio.CancelledError:
            pass
        except Exception:  # the server must outlive any one connection
            log.exception("connection from %s failed", peer)
        finally:
            self._conn_tasks.discard(task)
            writer.close()
            try:
                await writer.wait_closed()
            except Exception:
                pass

    async def _handle(self, conn: _Connection, data: bytes):
        if conn.raw_sasl:
            return await self._raw_sasl_token(conn, data)
        try:
            hdr, req = codec.decode_request(data)
        except codec.UnsupportedVersionError as exc:
            return self._unsupported(conn, exc.header)
        except ProtocolError as exc:
            log.warning("closing connection from %s: malformed request: %s", conn.peer, exc)
            return _CLOSE
        key, version = hdr.request_api_key, hdr.request_api_version
        lo, hi = ADVERTISED.get(key, (0, -1))
        if not lo <= version <= hi:
            return self._unsupported(conn, hdr)
        if not conn.authenticated and key not in _SASL_APIS:
            log.warning("closing connection from %s: %s request before SASL authentication",
                        conn.peer, m.api_name(key))
            return _CLOSE
        try:
            resp = await self._handlers[key](conn, hdr, req, version)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s v%d from %s (client %r) failed", m.api_name(key), version, conn.peer,
                          hdr.client_id)
            resp = _error_response(key, req, version, _err("UNKNOWN"))
            if resp is None:
                return _CLOSE
        if resp is None:          # Produce with acks=0: no answer at all
            return b""
        return codec.encode_response(resp, version, hdr.correlation_id)

    def _unsupported(self, conn, hdr):
        key, version = hdr.request_api_key, hdr.request_api_version
        if key == 18:
            # Kafka answers an ApiVersions it cannot parse with a v0 body: the error plus the
            # ranges it does support, so the client can retry with a version both know.
            resp = m.ApiVersionsResponse(error_code=_err("UNSUPPORTED_VERSION"), api_keys=self._api_list())
            return codec.encode_response(resp, 0, hdr.correlation_id)
        log.warning("closing connection from %s: unsupported %s version %d", conn.peer,
                    m.api_name(key), version)
        return _CLOSE

    # ------------------------------------------------------------------ ApiVersions, Metadata
    def _api_list(self):
        A = m.ApiVersionsResponse.ApiVersion
        return [A(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(ADVERTISED.items())]

    async def _api_versions(self, conn, hdr, req, v):
        return m.ApiVersionsResponse(error_code=0, api_keys=self._api_list(), throttle_time_ms=0)

    def _address(self):
        return self.config.host, self.port

    async def _metadata(self, conn, hdr, req, v):
        R = m.MetadataResponse
        host, port = self._address()
        topics_out = []
        if req.topics is None or (v == 0 and not req.topics):
            wanted = [(name, None) for name in sorted(self.storage.topics)]
        else:
            wanted = [(t.name, t.topic_id) for t in req.topics]
        for name, tid in wanted:
            info = None
            if name is None and v < 12:
                # look-up by id is a v12+ feature (Kafka refuses null names before that)
                topics_out.append(R.MetadataResponseTopic(error_code=_err("INVALID_REQUEST"), name=""))
                continue
            if name is None:
                try:
                    info = self.storage.topic_by_id(tid)
                except StorageError:
                    topics_out.append(R.MetadataResponseTopic(error_code=_err("UNKNOWN_TOPIC_ID"),
                                                              name=None, topic_id=tid))
                    continue
            else:
                info = self.storage.topics.get(name)
                if info is None and self.config.auto_create_topics and (v < 4 or req.allow_auto_topic_creation):
                    try:
                        info = await asyncio.to_thread(self.storage.create_topic, name,
                                                       self.config.auto_create_partitions)
                    except StorageError as exc:
                        if exc.error_name == "TOPIC_ALREADY_EXISTS":
                            info = self.storage.topics.get(name)
                        else:
                            topics_out.append(R.MetadataResponseTopic(error_code=exc.error_code, name=name))
                            continue
            if info is None:
                topics_out.append(R.MetadataResponseTopic(error_code=_err("UNKNOWN_TOPIC_OR_PARTITION"),
                                                          name=name))
                continue
            topics_out.append(R.MetadataResponseTopic(
                error_code=0, name=info.name, topic_id=info.topic_id_bytes, is_internal=False,
                partitions=[R.MetadataResponsePartition(error_code=0, partition_index=i, leader_id=NODE_ID,
                                                        leader_epoch=0, replica_nodes=[NODE_ID],
                                                        isr_nodes=[NODE_ID], offline_replicas=[])
                            for i in range(info.partitions)]))
        return R(throttle_time_ms=0, brokers=[R.MetadataResponseBroker(node_id=NODE_ID, host=host, port=port)],
                 cluster_id=self.config.cluster_id, controller_id=NODE_ID, topics=topics_out, error_code=0)

    # ------------------------------------------------------------------ Produce
    async def _produce(self, conn, hdr, req, v):
        R = m.ProduceResponse
        acks_ok = req.acks in (0, 1, -1)
        topics_out = []
        for td in req.topic_data:
            parts = []
            for pd in td.partition_data:
                pr = R.PartitionProduceResponse(index=pd.index, error_code=0, base_offset=-1)
                if not acks_ok:
                    pr.error_code = _err("INVALID_REQUIRED_ACKS")
                elif pd.records is None or len(pd.records) == 0:
                    pr.error_code = _err("CORRUPT_MESSAGE")
                    pr.error_message = "produce request without record batches"
                else:
                    try:
                        r = await asyncio.to_thread(self.storage.append, td.name, pd.index, bytes(pd.records))
                    except StorageError as exc:
                        pr.error_code = exc.error_code
                        pr.error_message = str(exc)
                        log.info("produce to %s-%d from %r refused: %s", td.name, pd.index, hdr.client_id, exc)
                    else:
                        pr.base_offset = r.base_offset
                        pr.log_append_time_ms = r.log_append_time
                        pr.log_start_offset = r.log_start_offset
                        self.notify(td.name, pd.index)
                parts.append(pr)
            topics_out.append(R.TopicProduceResponse(name=td.name, partition_responses=parts))
        if req.acks == 0:
            return None
        return R(responses=topics_out, throttle_time_ms=0)

    # ------------------------------------------------------------------ Fetch
    async def _fetch(self, conn, hdr, req, v):
        R = m.FetchResponse
        if req.session_id != 0 or req.session_epoch > 0:
            # we never hand out session ids, so an incremental fetch names a session we lack
            return R(throttle_time_ms=0, error_code=_err("FETCH_SESSION_ID_NOT_FOUND"), session_id=0,
                     responses=[])
        direct = (v >= MIN_FETCH_VERSION and req.remote_log_segment_location_requested
                  and STORAGE_FORMAT_APACHE_KAFKA_V1 in (req.supported_storage_format_versions or ()))
        resolved = []           # (request topic, name or None, error code)
        for t in req.topics:
            if v >= 13:
                try:
                    resolved.append((t, self.storage.topic_by_id(t.topic_id).name, 0))
                except StorageError:
                    resolved.append((t, None, _err("UNKNOWN_TOPIC_ID")))
            else:
                resolved.append((t, t.topic, 0))
        keys = [(name, p.partition) for t, name, _ in resolved if name for p in t.partitions]
        deadline = self._loop.time() + max(req.max_wait_ms, 0) / 1000
        while True:
            seen = [self._versions.get(k, 0) for k in keys]
            resp, total, errors = await self._fetch_once(hdr, req, v, resolved, direct)
            remaining = deadline - self._loop.time()
            if total >= max(req.min_bytes, 1) or errors or remaining <= 0 or not keys:
                records = sum(len(p.records or b"") for t in resp.responses for p in t.partitions)
                resp.throttle_time_ms = self._throttle(conn, hdr.client_id, records)
                return resp
            if seen != [self._versions.get(k, 0) for k in keys]:
                continue        # data arrived while we read: look again rather than miss the wake-up
            await self._wait_for_data(keys, remaining)

    def _throttle(self, conn, client_id: str | None, nbytes: int) -> int:
        """Charge ``nbytes`` to the client's quota; the throttle time in ms (0 within quota)."""
        rate = self.config.consumer_byte_rate
        if not rate or nbytes <= 0:
            return 0
        now = self._loop.time()
        key = client_id or ""
        clock = max(self._quota_clock.get(key, now), now) + nbytes / rate
        self._quota_clock[key] = clock
        delay = clock - now
        # Kafka allows a quota window's worth of burst before throttling (1 s samples here).
        if delay <= 1.0:
            return 0
        ms = int((delay - 1.0) * 1000)
        conn.muted_until = now + ms / 1000
        self.throttled_ms_total[key] = self.throttled_ms_total.get(key, 0) + ms
        return ms

    async def _fetch_once(self, hdr, req, v, resolved, direct):
        R = m.FetchResponse
        P = R.PartitionData
        budget = req.max_bytes
        total = 0
        errors = False
        topics_out = []
        for t, name, terr in resolved:
            parts = []
            for fp in t.partitions:
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
                    if direct:
                        loc = await asyncio.to_thread(self.storage.locate, name, fp.partition, fp.fetch_offset,
                                                      max(limit, 1), req.isolation_level,
                                                      client_id=hdr.client_id)
                        if loc is not None:
                            _fill_location(part, loc)
                            total += loc.end_position - loc.start_position
                            continue
                    if budget <= 0 and total > 0:
                        o = await asyncio.to_thread(self.storage.offsets, name, fp.partition)
                        part.high_watermark, part.last_stable_offset = o.high_watermark, o.last_stable_offset
                        part.log_start_offset = o.log_start_offset
                        continue
                    t0 = time.perf_counter()
                    r = await asyncio.to_thread(self.storage.read, name, fp.partition, fp.fetch_offset,
                                                max(limit, 1), req.isolation_level, client_id=hdr.client_id)
                    if r.from_remote or r.error_name == "KAFKA_STORAGE_ERROR":
                        self.remote_fetch_latency.observe(hdr.client_id, name, time.perf_counter() - t0)
                except StorageError as exc:
                    part.error_code = exc.error_code
                    errors = True
                    continue
                except KafkaTieredError as exc:
                    # e.g. a remote index the location answer needs cannot be read: Kafka answers a
                    # failed remote read with a storage error on that partition, not a dead request
                    log.warning("fetch %s-%d offset %d from %r failed: %s", name, fp.partition,
                                fp.fetch_offset, hdr.client_id, exc)
                    part.error_code = _err("KAFKA_STORAGE_ERROR")
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
            topics_out.append(R.FetchableTopicResponse(topic=name or "", topic_id=t.topic_id if v >= 13 else ZERO_UUID,
                                                       partitions=parts))
        return R(throttle_time_ms=0, error_code=0, session_id=0, responses=topics_out), total, errors

    # ------------------------------------------------------------------ ListOffsets
    async def _list_offsets(self, conn, hdr, req, v):
        R = m.ListOffsetsResponse
        topics_out = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                pr = R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0,
                                                    timestamp=-1, offset=-1, leader_epoch=-1)
                need = _LIST_OFFSETS_MIN_VERSION.get(p.timestamp)
                if need is not None and v < need:
                    pr.error_code = _err("UNSUPPORTED_VERSION")
                else:
                    try:
                        off, ts = await asyncio.to_thread(self.storage.list_offsets, t.name, p.partition_index,
                                                          p.timestamp, req.isolation_level if v >= 2 else 0)
                    except StorageError as exc:
                        pr.error_code = exc.error_code
                    else:
                        pr.offset, pr.timestamp = off, ts
                        pr.leader_epoch = 0 if off >= 0 else -1
                parts.append(pr)
            topics_out.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return R(throttle_time_ms=0, topics=topics_out)

    # ------------------------------------------------------------------ coordinators
    async def _find_coordinator(self, conn, hdr, req, v):
        R = m.FindCoordinatorResponse
        host, port = self._address()
        if req.key_type not in (0, 1):
            code, msg = _err("INVALID_REQUEST"), f"coordinator key type {req.key_type} is not supported"
        else:
            code, msg = 0, None
        if v >= 4:
            return R(throttle_time_ms=0, coordinators=[
                R.Coordinator(key=k, node_id=NODE_ID if not code else -1, host=host if not code else "",
                              port=port if not code else -1, error_code=code, error_message=msg)
                for k in req.coordinator_keys])
        return R(throttle_time_ms=0, error_code=code, error_message=msg, node_id=NODE_ID if not code else -1,
                 host=host if not code else "", port=port if not code else -1)

    async def _write_markers(self, plan: EndTxnPlan) -> None:
        for topic, partition in plan.partitions:
            await asyncio.to_thread(self.storage.write_txn_marker, topic, partition, plan.producer_id,
                                    plan.epoch, plan.commit, 0)
            self.notify(topic, partition)
        self.coordinator.complete(plan)

    async def _abort_timed_out_transactions(self) -> None:
        for plan in self.coordinator.pending():
            log.info("completing the transaction of %r left half-written by the last run", plan.transactional_id)
            try:
                await self._write_markers(plan)
            except Exception:
                log.exception("completing the transaction of %r failed", plan.transactional_id)
        while True:
            await asyncio.sleep(self.config.txn_timeout_check_s)
            for plan in self.coordinator.expire():
                log.warning("transaction of %r (producer %d) ran past its timeout: aborting it",
                            plan.transactional_id, plan.producer_id)
                try:
                    await self._write_markers(plan)
                except Exception:
                    log.exception("aborting the timed-out transaction of %r failed", plan.transactional_id)

    async def _init_producer_id(self, conn, hdr, req, v):
        R = m.InitProducerIdResponse
        try:
            pid, epoch, plan = self.coordinator.init_producer_id(
                req.transactional_id, req.transaction_timeout_ms,
                req.producer_id if v >= 3 else -1, req.producer_epoch if v >= 3 else -1)
        except CoordinatorError as exc:
            return R(throttle_time_ms=0, error_code=exc.error_code, producer_id=-1, producer_epoch=-1)
        if plan is not None:
            log.info("transactional id %r re-initialised: aborting its open transaction on %d partition(s)",
                     req.transactional_id, len(plan.partitions))
            await self._write_markers(plan)
        return R(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch)

    async def _add_partitions_to_txn(self, conn, hdr, req, v):
        R = m.AddPartitionsToTxnResponse
        wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
        known = {n: i.partitions for n, i in self.storage.topics.items()}
        unknown = {(t, p) for t, p in wanted if p < 0 or p >= known.get(t, 0)}
        codes = {}
        if unknown:
            for tp in wanted:
                codes[tp] = _err("UNKNOWN_TOPIC_OR_PARTITION") if tp in unknown else _err("OPERATION_NOT_ATTEMPTED")
        else:
            try:
                self.coordinator.add_partitions(req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                                req.v3_and_below_producer_epoch, wanted)
                code = 0
            except CoordinatorError as exc:
                code = exc.error_code
            codes = {tp: code for tp in wanted}
        by_topic: dict[str, list] = {}
        for (t, p), code in codes.items():
            by_topic.setdefault(t, []).append(R.AddPartitionsToTxnPartitionResult(partition_index=p,
                                                                                 partition_error_code=code))
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=[
            R.AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()])

    async def _end_txn(self, conn, hdr, req, v):
        R = m.EndTxnResponse
        try:
            plan = self.coordinator.end_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                            req.committed)
        except CoordinatorError as exc:
            return R(throttle_time_ms=0, error_code=exc.error_code)
        if not plan.already_done:
            await self._write_markers(plan)
        return R(throttle_time_ms=0, error_code=0)

    # ------------------------------------------------------------------ group offsets
    async def _offset_commit(self, conn, hdr, req, v):
        R = m.OffsetCommitResponse
        known = {n: i.partitions for n, i in self.storage.topics.items()}
        rows, topics_out = [], []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                ok = 0 <= p.partition_index < known.get(t.name, 0)
                parts.append(R.OffsetCommitResponsePartition(
                    partition_index=p.partition_index,
                    error_code=0 if ok else _err("UNKNOWN_TOPIC_OR_PARTITION")))
                if ok:
                    rows.append((t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                 p.committed_metadata))
            topics_out.append(R.OffsetCommitResponseTopic(name=t.name, partitions=parts))
        if not req.group_id:
            for t in topics_out:
                for p in t.partitions:
                    p.error_code = _err("INVALID_GROUP_ID")
        elif rows:
            self.coordinator.commit_offsets(req.group_id, rows)
        return R(throttle_time_ms=0, topics=topics_out)

    def _committed_topics(self, group: str, topics, part_cls, topic_cls):
        committed = self.coordinator.committed(group)
        if topics is None:
            wanted = [(t, sorted(ps)) for t, ps in sorted(committed.items())]
        else:
            wanted = [(t.name, list(t.partition_indexes)) for t in topics]
        out = []
        for name, parts in wanted:
            got = committed.get(name, {})
            ps = []
            for p in parts:
                off, epoch, meta = got.get(p, (-1, -1, ""))
                ps.append(part_cls(partition_index=p, committed_offset=off, committed_leader_epoch=epoch,
                                   metadata=meta if meta is not None else "", error_code=0))
            out.append(topic_cls(name=name, partitions=ps))
        return out

    async def _offset_fetch(self, conn, hdr, req, v):
        R = m.OffsetFetchResponse
        if v >= 8:
            return R(throttle_time_ms=0, groups=[
                R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=0, topics=self._committed_topics(
                    g.group_id, g.topics, _nested(R, "OffsetFetchResponsePartitions"),
                    R.OffsetFetchResponseTopics))
                for g in req.groups])
        return R(throttle_time_ms=0, error_code=0, topics=self._committed_topics(
            req.group_id, req.topics, _nested(R, "OffsetFetchResponsePartition"), R.OffsetFetchResponseTopic))

    # ------------------------------------------------------------------ SASL
    async def _sasl_handshake(self, conn, hdr, req, v):
        enabled = list(self.config.sasl.mechanisms) if self.config.sasl else []
        if conn.authenticated and self.config.sasl is None:
            return m.SaslHandshakeResponse(error_code=_err("ILLEGAL_SASL_STATE"), mechanisms=[])
        if req.mechanism not in enabled:
            conn.close_after = True
            return m.SaslHandshakeResponse(error_code=_err("UNSUPPORTED_SASL_MECHANISM"), mechanisms=enabled)
        conn.mechanism = req.mechanism
        conn.raw_sasl = v == 0
        return m.SaslHandshakeResponse(error_code=0, mechanisms=enabled)

    def _sasl_step(self, conn, token: bytes) -> bytes:
        """One client token -> the server's answer; raises SaslError on bad credentials."""
        if conn.mechanism == "PLAIN":
            _, user, password = parse_plain(token)
            expected = self.config.sasl.users.get(user)
            if expected is None or not hmac.compare_digest(password.encode(), expected.get().encode()):
                raise SaslError(f"authentication failed for user {user!r}")
            conn.user, conn.authenticated = user, True
            return b""
        if conn.scram is None:
            mech = conn.mechanism
            conn.scram = ScramServer(mech, lambda u: self._scram_creds.get((mech, u)))
            return conn.scram.first(token)
        out = conn.scram.final(token)
        conn.user, conn.authenticated = conn.scram.username, True
        return out

    def _auth_failed(self, conn, exc) -> str:
        log.warning("SASL %s authentication from %s failed: %s", conn.mechanism, conn.peer, exc)
        conn.close_after = True
        return (f"Authentication failed during authentication due to invalid credentials with SASL "
                f"mechanism {conn.mechanism}")

    async def _sasl_authenticate(self, conn, hdr, req, v):
        R = m.SaslAuthenticateResponse
        if conn.mechanism is None or conn.authenticated:
            conn.close_after = True
            return R(error_code=_err("ILLEGAL_SASL_STATE"), error_message="SaslAuthenticate without a "
                     "SaslHandshake naming the mechanism first", auth_bytes=b"")
        try:
            out = self._sasl_step(conn, bytes(req.auth_bytes))
        except SaslError as exc:
            return R(error_code=_err("SASL_AUTHENTICATION_FAILED"), error_message=self._auth_failed(conn, exc),
                     auth_bytes=b"")
        return R(error_code=0, error_message=None, auth_bytes=out, session_lifetime_ms=0)

    async def _raw_sasl_token(self, conn, data: bytes):
        """SaslHandshake v0: the client now sends bare size-prefixed tokens (no headers)."""
        try:
            out = self._sasl_step(conn, bytes(data))
        except SaslError as exc:
            self._auth_failed(conn, exc)
            return _CLOSE
        if conn.authenticated:
            conn.raw_sasl = False
        return codec.frame(out)

    # ------------------------------------------------------------------ client telemetry (KIP-714)
    async def _get_telemetry_subscriptions(self, conn, hdr, req, v):
        cid = req.client_instance_id if req.client_instance_id != ZERO_UUID else random_uuid()
        return m.GetTelemetrySubscriptionsResponse(
            throttle_time_ms=0, error_code=0, client_instance_id=cid,
            subscription_id=self._telemetry_subscription, accepted_compression_types=[0],
            push_interval_ms=self.config.telemetry_push_interval_ms, telemetry_max_bytes=1 << 20,
            # cumulative values: the latest push alone then tells the totals
            delta_temporality=False, requested_metrics=list(self.config.telemetry_metrics))

    async def _push_telemetry(self, conn, hdr, req, v):
        R = m.PushTelemetryResponse
        if req.client_instance_id == ZERO_UUID:
            return R(throttle_time_ms=0, error_code=_err("INVALID_REQUEST"))
        if req.subscription_id != self._telemetry_subscription:
            return R(throttle_time_ms=0, error_code=_err("UNKNOWN_SUBSCRIPTION_ID"))
        if req.compression_type != 0:
            return R(throttle_time_ms=0, error_code=_err("UNSUPPORTED_COMPRESSION_TYPE"))
        iid = uuid_to_str(req.client_instance_id)
        self.telemetry[iid] = TelemetryPush(iid, hdr.client_id, req.subscription_id, req.compression_type,
                                            bytes(req.metrics), bool(req.terminating), time.time())
        return R(throttle_time_ms=0, error_code=0)

    # ------------------------------------------------------------------ metrics over HTTP
    def metrics_text(self) -> str:
        """KIP-1267 operator metrics: the storage's counters plus the fetch-duration histogram."""
        return self.storage.metrics.prometheus_text() + self.remote_fetch_latency.prometheus_text()

    async def _serve_metrics(self, reader, writer) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            while True:
                h = await asyncio.wait_for(reader.readline(), 10)
                if h in (b"\r\n", b"\n", b""):
                    break
            parts = line.split()
            if len(parts) >= 2 and parts[0] == b"GET" and parts[1].split(b"?")[0] in (b"/", b"/metrics"):
                status, body = "200 OK", self.metrics_text().encode()
            else:
                status, body = "404 Not Found", b"only GET /metrics is served here\n"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def _linger_close(reader, writer, timeout: float = 1.0) -> None:
    """Close after a final answer (failed authentication) the way Kafka does: after a delay
    (its ``connections.failed.authentication.delay.ms``), or sooner when the client hangs up.
    Closing at once races the client's read of the answer: some clients (kafka-python) act on
    the end of stream before they handle the bytes that preceded it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while True:
            left = deadline - loop.time()
            if left <= 0 or not await asyncio.wait_for(reader.read(65536), left):
                return
    except (asyncio.TimeoutError, ConnectionError, OSError):
        return


def _nested(cls, name):
    """A nested struct class of a generated message by its Kafka JSON name, at any depth."""
    todo = [cls]
    while todo:
        c = todo.pop()
        for f in c._fields:
            sc = f.struct_class
            if sc is None:
                continue
            if sc.__name__ == name:
                return sc
            todo.append(sc)
    raise KeyError(name)


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


def _error_response(api_key: int, req, version: int, code: int):
    """The answer to a request whose handler failed: ``code`` on every partition (or at the top
    level), as Kafka's ``AbstractRequest.getErrorResponse`` does; None when there is no sensible
    answer (the connection is then closed)."""
    if api_key == 1:
        R = m.FetchResponse
        return R(throttle_time_ms=0, error_code=code, session_id=0, responses=[])
    if api_key == 0:
        if req.acks == 0:
            return None
        R = m.ProduceResponse
        return R(responses=[R.TopicProduceResponse(name=t.name, partition_responses=[
            R.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
            for p in t.partition_data]) for t in req.topic_data])
    if api_key == 2:
        R = m.ListOffsetsResponse
        return R(topics=[R.ListOffsetsTopicResponse(name=t.name, partitions=[
            R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in req.topics])
    resp_cls = m.RESPONSES[api_key]
    if any(f.attr == "error_code" and f.in_version(version) for f in resp_cls._fields):
        return resp_cls(error_code=code)
    return None
