"""A small OAuth 2 provider for tests and demos, on 127.0.0.1: a token endpoint for the client
credentials grant (RFC 6749 4.4: HTTP Basic client id and secret, form body, JSON answer) that
issues RS256 JWTs, and the JWKS that verifies them (RFC 7517), as an OIDC provider behind a
Kafka cluster's OAUTHBEARER listener serves them.

    with OAuthServer(clients={"reader": "s3cret"}, issuer="https://idp.test", audience="kafka") as idp:
        idp.token_endpoint_url, idp.jwks_url     # for the client and the embedded broker

``lifetime_s`` sets how long tokens live (per client too, ``lifetimes``); ``ages`` issues a
client's tokens already that many seconds old (``iat`` in the past: a refresh falls due at once);
``rotate_key()`` starts signing with a new key (the JWKS then lists both); ``fail_next(n,
status)`` answers the next ``n`` token requests with that status (retry tests, an IdP that is
down until ``clear_failures()``); ``hold(skip=k)`` stalls every token request after the next
``k`` until ``release()`` (a slow IdP: ``wait_held(n)`` waits until ``n`` requests are stalled,
``held`` counts them); ``mint(...)`` makes a token directly (static token files, expired or
foreign tokens).  ``issued`` counts tokens per client id, ``minted`` keeps every token made.
Optional TLS (``ssl_context``) for an https endpoint.  Needs ``cryptography``."""
from __future__ import annotations

import base64
import hmac
import json
import secrets
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from .oauth_validator import b64url


class OAuthServer:
    def __init__(self, clients: dict, *, issuer: str = "https://idp.kafka-tiered.test",
                 audience: str | tuple | None = "kafka", lifetime_s: float = 3600, lifetimes: dict | None = None,
                 ages: dict | None = None, host: str = "127.0.0.1", port: int = 0,
                 ssl_context: ssl.SSLContext | None = None):
        self.clients = dict(clients)
        self.issuer, self.audience = issuer, audience
        self.lifetime_s, self.lifetimes = lifetime_s, dict(lifetimes or {})
        self.ages: dict[str, float] = dict(ages or {})
        self.held = 0                      # token requests stalled by hold() right now
        self._hold_skip: int | None = None
        self._gate = threading.Event()
        self._gate.set()
        self._held_changed = threading.Condition()
        self.issued: dict[str, int] = {}
        self.minted: list[str] = []        # every token made (tests search outputs for them)
        self.token_requests = 0
        self.jwks_requests = 0
        self._fail: list[int] = []
        self._lock = threading.Lock()
        self._keys: list = []              # (kid, private key), newest last
        self.rotate_key()
        self._ssl = ssl_context
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        if ssl_context is not None:
            self._server.socket = ssl_context.wrap_socket(self._server.socket, server_side=True)
        self._thread: threading.Thread | None = None

    # -- lifecycle
    def start(self) -> "OAuthServer":
        self._thread = threading.Thread(target=self._server.serve_forever, name="oauth-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> "OAuthServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{'https' if self._ssl else 'http'}://{host!s}:{port}"

    @property
    def token_endpoint_url(self) -> str:
        return f"{self.base_url}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.base_url}/jwks"

    # -- keys and tokens
    def rotate_key(self) -> str:
        from cryptography.hazmat.primitives.asymmetric import rsa
        kid = f"k{len(self._keys) + 1}-{secrets.token_hex(4)}"
        with self._lock:
            self._keys.append((kid, rsa.generate_private_key(public_exponent=65537, key_size=2048)))
        return kid

    def jwks(self) -> dict:
        out = []
        for kid, key in self._keys:
            nums = key.public_key().public_numbers()
            out.append({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                        "n": b64url(nums.n.to_bytes((nums.n.bit_length() + 7) // 8, "big")),
                        "e": b64url(nums.e.to_bytes((nums.e.bit_length() + 7) // 8, "big"))})
        return {"keys": out}

    def mint(self, sub: str, *, lifetime_s: float | None = None, scope: str | None = None,
             issued_at: float | None = None, kid: str | None = None, **claims) -> str:
        """A signed JWT for ``sub``; ``claims`` override or add (``iss=None`` drops one)."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        now = time.time() if issued_at is None else issued_at
        life = self.lifetimes.get(sub, self.lifetime_s) if lifetime_s is None else lifetime_s
        body = {"iss": self.issuer, "sub": sub, "iat": int(now), "exp": round(now + life, 3),
                "jti": secrets.token_hex(8)}
        if self.audience is not None:
            body["aud"] = self.audience if isinstance(self.audience, str) else list(self.audience)
        if scope:
            body["scope"] = scope
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        with self._lock:
            key_id, key = next(k for k in self._keys if k[0] == kid) if kid else self._keys[-1]
        header = {"alg": "RS256", "typ": "JWT", "kid": key_id}
        signed = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(body).encode())}"
        sig = key.sign(signed.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        token = f"{signed}.{b64url(sig)}"
        self.minted.append(token)
        return token

    def twin(self, *, ssl_context: ssl.SSLContext | None = None) -> "OAuthServer":
        """Another endpoint of the same provider (same clients, keys, issuer and audience), e.g.
        the https face of an http one.  Not started."""
        other = OAuthServer(self.clients, issuer=self.issuer, audience=self.audience, lifetime_s=self.lifetime_s,
                            lifetimes=self.lifetimes, ssl_context=ssl_context)
        other._keys = self._keys
        return other

    def fail_next(self, n: int, status: int = 503) -> None:
        with self._lock:
            self._fail += [status] * n

    def clear_failures(self) -> None:
        with self._lock:
            self._fail.clear()

    # -- a slow IdP
    def hold(self, *, skip: int = 0) -> None:
        """Stall every token request after the next ``skip`` until :meth:`release`."""
        with self._lock:
            self._hold_skip = skip
            self._gate.clear()

    def release(self) -> None:
        with self._lock:
            self._hold_skip = None
            self._gate.set()

    def wait_held(self, n: int = 1, timeout: float = 30) -> bool:
        """Wait until ``n`` token requests are stalled; False if they are not within ``timeout``."""
        with self._held_changed:
            return self._held_changed.wait_for(lambda: self.held >= n, timeout)

    def _maybe_stall(self) -> None:
        with self._lock:
            if self._hold_skip is None:
                return
            if self._hold_skip > 0:
                self._hold_skip -= 1
                return
        with self._held_changed:
            self.held += 1
            self._held_changed.notify_all()
        try:
            self._gate.wait(60)
        finally:
            with self._held_changed:
                self.held -= 1
                self._held_changed.notify_all()

    # -- HTTP
    def _handler(self):
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):          # quiet: tests read the counters
                pass

            def _send(self, status: int, doc: dict) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path.split("?")[0] in ("/jwks", "/.well-known/jwks.json"):
                    idp.jwks_requests += 1
                    self._send(200, idp.jwks())
                else:
                    self._send(404, {"error": "not_found"})

            def do_POST(self):
                if self.path.split("?")[0] != "/token":
                    return self._send(404, {"error": "not_found"})
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                idp._maybe_stall()
                with idp._lock:
                    idp.token_requests += 1
                    fail = idp._fail.pop(0) if idp._fail else None
                if fail is not None:
                    return self._send(fail, {"error": "temporarily_unavailable",
                                             "error_description": "injected failure"})
                if form.get("grant_type") != "client_credentials":
                    return self._send(400, {"error": "unsupported_grant_type"})
                client = _basic(self.headers.get("Authorization", ""))
                if client is None or client[0] not in idp.clients or \
                        not hmac.compare_digest(client[1], idp.clients[client[0]]):
                    return self._send(401, {"error": "invalid_client",
                                            "error_description": "client authentication failed"})
                age = idp.ages.get(client[0], 0)
                token = idp.mint(client[0], scope=form.get("scope"), issued_at=time.time() - age if age else None)
                with idp._lock:
                    idp.issued[client[0]] = idp.issued.get(client[0], 0) + 1
                life = idp.lifetimes.get(client[0], idp.lifetime_s)
                self._send(200, {"access_token": token, "token_type": "Bearer", "expires_in": int(life - age),
                                 **({"scope": form["scope"]} if form.get("scope") else {})})

        return Handler


def _basic(header: str):
    if not header.startswith("Basic "):
        return None
    try:
        user, _, password = base64.b64decode(header[6:]).decode("utf-8").partition(":")
    except ValueError:
        return None
    return user, password
