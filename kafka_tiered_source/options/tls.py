"""A TLS client's settings, as Kafka's Java client takes them, whatever family of options they
come from: the Kafka client's ``ssl.*`` (:class:`~.client.ClientConfig`), the token endpoint's
``ssl.*`` inside ``sasl.jaas.config`` (Kafka's JaasOptionsUtils, :mod:`.oauth`), or another
client's prefixed copy of them (``<prefix>ssl.truststore.location`` ...).  Each parses into one
frozen :class:`TlsSettings`; ``protocol/tls.py``'s ``client_tls`` turns that into the SSLContext
and the host-name rule, so every TLS connection the library opens follows one rule.

The host-name rule is ``ssl.endpoint.identification.algorithm`` as Java takes it
(X509TrustManagerImpl.checkIdentity): ``HTTPS``, ``LDAP`` or ``LDAPS`` in any case (Kafka's
ConfigDef trims a STRING value first); the empty string turns the check off; any other name
fails every handshake in Java ("Unknown identification algorithm"), so it is refused here when
the options are parsed: a misspelt value never turns the check off.  kafka-python's
``ssl.check.hostname`` is taken too; given beside the Java name, the two must agree."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..dataclass import dataclass
from ..errors import ConfigError
from ..redact import Secret
from . import values as v

ENDPOINT_IDENTIFICATION = "ssl.endpoint.identification.algorithm"
CHECK_HOSTNAME = "ssl.check.hostname"
HOSTNAME_KEYS = (ENDPOINT_IDENTIFICATION, CHECK_HOSTNAME)
#: the values Java's trust manager knows (lower-cased); "" turns the check off
IDENTIFICATION_ALGORITHMS = ("https", "ldap", "ldaps", "")
TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")

# Kafka ssl.* key -> TlsSettings field, for the properties TlsSettings.parse reads
_STORE_KEYS = {
    "ssl.truststore.type": "truststore_type", "ssl.truststore.location": "truststore_location",
    "ssl.truststore.password": "truststore_password", "ssl.truststore.certificates": "truststore_certificates",
    "ssl.keystore.type": "keystore_type", "ssl.keystore.location": "keystore_location",
    "ssl.keystore.password": "keystore_password", "ssl.keystore.key": "keystore_key",
    "ssl.keystore.certificate.chain": "keystore_certificate_chain", "ssl.key.password": "key_password"}
_SECRET_FIELDS = ("truststore_password", "keystore_password", "keystore_key", "key_password")
#: every key :meth:`TlsSettings.parse` takes (Kafka's client ssl.* that mean something here)
TLS_KEYS = (*_STORE_KEYS, *HOSTNAME_KEYS, "ssl.protocol", "ssl.enabled.protocols")


def endpoint_identification(label: str, name: str, raw) -> str:
    """``ssl.endpoint.identification.algorithm``: ``https``, ``ldap``, ``ldaps`` or ``""``."""
    text = str(raw).strip().lower()
    if text not in IDENTIFICATION_ALGORITHMS:
        raise ConfigError(f"{label} must be HTTPS, LDAP or LDAPS (any case), or empty to turn the host-name "
                          f"check off; got {v.show(name, raw)} (Kafka's client fails every handshake on an "
                          f"unknown algorithm)", option=name)
    return text


def hostname_rule(given: Iterable[tuple[str, str, Any]]) -> str | None:
    """The host-name rule that ``given`` settings make: ``(the name the user gave, its Kafka key,
    the raw value)`` of each ``ssl.endpoint.identification.algorithm`` or ``ssl.check.hostname``,
    in order.  None when none is given.  Two settings that disagree are refused, naming both
    (``ssl.check.hostname=true`` agrees with any algorithm, ``false`` with the empty one; LDAP
    and LDAPS are one rule)."""
    chosen: tuple[str, str, str] | None = None          # (shown name, key, algorithm)
    for shown, key, raw in given:
        if key == CHECK_HOSTNAME:
            algorithm = "https" if v.boolean(shown, shown, raw, lenient=True) else ""
        else:
            algorithm = endpoint_identification(shown, shown, raw)
        if chosen is None:
            chosen = (shown, key, algorithm)
            continue
        before_shown, before_key, before = chosen
        if CHECK_HOSTNAME in (key, before_key):
            agree = (before == "") == (algorithm == "")
        else:
            agree = _rule(before) == _rule(algorithm)
        if not agree:
            raise ConfigError(f"{before_shown} ({_said(before_key, before)}) and {shown} ({_said(key, algorithm)}) "
                              f"disagree on checking host names: give one of them", option=shown)
        if key == ENDPOINT_IDENTIFICATION:
            chosen = (shown, key, algorithm)          # the Java name says which rule
    return None if chosen is None else chosen[2]


def _rule(algorithm: str) -> str:
    return "ldap" if algorithm == "ldaps" else algorithm


def _said(key: str, algorithm: str) -> str:
    if key == CHECK_HOSTNAME:
        return "true" if algorithm else "false"
    return repr(algorithm) if algorithm else "empty"


def enabled_protocols(key: str, value, before, shown: str | None = None) -> tuple:
    """The TLS versions to allow.  ``ssl.enabled.protocols`` lists them; ``ssl.protocol`` names
    the SSLContext's protocol, which in Java also allows the versions below it (TLSv1.3 and TLS:
    1.2 and 1.3); when both are given the list decides, as in Kafka.  ``shown``: the option's
    name in messages (default ``key``)."""
    shown = shown or key
    by_upper = {p.upper(): p for p in TLS_PROTOCOLS}
    if key == "ssl.protocol":
        text = str(value).strip().upper()
        if text in ("TLS", "TLSV1.3"):
            out: tuple = TLS_PROTOCOLS
        elif text == "TLSV1.2":
            out = ("TLSv1.2",)
        else:
            raise ConfigError(f"{shown} {str(value).strip()!r} is not TLS, TLSv1.2 or TLSv1.3 (older "
                              f"versions are not allowed)", option=shown)
        return before or out
    names = [p.strip() for p in str(value).split(",") if p.strip()]
    if not names:
        raise ConfigError(f"{shown} is empty", option=shown)
    for n in names:
        if n.upper() not in by_upper:
            raise ConfigError(f"{shown}: {n!r} is not a TLS version kafka-tiered allows "
                              f"({', '.join(TLS_PROTOCOLS)})", option=shown)
    return tuple(sorted({by_upper[n.upper()] for n in names}))


@dataclass(frozen=True)
class TlsSettings:
    """What a TLS client needs, in Kafka's terms; hashable (one context per process and
    settings).  ``names`` formats a Kafka key into the option name messages show (``"{}"``;
    ``"{} (in sasl.jaas.config)"``; ``"schema.registry.{}"``), ``peer`` says what is on the other
    end (``"the broker"``, ``"the token endpoint"``)."""

    endpoint_identification: str = "https"      # https, ldap, ldaps or "" (no host-name check)
    enabled_protocols: tuple[str, ...] = ()     # () = TLSv1.2 and up
    truststore_type: str | None = None
    truststore_location: str | None = None
    truststore_password: Secret | None = None
    truststore_certificates: str | None = None
    keystore_type: str | None = None
    keystore_location: str | None = None
    keystore_password: Secret | None = None
    keystore_key: Secret | None = None
    keystore_certificate_chain: str | None = None
    key_password: Secret | None = None
    cafile: str | None = None                   # kafka-python's PEM files (the Kafka client only)
    certfile: str | None = None
    keyfile: str | None = None
    names: str = "{}"
    peer: str = "the server"

    def name(self, key: str) -> str:
        return self.names.format(key)

    @property
    def system_trust(self) -> bool:
        """True when no CA is given: the system's CAs are trusted (as the JVM's cacerts)."""
        return not (self.cafile or self.truststore_location or self.truststore_certificates is not None)

    @classmethod
    def parse(cls, props: Mapping[str, Any], *, names: str = "{}", peer: str = "the server") -> "TlsSettings":
        """From Kafka-named ``ssl.*`` properties (the keys of :data:`TLS_KEYS`; any other key is
        refused by name).  Values are checked as the Kafka client's are."""
        kw: dict[str, Any] = {}
        hostname: list[tuple[str, str, Any]] = []
        for key, raw in props.items():
            shown = names.format(key)
            if key in HOSTNAME_KEYS:
                hostname.append((shown, key, raw))
            elif key in ("ssl.protocol", "ssl.enabled.protocols"):
                kw["enabled_protocols"] = enabled_protocols(key, raw, kw.get("enabled_protocols"), shown)
            elif key in _STORE_KEYS:
                attr = _STORE_KEYS[key]
                kw[attr] = Secret(str(raw)) if attr in _SECRET_FIELDS else str(raw)
            else:
                raise ConfigError(f"{shown} is not a TLS setting kafka-tiered takes ({', '.join(TLS_KEYS)})",
                                  option=shown)
        rule = hostname_rule(hostname)
        if rule is not None:
            kw["endpoint_identification"] = rule
        return cls(**kw, names=names, peer=peer)


__all__ = ["CHECK_HOSTNAME", "ENDPOINT_IDENTIFICATION", "HOSTNAME_KEYS", "IDENTIFICATION_ALGORITHMS",
           "TLS_KEYS", "TLS_PROTOCOLS", "TlsSettings", "enabled_protocols", "endpoint_identification",
           "hostname_rule"]
