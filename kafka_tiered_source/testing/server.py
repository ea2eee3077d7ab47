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
from typing import Protocol

from ..dataclass import dataclass, field
from ..errors import ConfigError, ProtocolError
from ..protocol import codec
from ..protocol import messages as m
from ..protocol import tls
from ..protocol.certificates import DerError, certificate_info
from ..protocol.keystores import StoreOptions
from ..protocol.sasl import MECHANISMS, ScramCredential
from ..redact import Secret
from .oauth_validator import JwtValidator, OAuthValidatorConfig
from .tls_stream import TlsStream
from .coordinator import Coordinator
from .apis import ADVERTISED, APIS, admin, sasl, txn
from .apis._shared import CLOSE, err
from .apis.fetch import LatencyHistogram
from .apis import fetch_request
from .apis.fetch_body import EncodedResponse
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
    """SASL the broker demands: ``mechanisms`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER),
    ``users`` name -> password (kept as :class:`Secret`; SCRAM credentials are derived once),
    ``oauthbearer``: the broker's OAUTHBEARER validation (:class:`OAuthValidatorConfig`), and
    ``connections_max_reauth_ms`` (Kafka's ``connections.max.reauth.ms``; 0: sessions end only
    with an OAUTHBEARER token's expiry)."""

    mechanisms: tuple
    users: dict = field(default_factory=dict)
    oauthbearer: OAuthValidatorConfig | None = None
    connections_max_reauth_ms: int = 0

    def __post_init__(self):
        if not self.mechanisms:
            raise ConfigError("sasl: at least one mechanism is needed", option="sasl.mechanism")
        for mech in self.mechanisms:
            if mech not in MECHANISMS:
                raise ConfigError(f"sasl: unsupported mechanism {mech!r}; supported: {', '.join(MECHANISMS)}",
                                  option="sasl.mechanism")
        if "OAUTHBEARER" in self.mechanisms and self.oauthbearer is None:
            raise ConfigError("sasl: OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url",
                              option="sasl.oauthbearer.jwks.endpoint.url")
        object.__setattr__(self, "users", {u: p if isinstance(p, Secret) else Secret(p)
                                           for u, p in dict(self.users).items()})

    @classmethod
    def of(cls, value) -> "SaslConfig | None":
        """From a SaslConfig, or a dict ``{"mechanism": "SCRAM-SHA-256" | "mechanisms": [...],
        "users": {name: password}}`` plus, under Kafka's broker names, the OAUTHBEARER settings
        (``sasl.oauthbearer.jwks.endpoint.url``, ``sasl.oauthbearer.expected.issuer``,
        ``sasl.oauthbearer.expected.audience``, ...) and ``connections.max.reauth.ms``."""
        if value is None or isinstance(value, SaslConfig):
            return value
        if not isinstance(value, dict):
            raise ConfigError("sasl must be a dict with 'mechanism(s)' and 'users'", option="sasl")
        oauth = {k: v for k, v in value.items() if k in OAuthValidatorConfig.KEYS}
        unknown = set(value) - {"mechanism", "mechanisms", "users", "connections.max.reauth.ms"} - set(oauth)
        if unknown:
            raise ConfigError(f"sasl: unknown keys {sorted(unknown)}", option="sasl")
        mechs = value.get("mechanisms") or value.get("mechanism")
        if isinstance(mechs, str):
            mechs = (mechs,)
        return cls(tuple(mechs or ()), value.get("users") or {},
                   OAuthValidatorConfig.from_properties(oauth) if oauth else None,
                   int(value.get("connections.max.reauth.ms", 0)))

    def __repr__(self):
        return f"SaslConfig(mechanisms={self.mechanisms}, users={sorted(self.users)})"


#: the listener's TLS settings, by Kafka's broker property names
SSL_KEYS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
            "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type",
            "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
            "ssl.client.auth", "ssl.enabled.protocols")
_SSL_SECRETS = ("ssl.keystore.password", "ssl.key.password", "ssl.keystore.key", "ssl.truststore.password")


@dataclass(frozen=True, repr=False)
class SslConfig:
    """The listener's TLS: PEM ``certfile``/``keyfile``, or Kafka's broker properties in
    ``properties`` (``ssl.keystore.*`` in any format, ``ssl.truststore.*``, ``ssl.client.auth``
    none/requested/required, as Kafka's SslFactory takes them)."""

    certfile: str | None = None
    keyfile: str | None = None
    properties: tuple = ()

    @classmethod
    def of(cls, value) -> "SslConfig | None":
        if value is None or isinstance(value, SslConfig):
            return value
        if not isinstance(value, dict) or not ("certfile" in value or "ssl.keystore.location" in value
                                               or "ssl.keystore.key" in value):
            raise ConfigError("ssl must be a dict with 'certfile' (and 'keyfile') or Kafka's ssl.keystore.* "
                              "settings", option="ssl")
        unknown = set(value) - {"certfile", "keyfile"} - set(SSL_KEYS)
        if unknown:
            raise ConfigError(f"ssl: unknown keys {sorted(unknown)} (known: certfile, keyfile, {', '.join(SSL_KEYS)})",
                              option="ssl")
        props = tuple(sorted((k, Secret(str(v)) if k in _SSL_SECRETS else str(v))
                             for k, v in value.items() if k in SSL_KEYS and v is not None))
        return cls(value.get("certfile"), value.get("keyfile"), props)

    def __repr__(self):
        shown = {k: ("***" if isinstance(v, Secret) else v) for k, v in self.properties}
        return f"SslConfig(certfile={self.certfile!r}, keyfile={self.keyfile!r}, {shown})"

    @property
    def client_auth(self) -> str:
        return str(dict(self.properties).get("ssl.client.auth", "none")).strip().lower()

    def context(self) -> _ssl.SSLContext:
        p = {k: (v.get() if isinstance(v, Secret) else v) for k, v in self.properties}
        inline_key = inline_chain = None
        key_type = p.get("ssl.keystore.type")
        if self.certfile:
            inline_chain = _read_text(self.certfile, "certfile")
            inline_key = _read_text(self.keyfile, "keyfile") if self.keyfile else inline_chain
            key_type = "PEM"
        keystore = StoreOptions(type=key_type, location=p.get("ssl.keystore.location"),
                                password=p.get("ssl.keystore.password"), key_password=p.get("ssl.key.password"),
                                inline_certificates=inline_chain or p.get("ssl.keystore.certificate.chain"),
                                inline_key=inline_key or p.get("ssl.keystore.key"), names=tls.CLIENT_KEY_NAMES)
        truststore = StoreOptions(type=p.get("ssl.truststore.type"), location=p.get("ssl.truststore.location"),
                                  password=p.get("ssl.truststore.password"),
                                  inline_certificates=p.get("ssl.truststore.certificates"),
                                  names=tls.CLIENT_TRUST_NAMES)
        protocols = tuple(x.strip() for x in p.get("ssl.enabled.protocols", "").split(",") if x.strip())
        return tls.server_context(keystore, truststore, self.client_auth, protocols)


def _read_text(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"ssl {what} {path!r} cannot be read: {exc.strerror or exc}", option=f"ssl.{what}") from None


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
    #: KIP-1018's ``remote.fetch.max.wait.ms`` (Kafka's default 500): how long a Fetch waits for
    #: a read of remote storage before it answers that partition with nothing (DelayedRemoteFetch)
    remote_fetch_max_wait_ms: int = 500






class _Connection:
    __slots__ = ("peer", "authenticated", "mechanism", "scram", "raw_sasl", "close_after", "user",
                 "muted_until", "session_ends", "reauth_capable", "reauth_from", "oauth_error", "tls_principal")

    def __init__(self, peer, needs_auth: bool):
        self.peer = peer
        self.authenticated = not needs_auth
        self.mechanism = None
        self.scram = None
        self.raw_sasl = False      # SaslHandshake v0: bare tokens follow, no Kafka headers
        self.close_after = False
        self.user: str | None = None
        self.muted_until = 0.0     # loop time before which no request is read (quota throttle)
        self.session_ends = None   # loop time the SASL session ends (KIP-368), None: never
        self.reauth_capable = False   # SaslAuthenticate v1+ seen: the client can re-authenticate
        self.reauth_from = None    # (mechanism, principal) while a re-authentication runs
        self.oauth_error = None    # OAUTHBEARER: the error challenge sent, awaiting the client's \x01
        self.tls_principal: str | None = None  # mTLS: the client certificate's subject


class _Reader(Protocol):
    """What a connection is read through: asyncio's stream, or the TLS stream over it."""
    async def readexactly(self, n: int) -> bytes: ...


class _Writer(Protocol):
    def write(self, data: bytes) -> None: ...
    async def drain(self) -> None: ...
    def close(self) -> None: ...
    async def wait_closed(self) -> None: ...


class BrokerServer:
    """The asyncio server.  ``await start()`` binds (``.port`` is then known), ``await stop()``
    closes listeners and connections.  Everything runs on one event loop."""

    def __init__(self, storage: BrokerStorage, coordinator: Coordinator, config: ServerConfig):
        self.storage = storage
        self.coordinator = coordinator
        self.config = config
        self.port: int | None = None
        self.metrics_port: int | None = None
        self._server: asyncio.Server | None = None
        self._metrics_server: asyncio.Server | None = None
        self._conn_tasks: set = set()
        self._waiters: dict[tuple[str, int], set] = {}
        # The API handlers (testing/apis, one module per API family) read and write what follows
        # up to the OAuth validator, so it is public: a partition's data version (bumped by
        # notify()), the loop (set by start()), SCRAM credentials, quota clocks, telemetry.
        self.data_versions: dict[tuple[str, int], int] = {}
        self.loop: asyncio.AbstractEventLoop = None       # type: ignore[assignment]  # set by start(), before any handler runs
        self._tls: _ssl.SSLContext | None = None
        self._txn_reaper: asyncio.Task | None = None
        self.scram_credentials: dict[tuple[str, str], ScramCredential] = {}
        if config.sasl:
            for mech in config.sasl.mechanisms:
                if mech.startswith("SCRAM-"):
                    for user, pw in config.sasl.users.items():
                        self.scram_credentials[(mech, user)] = ScramCredential.from_password(pw.get(), mech)
        self.telemetry: dict[str, TelemetryPush] = {}
        self.remote_fetch_latency = LatencyHistogram()
        # client id -> loop time at which its fetched bytes so far fit the quota (KIP-13)
        self.quota_clock: dict[str, float] = {}
        self.throttled_ms_total: dict[str, int] = {}
        self.telemetry_subscription = 1
        self.advertised = ADVERTISED
        # a slow broker for tests: callables (api key, request) -> None, seconds or an Event to
        # wait for before the request is handled (EmbeddedCluster.hold_answers)
        self.holds: list = []
        # seconds each read of remote storage takes first (EmbeddedCluster.slow_remote_reads)
        self.remote_read_delays: list = []
        oauth = config.sasl.oauthbearer if config.sasl else None
        self.jwt_validator = JwtValidator(oauth) if oauth is not None else None
        # who authenticated, for tests and operators: (mechanism or "SSL", principal) -> count
        self.authentications: dict[tuple[str, str], int] = {}
        self.reauthentications = 0
        self.expired_sessions_closed = 0

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        # TLS is done per connection (tls_stream.py), so a refused handshake sends its alert
        self._tls = self.config.ssl.context() if self.config.ssl else None
        self._server = await asyncio.start_server(self._serve, self.config.host, self.config.port,
                                                  limit=1 << 20)
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
        self.data_versions[key] = self.data_versions.get(key, 0) + 1
        for fut in self._waiters.pop(key, ()):
            if not fut.done():
                fut.set_result(None)

    async def wait_for_data(self, keys, timeout: float) -> None:
        fut = self.loop.create_future()
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
    async def _serve(self, plain_reader: asyncio.StreamReader, plain_writer: asyncio.StreamWriter) -> None:
        reader: _Reader = plain_reader
        writer: _Writer = plain_writer
        task = asyncio.current_task()
        self._conn_tasks.add(task)
        peer = plain_writer.get_extra_info("peername")
        conn = _Connection(peer, self.config.sasl is not None)
        try:
            if self._tls is not None:
                stream = await TlsStream.accept(plain_reader, plain_writer, self._tls)
                if stream is None:
                    return
                reader = writer = stream
                self._note_tls_principal(conn, stream)
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
                pause = conn.muted_until - self.loop.time()
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
            # a flexible Fetch of the usual shape without the codec's plan (fetch_request.py)
            got = fetch_request.read(data) if data[:2] == b"\0\1" else None
            hdr, req = got if got is not None else codec.decode_request(data)
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
        if conn.session_ends is not None and key != 17 and self.loop.time() > conn.session_ends:
            # Kafka's SocketServer: a request other than a re-authentication on a connection
            # whose session has ended closes it ("expired session").
            log.info("closing connection from %s (user %s): the SASL session ended and the client did "
                     "not re-authenticate", conn.peer, conn.user)
            self.expired_sessions_closed += 1
            return CLOSE
        for hold in list(self.holds):
            await _held(hold(key, req))
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
        if isinstance(resp, EncodedResponse):     # a flexible version's body (Fetch): header v1
            return struct.pack(">ii", len(resp.body) + 5, hdr.correlation_id) + b"\0" + resp.body
        return codec.encode_response(resp, version, hdr.correlation_id)

    def _note_tls_principal(self, conn: _Connection, writer) -> None:
        """mTLS: the principal is the client certificate's subject (Kafka's DefaultKafkaPrincipalBuilder,
        X500Principal.getName()); counted as an SSL authentication when no SASL follows."""
        obj = writer.get_extra_info("ssl_object")
        der = obj.getpeercert(binary_form=True) if obj is not None else None
        if not der:
            return
        try:
            conn.tls_principal = certificate_info(der).subject
        except DerError:
            conn.tls_principal = "?"
        if self.config.sasl is None:
            self.note_authentication("SSL", conn.tls_principal)

    def note_authentication(self, mechanism: str, principal: str) -> None:
        key = (mechanism, principal)
        self.authentications[key] = self.authentications.get(key, 0) + 1

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


async def _held(wait) -> None:
    """Hold one request as a slow broker would, without holding the others: ``wait`` seconds,
    or until a ``threading.Event`` is set (at most :data:`HOLD_LIMIT_S`)."""
    if wait is None:
        return
    if isinstance(wait, (int, float)):
        await asyncio.sleep(wait)
        return
    deadline = asyncio.get_running_loop().time() + HOLD_LIMIT_S
    while not wait.is_set() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.005)


HOLD_LIMIT_S = 60.0


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
    if any(f.attr == "error_code" and f.in_version(version) for f in resp_cls.FIELDS):
        return resp_cls(error_code=code)
    return None
