"""SASL/OAUTHBEARER tokens, client side, as Kafka's Java client gets and keeps them (KIP-768).

A :class:`TokenSource` per configuration and process (Kafka's LoginManager shares one login per
JAAS configuration in a JVM) posts the client credentials grant to the token endpoint (Kafka's
ClientCredentialsJwtRetriever: HTTP Basic client id and secret, ``grant_type=client_credentials``
and ``scope``), or reads a token file (``file:`` URLs, Kafka's FileJwtRetriever, read again when
the file changes).  The JWT's claims are checked as Kafka's ClientJwtValidator checks them
(three parts, ``exp`` and the subject claim present; the signature is the broker's business).

A token is refreshed when its refresh time comes, computed as Kafka's
ExpiringCredentialRefreshingLogin does (``sasl.login.refresh.window.factor`` + jitter of the
lifetime, kept ``sasl.login.refresh.buffer.seconds`` before expiry and
``sasl.login.refresh.min.period.seconds`` after the login, unless the lifetime is too short for
both); connections re-authenticate with the fresh token before the session the broker granted
ends (KIP-368, ``connection.py``).  Tokens, client secrets and response bodies that may hold them
never reach a log line or an error."""
from __future__ import annotations

import base64
import http.client
import json
import logging
import random
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote, urlencode, urlsplit

from ..errors import SaslError
from ..options.oauth import OAuthConfig
from ..redact import redact_url
from .keystores import StoreOptions, read_truststore
from .tls import set_protocols, trust

log = logging.getLogger(__name__)

#: Kafka's HttpJwtRetriever: these answers are final, anything else is retried
UNRETRYABLE_HTTP = frozenset({400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412, 413, 414, 415, 501, 505})
RETRY_AFTER_FAILED_REFRESH_S = 10      # Kafka's DELAY_SECONDS_BEFORE_NEXT_RETRY_WHEN_RELOGIN_FAILS
MAX_RESPONSE_BYTES = 1 << 20


@dataclass(frozen=True, repr=False)
class BearerToken:
    value: str
    principal: str
    expires_at_ms: int
    issued_at_ms: int | None
    scope: tuple
    received_at_ms: int

    def __repr__(self) -> str:
        return f"BearerToken(principal={self.principal!r}, expires_at_ms={self.expires_at_ms})"

    __str__ = __repr__


def _b64url_json(part: str, what: str):
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        return json.loads(raw)
    except (ValueError, TypeError):
        raise SaslError(f"the access token's {what} is not base64url JSON") from None


def parse_token(value: str, cfg: OAuthConfig, *, now_ms: int | None = None) -> BearerToken:
    """The claims of a serialized JWT, checked as Kafka's ClientJwtValidator checks them."""
    value = value.strip()
    parts = value.split(".")
    if len(parts) != 3:
        raise SaslError(f"the access token is not a JWT: expected three sections (header, payload, signature), "
                        f"found {len(parts)}")
    claims = _b64url_json(parts[1], "payload")
    if not isinstance(claims, dict):
        raise SaslError("the access token's payload is not a JSON object")
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or isinstance(exp, bool):
        raise SaslError("the access token has no numeric 'exp' claim")
    sub = claims.get(cfg.sub_claim)
    if not isinstance(sub, str) or not sub.strip():
        raise SaslError(f"the access token has no '{cfg.sub_claim}' claim (sasl.oauthbearer.sub.claim.name)")
    iat = claims.get("iat")
    scope = claims.get(cfg.scope_claim)
    scopes = tuple(scope.split()) if isinstance(scope, str) else tuple(map(str, scope)) if isinstance(scope, list) else ()
    return BearerToken(value, sub.strip(), int(exp * 1000),
                       int(iat * 1000) if isinstance(iat, (int, float)) and not isinstance(iat, bool) else None,
                       scopes, now_ms if now_ms is not None else int(time.time() * 1000))


def refresh_at_ms(token: BearerToken, cfg: OAuthConfig, *, rng: random.Random | None = None) -> int:
    """When to refresh ``token``: Kafka's ExpiringCredentialRefreshingLogin rule, relative to
    when it was received."""
    now, exp = token.received_at_ms, token.expires_at_ms
    if now > exp:
        return now + RETRY_AFTER_FAILED_REFRESH_S * 1000
    pct = cfg.refresh_window_factor + cfg.refresh_window_jitter * (rng or random).random()
    if now + 1000 * (cfg.refresh_min_period_s + cfg.refresh_buffer_s) > exp:
        return now + int((exp - now) * pct)         # too short-lived for both buffers
    start = token.issued_at_ms if token.issued_at_ms is not None else now
    proposed = start + int((exp - start) * pct)
    proposed = min(proposed, exp - cfg.refresh_buffer_s * 1000)
    return max(proposed, now + cfg.refresh_min_period_s * 1000)


class TokenSource:
    """The current token of one OAuth configuration; thread-safe."""

    def __init__(self, cfg: OAuthConfig):
        self.cfg = cfg
        self._lock = threading.Lock()
        self._token: BearerToken | None = None
        self._refresh_at = 0
        self.fetches = 0          # tokens obtained (for tests and metrics)

    def __repr__(self) -> str:
        return f"TokenSource({redact_url(self.cfg.token_endpoint_url)}, client {self.cfg.client_id!r})"

    def token(self) -> BearerToken:
        """A token that has not expired, refreshed first when its refresh time has come."""
        with self._lock:
            now = int(time.time() * 1000)
            tok = self._token
            if tok is not None and now < self._refresh_at:
                return tok
            try:
                fresh = self._fetch()
            except SaslError as exc:
                if tok is not None and now < tok.expires_at_ms:
                    # Kafka keeps the current credential and tries again later
                    log.warning("OAUTHBEARER token refresh failed (%s); the current token is valid for %.0f s "
                                "more, retrying in %d s", exc, (tok.expires_at_ms - now) / 1000,
                                RETRY_AFTER_FAILED_REFRESH_S)
                    self._refresh_at = now + RETRY_AFTER_FAILED_REFRESH_S * 1000
                    return tok
                raise
            if fresh.expires_at_ms <= fresh.received_at_ms:
                raise SaslError(f"the token from {self._where()} has already expired (exp "
                                f"{fresh.expires_at_ms // 1000})")
            self._token = fresh
            self._refresh_at = refresh_at_ms(fresh, self.cfg)
            self.fetches += 1
            log.info("OAUTHBEARER token for %s from %s, valid %.0f s, refresh in %.0f s", fresh.principal,
                     self._where(), (fresh.expires_at_ms - fresh.received_at_ms) / 1000,
                     (self._refresh_at - fresh.received_at_ms) / 1000)
            return fresh

    def _where(self) -> str:
        return redact_url(self.cfg.token_endpoint_url) or "?"

    def _fetch(self) -> BearerToken:
        if self.cfg.from_file:
            path = self.cfg.file_path
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError as exc:
                raise SaslError(f"sasl.oauthbearer.token.endpoint.url: cannot read the token file {path!r}: "
                                f"{exc.strerror or exc}") from None
            return parse_token(text, self.cfg)
        return parse_token(self._post(), self.cfg)

    def _post(self) -> str:
        """Kafka's Retry: attempts with doubling back-off until retry.backoff.max.ms has passed;
        4xx answers (except the retriable ones) end it at once."""
        cfg = self.cfg
        deadline = time.monotonic() + cfg.retry_backoff_max_ms / 1000
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._post_once()
            except _Retriable as exc:
                wait = min(cfg.retry_backoff_ms * 2 ** (attempt - 1) / 1000, deadline - time.monotonic())
                if wait <= 0:
                    raise SaslError(f"no token from {self._where()} after {attempt} attempts: {exc}") from None
                time.sleep(wait)

    def _post_once(self) -> str:
        cfg = self.cfg
        parts = urlsplit(cfg.token_endpoint_url)
        host = parts.hostname or ""          # checked when the options were parsed
        client_id, secret = cfg.client_id or "", cfg.client_secret.get() if cfg.client_secret else ""
        if cfg.header_urlencode:
            client_id, secret = quote(client_id, safe=""), quote(secret, safe="")
        basic = base64.b64encode(f"{client_id}:{secret}".encode("utf-8")).decode("ascii")
        body = {"grant_type": "client_credentials"}
        if cfg.scope:
            body["scope"] = cfg.scope
        headers = {"Authorization": f"Basic {basic}", "Accept": "application/json", "Cache-Control": "no-cache",
                   "Content-Type": "application/x-www-form-urlencoded"}
        timeout = cfg.connect_timeout_ms / 1000
        if parts.scheme.lower() == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, parts.port, timeout=timeout, context=endpoint_tls(cfg))
        else:
            conn = http.client.HTTPConnection(host, parts.port, timeout=timeout)
        try:
            conn.connect()
            if conn.sock is not None:
                conn.sock.settimeout(cfg.read_timeout_ms / 1000)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            conn.request("POST", path, urlencode(body), headers)
            resp = conn.getresponse()
            data = resp.read(MAX_RESPONSE_BYTES)
        except ssl.SSLError as exc:
            raise SaslError(f"TLS to the token endpoint {self._where()} failed: {exc.reason or exc} (its CA goes "
                            f"in sasl.jaas.config as ssl.truststore.location or ssl.truststore.certificates)") from None
        except (OSError, http.client.HTTPException) as exc:
            raise _Retriable(f"{type(exc).__name__}: {exc}") from None
        finally:
            conn.close()
        if resp.status in (200, 201):
            try:
                token = json.loads(data).get("access_token")
            except (ValueError, AttributeError):
                token = None
            if not isinstance(token, str) or not token.strip():
                raise SaslError(f"the answer of the token endpoint {self._where()} has no access_token")
            return token
        detail = _oauth_error(data)
        if resp.status in UNRETRYABLE_HTTP:
            hint = (" (check clientId and clientSecret in sasl.jaas.config)" if resp.status in (400, 401, 403)
                    else "")
            raise SaslError(f"the token endpoint {self._where()} answered HTTP {resp.status} {detail}{hint}")
        raise _Retriable(f"HTTP {resp.status} {detail}")


class _Retriable(Exception):
    pass


def _oauth_error(data: bytes) -> str:
    """RFC 6749 5.2's error and description only: the rest of a body may echo credentials."""
    try:
        doc = json.loads(data)
    except ValueError:
        return "{}"
    if not isinstance(doc, dict):
        return "{}"
    err = str(doc.get("error") or doc.get("errorCode") or "")[:100]
    desc = str(doc.get("error_description") or doc.get("errorSummary") or "")[:300]
    return f"{{{err} - {desc}}}" if err else "{}"


def endpoint_tls(cfg: OAuthConfig) -> ssl.SSLContext:
    """The token endpoint's TLS context: the JAAS ``ssl.*`` options (Kafka's JaasOptionsUtils),
    else the system's CAs."""
    opts = {k: (v.get() if hasattr(v, "get") else v) for k, v in cfg.tls}
    names = {"type": "ssl.truststore.type (in sasl.jaas.config)",
             "location": "ssl.truststore.location (in sasl.jaas.config)",
             "password": "ssl.truststore.password (in sasl.jaas.config)",
             "certificates": "ssl.truststore.certificates (in sasl.jaas.config)"}
    store = StoreOptions(type=opts.get("ssl.truststore.type"), location=opts.get("ssl.truststore.location"),
                         password=opts.get("ssl.truststore.password"),
                         inline_certificates=opts.get("ssl.truststore.certificates"), names=names)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = str(opts.get("ssl.endpoint.identification.algorithm", "https")).strip().lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    set_protocols(ctx, (), "ssl.enabled.protocols")
    trusted = read_truststore(store)
    if trusted is None:
        ctx.load_default_certs()
    else:
        trust(ctx, trusted, store)
    return ctx


_sources: dict = {}
_sources_lock = threading.Lock()


def token_source(cfg: OAuthConfig) -> TokenSource:
    """The process's token source for ``cfg`` (one login per configuration, as in Kafka)."""
    with _sources_lock:
        src = _sources.get(cfg)
        if src is None:
            src = _sources[cfg] = TokenSource(cfg)
        return src


def forget_tokens() -> None:
    """Drop every cached token (tests; a process that changed credentials)."""
    with _sources_lock:
        _sources.clear()


__all__ = ["BearerToken", "TokenSource", "endpoint_tls", "forget_tokens", "parse_token", "refresh_at_ms",
           "token_source"]
