"""SASL/OAUTHBEARER tokens, client side, as Kafka's Java client gets and keeps them (KIP-768).

A :class:`TokenSource` per configuration and process (Kafka's LoginManager shares one login per
JAAS configuration in a JVM) posts the client credentials grant to the token endpoint (Kafka's
ClientCredentialsJwtRetriever: HTTP Basic client id and secret, ``grant_type=client_credentials``
and ``scope``), or reads a token file (``file:`` URLs, Kafka's FileJwtRetriever, read again when
the file changes).  The JWT's claims are checked as Kafka's ClientJwtValidator checks them
(three parts, ``exp`` and the subject claim present; the signature is the broker's business).

A token is refreshed in the background when its refresh time comes, computed as Kafka's
ExpiringCredentialRefreshingLogin does (``sasl.login.refresh.window.factor`` + jitter of the
lifetime, kept ``sasl.login.refresh.buffer.seconds`` before expiry and
``sasl.login.refresh.min.period.seconds`` after the login, unless the lifetime is too short for
both), while connections keep using the valid one; they re-authenticate with the fresh token
before the session the broker granted ends (KIP-368, ``connection.py``).  The token endpoint's
TLS is ``tls.client_tls``'s, from the ``ssl.*`` options in ``sasl.jaas.config``.  Tokens, client secrets and response bodies that may hold them
never reach a log line or an error."""
from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import random
import ssl
import threading
import time
from urllib.parse import quote, urlencode, urlsplit

from ..dataclass import dataclass
from ..errors import SaslError, TokenExpiredError
from ..options.oauth import OAuthConfig
from ..redact import redact_url
from .tls import client_tls

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


def _now_ms() -> int:
    return int(time.time() * 1000)


def _when(ms: int | None) -> str:
    return "?" if ms is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


class TokenSource:
    """The current token of one OAuth configuration, and its refresher; thread-safe.

    As Kafka's ExpiringCredentialRefreshingLogin: the first caller logs in (fetches a token);
    from then on a daemon thread fetches the next token at :func:`refresh_at_ms` while callers
    (new connections, KIP-368 re-authentications) get the valid one at once.  No lock is held
    across HTTP or a sleep: one fetch runs at a time, and only a caller with no valid token to
    use waits for it.

    A refresh that fails (each try is Kafka's Retry, :meth:`_post`) is tried again after
    ``sasl.login.retry.backoff.ms``, doubling up to ``sasl.login.retry.backoff.max.ms`` (Kafka
    waits a fixed 10 s, the default maximum), for as long as the token lasts; an ERROR says when
    it expired.  A caller then tries once more (at most once per back-off) and gets
    :class:`~kafka_tiered_source.errors.TokenExpiredError` when that fails too.  A refresher
    whose token no one used since its last refresh stops at the next refresh time, so an idle
    process does not keep logging in; the next caller starts it again."""

    def __init__(self, cfg: OAuthConfig):
        self.cfg = cfg
        self._cond = threading.Condition(threading.Lock())
        self._token: BearerToken | None = None
        self._refresh_at = 0            # epoch ms of the refresher's next fetch
        self._fetching = False          # a fetch is running (without the lock)
        self._done = 0                  # fetches finished, either way
        self._failure: SaslError | None = None   # the last fetch's error; None after a token
        self._failures = 0              # failed fetches since the last token
        self._failed_since: int | None = None
        self._retry_at = 0              # after a failure, no caller fetches before this
        self._used = False              # token() was asked since the refresher's last token
        self._refresher: threading.Thread | None = None
        self._closed = False
        self.fetches = 0                # tokens obtained (for tests and metrics)
        self.failed_fetches = 0

    def __repr__(self) -> str:
        return f"TokenSource({redact_url(self.cfg.token_endpoint_url)}, client {self.cfg.client_id!r})"

    def token(self) -> BearerToken:
        """A token that has not expired: the current one while it lasts (its refresh runs in the
        background), else a new one.  Raises :class:`SaslError` when the first login fails and
        :class:`TokenExpiredError` when the token expired and no new one can be had."""
        with self._cond:
            while True:
                now = _now_ms()
                held = self._token
                if held is not None and now < held.expires_at_ms:
                    self._used = True
                    if now >= self._refresh_at:
                        self._start_refresher()       # its time came while it was stopped
                    return held
                if self._fetching:                    # wait for that fetch, then use its outcome
                    done = self._done
                    while self._fetching and self._done == done:
                        self._cond.wait()
                    if self._failure is not None and self._done != done:
                        raise self._no_token(held)
                    continue
                if self._failure is not None and now < self._retry_at:
                    raise self._no_token(held)         # it failed a moment ago: back off
                self._fetching = True
                break
        try:
            fresh = self._fetch_valid()
        except BaseException as exc:
            with self._cond:
                self._failed(exc if isinstance(exc, SaslError) else SaslError(f"{type(exc).__name__}"))
                error = self._no_token(held)
            if isinstance(exc, SaslError):
                raise error from None
            raise
        with self._cond:
            self._install(fresh, used=True)
            self._start_refresher()
        return fresh

    def close(self) -> None:
        """Stop the refresher (the token stays usable until it expires)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- state changes (under the lock)

    def _install(self, fresh: BearerToken, *, used: bool) -> None:
        self._token = fresh
        self._refresh_at = refresh_at_ms(fresh, self.cfg)
        self._fetching, self._done, self._used = False, self._done + 1, used
        self._failure, self._failures, self._failed_since, self._retry_at = None, 0, None, 0
        self.fetches += 1
        self._cond.notify_all()
        log.info("OAUTHBEARER token for %s from %s, valid %.0f s, refresh in %.0f s", fresh.principal,
                 self._where(), (fresh.expires_at_ms - fresh.received_at_ms) / 1000,
                 (self._refresh_at - fresh.received_at_ms) / 1000)

    def _failed(self, exc: SaslError) -> int:
        """Record a failed fetch; the back-off (ms) before the next one."""
        now = _now_ms()
        self._fetching, self._done = False, self._done + 1
        self._failure, self._failures = exc, self._failures + 1
        self.failed_fetches += 1
        if self._failed_since is None:
            self._failed_since = now
        backoff = min(self.cfg.retry_backoff_ms * 2 ** min(self._failures - 1, 30), self.cfg.retry_backoff_max_ms)
        self._retry_at = self._refresh_at = now + backoff
        self._cond.notify_all()
        return backoff

    def _no_token(self, held: BearerToken | None) -> SaslError:
        reason = str(self._failure or "no token")
        if held is None:                    # the first login failed: its own words
            return SaslError(reason)
        return TokenExpiredError(
            f"the OAUTHBEARER token of {held.principal!r} expired at {_when(held.expires_at_ms)} and the token "
            f"endpoint {self._where()} gave no new one: {self._failures} tries since {_when(self._failed_since)} "
            f"failed (retried with sasl.login.retry.backoff.ms / .max.ms); the last: {reason}",
            principal=held.principal, expired_at_ms=held.expires_at_ms, attempts=self._failures, reason=reason)

    def _start_refresher(self) -> None:
        if self._closed:
            return
        thread = self._refresher
        if thread is not None and thread.is_alive():
            self._cond.notify_all()
            return
        principal = self._token.principal if self._token is not None else "?"
        self._refresher = threading.Thread(target=self._refresh_loop, daemon=True,
                                           name=f"kafka-tiered-oauth-refresh-{principal}")
        self._refresher.start()

    # -- the refresher thread

    def _refresh_due(self) -> bool:
        """Under the lock: wait until a refresh is due (True) or the refresher must stop (False)."""
        me = threading.current_thread()
        while True:
            if self._closed or self._refresher is not me:
                return False
            now, held = _now_ms(), self._token
            if held is None or now >= held.expires_at_ms:
                if held is not None and self._failure is not None:
                    log.error("the OAUTHBEARER token of %s expired at %s; %d refreshes from %s since %s failed "
                              "(the last: %s): connections fail until it answers", held.principal,
                              _when(held.expires_at_ms), self._failures, self._where(),
                              _when(self._failed_since), self._failure)
                self._refresher = None
                return False
            if self._fetching:
                self._cond.wait()
            elif now >= self._refresh_at:
                if not self._used:
                    log.debug("no connection used the OAUTHBEARER token of %s since its refresh: the refresher "
                              "stops until one does", held.principal)
                    self._refresher = None
                    return False
                self._fetching = True
                return True
            else:
                self._cond.wait((min(self._refresh_at, held.expires_at_ms) - now) / 1000)

    def _refresh_loop(self) -> None:
        while True:
            with self._cond:
                if not self._refresh_due():
                    return
            try:
                fresh = self._fetch_valid()
            except SaslError as exc:
                with self._cond:
                    backoff = self._failed(exc)
                    held = self._token
                    left = (held.expires_at_ms - _now_ms()) if held is not None else 0
                log.warning("OAUTHBEARER token refresh from %s failed (%s); the current token is valid for %.1f s "
                            "more, next try in %.1f s", self._where(), exc, max(left, 0) / 1000, backoff / 1000)
                continue
            except BaseException:
                with self._cond:
                    self._fetching, self._done, self._refresher = False, self._done + 1, None
                    self._cond.notify_all()
                raise
            with self._cond:
                self._install(fresh, used=False)

    # -- fetching (no lock held)

    def _fetch_valid(self) -> BearerToken:
        fresh = self._fetch()
        if fresh.expires_at_ms <= fresh.received_at_ms:
            raise SaslError(f"the token from {self._where()} has already expired (exp "
                            f"{fresh.expires_at_ms // 1000})")
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
            conn: http.client.HTTPConnection = client_tls(cfg.tls).https_connection(host, parts.port,
                                                                                    timeout=timeout)
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
        except ssl.SSLCertVerificationError as exc:
            if exc.verify_code in (62, 64):
                raise SaslError(f"TLS to the token endpoint {self._where()} failed: its certificate does not name "
                                f"the host {host!r} ({exc.verify_message}); ssl.endpoint.identification.algorithm "
                                f"in sasl.jaas.config sets the rule") from None
            raise SaslError(f"TLS to the token endpoint {self._where()} failed: {exc.verify_message or exc.reason} "
                            f"(its CA goes in sasl.jaas.config as ssl.truststore.location or "
                            f"ssl.truststore.certificates)") from None
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
    """The token endpoint's SSLContext: the JAAS ``ssl.*`` options (Kafka's JaasOptionsUtils),
    else the system's CAs (``client_tls(cfg.tls)``'s, which also applies the host-name rule)."""
    return client_tls(cfg.tls).context


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
    """Drop every cached token and stop the refreshers (tests; a process that changed
    credentials)."""
    with _sources_lock:
        sources = list(_sources.values())
        _sources.clear()
    for src in sources:
        src.close()


def _after_fork_in_child() -> None:
    # a forked worker (Spark's daemon forks them) starts without the parent's logins: their
    # refresher threads and locks did not come along
    global _sources, _sources_lock
    _sources, _sources_lock = {}, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


__all__ = ["BearerToken", "TokenSource", "endpoint_tls", "forget_tokens", "parse_token", "refresh_at_ms",
           "token_source"]
