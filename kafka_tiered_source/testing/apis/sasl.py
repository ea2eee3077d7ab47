"""SaslHandshake and SaslAuthenticate: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER (and v0's bare
tokens), with KIP-368 sessions and re-authentication as Kafka's SaslServerAuthenticator does them.

* OAUTHBEARER tokens are validated against the JWKS (``oauth_validator.py``); a bad token gets
  Kafka's error challenge ``{"status":"invalid_token"}`` (OAuthBearerSaslServer), and the
  exchange fails when the client answers it with ``\\x01``.
* The session lifetime sent back (SaslAuthenticate v1+) is the token's remaining lifetime, capped
  by ``connections.max.reauth.ms`` when that is set (calcCompletionTimesAndReturnSessionLifetimeMs);
  the server closes a connection that sends anything but a SaslHandshake after it ends.
* A SaslHandshake on an authenticated connection starts a re-authentication: same mechanism,
  same principal, or the connection is closed.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import time

from ...protocol import codec
from ...protocol import messages as m
from ...protocol.sasl import SaslError, ScramServer, parse_oauthbearer, parse_plain
from ._shared import CLOSE, err

log = logging.getLogger(__name__)
INVALID_TOKEN = b'{"status":"invalid_token"}'


async def sasl_handshake(broker, conn, hdr, req, v):
    enabled = list(broker.config.sasl.mechanisms) if broker.config.sasl else []
    if conn.authenticated and broker.config.sasl is None:
        return m.SaslHandshakeResponse(error_code=err("ILLEGAL_SASL_STATE"), mechanisms=[])
    if conn.authenticated:
        if v == 0 or not conn.reauth_capable:
            conn.close_after = True
            return m.SaslHandshakeResponse(error_code=err("ILLEGAL_SASL_STATE"), mechanisms=enabled)
        # KIP-368: re-authentication; nothing else may run on the connection until it completes
        conn.reauth_from = (conn.mechanism, conn.user)
        conn.authenticated = False
        conn.session_ends = None       # the new session's end comes with its authentication
        conn.scram = None
    if req.mechanism not in enabled:
        conn.close_after = True
        return m.SaslHandshakeResponse(error_code=err("UNSUPPORTED_SASL_MECHANISM"), mechanisms=enabled)
    conn.mechanism = req.mechanism
    conn.raw_sasl = v == 0
    return m.SaslHandshakeResponse(error_code=0, mechanisms=enabled)


async def _sasl_step(broker, conn, token: bytes):
    """One client token -> ``(answer, session end as epoch ms or None)``; the answer is None
    while the exchange goes on and the client must send again.  Raises SaslError on bad
    credentials."""
    if conn.mechanism == "PLAIN":
        _, user, password = parse_plain(token)
        expected = broker.config.sasl.users.get(user)
        if expected is None or not hmac.compare_digest(password.encode(), expected.get().encode()):
            raise SaslError(f"authentication failed for user {user!r}")
        return _done(broker, conn, user, None), b""
    if conn.mechanism == "OAUTHBEARER":
        if conn.oauth_error is not None:
            # OAuthBearerSaslServer: the client's \x01 after our error challenge ends it
            reason, conn.oauth_error = conn.oauth_error, None
            raise SaslError(reason)
        _, value, _ = parse_oauthbearer(token)
        try:
            valid = await asyncio.to_thread(broker.jwt_validator.validate, value)
        except SaslError as exc:
            log.warning("OAUTHBEARER token from %s refused: %s", conn.peer, exc)
            conn.oauth_error = INVALID_TOKEN.decode()
            return None, INVALID_TOKEN
        return _done(broker, conn, valid.principal, valid.expires_at_ms), b""
    if conn.scram is None:
        mech = conn.mechanism
        conn.scram = ScramServer(mech, lambda u: broker.scram_credentials.get((mech, u)))
        return None, conn.scram.first(token)
    out = conn.scram.final(token)
    return _done(broker, conn, conn.scram.username, None), out


def _done(broker, conn, principal: str, credential_expires_ms: int | None) -> int:
    """Authentication complete: principal checks for a re-authentication, the session's end.
    Returns the session lifetime to tell the client (ms, 0 = none)."""
    if conn.reauth_from is not None:
        mech, before = conn.reauth_from
        if mech != conn.mechanism:
            raise SaslError(f"SASL mechanism '{conn.mechanism}' requested by client is not supported for "
                            f"re-authentication of mechanism '{mech}'")
        if before != principal:
            raise SaslError(f"Cannot change principals during re-authentication from User:{before}: "
                            f"User:{principal}")
        broker.reauthentications += 1
        conn.reauth_from = None
    conn.user, conn.authenticated = principal, True
    broker.note_authentication(conn.mechanism, principal)
    now_ms = int(time.time() * 1000)
    max_reauth = broker.config.sasl.connections_max_reauth_ms
    if credential_expires_ms is None and max_reauth <= 0:
        conn.session_ends = None
        return 0
    lifetime = credential_expires_ms - now_ms if credential_expires_ms is not None else max_reauth
    if credential_expires_ms is not None and max_reauth > 0:
        lifetime = min(lifetime, max_reauth)
    lifetime = max(0, lifetime)
    conn.session_ends = broker.loop.time() + lifetime / 1000
    return lifetime


def _auth_failed(broker, conn, exc) -> str:
    log.warning("SASL %s authentication from %s failed: %s", conn.mechanism, conn.peer, exc)
    conn.close_after = True
    what = "re-authentication" if conn.reauth_from is not None else "authentication"
    if conn.mechanism == "OAUTHBEARER" or "principal" in str(exc) or "re-authentication of" in str(exc):
        return str(exc)    # SaslAuthenticationException messages go to the client as they are
    return (f"Authentication failed during {what} due to invalid credentials with SASL "
            f"mechanism {conn.mechanism}")


async def sasl_authenticate(broker, conn, hdr, req, v):
    R = m.SaslAuthenticateResponse
    if conn.mechanism is None or conn.authenticated:
        conn.close_after = True
        return R(error_code=err("ILLEGAL_SASL_STATE"), error_message="SaslAuthenticate without a "
                 "SaslHandshake naming the mechanism first", auth_bytes=b"")
    conn.reauth_capable = conn.reauth_capable or v > 0
    try:
        lifetime, out = await _sasl_step(broker, conn, bytes(req.auth_bytes))
    except SaslError as exc:
        return R(error_code=err("SASL_AUTHENTICATION_FAILED"), error_message=_auth_failed(broker, conn, exc),
                 auth_bytes=b"")
    return R(error_code=0, error_message=None, auth_bytes=out, session_lifetime_ms=lifetime or 0)


async def raw_sasl_token(broker, conn, data: bytes):
    """SaslHandshake v0: the client now sends bare size-prefixed tokens (no headers)."""
    try:
        _, out = await _sasl_step(broker, conn, bytes(data))
    except SaslError as exc:
        _auth_failed(broker, conn, exc)
        return CLOSE
    if conn.authenticated:
        conn.raw_sasl = False
    return codec.frame(out)
