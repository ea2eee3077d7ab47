"""SaslHandshake and SaslAuthenticate: PLAIN and SCRAM-SHA-256/512 (and v0's bare tokens)."""
from __future__ import annotations

import hmac
import logging

from ...protocol import codec
from ...protocol import messages as m
from ...protocol.sasl import SaslError, ScramServer, parse_plain
from ._shared import CLOSE, err

log = logging.getLogger(__name__)


async def sasl_handshake(broker, conn, hdr, req, v):
    enabled = list(broker.config.sasl.mechanisms) if broker.config.sasl else []
    if conn.authenticated and broker.config.sasl is None:
        return m.SaslHandshakeResponse(error_code=err("ILLEGAL_SASL_STATE"), mechanisms=[])
    if req.mechanism not in enabled:
        conn.close_after = True
        return m.SaslHandshakeResponse(error_code=err("UNSUPPORTED_SASL_MECHANISM"), mechanisms=enabled)
    conn.mechanism = req.mechanism
    conn.raw_sasl = v == 0
    return m.SaslHandshakeResponse(error_code=0, mechanisms=enabled)


def _sasl_step(broker, conn, token: bytes) -> bytes:
    """One client token -> the server's answer; raises SaslError on bad credentials."""
    if conn.mechanism == "PLAIN":
        _, user, password = parse_plain(token)
        expected = broker.config.sasl.users.get(user)
        if expected is None or not hmac.compare_digest(password.encode(), expected.get().encode()):
            raise SaslError(f"authentication failed for user {user!r}")
        conn.user, conn.authenticated = user, True
        return b""
    if conn.scram is None:
        mech = conn.mechanism
        conn.scram = ScramServer(mech, lambda u: broker._scram_creds.get((mech, u)))
        return conn.scram.first(token)
    out = conn.scram.final(token)
    conn.user, conn.authenticated = conn.scram.username, True
    return out


def _auth_failed(broker, conn, exc) -> str:
    log.warning("SASL %s authentication from %s failed: %s", conn.mechanism, conn.peer, exc)
    conn.close_after = True
    return (f"Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {conn.mechanism}")


async def sasl_authenticate(broker, conn, hdr, req, v):
    R = m.SaslAuthenticateResponse
    if conn.mechanism is None or conn.authenticated:
        conn.close_after = True
        return R(error_code=err("ILLEGAL_SASL_STATE"), error_message="SaslAuthenticate without a "
                 "SaslHandshake naming the mechanism first", auth_bytes=b"")
    try:
        out = _sasl_step(broker, conn, bytes(req.auth_bytes))
    except SaslError as exc:
        return R(error_code=err("SASL_AUTHENTICATION_FAILED"), error_message=_auth_failed(broker, conn, exc),
                 auth_bytes=b"")
    return R(error_code=0, error_message=None, auth_bytes=out, session_lifetime_ms=0)


async def raw_sasl_token(broker, conn, data: bytes):
    """SaslHandshake v0: the client now sends bare size-prefixed tokens (no headers)."""
    try:
        out = _sasl_step(broker, conn, bytes(data))
    except SaslError as exc:
        _auth_failed(broker, conn, exc)
        return CLOSE
    if conn.authenticated:
        conn.raw_sasl = False
    return codec.frame(out)
