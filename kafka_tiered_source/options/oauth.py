"""SASL/OAUTHBEARER as Kafka's Java client configures it (KIP-768): the ``sasl.oauthbearer.*`` and
``sasl.login.*`` properties and the options of ``sasl.jaas.config``, parsed into a frozen
:class:`OAuthConfig`.  The protocol layer (``protocol/oauth.py``) fetches and refreshes tokens.

Accepted as in Kafka:

* ``sasl.login.callback.handler.class`` naming Kafka's ``OAuthBearerLoginCallbackHandler``
  (either package it has lived in) is the marker that the token endpoint is to be used; no Java
  class runs here, so any other handler is refused by name.
* ``sasl.oauthbearer.token.endpoint.url``: an ``http(s)://`` token endpoint, posted the client
  credentials grant; or a ``file:`` URL of a file holding a token (Kafka's static token).
* JAAS options ``clientId``, ``clientSecret``, ``scope`` (or Kafka 4.1's
  ``sasl.oauthbearer.client.credentials.client.id`` / ``.client.secret`` and
  ``sasl.oauthbearer.scope``), ``extension_<name>`` SASL extensions (KIP-342), and ``ssl.*``
  options for the token endpoint's own TLS (as Kafka's JaasOptionsUtils reads them).
"""
from __future__ import annotations

import re

from ..dataclass import dataclass
from ..errors import ConfigError
from ..redact import Secret
from .tls import CHECK_HOSTNAME, TLS_KEYS, TlsSettings

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
#: Kafka's client-credentials login handler: org.apache.kafka...oauthbearer (3.4+) and
#: ...oauthbearer.secured (3.1-3.3, still accepted by Kafka as deprecated).
LOGIN_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                  "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler")
# RFC 7628 section 3.1, as Kafka's OAuthBearerClientInitialResponse checks extensions
_EXT_KEY = r"^[A-Za-z]+$"   # compiled when first used (re caches it): not at import (issue 36)
_EXT_VALUE = r"^[\x21-\x7E \t\r\n]+$"
#: the JAAS ssl.* options Kafka's JaasOptionsUtils turns into the token endpoint's TLS (its
#: client ssl.* settings; kafka-python's ssl.check.hostname is not one of them)
JAAS_SSL_KEYS = tuple(k for k in TLS_KEYS if k != CHECK_HOSTNAME)
#: how the token endpoint's TLS options are named in messages
JAAS_SSL_NAMES = "{} (in sasl.jaas.config)"

# property -> (OAuthConfig field, default); parsed by the option table's row of that name
PROPERTIES = {
    "sasl.oauthbearer.scope.claim.name": ("scope_claim", "scope"),
    "sasl.oauthbearer.sub.claim.name": ("sub_claim", "sub"),
    "sasl.login.connect.timeout.ms": ("connect_timeout_ms", 10_000),
    "sasl.login.read.timeout.ms": ("read_timeout_ms", 30_000),
    "sasl.login.retry.backoff.ms": ("retry_backoff_ms", 100),
    "sasl.login.retry.backoff.max.ms": ("retry_backoff_max_ms", 10_000),
    "sasl.login.refresh.window.factor": ("refresh_window_factor", 0.8),
    "sasl.login.refresh.window.jitter": ("refresh_window_jitter", 0.05),
    "sasl.login.refresh.min.period.seconds": ("refresh_min_period_s", 60),
    "sasl.login.refresh.buffer.seconds": ("refresh_buffer_s", 300),
    "sasl.oauthbearer.header.urlencode": ("header_urlencode", False),
}


@dataclass(frozen=True)
class OAuthConfig:
    """Where tokens come from and when they are refreshed (Kafka's names in the comments).
    Hashable: equal configurations share one token (as Kafka's LoginManager shares one login
    per JAAS configuration in a JVM)."""

    token_endpoint_url: str                     # sasl.oauthbearer.token.endpoint.url
    client_id: str | None = None                # clientId
    client_secret: Secret | None = None         # clientSecret
    scope: str | None = None                    # scope
    extensions: tuple = ()                      # extension_<name>: ((name, value), ...)
    tls: TlsSettings = TlsSettings(names=JAAS_SSL_NAMES, peer="the token endpoint")   # the JAAS ssl.* options
    scope_claim: str = "scope"
    sub_claim: str = "sub"
    connect_timeout_ms: int = 10_000
    read_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000
    refresh_window_factor: float = 0.8
    refresh_window_jitter: float = 0.05
    refresh_min_period_s: int = 60
    refresh_buffer_s: int = 300
    header_urlencode: bool = False

    @property
    def from_file(self) -> bool:
        return self.token_endpoint_url.lower().startswith("file:")

    @property
    def file_path(self) -> str:
        from urllib.parse import urlsplit   # (with ipaddress) only where OAuth is configured
        parts = urlsplit(self.token_endpoint_url)
        return parts.path if not parts.netloc else f"//{parts.netloc}{parts.path}"


def oauth_config(props: dict, jaas: dict | None, handler: str | None, parse) -> OAuthConfig:
    """From the OAUTHBEARER properties (``props``: key -> raw value, already checked against the
    table), the JAAS options and the login callback handler class.  ``parse(key, raw)`` is the
    option table's parser of that key."""
    if handler is None:
        raise ConfigError(
            "SASL/OAUTHBEARER needs sasl.login.callback.handler.class="
            f"{LOGIN_HANDLERS[0]} (with sasl.oauthbearer.token.endpoint.url): without it Kafka's "
            "client makes unsecured test tokens, which kafka-tiered does not",
            option="sasl.login.callback.handler.class")
    if handler.strip() not in LOGIN_HANDLERS:
        raise ConfigError(f"sasl.login.callback.handler.class {handler.strip()!r} is a Java class kafka-tiered "
                          f"cannot run; it understands Kafka's {LOGIN_HANDLERS[0]} (client credentials, "
                          f"KIP-768, or a token file)", option="sasl.login.callback.handler.class")
    url = props.get("sasl.oauthbearer.token.endpoint.url")
    if not url or not str(url).strip():
        raise ConfigError("SASL/OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url (the OAuth "
                          "provider's token endpoint, or file:///path of a token)",
                          option="sasl.oauthbearer.token.endpoint.url")
    url = str(url).strip()
    from urllib.parse import urlsplit
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https", "file") or (scheme != "file" and not urlsplit(url).hostname):
        raise ConfigError(f"sasl.oauthbearer.token.endpoint.url must be an http(s):// or file: URL, "
                          f"got scheme {scheme or 'none'!r}", option="sasl.oauthbearer.token.endpoint.url")
    jaas = dict(jaas or {})
    kw: dict = {"token_endpoint_url": url}
    for key, (attr, _default) in PROPERTIES.items():
        if key in props:
            kw[attr] = parse(key, props[key])
    client_id = props.get("sasl.oauthbearer.client.credentials.client.id") or jaas.pop("clientId", None)
    secret = props.get("sasl.oauthbearer.client.credentials.client.secret") or jaas.pop("clientSecret", None)
    scope = props.get("sasl.oauthbearer.scope") or jaas.pop("scope", None)
    if scheme != "file":
        if not client_id:
            raise ConfigError("SASL/OAUTHBEARER with a token endpoint needs clientId=\"...\" in "
                              "sasl.jaas.config (or sasl.oauthbearer.client.credentials.client.id)",
                              option="sasl.jaas.config")
        if not secret:
            raise ConfigError("SASL/OAUTHBEARER with a token endpoint needs clientSecret=\"...\" in "
                              "sasl.jaas.config (or sasl.oauthbearer.client.credentials.client.secret)",
                              option="sasl.jaas.config")
    extensions = []
    tls: dict[str, str] = {}
    for key in sorted(jaas):
        value = jaas[key]
        if key.startswith("extension_"):
            name = key[len("extension_"):]
            if not re.match(_EXT_KEY, name) or name == "auth" or not re.match(_EXT_VALUE, value):
                raise ConfigError(f"sasl.jaas.config: the SASL extension {name!r} has an invalid name or value "
                                  f"(RFC 7628: letters only; printable ASCII)", option="sasl.jaas.config")
            extensions.append((name, value))
        elif key in JAAS_SSL_KEYS:
            tls[key] = value
        elif key.startswith("ssl."):
            # a TLS setting of the token endpoint that is not understood must not be dropped: a
            # misspelt name would leave the endpoint checked by rules nobody asked for (fail closed)
            raise ConfigError(f"sasl.jaas.config: {key} is not a TLS setting kafka-tiered understands for "
                              f"the token endpoint; it takes {', '.join(JAAS_SSL_KEYS)}",
                              option="sasl.jaas.config")
        elif key.startswith("unsecuredLogin"):
            raise ConfigError(f"sasl.jaas.config: {key} configures Kafka's unsecured test tokens, which "
                              f"kafka-tiered does not make; give a token endpoint (or a token file)",
                              option="sasl.jaas.config")
        # Other JAAS options are the login module's business in Java (debug flags ...): ignored.
    kw.update(client_id=client_id, client_secret=Secret(str(secret)) if secret else None, scope=scope,
              extensions=tuple(extensions),
              tls=TlsSettings.parse(tls, names=JAAS_SSL_NAMES, peer="the token endpoint"))
    return OAuthConfig(**kw)
