"""One socket to one broker: TLS and SASL set-up, ApiVersions negotiation, and requests: one at
a time (the lock is held from send to receive), or pipelined by :meth:`BrokerConnection.exchange`
(several in flight, answered in order, as Kafka answers one connection).  The correlation id of
every response is checked.  :class:`~.client.BrokerClient` routes requests over these.

When the broker grants a SASL session a lifetime (SaslAuthenticate v1+, KIP-368: an OAUTHBEARER
token's expiry, or ``connections.max.reauth.ms``), the connection re-authenticates on the same
socket before sending anything once 85-95% of it has passed, as Kafka's client does; a broker
closes a connection whose session ended with anything but a re-authentication."""
from __future__ import annotations

import random
import socket
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from ..errors import BrokerError, ProtocolError, TokenExpiredError
from ..logs import get_logger
from ..options.client import ClientConfig
from . import codec, messages as m
from .errors import broker_error

if TYPE_CHECKING:
    from .tls import ClientTls


class _NotTLS(Exception):
    """Stands for ``ssl.SSLError`` in a process that never loaded ``ssl``: no socket of it can
    raise one.  TLS, SASL and OAuth are imported by the connections that use them, so a plain
    connection's process pays for none of them (a new process's first plan, issue 36)."""


def _ssl_error() -> type[Exception]:
    mod = sys.modules.get("ssl")
    return mod.SSLError if mod is not None else _NotTLS

log = get_logger(__name__)

UNSUPPORTED_VERSION = 35
SASL_AUTH_FAILED = 58
REQUEST_TIMED_OUT = 7
NETWORK_EXCEPTION = 13


class ConnectionLost(Exception):
    """Internal: the socket failed or closed mid-request (always retried on a new socket)."""


def recv_exact(sock, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionLost("connection closed by the broker")
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
        self._sock: socket.socket | None = None
        self._next_cid = random.randrange(1 << 20)
        self.api_versions: dict = {}
        self.features: dict = {}   # ApiVersions' SupportedFeatures: name -> (min, max)
        self._last_used = 0.0
        self._muted_until = 0.0    # monotonic time before which nothing is sent (broker throttle)
        self.throttled_s = 0.0     # time spent waiting out broker throttles
        self._reauth_at: float | None = None   # monotonic time to re-authenticate at (KIP-368), if the session ends
        self.reauthentications = 0
        # Stores are read now, so a wrong password or a missing file fails the client's creation
        # (the planner's) rather than a task's connection; the context is shared per process.
        self._tls: ClientTls | None = None
        if config.uses_ssl:
            from . import tls
            self._tls = tls.client_tls(config.tls)
        self._tokens = None
        if config.oauth is not None and config.uses_sasl and config.sasl_mechanism == "OAUTHBEARER":
            from .oauth import token_source
            self._tokens = token_source(config.oauth)

    def __repr__(self):
        return f"BrokerConnection({self.address}, node {self.node_id})"

    # -- setup

    def _open(self):
        cfg = self.config
        # An ASCII name as bytes: getaddrinfo encodes a str with the "idna" codec, whose import
        # (encodings.idna, stringprep) a new process would pay at its first connection (issue 36).
        host: Any = self.host.encode("ascii") if self.host.isascii() else self.host
        try:
            sock = socket.create_connection((host, self.port), timeout=cfg.connect_timeout_ms / 1000)
        except OSError as exc:
            raise BrokerError(f"cannot connect: {exc.strerror or exc}", broker=self.address,
                              retriable=True) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._tls.wrap(sock, self.host)      # the handshake and the host-name rule
        except _ssl_error() as exc:
            import ssl

            from . import tls
            assert isinstance(exc, ssl.SSLError)     # _ssl_error() is ssl's once a context exists
            sock.close()
            # an end of stream may be a restart (retried); a refusal is final
            raise BrokerError(f"TLS handshake failed: {tls.describe_failure(exc, cfg, self.host)}",
                              broker=self.address, retriable=isinstance(exc, ssl.SSLEOFError)) from None
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
            if resp.error_code == UNSUPPORTED_VERSION:
                # The broker answered in v0 and listed what it does take for ApiVersions.
                theirs = {k.api_key: k for k in resp.api_keys}.get(m.ApiVersionsRequest.API_KEY)
                if theirs is None or version <= theirs.max_version:
                    break
                version = max(theirs.max_version, 0)
                continue
            if resp.error_code:
                raise broker_error(resp.error_code, broker=self.address, api="ApiVersions")
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            self.features = {f.name: (f.min_version, f.max_version) for f in (resp.supported_features or ())}
            return
        raise broker_error(UNSUPPORTED_VERSION, broker=self.address, api="ApiVersions")

    def _authenticate(self):
        from .sasl import SaslError, ScramClient, oauthbearer_initial_response, plain_initial_response
        cfg = self.config
        mech = cfg.sasl_mechanism
        hs_version = self.pick_version(m.SaslHandshakeRequest, at_least=1)
        resp = self._roundtrip(m.SaslHandshakeRequest(mechanism=mech), hs_version)
        if resp.error_code:
            detail = f"broker offers {', '.join(resp.mechanisms) or 'none'}" if resp.error_code == 33 else None
            raise broker_error(resp.error_code, broker=self.address, api="SaslHandshake", detail=detail)
        av = self.pick_version(m.SaslAuthenticateRequest)
        lifetime = [0]

        def step(payload: bytes) -> bytes:
            r = self._roundtrip(m.SaslAuthenticateRequest(auth_bytes=payload), av)
            if r.error_code:
                # error_message comes from the broker and may name the user, never a secret
                raise broker_error(r.error_code, broker=self.address, api="SaslAuthenticate",
                                   detail=r.error_message)
            lifetime[0] = getattr(r, "session_lifetime_ms", 0) or 0
            return bytes(r.auth_bytes)

        try:
            if mech == "OAUTHBEARER":
                if self._tokens is None or cfg.oauth is None:   # ClientConfig requires both
                    raise SaslError("SASL/OAUTHBEARER without a token endpoint")
                token = self._tokens.token()
                challenge = step(oauthbearer_initial_response(token.value, cfg.oauth.extensions))
                if challenge:
                    # RFC 7628: the server's error comes as a challenge; the client answers
                    # with a lone \x01 and the server then fails the exchange.
                    step(b"\x01")
                    raise SaslError(f"the broker refused the OAUTHBEARER token of {token.principal!r}")
            elif mech == "PLAIN":
                step(plain_initial_response(*cfg.sasl_credentials()))
            else:
                scram = ScramClient(mech, *cfg.sasl_credentials())
                server_first = step(scram.first())
                server_final = step(scram.final(server_first))
                scram.verify(server_final)
        except TokenExpiredError:
            raise                   # no credential to offer: not the broker's refusal
        except SaslError as exc:
            raise BrokerError(str(exc), error_code=SASL_AUTH_FAILED, error_name="SASL_AUTHENTICATION_FAILED",
                              broker=self.address, api="SaslAuthenticate") from None
        # KIP-368: re-authenticate at 85-95% of the session the broker granted (0: none)
        self._reauth_at = (time.monotonic() + lifetime[0] / 1000 * (0.85 + 0.10 * random.random())
                           if lifetime[0] > 0 else None)

    def _reauth_due(self) -> bool:
        return self._reauth_at is not None and self._sock is not None and time.monotonic() >= self._reauth_at

    def _reauthenticate(self):
        """KIP-368 on this socket (nothing in flight): the same mechanism, a current credential."""
        log.debug("re-authenticating with %s (SASL %s)", self.address, self.config.sasl_mechanism)
        try:
            self._authenticate()
        except BaseException:
            self._close_locked()
            raise
        self.reauthentications += 1

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
            raise broker_error(UNSUPPORTED_VERSION, broker=self.address, api=m.api_name(cls.API_KEY),
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
        return self._receive(msg, version, self._send(msg, version, timeout_ms), timeout_ms)

    def _send(self, msg, version: int, timeout_ms: int | None = None, encode=None) -> int:
        """Write one request frame; its correlation id.  ``encode(msg, version, correlation id,
        client id)``, when given, makes the frame instead of the codec."""
        sock = self._sock
        if sock is None:
            raise ConnectionLost("not connected")
        cid = self._next_cid
        self._next_cid = (cid + 1) & 0x7FFFFFFF
        frame = (encode or codec.encode_request)(msg, version, cid, self.config.client_id)
        try:
            sock.settimeout(self._timeout(timeout_ms))
            sock.sendall(frame)
        except socket.timeout:
            self._timed_out(msg, timeout_ms)
        except _ssl_error() as exc:
            self._tls_failed(exc, msg)
        except OSError as exc:
            self._close_locked()
            raise ConnectionLost(f"{self.address} ({m.api_name(msg.API_KEY)}): {exc}") from None
        return cid

    def _timeout(self, timeout_ms: int | None) -> float:
        return (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms) / 1000

    def _timed_out(self, msg, timeout_ms):
        self._close_locked()
        raise BrokerError(f"request timed out after {self._timeout(timeout_ms) * 1000:.0f} ms",
                          error_code=REQUEST_TIMED_OUT, error_name="REQUEST_TIMED_OUT",
                          retriable=True, broker=self.address, api=m.api_name(msg.API_KEY)) from None

    def _tls_failed(self, exc: Exception, msg):
        """A TLS error after the handshake.  With TLS 1.3 the broker's verdict on the client
        certificate arrives here, as an alert on the first read: that is final.  A bare end of
        stream is an ordinary lost connection."""
        import ssl

        from . import tls
        self._close_locked()
        if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            raise ConnectionLost(f"{self.address} ({m.api_name(msg.API_KEY)}): {exc}") from None
        assert isinstance(exc, ssl.SSLError)
        raise BrokerError(f"TLS failed: {tls.describe_failure(exc, self.config, self.host)}",
                          broker=self.address, api=m.api_name(msg.API_KEY)) from None

    def _receive(self, msg, version: int, cid: int, timeout_ms: int | None = None, decode=None):
        """Read and decode the response to the request ``cid`` (the next one on the socket:
        a broker answers the requests of one connection in the order they were sent).
        ``decode(frame, version)``, when given, decodes it instead of the codec."""
        sock = self._sock
        if sock is None:
            raise ConnectionLost("not connected")
        try:
            sock.settimeout(self._timeout(timeout_ms))
            size = struct.unpack(">i", recv_exact(sock, 4))[0]
            if size < 4:
                raise ProtocolError(f"response frame size {size} from {self.address}")
            data = recv_exact(sock, size)
        except socket.timeout:
            self._timed_out(msg, timeout_ms)
        except _ssl_error() as exc:
            self._tls_failed(exc, msg)
        except (OSError, ConnectionLost) as exc:
            self._close_locked()
            raise ConnectionLost(f"{self.address} ({m.api_name(msg.API_KEY)}): {exc}") from None
        got = codec.peek_correlation_id(data)
        if got != cid:
            # The stream is out of step: nothing later on this socket can be trusted.
            self._close_locked()
            raise ConnectionLost(f"correlation id {got} from {self.address}, expected {cid} "
                                  f"({m.api_name(msg.API_KEY)})")
        self._last_used = time.monotonic()
        if decode is not None:
            return decode(data, version)
        if msg.API_KEY == m.ApiVersionsRequest.API_KEY and version > 0:
            # A broker that does not know our ApiVersions version answers with a v0 body
            # (Kafka's own client falls back the same way).
            try:
                return codec.decode_response(data, type(msg), version)[1]
            except ProtocolError:
                return codec.decode_response(data, type(msg), 0)[1]
        return codec.decode_response(data, type(msg), version)[1]

    def exchange(self, first, step, version: int, *, timeout_ms: int | None = None, encode=None,
                 decode=None) -> None:
        """Pipelined requests of one API and version: send every request of ``first`` at once,
        then, as each response arrives, call ``step(response, request)``, which returns the
        follow-up requests to send (the broker works on the next request while this side decodes
        the last answer).  Returns when nothing is in flight.  A broker throttle (KIP-219) delays
        the follow-ups; an error closes the connection, whatever was in flight is lost, and the
        caller starts over from what its ``step`` calls have recorded.  ``encode`` and ``decode``
        as :meth:`_send` and :meth:`_receive` take them."""
        from collections import deque
        with self._lock:
            self._ready()
            inflight: deque = deque()
            for msg in first:
                inflight.append((msg, self._send(msg, version, timeout_ms, encode)))
            while inflight:
                msg, cid = inflight.popleft()
                resp = self._receive(msg, version, cid, timeout_ms, decode)
                self._throttled(resp)
                follow = step(resp, msg)
                if follow:
                    self._wait_throttle()
                    if self._reauth_due():
                        # KIP-368: re-authentication waits until nothing is in flight
                        while inflight:
                            msg, cid = inflight.popleft()
                            resp = self._receive(msg, version, cid, timeout_ms, decode)
                            self._throttled(resp)
                            follow = list(follow) + list(step(resp, msg) or ())
                        self._reauthenticate()
                    for nxt in follow:
                        inflight.append((nxt, self._send(nxt, version, timeout_ms, encode)))

    def _ready(self):
        idle = self.config.connections_max_idle_ms
        if self._sock is not None and idle and self._last_used and \
                time.monotonic() - self._last_used > idle / 1000:
            self._close_locked()  # the broker has likely dropped it already
        if self._sock is None:
            self._open()
        elif self._reauth_due():
            self._reauthenticate()

    def _wait_throttle(self):
        wait = self._muted_until - time.monotonic()
        if wait > 0:
            # KIP-219: a throttled client sends nothing to that broker until the throttle
            # time has passed (the broker mutes the channel for as long anyway).
            time.sleep(wait)
            self.throttled_s += wait

    def _throttled(self, resp):
        throttle = getattr(resp, "throttle_time_ms", 0) or 0
        if throttle > 0:
            self._muted_until = time.monotonic() + throttle / 1000

    def request(self, msg, version: int | None = None, *, timeout_ms: int | None = None):
        """Send one request and return the decoded response (connecting first if needed)."""
        with self._lock:
            self._ready()
            if version is None:
                version = self.pick_version(type(msg))
            self._wait_throttle()
            resp = self._roundtrip(msg, version, timeout_ms)
            self._throttled(resp)
            return resp

    def ensure_connected(self):
        with self._lock:
            if self._sock is None:
                self._open()

    def _close_locked(self):
        self._reauth_at = None
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
