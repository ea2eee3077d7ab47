"""SASL mechanisms Kafka clients use: PLAIN, SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and the
message format of OAUTHBEARER (RFC 7628; tokens come from :mod:`.oauth`).

Client side for :mod:`.client`, and a small server side (credential derivation, exchange
checks) so an embedded test broker can authenticate real clients with the same code.  Nothing
here logs or formats passwords; error messages name the user at most.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re

from ..dataclass import dataclass
from ..errors import SaslError
from ..options.client import SASL_MECHANISMS as MECHANISMS   # declared with the option table

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka refuses fewer iterations than this for SCRAM credentials.
MIN_ITERATIONS = 4096

__all__ = ["MECHANISMS", "MIN_ITERATIONS", "SaslError", "ScramClient", "ScramCredential", "ScramServer",
           "oauthbearer_initial_response", "parse_oauthbearer", "parse_plain", "plain_initial_response"]




# --- PLAIN ----------------------------------------------------------------------------------

def plain_initial_response(username: str, password: str, authzid: str = "") -> bytes:
    """RFC 4616: ``authzid NUL authcid NUL passwd``."""
    return f"{authzid}\0{username}\0{password}".encode("utf-8")


def parse_plain(message: bytes) -> tuple[str, str, str]:
    """Server side: ``(authzid, username, password)`` from a PLAIN message."""
    parts = bytes(message).split(b"\0")
    if len(parts) != 3 or not parts[1]:
        raise SaslError("malformed SASL/PLAIN message")
    try:
        return parts[0].decode(), parts[1].decode(), parts[2].decode()
    except UnicodeDecodeError:
        raise SaslError("SASL/PLAIN message is not UTF-8") from None


# --- SCRAM ----------------------------------------------------------------------------------

def _hash_name(mechanism: str) -> str:
    try:
        return _HASHES[mechanism]
    except KeyError:
        raise SaslError(f"not a SCRAM mechanism: {mechanism}") from None


def _hmac(hname, key, msg):
    return hmac.new(key, msg, hname).digest()


def _h(hname, data):
    return hashlib.new(hname, data).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unsaslname(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


def _attrs(message: str) -> dict:
    out = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslError(f"malformed SCRAM attribute in message: {part[:1]!r}")
        out[part[0]] = part[2:]
    return out


def _nonce() -> str:
    return base64.b64encode(os.urandom(24)).decode("ascii").replace(",", "-")


@dataclass(frozen=True, repr=False)
class ScramCredential:
    """What a server stores for a SCRAM user (never the password)."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_password(cls, password: str, mechanism: str, *, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> "ScramCredential":
        hname = _hash_name(mechanism)
        salt = salt if salt is not None else os.urandom(16)
        salted = hashlib.pbkdf2_hmac(hname, password.encode("utf-8"), salt, iterations)
        client_key = _hmac(hname, salted, b"Client Key")
        return cls(mechanism, salt, iterations, _h(hname, client_key), _hmac(hname, salted, b"Server Key"))

    def __repr__(self):
        return f"ScramCredential({self.mechanism}, iterations={self.iterations})"


class ScramClient:
    """Client side of one SCRAM exchange: ``first()``, ``final(server_first)``,
    ``verify(server_final)``."""

    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None):
        self._hname = _hash_name(mechanism)
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._nonce = nonce or _nonce()
        self._client_first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature = None

    def __repr__(self):
        return f"ScramClient({self.mechanism}, user={self._username!r})"

    def first(self) -> bytes:
        return ("n,," + self._client_first_bare).encode("utf-8")

    def final(self, server_first: bytes) -> bytes:
        text = bytes(server_first).decode("utf-8")
        a = _attrs(text)
        if "e" in a:
            raise SaslError(f"SCRAM server error: {a['e']}")
        nonce, salt, iters = a.get("r"), a.get("s"), a.get("i")
        if not nonce or salt is None or iters is None:
            raise SaslError("SCRAM server-first message lacks r, s or i")
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise SaslError("SCRAM server nonce does not extend the client nonce")
        iterations = int(iters)
        if iterations < MIN_ITERATIONS:
            raise SaslError(f"SCRAM iteration count {iterations} below {MIN_ITERATIONS}")
        salted = hashlib.pbkdf2_hmac(self._hname, self._password.encode("utf-8"),
                                     base64.b64decode(salt), iterations)
        client_key = _hmac(self._hname, salted, b"Client Key")
        stored_key = _h(self._hname, client_key)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode("utf-8")
        signature = _hmac(self._hname, stored_key, auth_message)
        proof = base64.b64encode(_xor(client_key, signature)).decode("ascii")
        server_key = _hmac(self._hname, salted, b"Server Key")
        self._server_signature = _hmac(self._hname, server_key, auth_message)
        return f"{without_proof},p={proof}".encode("utf-8")

    def verify(self, server_final: bytes) -> None:
        a = _attrs(bytes(server_final).decode("utf-8"))
        if "e" in a:
            raise SaslError(f"SCRAM authentication failed: {a['e']}")
        if self._server_signature is None or "v" not in a:
            raise SaslError("SCRAM server-final message lacks the server signature")
        if not hmac.compare_digest(base64.b64decode(a["v"]), self._server_signature):
            raise SaslError("SCRAM server signature does not match: the server does not know the password")


class ScramServer:
    """Server side of one SCRAM exchange.  ``lookup(username)`` returns the user's
    :class:`ScramCredential` or None.  ``first(client_first)`` -> server-first bytes;
    ``final(client_final)`` -> server-final bytes (raises :class:`SaslError` on a bad proof);
    ``username`` is set once the exchange succeeded."""

    def __init__(self, mechanism: str, lookup, *, nonce: str | None = None):
        self._hname = _hash_name(mechanism)
        self.mechanism = mechanism
        self._lookup = lookup
        self._nonce = nonce or _nonce()
        self._state: tuple | None = None
        self.username: str | None = None

    def first(self, client_first: bytes) -> bytes:
        text = bytes(client_first).decode("utf-8")
        if not text.startswith("n,") or text.count(",") < 3:
            raise SaslError("SCRAM client-first message must start with the gs2 header 'n,,'")
        gs2_end = text.index(",", 2) + 1
        bare = text[gs2_end:]
        a = _attrs(bare)
        user, cnonce = a.get("n"), a.get("r")
        if not user or not cnonce:
            raise SaslError("SCRAM client-first message lacks n or r")
        user = _unsaslname(user)
        cred = self._lookup(user)
        if cred is None or cred.mechanism != self.mechanism:
            raise SaslError(f"authentication failed for user {user!r}")
        nonce = cnonce + self._nonce
        server_first = f"r={nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self._state = (user, cred, bare, server_first, nonce, text[:gs2_end])
        return server_first.encode("utf-8")

    def final(self, client_final: bytes) -> bytes:
        if self._state is None:
            raise SaslError("SCRAM client-final before client-first")
        user, cred, bare, server_first, nonce, gs2 = self._state
        text = bytes(client_final).decode("utf-8")
        if ",p=" not in text:
            raise SaslError("SCRAM client-final message lacks the proof")
        without_proof, proof = text.rsplit(",p=", 1)
        a = _attrs(without_proof)
        if a.get("r") != nonce:
            raise SaslError("SCRAM client-final nonce does not match")
        if base64.b64decode(a.get("c", "")) != gs2.encode():
            raise SaslError("SCRAM channel binding does not match the gs2 header")
        auth_message = f"{bare},{server_first},{without_proof}".encode("utf-8")
        signature = _hmac(self._hname, cred.stored_key, auth_message)
        client_key = _xor(base64.b64decode(proof), signature)
        if not hmac.compare_digest(_h(self._hname, client_key), cred.stored_key):
            raise SaslError(f"authentication failed for user {user!r}")
        self.username = user
        server_sig = _hmac(self._hname, cred.server_key, auth_message)
        return f"v={base64.b64encode(server_sig).decode()}".encode("utf-8")


# --- OAUTHBEARER ----------------------------------------------------------------------------
# Kafka's OAuthBearerClientInitialResponse: gs2 header "n,[a=authzid]," then \x01-separated
# key=value pairs, "auth=Bearer <token>" first, closed by \x01\x01.
_SEP = "\x01"
_SASLNAME = r"(?:[\x01-\x7F](?<![=,])|=2C|=3D)+"
_OAUTH_MESSAGE = re.compile(rf"^n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEP}(?P<kv>(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+{_SEP})*){_SEP}$")
_AUTH = re.compile(r"^(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)$")


def oauthbearer_initial_response(token: str, extensions=()) -> bytes:
    """The client's one OAUTHBEARER message (no authorization id, as Kafka's client sends)."""
    ext = "".join(f"{_SEP}{k}={v}" for k, v in extensions)
    return f"n,,{_SEP}auth=Bearer {token}{ext}{_SEP}{_SEP}".encode("utf-8")


def parse_oauthbearer(message: bytes) -> tuple[str, str, dict]:
    """Server side: ``(authzid, token, extensions)``; raises :class:`SaslError` (never naming the
    token) when the message is not what Kafka's client sends."""
    try:
        text = bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("Invalid OAUTHBEARER client first message: not UTF-8") from None
    m = _OAUTH_MESSAGE.match(text)
    if m is None:
        raise SaslError("Invalid OAUTHBEARER client first message")
    pairs = dict(item.split("=", 1) for item in m.group("kv").split(_SEP) if item)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise SaslError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    am = _AUTH.match(auth)
    if am is None:
        raise SaslError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am.group("scheme").lower() != "bearer":
        raise SaslError(f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')}")
    return m.group("authzid") or "", am.group("token"), pairs
