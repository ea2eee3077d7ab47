"""The Kafka client's configuration: Kafka's own property names (the ``kafka.*`` options without
the prefix), parsed through the option table's ``kafka`` rows into a frozen :class:`ClientConfig`."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ConfigError
from ..redact import Secret
from .table import KAFKA_BY_KEY, IGNORED_KAFKA_KEYS, unknown_kafka

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
IGNORED_KEYS = IGNORED_KAFKA_KEYS
_JAAS = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')

# property -> the ClientConfig field it sets (integers and booleans through the table's parser)
_FIELDS = {
    "client.id": "client_id", "client.rack": "client_rack", "sasl.username": "sasl_username",
    "ssl.cafile": "ssl_cafile", "ssl.certfile": "ssl_certfile", "ssl.keyfile": "ssl_keyfile",
    "ssl.check.hostname": "ssl_check_hostname", "request.timeout.ms": "request_timeout_ms",
    "socket.connection.setup.timeout.ms": "connect_timeout_ms",
    "socket.connection.setup.timeout.max.ms": "connect_timeout_ms",
    "connections.max.idle.ms": "connections_max_idle_ms", "metadata.max.age.ms": "metadata_max_age_ms",
    "retries": "retries", "retry.backoff.ms": "retry_backoff_ms",
    "retry.backoff.max.ms": "retry_backoff_max_ms", "fetch.max.wait.ms": "fetch_max_wait_ms",
    "fetch.min.bytes": "fetch_min_bytes", "fetch.max.bytes": "fetch_max_bytes",
    "max.partition.fetch.bytes": "max_partition_fetch_bytes",
}


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


@dataclass(frozen=True)
class ClientConfig:
    """Typed, frozen client settings.  Build with :meth:`from_properties` from Kafka's own key
    names.  Secrets are :class:`~kafka_tiered_source.redact.Secret` and never show in reprs."""

    bootstrap_servers: tuple
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: Secret | None = None
    ssl_check_hostname: bool = True
    client_id: str = "kafka-tiered"
    client_rack: str = ""
    request_timeout_ms: int = 30000
    connect_timeout_ms: int = 10000
    connections_max_idle_ms: int = 540000
    metadata_max_age_ms: int = 300000
    retries: int = 5
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    isolation_level: int = READ_UNCOMMITTED

    def __post_init__(self):
        if self.security_protocol not in PROTOCOLS:
            raise ConfigError(f"security.protocol must be one of {', '.join(PROTOCOLS)}, got "
                              f"{self.security_protocol!r}", option="security.protocol")
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise ConfigError(f"sasl.mechanism must be one of {', '.join(SASL_MECHANISMS)}, got "
                              f"{self.sasl_mechanism!r}", option="sasl.mechanism")
        if self.uses_sasl and (not self.sasl_username or self.sasl_password is None):
            raise ConfigError("SASL needs a username and password (sasl.jaas.config or "
                              "sasl.username/sasl.password)", option="sasl.jaas.config")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: dict) -> "ClientConfig":
        """Kafka client properties (``bootstrap.servers``, ``security.protocol``, ...), with or
        without a ``kafka.`` prefix.  Unknown keys raise :class:`ConfigError` naming the key,
        except the harmless consumer keys in :data:`IGNORED_KEYS`."""
        kw: dict = {}
        jaas = None
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
            elif key == "sasl.password":
                kw["sasl_password"] = Secret(str(value))
            elif key in ("ssl.truststore.location", "ssl.keystore.location"):
                # Java keystores (JKS/PKCS12) are not read here: say so rather than fail in TLS.
                raise ConfigError(f"{key} (a Java keystore) is not supported; give PEM files with "
                                  f"ssl.cafile / ssl.certfile / ssl.keyfile", option=key)
            elif key in ("ssl.key.password", "ssl.password"):
                kw["ssl_key_password"] = Secret(str(value))
            elif key == "ssl.endpoint.identification.algorithm":
                # Kafka's spelling: "https" verifies the host name, "" turns that off.
                kw["ssl_check_hostname"] = str(value).strip().lower() == "https"
            elif key == "isolation.level":
                level = KAFKA_BY_KEY[key].value(value)
                kw["isolation_level"] = READ_COMMITTED if level == "read_committed" else READ_UNCOMMITTED
            else:
                kw[_FIELDS[key]] = KAFKA_BY_KEY[key].value(value)
        if "bootstrap_servers" not in kw:
            raise ConfigError("bootstrap.servers is required", option="bootstrap.servers")
        if jaas is not None:
            found = dict(_JAAS.findall(jaas))
            if "username" not in found or "password" not in found:
                # never echo the JAAS text: it holds the password
                raise ConfigError("sasl.jaas.config must set username=\"...\" and password=\"...\"",
                                  option="sasl.jaas.config")
            kw.setdefault("sasl_username", found["username"].replace('\\"', '"'))
            kw.setdefault("sasl_password", Secret(found["password"].replace('\\"', '"')))
        return cls(**kw)
