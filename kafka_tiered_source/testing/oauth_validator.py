"""The embedded broker's side of SASL/OAUTHBEARER: JWTs checked against a JWKS endpoint the way
Kafka's OAuthBearerValidatorCallbackHandler (BrokerJwtValidator, jose4j underneath) checks them.

* the signature, with the JWKS key named by the token's ``kid`` (RS*, PS*, ES*; ``none`` is
  refused, as DISALLOW_NONE does); the key set is fetched from
  ``sasl.oauthbearer.jwks.endpoint.url`` (``http(s)`` or ``file:``), again every
  ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` and when an unknown ``kid`` arrives
  (RefreshingHttpsJwks, at most once a minute per kid);
* ``exp`` and ``iat`` present, ``exp`` and ``nbf`` within ``sasl.oauthbearer.clock.skew.seconds``;
* ``iss`` equal to ``sasl.oauthbearer.expected.issuer`` when that is set;
* ``aud`` holding one of ``sasl.oauthbearer.expected.audience`` when that is set, and, as jose4j
  does, a token that carries ``aud`` refused when no audience is expected;
* the subject claim (``sasl.oauthbearer.sub.claim.name``) present; scopes read from
  ``sasl.oauthbearer.scope.claim.name``.

Failures raise :class:`SaslError` with the reason (logged by the broker; the client gets
Kafka's ``{"status":"invalid_token"}``).  Tokens never appear in a message.
Needs ``cryptography``."""
from __future__ import annotations

import base64
import json
import threading
import time
import urllib.request
from typing import TypeGuard
from urllib.parse import urlsplit

from ..dataclass import dataclass, field
from ..errors import ConfigError, SaslError

_HASHES = {"256": "SHA256", "384": "SHA384", "512": "SHA512"}
#: RefreshingHttpsJwks: an unknown kid triggers a fetch at most once a minute
MISSING_KID_RETRY_S = 60.0
_CURVES = {"P-256": "SECP256R1", "P-384": "SECP384R1", "P-521": "SECP521R1"}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class ValidatedToken:
    principal: str
    expires_at_ms: int
    issued_at_ms: int
    scopes: tuple


@dataclass(frozen=True)
class OAuthValidatorConfig:
    """The broker's OAUTHBEARER settings, under Kafka's names."""

    jwks_endpoint_url: str
    expected_issuer: str | None = None
    expected_audience: tuple = ()
    clock_skew_s: int = 30
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    jwks_refresh_ms: int = 3_600_000

    KEYS = {"sasl.oauthbearer.jwks.endpoint.url": "jwks_endpoint_url",
            "sasl.oauthbearer.expected.issuer": "expected_issuer",
            "sasl.oauthbearer.expected.audience": "expected_audience",
            "sasl.oauthbearer.clock.skew.seconds": "clock_skew_s",
            "sasl.oauthbearer.sub.claim.name": "sub_claim",
            "sasl.oauthbearer.scope.claim.name": "scope_claim",
            "sasl.oauthbearer.jwks.endpoint.refresh.ms": "jwks_refresh_ms"}

    @classmethod
    def from_properties(cls, props: dict) -> "OAuthValidatorConfig":
        kw: dict = {}
        for key, value in props.items():
            attr = cls.KEYS.get(key)
            if attr is None:
                raise ConfigError(f"unknown OAUTHBEARER broker setting {key!r} (known: {', '.join(cls.KEYS)})",
                                  option=key)
            if attr == "expected_audience":
                value = tuple(a.strip() for a in (value.split(",") if isinstance(value, str) else value)
                              if a.strip())
            elif attr in ("clock_skew_s", "jwks_refresh_ms"):
                try:
                    value = int(value)
                except (TypeError, ValueError):
                    raise ConfigError(f"{key} must be an integer", option=key) from None
            kw[attr] = value
        if not kw.get("jwks_endpoint_url"):
            raise ConfigError("OAUTHBEARER on the broker needs sasl.oauthbearer.jwks.endpoint.url",
                              option="sasl.oauthbearer.jwks.endpoint.url")
        if urlsplit(kw["jwks_endpoint_url"]).scheme not in ("http", "https", "file"):
            raise ConfigError("sasl.oauthbearer.jwks.endpoint.url must be an http(s) or file URL",
                              option="sasl.oauthbearer.jwks.endpoint.url")
        return cls(**kw)


@dataclass
class JwtValidator:
    config: OAuthValidatorConfig
    _keys: dict = field(default_factory=dict)
    _fetched_at: float = -1e18
    _missing: dict = field(default_factory=dict)     # kid -> when a fetch last looked for it
    _lock: threading.Lock = field(default_factory=threading.Lock)
    jwks_fetches: int = 0

    def _refresh(self, *, missing=None) -> None:
        with self._lock:
            now = time.monotonic()
            stale = now - self._fetched_at > self.config.jwks_refresh_ms / 1000
            expedite = False
            if missing is not None and now - self._missing.get(missing, -MISSING_KID_RETRY_S) >= MISSING_KID_RETRY_S:
                self._missing[missing] = now
                expedite = True
            if not (stale or expedite):
                return
            url = self.config.jwks_endpoint_url
            try:
                if url.startswith("file:"):
                    with open(urlsplit(url).path, "rb") as f:
                        doc = json.loads(f.read())
                else:
                    with urllib.request.urlopen(url, timeout=10) as resp:
                        doc = json.loads(resp.read(1 << 20))
            except (OSError, ValueError) as exc:
                raise SaslError(f"the JWKS at {url} cannot be read: {exc}") from None
            self._keys = {k.get("kid"): k for k in doc.get("keys", []) if isinstance(k, dict)}
            self._fetched_at = now
            self.jwks_fetches += 1

    def _key(self, kid):
        self._refresh()
        if kid not in self._keys:
            self._refresh(missing=kid)      # a key rotated in since the last fetch
        jwk = self._keys.get(kid)
        if jwk is None:
            raise SaslError(f"no key with kid {kid!r} in the JWKS")
        return jwk

    def validate(self, token: str, *, now: float | None = None) -> ValidatedToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise SaslError("malformed JWT: expected three sections (header, payload, and signature)")
        try:
            header = json.loads(unb64url(parts[0]))
            claims = json.loads(unb64url(parts[1]))
            signature = unb64url(parts[2])
        except ValueError:
            raise SaslError("malformed JWT: a section is not base64url JSON") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise SaslError("malformed JWT: header and payload must be JSON objects")
        alg = str(header.get("alg", ""))
        if alg in ("", "none"):
            raise SaslError("the JWT is not signed (alg none is refused)")
        _verify(alg, self._key(header.get("kid")), f"{parts[0]}.{parts[1]}".encode("ascii"), signature)
        return self._claims(claims, time.time() if now is None else now)

    def _claims(self, claims: dict, now: float) -> ValidatedToken:
        cfg = self.config
        skew = cfg.clock_skew_s
        raw_exp, raw_iat, nbf = claims.get("exp"), claims.get("iat"), claims.get("nbf")
        if not _number(raw_exp):
            raise SaslError("the JWT has no exp claim")
        if not _number(raw_iat):
            raise SaslError("the JWT has no iat claim")
        exp, iat = float(raw_exp), float(raw_iat)
        if now > exp + skew:
            raise SaslError(f"the JWT expired at {exp} (now {now:.0f}, allowed skew {skew} s)")
        if _number(nbf) and now < nbf - skew:
            raise SaslError(f"the JWT is not valid before {nbf}")
        if cfg.expected_issuer is not None and claims.get("iss") != cfg.expected_issuer:
            raise SaslError(f"issuer {claims.get('iss')!r} is not the expected {cfg.expected_issuer!r}")
        aud = claims.get("aud")
        auds = [aud] if isinstance(aud, str) else list(aud) if isinstance(aud, list) else []
        if cfg.expected_audience:
            if not set(auds) & set(cfg.expected_audience):
                raise SaslError(f"audience {auds} holds none of the expected {list(cfg.expected_audience)}")
        elif auds:
            raise SaslError(f"the JWT has an audience {auds} but no expected audience is configured "
                            f"(sasl.oauthbearer.expected.audience)")
        sub = claims.get(cfg.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise SaslError(f"the JWT has no {cfg.sub_claim!r} claim")
        scope = claims.get(cfg.scope_claim)
        scopes = tuple(scope.split()) if isinstance(scope, str) else tuple(scope) if isinstance(scope, list) else ()
        return ValidatedToken(sub.strip(), int(exp * 1000), int(iat * 1000), scopes)


def _number(v) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _verify(alg: str, jwk: dict, signed: bytes, signature: bytes) -> None:
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
    except ImportError:
        raise SaslError("validating JWTs needs the 'cryptography' package (pip install "
                        "'kafka-tiered-source[tls]')") from None
    family, bits = alg[:2], alg[2:]
    if family not in ("RS", "PS", "ES") or bits not in _HASHES:
        raise SaslError(f"JWT algorithm {alg!r} is not accepted")
    if jwk.get("alg") not in (None, alg):
        raise SaslError(f"the JWKS key is for {jwk.get('alg')}, the JWT says {alg}")
    digest = getattr(hashes, _HASHES[bits])()
    try:
        if family in ("RS", "PS"):
            if jwk.get("kty") != "RSA":
                raise SaslError(f"the JWKS key is {jwk.get('kty')}, the JWT needs RSA")
            rsa_key = rsa.RSAPublicNumbers(int.from_bytes(unb64url(jwk["e"]), "big"),
                                           int.from_bytes(unb64url(jwk["n"]), "big")).public_key()
            pad = (padding.PKCS1v15() if family == "RS"
                   else padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size))
            rsa_key.verify(signature, signed, pad, digest)
        else:
            if jwk.get("kty") != "EC" or jwk.get("crv") not in _CURVES:
                raise SaslError(f"the JWKS key is {jwk.get('kty')}/{jwk.get('crv')}, the JWT needs EC")
            curve = getattr(ec, _CURVES[jwk["crv"]])()
            ec_key = ec.EllipticCurvePublicNumbers(int.from_bytes(unb64url(jwk["x"]), "big"),
                                                   int.from_bytes(unb64url(jwk["y"]), "big"), curve).public_key()
            half = len(signature) // 2
            der = encode_dss_signature(int.from_bytes(signature[:half], "big"),
                                       int.from_bytes(signature[half:], "big"))
            ec_key.verify(der, signed, ec.ECDSA(digest))
    except InvalidSignature:
        raise SaslError("the JWT's signature does not verify with the JWKS key") from None
    except (KeyError, ValueError) as exc:
        raise SaslError(f"the JWKS key cannot be used: {exc}") from None
