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
import logging
import ssl as _ssl
import struct
from dataclasses import dataclass, field

from ..errors import ConfigError, ProtocolError
from ..protocol import codec
from ..protocol import messages as m
from ..protocol.sasl import MECHANISMS, ScramCredential
from ..redact import Secret
from .coordinator import Coordinator
from .apis import ADVERTISED, APIS, admin, sasl, txn
from .apis._shared import CLOSE, err
from .apis.fetch import LatencyHistogram
from .apis.telemetry import TelemetryPush
from .storage import BrokerStorage

log = logging.getLogger(__name__)

NODE_ID = 0
#: Kafka's socket.request.max.bytes default; a bigger size prefix is a broken or hostile frame
MAX_FRAME_BYTES = 100 * 1024 * 1024
ZERO_UUID = bytes(16)

_SASL_APIS = (17, 18, 36)     # allowed before authentication



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
    #: True: answer the KIP-1248 location tags on Fetch; False: behave as Apache Kafka 4.1 does
    #: (tags ignored, tiered data served through the broker, one partition per Fetch)
    kip1248: bool = True






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
        self.advertised = ADVERTISED

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
        self._txn_reaper = asyncio.create_task(txn.abort_timed_out_transactions(self))
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
                if out is CLOSE:
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
            return await sasl.raw_sasl_token(self, conn, data)
        try:
            hdr, req = codec.decode_request(data)
        except codec.UnsupportedVersionError as exc:
            return self._unsupported(conn, exc.header)
        except ProtocolError as exc:
            log.warning("closing connection from %s: malformed request: %s", conn.peer, exc)
            return CLOSE
        key, version = hdr.request_api_key, hdr.request_api_version
        lo, hi = self.advertised.get(key, (0, -1))
        if not lo <= version <= hi:
            return self._unsupported(conn, hdr)
        if not conn.authenticated and key not in _SASL_APIS:
            log.warning("closing connection from %s: %s request before SASL authentication",
                        conn.peer, m.api_name(key))
            return CLOSE
        try:
            resp = await APIS[key][0](self, conn, hdr, req, version)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s v%d from %s (client %r) failed", m.api_name(key), version, conn.peer,
                          hdr.client_id)
            resp = _error_response(key, req, version, err("UNKNOWN"))
            if resp is None:
                return CLOSE
        if resp is None:          # Produce with acks=0: no answer at all
            return b""
        return codec.encode_response(resp, version, hdr.correlation_id)

    def _unsupported(self, conn, hdr):
        key, version = hdr.request_api_key, hdr.request_api_version
        if key == 18:
            # Kafka answers an ApiVersions it cannot parse with a v0 body: the error plus the
            # ranges it does support, so the client can retry with a version both know.
            resp = m.ApiVersionsResponse(error_code=err("UNSUPPORTED_VERSION"), api_keys=admin.api_list(self))
            return codec.encode_response(resp, 0, hdr.correlation_id)
        log.warning("closing connection from %s: unsupported %s version %d", conn.peer,
                    m.api_name(key), version)
        return CLOSE

    # ------------------------------------------------------------------ ApiVersions, Metadata
    # ------------------------------------------------------------------ Produce
    # ------------------------------------------------------------------ Fetch
    # ------------------------------------------------------------------ ListOffsets
    # ------------------------------------------------------------------ coordinators
    # ------------------------------------------------------------------ group offsets
    # ------------------------------------------------------------------ SASL
    # ------------------------------------------------------------------ client telemetry (KIP-714)
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
