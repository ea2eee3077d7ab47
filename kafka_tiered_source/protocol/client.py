"""A synchronous Kafka broker client: just what the tiered reader needs.

Bootstrap, ApiVersions negotiation (highest common version), a metadata cache with topic ids,
routing to partition leaders, ListOffsets and sessionless Fetch (optionally with the KIP-1248
tags), PLAINTEXT/SSL/SASL_PLAINTEXT/SASL_SSL with PLAIN and SCRAM-SHA-256/512.

Threading: one connection per broker, reused, with one request in flight at a time (the
connection lock is held from send to receive), so the client can be shared by threads.  The
correlation id of every response is checked; a mismatch or a closed socket drops the
connection and the request is retried on a fresh one.
"""
from __future__ import annotations

import logging
import random
import re
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass
from typing import Iterable

from ..errors import BrokerError, ConfigError, ProtocolError
from ..model import EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD, LATEST_TIERED, MAX_TIMESTAMP
from ..option_parsing import parse_bool
from ..redact import Secret
from . import codec, kip1248, messages as m
from .errors import broker_error
from .sasl import MECHANISMS, SaslError, ScramClient, plain_initial_response

log = logging.getLogger(__name__)

# ListOffsets version needed by each special timestamp (KIP-734, KIP-1005, KIP-1023).
_SPECIAL_TIMESTAMP_MIN_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                                  EARLIEST_PENDING_UPLOAD: 11}
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
ZERO_UUID = bytes(16)

_UNSUPPORTED_VERSION = 35
_SASL_AUTH_FAILED = 58
_REQUEST_TIMED_OUT = 7
_NETWORK_EXCEPTION = 13

# --- configuration ---------------------------------------------------------------------------

#: Standard Kafka consumer keys that mean nothing to this client (group management, polling,
#: deserialisation, buffer tuning).  They are accepted and ignored so a consumer's properties
#: can be passed unchanged; every other unknown key is refused.
IGNORED_KEYS = frozenset({
    "group.id", "group.instance.id", "enable.auto.commit", "auto.commit.interval.ms",
    "auto.offset.reset", "key.deserializer", "value.deserializer", "session.timeout.ms",
    "heartbeat.interval.ms", "max.poll.records", "max.poll.interval.ms",
    "partition.assignment.strategy", "interceptor.classes", "metric.reporters",
    "metrics.num.samples", "metrics.sample.window.ms", "metrics.recording.level",
    "check.crcs", "exclude.internal.topics", "allow.auto.create.topics",
    "receive.buffer.bytes", "send.buffer.bytes", "client.dns.lookup", "default.api.timeout.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "enable.metrics.push",
})

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_JAAS = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _int(key, value, lo=0) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{key} must be an integer, got {value!r}", option=key) from None
    if n < lo:
        raise ConfigError(f"{key} must be >= {lo}, got {n}", option=key)
    return n


def _parse_servers(text: str) -> tuple:
    out = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"bootstrap.servers entry {item!r} is not host:port", option="bootstrap.servers")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ConfigError("bootstrap.servers is empty", option="bootstrap.servers")
    return tuple(out)


@dataclass(frozen=True)
class ClientConfig:
    """Typed, frozen client settings.  Build with :meth:`from_properties` from Kafka's own key
    names.  Secrets are :class:`~kafka_tiered_source.redact.Secret` and never show in reprs."""

    bootstrap_servers: tuple
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: Secret | None = None
    ssl_check_hostname: bool = True
    client_id: str = "kafka-tiered"
    client_rack: str = ""
    request_timeout_ms: int = 30000
    connect_timeout_ms: int = 10000
    connections_max_idle_ms: int = 540000
    metadata_max_age_ms: int = 300000
    retries: int = 5
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    isolation_level: int = READ_UNCOMMITTED

    def __post_init__(self):
        if self.security_protocol not in _PROTOCOLS:
            raise ConfigError(f"security.protocol must be one of {', '.join(_PROTOCOLS)}, got "
                              f"{self.security_protocol!r}", option="security.protocol")
        if self.sasl_mechanism not in MECHANISMS:
            raise ConfigError(f"sasl.mechanism must be one of {', '.join(MECHANISMS)}, got "
                              f"{self.sasl_mechanism!r}", option="sasl.mechanism")
        if self.uses_sasl and (not self.sasl_username or self.sasl_password is None):
            raise ConfigError("SASL needs a username and password (sasl.jaas.config or "
                              "sasl.username/sasl.password)", option="sasl.jaas.config")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: dict) -> "ClientConfig":
        """Kafka client properties (``bootstrap.servers``, ``security.protocol``, ...), with or
        without a ``kafka.`` prefix.  Unknown keys raise :class:`ConfigError` naming the key,
        except the harmless consumer keys in :data:`IGNORED_KEYS`."""
        kw: dict = {}
        jaas = None
        for raw_key, value in props.items():
            key = str(raw_key)
            if key.startswith("kafka."):
                key = key[len("kafka."):]
            if key in IGNORED_KEYS:
                continue
            if key == "bootstrap.servers":
                kw["bootstrap_servers"] = _parse_servers(value)
            elif key == "security.protocol":
                kw["security_protocol"] = str(value).strip().upper()
            elif key == "sasl.mechanism":
                kw["sasl_mechanism"] = str(value).strip().upper()
            elif key == "sasl.jaas.config":
                jaas = str(value)
            elif key == "sasl.username":
                kw["sasl_username"] = str(value)
            elif key == "sasl.password":
                kw["sasl_password"] = Secret(str(value))
            elif key == "ssl.cafile":
                kw["ssl_cafile"] = str(value)
            elif key == "ssl.certfile":
                kw["ssl_certfile"] = str(value)
            elif key in ("ssl.truststore.location", "ssl.keystore.location"):
                # Java keystores (JKS/PKCS12) are not read here: say so rather than fail in TLS.
                raise ConfigError(f"{key} (a Java keystore) is not supported; give PEM files with "
                                  f"ssl.cafile / ssl.certfile / ssl.keyfile", option=key)
            elif key == "ssl.keyfile":
                kw["ssl_keyfile"] = str(value)
            elif key in ("ssl.key.password", "ssl.password"):
                kw["ssl_key_password"] = Secret(str(value))
            elif key == "ssl.check.hostname":
                kw["ssl_check_hostname"] = parse_bool(key, value)
            elif key == "ssl.endpoint.identification.algorithm":
                # Kafka's spelling: "https" verifies the host name, "" turns that off.
                kw["ssl_check_hostname"] = str(value).strip().lower() == "https"
            elif key == "client.id":
                kw["client_id"] = str(value)
            elif key == "client.rack":
                kw["client_rack"] = str(value)
            elif key == "request.timeout.ms":
                kw["request_timeout_ms"] = _int(key, value, 1)
            elif key in ("socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms"):
                kw["connect_timeout_ms"] = _int(key, value, 1)
            elif key == "connections.max.idle.ms":
                kw["connections_max_idle_ms"] = _int(key, value, 0)
            elif key == "metadata.max.age.ms":
                kw["metadata_max_age_ms"] = _int(key, value, 0)
            elif key == "retries":
                kw["retries"] = _int(key, value, 0)
            elif key == "retry.backoff.ms":
                kw["retry_backoff_ms"] = _int(key, value, 0)
            elif key == "retry.backoff.max.ms":
                kw["retry_backoff_max_ms"] = _int(key, value, 0)
            elif key == "fetch.max.wait.ms":
                kw["fetch_max_wait_ms"] = _int(key, value, 0)
            elif key == "fetch.min.bytes":
                kw["fetch_min_bytes"] = _int(key, value, 0)
            elif key == "fetch.max.bytes":
                kw["fetch_max_bytes"] = _int(key, value, 1)
            elif key == "max.partition.fetch.bytes":
                kw["max_partition_fetch_bytes"] = _int(key, value, 1)
            elif key == "isolation.level":
                v = str(value).strip().lower()
                if v not in ("read_uncommitted", "read_committed"):
                    raise ConfigError(f"isolation.level must be read_uncommitted or read_committed, "
                                      f"got {value!r}", option=key)
                kw["isolation_level"] = READ_COMMITTED if v == "read_committed" else READ_UNCOMMITTED
            else:
                raise ConfigError(f"unknown Kafka client option {raw_key!r}", option=str(raw_key))
        if "bootstrap_servers" not in kw:
            raise ConfigError("bootstrap.servers is required", option="bootstrap.servers")
        if jaas is not None:
            found = dict(_JAAS.findall(jaas))
            if "username" not in found or "password" not in found:
                # never echo the JAAS text: it holds the password
                raise ConfigError("sasl.jaas.config must set username=\"...\" and password=\"...\"",
                                  option="sasl.jaas.config")
            kw.setdefault("sasl_username", found["username"].replace('\\"', '"'))
            kw.setdefault("sasl_password", Secret(found["password"].replace('\\"', '"')))
        return cls(**kw)


# --- results ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple
    isr: tuple
    error_code: int = 0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: bytes
    partitions: dict  # partition -> PartitionInfo
    error_code: int = 0


@dataclass(frozen=True)
class ListedOffset:
    partition: int
    offset: int
    timestamp: int
    leader_epoch: int


@dataclass(frozen=True)
class FetchResult:
    """One partition's fetch answer.  ``partition`` is the decoded
    ``FetchResponse.PartitionData`` (``records`` is a memoryview into the response frame,
    KIP-1248 fields included); ``kip1248_requested`` says whether the tags were sent."""

    topic: str
    partition_index: int
    partition: object
    version: int
    broker: str
    kip1248_requested: bool
    throttle_time_ms: int = 0     # the broker's quota throttle (KIP-13); already waited out

    @property
    def records(self):
        return self.partition.records

    @property
    def has_remote_location(self) -> bool:
        return kip1248.has_remote_location(self.partition)


class _ConnectionLost(Exception):
    """Internal: the socket failed or closed mid-request (always retried on a new socket)."""


# --- connection ------------------------------------------------------------------------------

def _recv_exact(sock, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise _ConnectionLost("connection closed by the broker")
        got += k
    return buf


class BrokerConnection:
    """One socket to one broker; negotiated API versions; one request in flight at a time."""

    def __init__(self, host: str, port: int, config: ClientConfig, *, node_id: int | None = None):
        self.host = host
        self.port = port
        self.node_id = node_id
        self.config = config
        self.address = f"{host}:{port}"
        self._lock = threading.Lock()
        self._sock = None
        self._next_cid = random.randrange(1 << 20)
        self.api_versions: dict = {}
        self._last_used = 0.0
        self._muted_until = 0.0    # monotonic time before which nothing is sent (broker throttle)
        self.throttled_s = 0.0     # time spent waiting out broker throttles

    def __repr__(self):
        return f"BrokerConnection({self.address}, node {self.node_id})"

    # -- setup

    def _ssl_context(self) -> ssl.SSLContext:
        cfg = self.config
        ctx = ssl.create_default_context(cafile=cfg.ssl_cafile)
        ctx.check_hostname = cfg.ssl_check_hostname
        if cfg.ssl_certfile:
            pw = cfg.ssl_key_password.get() if cfg.ssl_key_password else None
            ctx.load_cert_chain(cfg.ssl_certfile, cfg.ssl_keyfile, password=pw)
        return ctx

    def _open(self):
        cfg = self.config
        try:
            sock = socket.create_connection((self.host, self.port), timeout=cfg.connect_timeout_ms / 1000)
        except OSError as exc:
            raise BrokerError(f"cannot connect: {exc.strerror or exc}", broker=self.address,
                              retriable=True) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if cfg.uses_ssl:
                sock = self._ssl_context().wrap_socket(sock, server_hostname=self.host)
        except ssl.SSLError as exc:
            sock.close()
            raise BrokerError(f"TLS handshake failed: {exc.reason or exc}", broker=self.address) from None
        except OSError as exc:
            sock.close()
            raise BrokerError(f"TLS handshake failed: {exc}", broker=self.address, retriable=True) from None
        self._sock = sock
        try:
            self._negotiate_versions()
            if cfg.uses_sasl:
                self._authenticate()
        except BaseException:
            self._close_locked()
            raise

    def _negotiate_versions(self):
        req = m.ApiVersionsRequest(client_software_name="kafka-tiered",
                                   client_software_version="0.1.0")
        version = m.ApiVersionsRequest.VALID_VERSIONS.hi
        for _ in range(2):
            resp = self._roundtrip(req, version)
            if resp.error_code == _UNSUPPORTED_VERSION:
                # The broker answered in v0 and listed what it does take for ApiVersions.
                theirs = {k.api_key: k for k in resp.api_keys}.get(m.ApiVersionsRequest.API_KEY)
                if theirs is None or version <= theirs.max_version:
                    break
                version = max(theirs.max_version, 0)
                continue
            if resp.error_code:
                raise broker_error(resp.error_code, broker=self.address, api="ApiVersions")
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            return
        raise broker_error(_UNSUPPORTED_VERSION, broker=self.address, api="ApiVersions")

    def _authenticate(self):
        cfg = self.config
        mech = cfg.sasl_mechanism
        hs_version = self.pick_version(m.SaslHandshakeRequest, at_least=1)
        resp = self._roundtrip(m.SaslHandshakeRequest(mechanism=mech), hs_version)
        if resp.error_code:
            detail = f"broker offers {', '.join(resp.mechanisms) or 'none'}" if resp.error_code == 33 else None
            raise broker_error(resp.error_code, broker=self.address, api="SaslHandshake", detail=detail)
        av = self.pick_version(m.SaslAuthenticateRequest)
        password = cfg.sasl_password.get()

        def step(payload: bytes) -> bytes:
            r = self._roundtrip(m.SaslAuthenticateRequest(auth_bytes=payload), av)
            if r.error_code:
                # error_message comes from the broker and may name the user, never the password
                raise broker_error(r.error_code, broker=self.address, api="SaslAuthenticate",
                                   detail=r.error_message)
            return bytes(r.auth_bytes)

        try:
            if mech == "PLAIN":
                step(plain_initial_response(cfg.sasl_username, password))
            else:
                scram = ScramClient(mech, cfg.sasl_username, password)
                server_first = step(scram.first())
                server_final = step(scram.final(server_first))
                scram.verify(server_final)
        except SaslError as exc:
            raise BrokerError(str(exc), error_code=_SASL_AUTH_FAILED, error_name="SASL_AUTHENTICATION_FAILED",
                              broker=self.address, api="SaslAuthenticate") from None

    # -- versions

    def pick_version(self, cls, *, at_least: int | None = None, at_most: int | None = None) -> int:
        """Highest version both sides support (optionally bounded)."""
        theirs = self.api_versions.get(cls.API_KEY)
        lo = cls.VALID_VERSIONS.lo
        hi = cls.VALID_VERSIONS.hi
        if at_least is not None:
            lo = max(lo, at_least)
        if at_most is not None:
            hi = min(hi, at_most)
        if theirs is not None:
            lo, hi = max(lo, theirs[0]), min(hi, theirs[1])
        if theirs is None or lo > hi:
            raise broker_error(_UNSUPPORTED_VERSION, broker=self.address, api=m.api_name(cls.API_KEY),
                               detail=f"broker offers {theirs if theirs else 'nothing'}, "
                                      f"we need {lo}-{hi}")
        return hi

    def max_version(self, cls) -> int | None:
        theirs = self.api_versions.get(cls.API_KEY)
        if theirs is None:
            return None
        hi = min(theirs[1], cls.VALID_VERSIONS.hi)
        return hi if hi >= max(theirs[0], cls.VALID_VERSIONS.lo) else None

    # -- requests

    def _roundtrip(self, msg, version: int, timeout_ms: int | None = None):
        sock = self._sock
        if sock is None:
            raise _ConnectionLost("not connected")
        cid = self._next_cid
        self._next_cid = (cid + 1) & 0x7FFFFFFF
        frame = codec.encode_request(msg, version, cid, self.config.client_id)
        timeout = (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms) / 1000
        try:
            sock.settimeout(timeout)
            sock.sendall(frame)
            size = struct.unpack(">i", _recv_exact(sock, 4))[0]
            if size < 4:
                raise ProtocolError(f"response frame size {size} from {self.address}")
            data = _recv_exact(sock, size)
        except socket.timeout:
            self._close_locked()
            raise BrokerError(f"request timed out after {timeout * 1000:.0f} ms",
                              error_code=_REQUEST_TIMED_OUT, error_name="REQUEST_TIMED_OUT",
                              retriable=True, broker=self.address, api=m.api_name(msg.API_KEY)) from None
        except (OSError, _ConnectionLost) as exc:
            self._close_locked()
            raise _ConnectionLost(f"{self.address} ({m.api_name(msg.API_KEY)}): {exc}") from None
        got = codec.peek_correlation_id(data)
        if got != cid:
            # The stream is out of step: nothing later on this socket can be trusted.
            self._close_locked()
            raise _ConnectionLost(f"correlation id {got} from {self.address}, expected {cid} "
                                  f"({m.api_name(msg.API_KEY)})")
        self._last_used = time.monotonic()
        if msg.API_KEY == m.ApiVersionsRequest.API_KEY and version > 0:
            # A broker that does not know our ApiVersions version answers with a v0 body
            # (Kafka's own client falls back the same way).
            try:
                return codec.decode_response(data, type(msg), version)[1]
            except ProtocolError:
                return codec.decode_response(data, type(msg), 0)[1]
        return codec.decode_response(data, type(msg), version)[1]

    def request(self, msg, version: int | None = None, *, timeout_ms: int | None = None):
        """Send one request and return the decoded response (connecting first if needed)."""
        with self._lock:
            idle = self.config.connections_max_idle_ms
            if self._sock is not None and idle and self._last_used and \
                    time.monotonic() - self._last_used > idle / 1000:
                self._close_locked()  # the broker has likely dropped it already
            if self._sock is None:
                self._open()
            if version is None:
                version = self.pick_version(type(msg))
            wait = self._muted_until - time.monotonic()
            if wait > 0:
                # KIP-219: a throttled client sends nothing to that broker until the throttle
                # time has passed (the broker mutes the channel for as long anyway).
                time.sleep(wait)
                self.throttled_s += wait
            resp = self._roundtrip(msg, version, timeout_ms)
            throttle = getattr(resp, "throttle_time_ms", 0) or 0
            if throttle > 0:
                self._muted_until = time.monotonic() + throttle / 1000
            return resp

    def ensure_connected(self):
        with self._lock:
            if self._sock is None:
                self._open()

    def _close_locked(self):
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def close(self):
        with self._lock:
            self._close_locked()

    @property
    def connected(self) -> bool:
        return self._sock is not None


# --- client ----------------------------------------------------------------------------------

class BrokerClient:
    """Synchronous client over a set of brokers.  ``BrokerClient(ClientConfig | dict)``."""

    def __init__(self, config):
        if isinstance(config, dict):
            config = ClientConfig.from_properties(config)
        self.config = config
        self._lock = threading.RLock()
        self._conns: dict = {}         # node id -> BrokerConnection
        self._bootstrap: list = [BrokerConnection(h, p, config) for h, p in config.bootstrap_servers]
        self._brokers: dict = {}       # node id -> BrokerNode
        self._topics: dict = {}        # name -> TopicInfo
        self._ids: dict = {}           # topic id -> name
        self._metadata_at = 0.0
        self.cluster_id = None
        self.controller_id = None

    def __repr__(self):
        return f"BrokerClient({[f'{h}:{p}' for h, p in self.config.bootstrap_servers]})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        with self._lock:
            for c in list(self._conns.values()) + self._bootstrap:
                c.close()
            self._conns.clear()

    # -- plumbing

    def _backoff(self, attempt: int):
        cfg = self.config
        delay = min(cfg.retry_backoff_ms * (2 ** attempt), cfg.retry_backoff_max_ms) / 1000
        time.sleep(delay * random.uniform(0.8, 1.2))

    def _any_connection(self) -> BrokerConnection:
        """A connected broker: a known one first, else the bootstrap list in order."""
        with self._lock:
            candidates = [c for c in self._conns.values() if c.connected] + list(self._conns.values())
        candidates += self._bootstrap
        last = None
        for conn in candidates:
            try:
                conn.ensure_connected()
                return conn
            except (BrokerError, _ConnectionLost) as exc:
                if isinstance(exc, BrokerError) and not exc.retriable:
                    raise
                last = exc
        raise BrokerError(f"no broker reachable ({last})", broker=",".join(c.address for c in self._bootstrap),
                          retriable=True)

    def connection(self, node_id: int) -> BrokerConnection:
        with self._lock:
            conn = self._conns.get(node_id)
            node = self._brokers.get(node_id)
            if conn is not None and node is not None and (conn.host, conn.port) != (node.host, node.port):
                conn.close()  # the broker moved
                conn = None
            if conn is None:
                if node is None:
                    raise BrokerError(f"broker {node_id} is not in the metadata", retriable=True,
                                      error_code=5, error_name="LEADER_NOT_AVAILABLE")
                conn = BrokerConnection(node.host, node.port, self.config, node_id=node_id)
                self._conns[node_id] = conn
            return conn

    def _with_retries(self, api: str, fn, *, topic=None, partition=None):
        """Run ``fn()``; on retriable errors back off, refresh metadata when it is stale, retry."""
        attempt = 0
        while True:
            try:
                return fn()
            except _ConnectionLost as exc:
                err = BrokerError(f"connection lost: {exc}", error_code=_NETWORK_EXCEPTION,
                                  error_name="NETWORK_EXCEPTION", retriable=True, api=api,
                                  topic=topic, partition=partition)
                err.refresh_metadata = True
            except BrokerError as exc:
                if not exc.retriable:
                    raise
                err = exc
            if attempt >= self.config.retries:
                raise err
            log.debug("retrying %s after %s (attempt %d)", api, err, attempt + 1)
            self._backoff(attempt)
            attempt += 1
            if getattr(err, "refresh_metadata", False) or err.error_code in (None, _NETWORK_EXCEPTION):
                self._metadata_at = 0.0  # force a refresh before the next routing decision

    # -- metadata

    def metadata(self, topics: Iterable[str] | None = None, *, topic_ids: Iterable[bytes] = ()):
        """Fetch metadata (all topics when ``topics`` is None and no ids are given), update the
        cache and return the decoded ``MetadataResponse``."""
        names = None if topics is None else list(topics)
        ids = list(topic_ids)

        def run():
            conn = self._any_connection()
            version = conn.pick_version(m.MetadataRequest, at_least=1)
            if ids and version < 12:
                raise broker_error(_UNSUPPORTED_VERSION, broker=conn.address, api="Metadata",
                                   detail="look-up by topic id needs Metadata v12+")
            if names is None and not ids:
                req_topics = None
            else:
                req_topics = [m.MetadataRequest.MetadataRequestTopic(name=n) for n in names or ()]
                req_topics += [m.MetadataRequest.MetadataRequestTopic(topic_id=i, name=None) for i in ids]
            req = m.MetadataRequest(topics=req_topics, allow_auto_topic_creation=False)
            resp = conn.request(req, version)
            self._absorb_metadata(resp)
            return resp

        return self._with_retries("Metadata", run)

    def _absorb_metadata(self, resp):
        with self._lock:
            self._brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
            self.cluster_id = resp.cluster_id
            self.controller_id = resp.controller_id
            for t in resp.topics:
                name = t.name if t.name is not None else self._ids.get(t.topic_id)
                if name is None:
                    continue
                if t.error_code:
                    self._topics.pop(name, None)
                    continue
                parts = {p.partition_index: PartitionInfo(p.partition_index, p.leader_id, p.leader_epoch,
                                                          tuple(p.replica_nodes), tuple(p.isr_nodes), p.error_code)
                         for p in t.partitions}
                self._topics[name] = TopicInfo(name, t.topic_id, parts)
                if t.topic_id != ZERO_UUID:
                    self._ids[t.topic_id] = name
            self._metadata_at = time.monotonic()

    def _stale(self) -> bool:
        return (not self._metadata_at or
                time.monotonic() - self._metadata_at > self.config.metadata_max_age_ms / 1000)

    def topic(self, name_or_id, *, refresh: bool = False) -> TopicInfo:
        """Cached topic metadata by name or by 16-byte topic id (fetched when missing/stale)."""
        by_id = isinstance(name_or_id, (bytes, bytearray))
        with self._lock:
            name = self._ids.get(bytes(name_or_id)) if by_id else name_or_id
            info = self._topics.get(name) if name else None
        if info is None or refresh or self._stale():
            resp = self.metadata(topic_ids=[bytes(name_or_id)]) if by_id else self.metadata([name_or_id])
            for t in resp.topics:
                if (by_id and t.topic_id == bytes(name_or_id)) or (not by_id and t.name == name_or_id):
                    if t.error_code:
                        raise broker_error(t.error_code, api="Metadata",
                                           topic=t.name or str(name_or_id))
            with self._lock:
                name = self._ids.get(bytes(name_or_id)) if by_id else name_or_id
                info = self._topics.get(name) if name else None
            if info is None:
                raise broker_error(3 if not by_id else 100, api="Metadata", topic=str(name_or_id))
        return info

    def _topic_name(self, topic) -> str:
        """Routing works by name or by 16-byte topic id."""
        if isinstance(topic, (bytes, bytearray)):
            return self.topic(bytes(topic)).name
        return topic

    def leader(self, topic, partition: int) -> BrokerConnection:
        topic = self._topic_name(topic)
        info = self.topic(topic)
        p = info.partitions.get(partition)
        if p is None:
            info = self.topic(topic, refresh=True)
            p = info.partitions.get(partition)
            if p is None:
                raise broker_error(3, api="Metadata", topic=topic, partition=partition,
                                   detail=f"topic has {len(info.partitions)} partitions")
        if p.error_code or p.leader < 0:
            raise broker_error(p.error_code or 5, api="Metadata", topic=topic, partition=partition)
        return self.connection(p.leader)

    def supported_versions(self, node_id: int | None = None) -> dict:
        """Negotiated ``{api name: highest common version}`` for a broker (any when None)."""
        conn = self._any_connection() if node_id is None else self.connection(node_id)
        conn.ensure_connected()
        out = {}
        for key, req in m.REQUESTS.items():
            v = conn.max_version(req)
            if v is not None:
                out[m.api_name(key)] = v
        return out

    def fetch_version(self, topic, partition: int) -> int:
        """The Fetch version this client would use against the partition's leader."""
        topic = self._topic_name(topic)
        conn = self.leader(topic, partition)
        conn.ensure_connected()
        return self._fetch_version(conn, self.topic(topic))

    def supports_kip1248(self, topic: str, partition: int) -> bool:
        """False when the leader's highest common Fetch version is below 12: no tagged field can
        be sent, so direct reads of tiered segments cannot be asked for."""
        return self.fetch_version(topic, partition) >= kip1248.MIN_FETCH_VERSION

    @staticmethod
    def _fetch_version(conn: BrokerConnection, info: TopicInfo) -> int:
        at_most = None
        if info.topic_id == ZERO_UUID:
            at_most = 12  # v13+ address topics by id only
        return conn.pick_version(m.FetchRequest, at_most=at_most)

    # -- ListOffsets

    def list_offsets(self, topic, timestamps: dict, *, isolation_level: int | None = None) -> dict:
        """``{partition: timestamp}`` -> ``{partition: ListedOffset}``.  Timestamps: ms since the
        epoch, or EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3), EARLIEST_LOCAL (-4),
        LATEST_TIERED (-5), EARLIEST_PENDING_UPLOAD (-6) where the broker's version allows."""
        topic = self._topic_name(topic)
        iso = self.config.isolation_level if isolation_level is None else isolation_level
        need = max([_SPECIAL_TIMESTAMP_MIN_VERSION.get(ts, 1) for ts in timestamps.values()] + [2 if iso else 1])
        result: dict = {}
        pending = dict(timestamps)

        def run():
            by_leader: dict = {}
            for p, ts in pending.items():
                by_leader.setdefault(self.leader(topic, p), {})[p] = ts
            for conn, parts in by_leader.items():
                conn.ensure_connected()
                top = conn.max_version(m.ListOffsetsRequest)
                if top is None or top < need:
                    raise broker_error(_UNSUPPORTED_VERSION, broker=conn.address, api="ListOffsets",
                                       topic=topic, detail=f"needs ListOffsets v{need}+, broker offers "
                                                           f"{conn.api_versions.get(m.ListOffsetsRequest.API_KEY)}")
                version = conn.pick_version(m.ListOffsetsRequest, at_least=need)
                leader_epochs = self._topics.get(topic)
                req = m.ListOffsetsRequest(replica_id=-1, isolation_level=iso, timeout_ms=self.config.request_timeout_ms,
                                           topics=[m.ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                                               m.ListOffsetsRequest.ListOffsetsPartition(
                                                   partition_index=p, timestamp=ts,
                                                   current_leader_epoch=(leader_epochs.partitions[p].leader_epoch
                                                                         if leader_epochs and p in leader_epochs.partitions else -1))
                                               for p, ts in sorted(parts.items())])])
                resp = conn.request(req, version)
                for t in resp.topics:
                    for p in t.partitions:
                        if p.error_code:
                            raise broker_error(p.error_code, broker=conn.address, api="ListOffsets",
                                               topic=topic, partition=p.partition_index)
                        result[p.partition_index] = ListedOffset(p.partition_index, p.offset, p.timestamp, p.leader_epoch)
                        pending.pop(p.partition_index, None)
            missing = [p for p in pending if p not in result]
            if missing:
                raise BrokerError(f"no answer for partitions {missing}", api="ListOffsets", topic=topic)
            return result

        return self._with_retries("ListOffsets", run, topic=topic)

    # -- Fetch

    def fetch(self, topic, partition: int, offset: int, *, max_bytes: int | None = None,
              partition_max_bytes: int | None = None, max_wait_ms: int | None = None,
              min_bytes: int | None = None, isolation_level: int | None = None,
              current_leader_epoch: int = -1, request_remote_location: bool = False,
              storage_formats: tuple = (kip1248.STORAGE_FORMAT_APACHE_KAFKA_V1,)) -> FetchResult:
        """Sessionless fetch (session id 0, epoch -1) of one partition from its leader.

        With ``request_remote_location`` the KIP-1248 tags are sent when the version allows
        (12+); ``FetchResult.kip1248_requested`` says whether they were.  Partition errors
        raise :class:`BrokerError`; retriable ones are retried after a metadata refresh."""
        topic = self._topic_name(topic)
        cfg = self.config
        iso = cfg.isolation_level if isolation_level is None else isolation_level
        wait = cfg.fetch_max_wait_ms if max_wait_ms is None else max_wait_ms

        def run():
            info = self.topic(topic)
            conn = self.leader(topic, partition)
            conn.ensure_connected()
            version = self._fetch_version(conn, info)
            send_tags = request_remote_location and version >= kip1248.MIN_FETCH_VERSION
            ftopic = m.FetchRequest.FetchTopic(partitions=[m.FetchRequest.FetchPartition(
                partition=partition, fetch_offset=offset, current_leader_epoch=current_leader_epoch,
                partition_max_bytes=cfg.max_partition_fetch_bytes if partition_max_bytes is None else partition_max_bytes)])
            if version >= 13:
                ftopic.topic_id = info.topic_id
            else:
                ftopic.topic = topic
            req = m.FetchRequest(
                replica_id=-1, max_wait_ms=wait, min_bytes=cfg.fetch_min_bytes if min_bytes is None else min_bytes,
                max_bytes=cfg.fetch_max_bytes if max_bytes is None else max_bytes, isolation_level=iso,
                session_id=0, session_epoch=-1, topics=[ftopic], rack_id=cfg.client_rack)
            if send_tags:
                req.remote_log_segment_location_requested = True
                req.supported_storage_format_versions = list(storage_formats)
            # the broker may hold the request for max_wait_ms before answering
            resp = conn.request(req, version, timeout_ms=cfg.request_timeout_ms + wait)
            if resp.error_code:
                raise broker_error(resp.error_code, broker=conn.address, api="Fetch", topic=topic,
                                   partition=partition)
            for t in resp.responses:
                if (version >= 13 and t.topic_id != info.topic_id) or (version < 13 and t.topic != topic):
                    continue
                for p in t.partitions:
                    if p.partition_index != partition:
                        continue
                    if p.error_code:
                        raise broker_error(p.error_code, broker=conn.address, api="Fetch", topic=topic,
                                           partition=partition)
                    return FetchResult(topic, partition, p, version, conn.address, send_tags,
                                       resp.throttle_time_ms or 0)
            raise BrokerError("the fetch response does not contain the partition", broker=conn.address,
                              api="Fetch", topic=topic, partition=partition)

        return self._with_retries("Fetch", run, topic=topic, partition=partition)
