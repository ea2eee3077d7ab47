"""The Kafka client's configuration: Kafka's own property names (the ``kafka.*`` options without
the prefix), parsed through the option table's ``kafka`` rows into a frozen :class:`ClientConfig`.

Security settings are checked here for what goes together (Kafka's DefaultSslEngineFactory and
SaslConfigs rules, by option name); the stores they name are read when a client is built
(``protocol/tls.py``), where a wrong password or an expired certificate is refused by name."""
from __future__ import annotations

import re

from ..errors import ConfigError
from ..redact import Secret
from .oauth import LOGIN_MODULE as OAUTH_LOGIN_MODULE
from .oauth import PROPERTIES as OAUTH_PROPERTIES
from .oauth import oauth_config
from .fields import ClientConfigFields
from .table import KAFKA_BY_KEY, IGNORED_KAFKA_KEYS, unknown_kafka
from .tls import HOSTNAME_KEYS, TlsSettings, enabled_protocols, hostname_rule

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
IGNORED_KEYS = IGNORED_KAFKA_KEYS
GSSAPI_REFUSAL = (
    "GSSAPI (Kerberos) is not supported: it needs a Kerberos ticket or keytab, a krb5.conf and "
    "the system's GSS-API library on every executor, which options cannot set up. Use a listener "
    "with SCRAM-SHA-512 (ScramLoginModule in sasl.jaas.config), OAUTHBEARER (KIP-768 client "
    "credentials) or mutual TLS (ssl.keystore.*) instead")
# One JAAS login-module entry: Name flag key=value ... ;  (values quoted, with \" and \\, or bare)
_JAAS_TOKEN = r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))'   # compiled when first used (re caches it): not at import (issue 36)
_JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")
# Kafka ssl.* settings that choose JVM machinery: accepted when they name Java's default (which
# means nothing to OpenSSL), else refused; None: always refused.
_JVM_ONLY: dict[str, tuple[tuple, str]] = {
    "ssl.keymanager.algorithm": (("SunX509", "PKIX", "NewSunX509"), "a JVM key manager algorithm"),
    "ssl.trustmanager.algorithm": (("PKIX", "SunX509"), "a JVM trust manager algorithm"),
    "ssl.cipher.suites": ((), "Java cipher suites (OpenSSL's defaults for TLSv1.2 and TLSv1.3 are used)"),
    "ssl.provider": ((), "a JVM security provider"),
    "ssl.engine.factory.class": ((), "a Java class")}
_OAUTH_KEYS = frozenset({*OAUTH_PROPERTIES, "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope",
                         "sasl.oauthbearer.client.credentials.client.id",
                         "sasl.oauthbearer.client.credentials.client.secret"})

# Properties that set the attribute of another row (Kafka's alias, and its cap of the connect
# timeout, which is the timeout itself here), parsed by their own row.
_SAME_AS = {"ssl.password": "ssl.key.password",
            "socket.connection.setup.timeout.max.ms": "socket.connection.setup.timeout.ms"}


def parse_jaas(text: str, option: str = "sasl.jaas.config") -> tuple[str, str, dict]:
    """``(login module, flag, options)`` of a one-module JAAS line, as Kafka's JaasConfig reads
    it.  Errors never echo the text: it holds passwords and client secrets."""
    tokens = []
    pos = 0
    text = str(text)
    while pos < len(text):
        m = re.compile(_JAAS_TOKEN).match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ConfigError(f"{option} is not a JAAS line (unexpected character at position {pos}); "
                              f"expected '<LoginModule> required key=\"value\" ...;'", option=option)
        pos = m.end()
        quoted, bare, eq, semi = m.groups()
        if quoted is not None:
            tokens.append(("v", re.sub(r"\\(.)", r"\1", quoted)))
        elif bare is not None:
            tokens.append(("v", bare))
        else:
            tokens.append(("=", "=") if eq else (";", ";"))
    shape = "expected '<LoginModule> required key=\"value\" ...;'"
    if len(tokens) < 3 or tokens[0][0] != "v" or tokens[1][0] != "v" or tokens[1][1].lower() not in _JAAS_FLAGS:
        raise ConfigError(f"{option} is not a JAAS line: {shape}", option=option)
    if tokens[-1][0] != ";":
        raise ConfigError(f"{option} must end with ';'", option=option)
    opts: dict = {}
    i = 2
    while i < len(tokens) - 1:
        if i + 2 >= len(tokens) or tokens[i][0] != "v" or tokens[i + 1][0] != "=" or tokens[i + 2][0] != "v":
            if tokens[i][0] == ";":
                raise ConfigError(f"{option} holds more than one login module; Kafka takes one", option=option)
            raise ConfigError(f"{option}: options must be key=value pairs ({shape})", option=option)
        opts[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    return tokens[0][1], tokens[1][1].lower(), opts


def parse_servers(text: str) -> tuple:
    out = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"bootstrap.servers entry {item!r} is not host:port", option="bootstrap.servers")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ConfigError("bootstrap.servers is empty", option="bootstrap.servers")
    return tuple(out)


class ClientConfig(ClientConfigFields):
    """Typed, frozen client settings.  Build with :meth:`from_properties` from Kafka's own key
    names.  Secrets are :class:`~kafka_tiered_source.redact.Secret` and never show in reprs.
    The fields that are one property each come from the option table (:class:`.fields.
    ClientConfigFields`), then those built from several, or spelt differently
    (``bootstrap_servers``, ``security_protocol``, ``sasl_mechanism``, ``ssl_enabled_protocols``,
    ``oauth``, ``isolation_level``: READ_UNCOMMITTED or READ_COMMITTED)."""
    __slots__ = ()

    def __post_init__(self):
        if self.security_protocol not in PROTOCOLS:
            raise ConfigError(f"security.protocol must be one of {', '.join(PROTOCOLS)}, got "
                              f"{self.security_protocol!r}", option="security.protocol")
        if self.sasl_mechanism == "GSSAPI":
            raise ConfigError(f"sasl.mechanism=GSSAPI: {GSSAPI_REFUSAL}", option="sasl.mechanism")
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise ConfigError(f"sasl.mechanism must be one of {', '.join(SASL_MECHANISMS)}, got "
                              f"{self.sasl_mechanism!r}", option="sasl.mechanism")
        if self.uses_sasl and self.sasl_mechanism == "OAUTHBEARER":
            if self.oauth is None:
                raise ConfigError("SASL/OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url and "
                                  "sasl.login.callback.handler.class", option="sasl.oauthbearer.token.endpoint.url")
        elif self.uses_sasl and (not self.sasl_username or self.sasl_password is None):
            raise ConfigError("SASL needs a username and password (sasl.jaas.config or "
                              "sasl.username/sasl.password)", option="sasl.jaas.config")
        store = any(x is not None for x in (self.ssl_truststore_location, self.ssl_truststore_certificates))
        if self.ssl_cafile and store:
            raise ConfigError("give ssl.cafile or a truststore (ssl.truststore.location / "
                              "ssl.truststore.certificates), not both", option="ssl.cafile")
        keystore = any(x is not None for x in (self.ssl_keystore_location, self.ssl_keystore_key,
                                               self.ssl_keystore_certificate_chain))
        if (self.ssl_certfile or self.ssl_keyfile) and keystore:
            raise ConfigError("give ssl.certfile/ssl.keyfile or a keystore (ssl.keystore.*), not both",
                              option="ssl.certfile")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ConfigError("ssl.keyfile is given but ssl.certfile is not", option="ssl.certfile")

    @property
    def ssl_check_hostname(self) -> bool:
        """Whether host names are checked (``ssl.endpoint.identification.algorithm`` not empty)."""
        return self.ssl_endpoint_identification_algorithm != ""

    @property
    def tls(self) -> TlsSettings:
        """The TLS settings of connections to the brokers (``protocol/tls.py``'s ``client_tls``)."""
        return TlsSettings(
            endpoint_identification=self.ssl_endpoint_identification_algorithm,
            enabled_protocols=self.ssl_enabled_protocols, truststore_type=self.ssl_truststore_type,
            truststore_location=self.ssl_truststore_location, truststore_password=self.ssl_truststore_password,
            truststore_certificates=self.ssl_truststore_certificates, keystore_type=self.ssl_keystore_type,
            keystore_location=self.ssl_keystore_location, keystore_password=self.ssl_keystore_password,
            keystore_key=self.ssl_keystore_key, keystore_certificate_chain=self.ssl_keystore_certificate_chain,
            key_password=self.ssl_key_password, cafile=self.ssl_cafile, certfile=self.ssl_certfile,
            keyfile=self.ssl_keyfile, peer="the broker")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def sasl_credentials(self) -> tuple[str, str]:
        """``(username, password)`` of PLAIN and SCRAM (checked present with SASL at creation)."""
        if not self.sasl_username or self.sasl_password is None:
            raise ConfigError("SASL needs a username and password (sasl.jaas.config or "
                              "sasl.username/sasl.password)", option="sasl.jaas.config")
        return self.sasl_username, self.sasl_password.get()

    @classmethod
    def from_properties(cls, props: dict) -> "ClientConfig":
        """Kafka client properties (``bootstrap.servers``, ``security.protocol``, ...), with or
        without a ``kafka.`` prefix.  Unknown keys raise :class:`ConfigError` naming the key,
        except the harmless consumer keys in :data:`IGNORED_KEYS`."""
        kw: dict = {}
        jaas = None
        oauth_props: dict = {}
        handler = None
        hostname: list = []         # (name given, key, value) of the host-name settings
        for raw_key, value in props.items():
            key = str(raw_key)
            if key.startswith("kafka."):
                key = key[len("kafka."):]
            refusal = unknown_kafka(key, str(raw_key))
            if refusal is not None:
                raise refusal
            if key in IGNORED_KEYS:
                continue
            if key == "bootstrap.servers":
                kw["bootstrap_servers"] = parse_servers(value)
            elif key in ("security.protocol", "sasl.mechanism"):
                kw[key.replace(".", "_")] = str(value).strip().upper()
            elif key == "sasl.jaas.config":
                jaas = str(value)
            elif key in HOSTNAME_KEYS:
                hostname.append((str(raw_key), key, value))
            elif key in ("ssl.protocol", "ssl.enabled.protocols"):
                kw["ssl_enabled_protocols"] = enabled_protocols(key, value, kw.get("ssl_enabled_protocols"))
            elif key in _JVM_ONLY:
                accepted, what = _JVM_ONLY[key]
                if str(value).strip() not in accepted:
                    default = f" (only Java's default, {' or '.join(accepted)}, is accepted)" if accepted else ""
                    raise ConfigError(f"{key} names {what}; kafka-tiered's TLS is OpenSSL's and cannot use "
                                      f"it{default}: remove the option", option=key)
            elif key.startswith("sasl.kerberos."):
                raise ConfigError(f"{key}: {GSSAPI_REFUSAL}", option=key)
            elif key == "ssl.secure.random.implementation":
                continue          # a JVM random generator: OpenSSL's own serves
            elif key == "sasl.login.callback.handler.class":
                handler = str(value)
            elif key in _OAUTH_KEYS:
                oauth_props[key] = value
            elif key == "isolation.level":
                level = KAFKA_BY_KEY[key].value(value)
                kw["isolation_level"] = READ_COMMITTED if level == "read_committed" else READ_UNCOMMITTED
            else:
                option = KAFKA_BY_KEY[key]
                field = option.field or KAFKA_BY_KEY[_SAME_AS[key]].field
                kw[str(field)] = option.value(value)
        rule = hostname_rule(hostname)       # refuses a value Java does not know, and two that disagree
        if rule is not None:
            kw["ssl_endpoint_identification_algorithm"] = rule
        if "bootstrap_servers" not in kw:
            raise ConfigError("bootstrap.servers is required", option="bootstrap.servers")
        mechanism = kw.get("sasl_mechanism", "PLAIN")
        sasl = str(kw.get("security_protocol", "PLAINTEXT")).startswith("SASL_")
        if mechanism == "GSSAPI":
            raise ConfigError(f"sasl.mechanism=GSSAPI: {GSSAPI_REFUSAL}", option="sasl.mechanism")
        module, options = None, {}  # type: tuple[str | None, dict[str, str]]
        if jaas is not None:
            module, _, options = parse_jaas(jaas)
            if module.endswith("Krb5LoginModule"):
                raise ConfigError(f"sasl.jaas.config names Krb5LoginModule: {GSSAPI_REFUSAL}",
                                  option="sasl.jaas.config")
            if sasl and (module == OAUTH_LOGIN_MODULE) != (mechanism == "OAUTHBEARER"):
                raise ConfigError(f"sasl.jaas.config names {module.rsplit('.', 1)[-1]} but sasl.mechanism is "
                                  f"{mechanism}: they must go together", option="sasl.jaas.config")
        if mechanism == "OAUTHBEARER":
            if sasl:
                kw["oauth"] = oauth_config(oauth_props, options, handler,
                                           lambda k, raw: KAFKA_BY_KEY[k].value(raw))
        elif jaas is not None and sasl:
            if "username" not in options or "password" not in options:
                # never echo the JAAS text: it holds the password
                raise ConfigError("sasl.jaas.config must set username=\"...\" and password=\"...\"",
                                  option="sasl.jaas.config")
            kw.setdefault("sasl_username", options["username"])
            kw.setdefault("sasl_password", Secret(options["password"]))
        elif jaas is not None and "username" in options and "password" in options:
            kw.setdefault("sasl_username", options["username"])
            kw.setdefault("sasl_password", Secret(options["password"]))
        return cls(**kw)

