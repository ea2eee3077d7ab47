"""The frozen configs' fields, one per row of the option table that has a ``field``, and
each config's others (all but :class:`ReadOptions`', in :mod:`.read_fields`).
Generated from :mod:`.table` by ``python -m kafka_tiered_source.options.codegen``: edit the table
(or the codegen's EXTRAS), not this file."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

from ..redact import Secret
from .frozen import Frozen
from .oauth import OAuthConfig

TimestampStrategy = Literal["error", "latest"]
Locator = Literal["auto", "kip1248", "metadata-topic", "listing"]
Layout = Literal["aiven", "kafka-local-tiered", "template"]
Fallback = Literal["auto", "never", "always"]
CostPreset = Literal["aws-s3-standard", "gcs-standard", "azure-hot"]
EgressClass = Literal["same-region", "inter-az", "inter-region", "internet"]
Format = Literal["binary", "avro", "protobuf", "json", "string"]
SubjectStrategy = Literal["TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"]
Mode = Literal["FAILFAST", "PERMISSIVE"]
CredentialsSource = Literal["USER_INFO", "URL", "SASL_INHERIT"]
BearerSource = Literal["STATIC_TOKEN"]
EndpointIdentification = Literal["https", "ldap", "ldaps", ""]
IsolationLevel = Literal["read_uncommitted", "read_committed"]


class FetcherConfigFields(Frozen):
    """The fields of :class:`FetcherConfig`: one per option of the table, then the rest."""
    __slots__ = FIELDS = ("fetcher", "fetcher_class", "layout", "template", "padded_offsets", "prefix",
                        "connect_timeout_ms", "read_timeout_ms", "part_size", "concurrency", "coalesce_gap",
                        "retry_max_attempts", "retry_backoff_ms", "retry_backoff_max_ms",
                        "manifest_cache_size", "backend_options")
    #: those that are one option each
    OPTION_FIELDS: ClassVar[tuple[str, ...]] = FIELDS[:15]
    __match_args__ = ("fetcher", "fetcher_class", "layout", "template", "padded_offsets", "prefix",
                      "connect_timeout_ms", "read_timeout_ms", "part_size", "concurrency", "coalesce_gap",
                      "retry_max_attempts", "retry_backoff_ms", "retry_backoff_max_ms",
                      "manifest_cache_size", "backend_options")
    #: ``remote.storage.fetcher``: fetcher name: s3, gcs, azure, fsspec, presigned, or one registered under the entry-point group kafka_tiered_source.fetchers
    fetcher: str | None
    #: ``remote.storage.fetcher.class``: dotted path (pkg.mod:Class) of your own ByteRangeStore (or RemoteStorageFetcher) subclass; wins over remote.storage.fetcher
    fetcher_class: str | None
    #: ``remote.storage.layout``: object layout: aiven (default), kafka-local-tiered or template
    layout: Layout
    #: ``remote.storage.layout.template``: format string of the template layout, fields {prefix} {topic} {topic_id} {partition} {base_offset} {end_offset} {segment_id} {suffix}
    template: str | None
    #: ``remote.storage.layout.padded.offsets``: kafka-local-tiered: zero-pad offsets to 20 digits
    padded_offsets: bool
    #: ``remote.storage.prefix``: key prefix (Aiven key.prefix; root directory for kafka-local-tiered)
    prefix: str
    #: ``fetch.remote.connect.timeout.ms``: connect timeout of one GET; a timeout falls back to the broker
    connect_timeout_ms: int
    #: ``fetch.remote.read.timeout.ms``: socket read timeout of one GET
    read_timeout_ms: int
    #: ``fetch.remote.part.size.bytes``: large ranges are split into GETs of this size
    part_size: int
    #: ``fetch.remote.concurrency``: parts fetched at once by one fetcher
    concurrency: int
    #: ``fetch.remote.coalesce.gap.bytes``: ranges closer than this are read in one GET
    coalesce_gap: int
    #: ``fetch.remote.retry.max.attempts``: attempts per GET on throttling, 5xx and connection errors
    retry_max_attempts: int
    #: ``fetch.remote.retry.backoff.ms``: first back-off; doubles per attempt, with jitter
    retry_backoff_ms: int
    #: ``fetch.remote.retry.backoff.max.ms``: back-off cap
    retry_backoff_max_ms: int
    #: ``fetch.remote.manifest.cache.size``: Aiven manifests kept per fetcher
    manifest_cache_size: int
    # not one option each
    backend_options: tuple[tuple[str, Any], ...]

    def __init__(self, fetcher: str | None = None, fetcher_class: str | None = None,
                 layout: Layout = "aiven", template: str | None = None, padded_offsets: bool = True,
                 prefix: str = "", connect_timeout_ms: int = 1000, read_timeout_ms: int = 5000,
                 part_size: int = 16777216, concurrency: int = 4, coalesce_gap: int = 1048576,
                 retry_max_attempts: int = 5, retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 5000,
                 manifest_cache_size: int = 1024, backend_options: tuple[tuple[str, Any], ...] = ()) -> None:
        _set = object.__setattr__
        _set(self, "fetcher", fetcher)
        _set(self, "fetcher_class", fetcher_class)
        _set(self, "layout", layout)
        _set(self, "template", template)
        _set(self, "padded_offsets", padded_offsets)
        _set(self, "prefix", prefix)
        _set(self, "connect_timeout_ms", connect_timeout_ms)
        _set(self, "read_timeout_ms", read_timeout_ms)
        _set(self, "part_size", part_size)
        _set(self, "concurrency", concurrency)
        _set(self, "coalesce_gap", coalesce_gap)
        _set(self, "retry_max_attempts", retry_max_attempts)
        _set(self, "retry_backoff_ms", retry_backoff_ms)
        _set(self, "retry_backoff_max_ms", retry_backoff_max_ms)
        _set(self, "manifest_cache_size", manifest_cache_size)
        _set(self, "backend_options", backend_options)
        self.__post_init__()

    def __post_init__(self) -> None:
        """Checks of the whole config, run by ``__init__`` (as a dataclass runs its own)."""

    def _values(self) -> tuple:
        return (self.fetcher, self.fetcher_class, self.layout, self.template, self.padded_offsets,
                self.prefix, self.connect_timeout_ms, self.read_timeout_ms, self.part_size, self.concurrency,
                self.coalesce_gap, self.retry_max_attempts, self.retry_backoff_ms, self.retry_backoff_max_ms,
                self.manifest_cache_size, self.backend_options)

    def __repr__(self) -> str:
        return (f"{type(self).__qualname__}("
                f"fetcher={self.fetcher!r}, "
                f"fetcher_class={self.fetcher_class!r}, "
                f"layout={self.layout!r}, "
                f"template={self.template!r}, "
                f"padded_offsets={self.padded_offsets!r}, "
                f"prefix={self.prefix!r}, "
                f"connect_timeout_ms={self.connect_timeout_ms!r}, "
                f"read_timeout_ms={self.read_timeout_ms!r}, "
                f"part_size={self.part_size!r}, "
                f"concurrency={self.concurrency!r}, "
                f"coalesce_gap={self.coalesce_gap!r}, "
                f"retry_max_attempts={self.retry_max_attempts!r}, "
                f"retry_backoff_ms={self.retry_backoff_ms!r}, "
                f"retry_backoff_max_ms={self.retry_backoff_max_ms!r}, "
                f"manifest_cache_size={self.manifest_cache_size!r}, "
                f"backend_options={self.backend_options!r})")


class QuotaConfigFields(Frozen):
    """The fields of :class:`QuotaConfig`: one per option of the table, then the rest."""
    __slots__ = FIELDS = ("remote_bytes_per_second", "remote_requests_per_second",
                        "job_remote_bytes_per_second", "job_remote_requests_per_second")
    #: those that are one option each
    OPTION_FIELDS: ClassVar[tuple[str, ...]] = FIELDS[:4]
    __match_args__ = ("remote_bytes_per_second", "remote_requests_per_second", "job_remote_bytes_per_second",
                      "job_remote_requests_per_second")
    #: ``quota.remote.bytes.per.second``: per-task byte rate from storage
    remote_bytes_per_second: float | None
    #: ``quota.remote.requests.per.second``: per-task GET rate
    remote_requests_per_second: float | None
    #: ``quota.job.remote.bytes.per.second``: job byte rate, split over the tasks
    job_remote_bytes_per_second: float | None
    #: ``quota.job.remote.requests.per.second``: job GET rate, split over the tasks
    job_remote_requests_per_second: float | None

    def __init__(self, remote_bytes_per_second: float | None = None,
                 remote_requests_per_second: float | None = None,
                 job_remote_bytes_per_second: float | None = None,
                 job_remote_requests_per_second: float | None = None) -> None:
        _set = object.__setattr__
        _set(self, "remote_bytes_per_second", remote_bytes_per_second)
        _set(self, "remote_requests_per_second", remote_requests_per_second)
        _set(self, "job_remote_bytes_per_second", job_remote_bytes_per_second)
        _set(self, "job_remote_requests_per_second", job_remote_requests_per_second)
        self.__post_init__()

    def __post_init__(self) -> None:
        """Checks of the whole config, run by ``__init__`` (as a dataclass runs its own)."""

    def _values(self) -> tuple:
        return (self.remote_bytes_per_second, self.remote_requests_per_second,
                self.job_remote_bytes_per_second, self.job_remote_requests_per_second)

    def __repr__(self) -> str:
        return (f"{type(self).__qualname__}("
                f"remote_bytes_per_second={self.remote_bytes_per_second!r}, "
                f"remote_requests_per_second={self.remote_requests_per_second!r}, "
                f"job_remote_bytes_per_second={self.job_remote_bytes_per_second!r}, "
                f"job_remote_requests_per_second={self.job_remote_requests_per_second!r})")


class ClientConfigFields(Frozen):
    """The fields of :class:`ClientConfig`: one per option of the table, then the rest."""
    __slots__ = FIELDS = ("sasl_username", "sasl_password", "ssl_cafile", "ssl_certfile", "ssl_keyfile",
                        "ssl_key_password", "ssl_endpoint_identification_algorithm", "ssl_truststore_type",
                        "ssl_truststore_location", "ssl_truststore_password", "ssl_truststore_certificates",
                        "ssl_keystore_type", "ssl_keystore_location", "ssl_keystore_password",
                        "ssl_keystore_certificate_chain", "ssl_keystore_key", "client_id", "client_rack",
                        "request_timeout_ms", "connect_timeout_ms", "connections_max_idle_ms",
                        "metadata_max_age_ms", "retries", "retry_backoff_ms", "retry_backoff_max_ms",
                        "fetch_max_wait_ms", "fetch_min_bytes", "fetch_max_bytes",
                        "max_partition_fetch_bytes", "bootstrap_servers", "security_protocol",
                        "sasl_mechanism", "ssl_enabled_protocols", "oauth", "isolation_level")
    #: those that are one option each
    OPTION_FIELDS: ClassVar[tuple[str, ...]] = FIELDS[:29]
    __match_args__ = ("sasl_username", "sasl_password", "ssl_cafile", "ssl_certfile", "ssl_keyfile",
                      "ssl_key_password", "ssl_endpoint_identification_algorithm", "ssl_truststore_type",
                      "ssl_truststore_location", "ssl_truststore_password", "ssl_truststore_certificates",
                      "ssl_keystore_type", "ssl_keystore_location", "ssl_keystore_password",
                      "ssl_keystore_certificate_chain", "ssl_keystore_key", "client_id", "client_rack",
                      "request_timeout_ms", "connect_timeout_ms", "connections_max_idle_ms",
                      "metadata_max_age_ms", "retries", "retry_backoff_ms", "retry_backoff_max_ms",
                      "fetch_max_wait_ms", "fetch_min_bytes", "fetch_max_bytes", "max_partition_fetch_bytes")
    #: ``sasl.username``: SASL user
    sasl_username: str | None
    #: ``sasl.password``: SASL password
    sasl_password: Secret | None
    #: ``ssl.cafile``: CA certificates (PEM)
    ssl_cafile: str | None
    #: ``ssl.certfile``: client certificate (PEM)
    ssl_certfile: str | None
    #: ``ssl.keyfile``: client key (PEM)
    ssl_keyfile: str | None
    #: ``ssl.key.password``: password of the client key
    ssl_key_password: Secret | None
    #: ``ssl.endpoint.identification.algorithm``: `https` (any case) checks the broker's host name, `LDAP` or `LDAPS` by Java's LDAP rules; empty turns the check off (with a warning); any other value is refused
    ssl_endpoint_identification_algorithm: EndpointIdentification
    #: ``ssl.truststore.type``: JKS, PKCS12 or PEM (default: told from the file)
    ssl_truststore_type: str | None
    #: ``ssl.truststore.location``: truststore file (JKS, PKCS12 or PEM); must exist on every executor
    ssl_truststore_location: str | None
    #: ``ssl.truststore.password``: truststore password (JKS, PKCS12)
    ssl_truststore_password: Secret | None
    #: ``ssl.truststore.certificates``: trusted certificates as PEM text (ssl.truststore.type=PEM; KIP-651)
    ssl_truststore_certificates: str | None
    #: ``ssl.keystore.type``: JKS, PKCS12 or PEM (default: told from the file)
    ssl_keystore_type: str | None
    #: ``ssl.keystore.location``: keystore file (JKS, PKCS12 or PEM) with the client key for mutual TLS; must exist on every executor
    ssl_keystore_location: str | None
    #: ``ssl.keystore.password``: keystore password (JKS, PKCS12)
    ssl_keystore_password: Secret | None
    #: ``ssl.keystore.certificate.chain``: client certificate chain as PEM text (ssl.keystore.type=PEM)
    ssl_keystore_certificate_chain: str | None
    #: ``ssl.keystore.key``: client private key as PEM text (ssl.keystore.type=PEM)
    ssl_keystore_key: Secret | None
    #: ``client.id``: client id sent to the brokers
    client_id: str
    #: ``client.rack``: rack of the client (follower fetching)
    client_rack: str
    #: ``request.timeout.ms``: broker request timeout
    request_timeout_ms: int
    #: ``socket.connection.setup.timeout.ms``: connect timeout
    connect_timeout_ms: int
    #: ``connections.max.idle.ms``: close idle connections after this
    connections_max_idle_ms: int
    #: ``metadata.max.age.ms``: refresh metadata this often
    metadata_max_age_ms: int
    #: ``retries``: retries of a failed request
    retries: int
    #: ``retry.backoff.ms``: first back-off between retries
    retry_backoff_ms: int
    #: ``retry.backoff.max.ms``: back-off cap
    retry_backoff_max_ms: int
    #: ``fetch.max.wait.ms``: how long a broker may hold a Fetch
    fetch_max_wait_ms: int
    #: ``fetch.min.bytes``: bytes a broker waits for
    fetch_min_bytes: int
    #: ``fetch.max.bytes``: bytes per Fetch
    fetch_max_bytes: int
    #: ``max.partition.fetch.bytes``: bytes per partition per Fetch
    max_partition_fetch_bytes: int
    # not one option each
    bootstrap_servers: tuple[tuple[str, int], ...]
    security_protocol: str
    sasl_mechanism: str
    ssl_enabled_protocols: tuple[str, ...]
    oauth: OAuthConfig | None
    isolation_level: int

    def __init__(self, sasl_username: str | None = None, sasl_password: Secret | None = None,
                 ssl_cafile: str | None = None, ssl_certfile: str | None = None,
                 ssl_keyfile: str | None = None, ssl_key_password: Secret | None = None,
                 ssl_endpoint_identification_algorithm: EndpointIdentification = "https",
                 ssl_truststore_type: str | None = None, ssl_truststore_location: str | None = None,
                 ssl_truststore_password: Secret | None = None,
                 ssl_truststore_certificates: str | None = None, ssl_keystore_type: str | None = None,
                 ssl_keystore_location: str | None = None, ssl_keystore_password: Secret | None = None,
                 ssl_keystore_certificate_chain: str | None = None, ssl_keystore_key: Secret | None = None,
                 client_id: str = "kafka-tiered", client_rack: str = "", request_timeout_ms: int = 30000,
                 connect_timeout_ms: int = 10000, connections_max_idle_ms: int = 540000,
                 metadata_max_age_ms: int = 300000, retries: int = 5, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 1000, fetch_max_wait_ms: int = 500, fetch_min_bytes: int = 1,
                 fetch_max_bytes: int = 52428800, max_partition_fetch_bytes: int = 1048576, *,
                 bootstrap_servers: tuple[tuple[str, int], ...], security_protocol: str = "PLAINTEXT",
                 sasl_mechanism: str = "PLAIN", ssl_enabled_protocols: tuple[str, ...] = (),
                 oauth: OAuthConfig | None = None, isolation_level: int = 0) -> None:
        _set = object.__setattr__
        _set(self, "sasl_username", sasl_username)
        _set(self, "sasl_password", sasl_password)
        _set(self, "ssl_cafile", ssl_cafile)
        _set(self, "ssl_certfile", ssl_certfile)
        _set(self, "ssl_keyfile", ssl_keyfile)
        _set(self, "ssl_key_password", ssl_key_password)
        _set(self, "ssl_endpoint_identification_algorithm", ssl_endpoint_identification_algorithm)
        _set(self, "ssl_truststore_type", ssl_truststore_type)
        _set(self, "ssl_truststore_location", ssl_truststore_location)
        _set(self, "ssl_truststore_password", ssl_truststore_password)
        _set(self, "ssl_truststore_certificates", ssl_truststore_certificates)
        _set(self, "ssl_keystore_type", ssl_keystore_type)
        _set(self, "ssl_keystore_location", ssl_keystore_location)
        _set(self, "ssl_keystore_password", ssl_keystore_password)
        _set(self, "ssl_keystore_certificate_chain", ssl_keystore_certificate_chain)
        _set(self, "ssl_keystore_key", ssl_keystore_key)
        _set(self, "client_id", client_id)
        _set(self, "client_rack", client_rack)
        _set(self, "request_timeout_ms", request_timeout_ms)
        _set(self, "connect_timeout_ms", connect_timeout_ms)
        _set(self, "connections_max_idle_ms", connections_max_idle_ms)
        _set(self, "metadata_max_age_ms", metadata_max_age_ms)
        _set(self, "retries", retries)
        _set(self, "retry_backoff_ms", retry_backoff_ms)
        _set(self, "retry_backoff_max_ms", retry_backoff_max_ms)
        _set(self, "fetch_max_wait_ms", fetch_max_wait_ms)
        _set(self, "fetch_min_bytes", fetch_min_bytes)
        _set(self, "fetch_max_bytes", fetch_max_bytes)
        _set(self, "max_partition_fetch_bytes", max_partition_fetch_bytes)
        _set(self, "bootstrap_servers", bootstrap_servers)
        _set(self, "security_protocol", security_protocol)
        _set(self, "sasl_mechanism", sasl_mechanism)
        _set(self, "ssl_enabled_protocols", ssl_enabled_protocols)
        _set(self, "oauth", oauth)
        _set(self, "isolation_level", isolation_level)
        self.__post_init__()

    def __post_init__(self) -> None:
        """Checks of the whole config, run by ``__init__`` (as a dataclass runs its own)."""

    def _values(self) -> tuple:
        return (self.sasl_username, self.sasl_password, self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile,
                self.ssl_key_password, self.ssl_endpoint_identification_algorithm, self.ssl_truststore_type,
                self.ssl_truststore_location, self.ssl_truststore_password, self.ssl_truststore_certificates,
                self.ssl_keystore_type, self.ssl_keystore_location, self.ssl_keystore_password,
                self.ssl_keystore_certificate_chain, self.ssl_keystore_key, self.client_id, self.client_rack,
                self.request_timeout_ms, self.connect_timeout_ms, self.connections_max_idle_ms,
                self.metadata_max_age_ms, self.retries, self.retry_backoff_ms, self.retry_backoff_max_ms,
                self.fetch_max_wait_ms, self.fetch_min_bytes, self.fetch_max_bytes,
                self.max_partition_fetch_bytes, self.bootstrap_servers, self.security_protocol,
                self.sasl_mechanism, self.ssl_enabled_protocols, self.oauth, self.isolation_level)

    def __repr__(self) -> str:
        return (f"{type(self).__qualname__}("
                f"sasl_username={self.sasl_username!r}, "
                f"sasl_password={self.sasl_password!r}, "
                f"ssl_cafile={self.ssl_cafile!r}, "
                f"ssl_certfile={self.ssl_certfile!r}, "
                f"ssl_keyfile={self.ssl_keyfile!r}, "
                f"ssl_key_password={self.ssl_key_password!r}, "
                f"ssl_endpoint_identification_algorithm={self.ssl_endpoint_identification_algorithm!r}, "
                f"ssl_truststore_type={self.ssl_truststore_type!r}, "
                f"ssl_truststore_location={self.ssl_truststore_location!r}, "
                f"ssl_truststore_password={self.ssl_truststore_password!r}, "
                f"ssl_truststore_certificates={self.ssl_truststore_certificates!r}, "
                f"ssl_keystore_type={self.ssl_keystore_type!r}, "
                f"ssl_keystore_location={self.ssl_keystore_location!r}, "
                f"ssl_keystore_password={self.ssl_keystore_password!r}, "
                f"ssl_keystore_certificate_chain={self.ssl_keystore_certificate_chain!r}, "
                f"ssl_keystore_key={self.ssl_keystore_key!r}, "
                f"client_id={self.client_id!r}, "
                f"client_rack={self.client_rack!r}, "
                f"request_timeout_ms={self.request_timeout_ms!r}, "
                f"connect_timeout_ms={self.connect_timeout_ms!r}, "
                f"connections_max_idle_ms={self.connections_max_idle_ms!r}, "
                f"metadata_max_age_ms={self.metadata_max_age_ms!r}, "
                f"retries={self.retries!r}, "
                f"retry_backoff_ms={self.retry_backoff_ms!r}, "
                f"retry_backoff_max_ms={self.retry_backoff_max_ms!r}, "
                f"fetch_max_wait_ms={self.fetch_max_wait_ms!r}, "
                f"fetch_min_bytes={self.fetch_min_bytes!r}, "
                f"fetch_max_bytes={self.fetch_max_bytes!r}, "
                f"max_partition_fetch_bytes={self.max_partition_fetch_bytes!r}, "
                f"bootstrap_servers={self.bootstrap_servers!r}, "
                f"security_protocol={self.security_protocol!r}, "
                f"sasl_mechanism={self.sasl_mechanism!r}, "
                f"ssl_enabled_protocols={self.ssl_enabled_protocols!r}, "
                f"oauth={self.oauth!r}, "
                f"isolation_level={self.isolation_level!r})")


class ValuesConfigFields(Frozen):
    """The fields of :class:`ValuesConfig`: one per option of the table, then the rest."""
    __slots__ = FIELDS = ("value_format", "value_subject_strategy", "value_record_name", "value_subject",
                        "value_schema_version", "value_schema", "key_format", "key_subject_strategy",
                        "key_record_name", "key_subject", "key_schema_version", "key_schema", "mode",
                        "registry_url", "basic_auth_credentials_source", "basic_auth_user_info",
                        "bearer_auth_credentials_source", "bearer_auth_token", "bearer_auth_logical_cluster",
                        "bearer_auth_identity_pool_id", "ssl_ca_location", "ssl_certificate_location",
                        "ssl_key_location", "ssl_key_password", "ssl_endpoint_identification_algorithm",
                        "max_retries", "retries_wait_ms", "retries_max_wait_ms", "request_timeout_ms",
                        "readers")
    #: those that are one option each
    OPTION_FIELDS: ClassVar[tuple[str, ...]] = FIELDS[:29]
    __match_args__ = ("value_format", "value_subject_strategy", "value_record_name", "value_subject",
                      "value_schema_version", "value_schema", "key_format", "key_subject_strategy",
                      "key_record_name", "key_subject", "key_schema_version", "key_schema", "mode",
                      "registry_url", "basic_auth_credentials_source", "basic_auth_user_info",
                      "bearer_auth_credentials_source", "bearer_auth_token", "bearer_auth_logical_cluster",
                      "bearer_auth_identity_pool_id", "ssl_ca_location", "ssl_certificate_location",
                      "ssl_key_location", "ssl_key_password", "ssl_endpoint_identification_algorithm",
                      "max_retries", "retries_wait_ms", "retries_max_wait_ms", "request_timeout_ms",
                      "readers")
    #: ``value.format``: how the record values are written: `binary` (bytes, as Spark's Kafka source), `avro`, `protobuf` or `json` (Confluent's serializers, schemas from schema.registry.url), `string` (UTF-8)
    value_format: Format
    #: ``value.subject.name.strategy``: the subject of the value reader schema: `TopicNameStrategy` (`<topic>-value`), `RecordNameStrategy` (`<record>`) or `TopicRecordNameStrategy` (`<topic>-<record>`)
    value_subject_strategy: SubjectStrategy
    #: ``value.schema.record.name``: the full name of the value record (Avro record, Protobuf message, JSON Schema title) for the record strategies; for Protobuf also which message of the file
    value_record_name: str | None
    #: ``value.schema.subject``: the value reader schema's subject, given outright (instead of a strategy)
    value_subject: str | None
    #: ``value.schema.version``: `latest` (default) or the version of that subject the value reader schema is
    value_schema_version: int | None
    #: ``value.schema``: the value reader schema itself (Avro JSON; Protobuf: base64 of a FileDescriptorProto, the registry's `format=serialized`; JSON Schema), instead of the registry's
    value_schema: str | None
    #: ``key.format``: how the record keys are written: `binary` (bytes, as Spark's Kafka source), `avro`, `protobuf` or `json` (Confluent's serializers, schemas from schema.registry.url), `string` (UTF-8)
    key_format: Format
    #: ``key.subject.name.strategy``: the subject of the key reader schema: `TopicNameStrategy` (`<topic>-key`), `RecordNameStrategy` (`<record>`) or `TopicRecordNameStrategy` (`<topic>-<record>`)
    key_subject_strategy: SubjectStrategy
    #: ``key.schema.record.name``: the full name of the key record (Avro record, Protobuf message, JSON Schema title) for the record strategies; for Protobuf also which message of the file
    key_record_name: str | None
    #: ``key.schema.subject``: the key reader schema's subject, given outright (instead of a strategy)
    key_subject: str | None
    #: ``key.schema.version``: `latest` (default) or the version of that subject the key reader schema is
    key_schema_version: int | None
    #: ``key.schema``: the key reader schema itself (Avro JSON; Protobuf: base64 of a FileDescriptorProto, the registry's `format=serialized`; JSON Schema), instead of the registry's
    key_schema: str | None
    #: ``mode``: a key or value that cannot be decoded (bad framing, unknown schema id, registry down, malformed payload): `FAILFAST` fails the read naming topic, partition, offset and schema id; `PERMISSIVE` gives a null and its bytes in the `corruptValue` (`corruptKey`) column
    mode: Mode
    #: ``schema.registry.url``: the schema registry's URL (several: comma-separated, tried in turn)
    registry_url: str | None
    #: ``basic.auth.credentials.source``: `USER_INFO` (basic.auth.user.info), `URL` (the user info of schema.registry.url) or `SASL_INHERIT` (the Kafka client's SASL user and password)
    basic_auth_credentials_source: CredentialsSource
    #: ``basic.auth.user.info``: `user:password` for the registry
    basic_auth_user_info: Secret | None
    #: ``bearer.auth.credentials.source``: `STATIC_TOKEN`: send bearer.auth.token
    bearer_auth_credentials_source: BearerSource | None
    #: ``bearer.auth.token``: the registry's bearer token
    bearer_auth_token: Secret | None
    #: ``bearer.auth.logical.cluster``: Confluent Cloud: the registry's logical cluster (header target-sr-cluster)
    bearer_auth_logical_cluster: str | None
    #: ``bearer.auth.identity.pool.id``: Confluent Cloud: the identity pool (header Confluent-Identity-Pool-Id)
    bearer_auth_identity_pool_id: str | None
    #: ``schema.registry.ssl.ca.location``: CA certificates (PEM) the registry's certificate is checked against (default: the system's)
    ssl_ca_location: str | None
    #: ``schema.registry.ssl.certificate.location``: client certificate (PEM) for mutual TLS
    ssl_certificate_location: str | None
    #: ``schema.registry.ssl.key.location``: client key (PEM)
    ssl_key_location: str | None
    #: ``schema.registry.ssl.key.password``: password of the client key
    ssl_key_password: Secret | None
    #: ``schema.registry.ssl.endpoint.identification.algorithm``: `https` (default) checks the registry's host name, empty does not (as the Kafka client's option)
    ssl_endpoint_identification_algorithm: str
    #: ``schema.registry.max.retries``: retries of a registry request that failed to connect or got 408, 429 or 5xx
    max_retries: int
    #: ``schema.registry.retries.wait.ms``: first wait between retries (doubles, full jitter)
    retries_wait_ms: int
    #: ``schema.registry.retries.max.wait.ms``: longest wait between retries
    retries_max_wait_ms: int
    #: ``schema.registry.request.timeout.ms``: connect and read timeout of one registry request
    request_timeout_ms: int
    # not one option each
    readers: Any

    def __init__(self, value_format: Format = "binary",
                 value_subject_strategy: SubjectStrategy = "TopicNameStrategy",
                 value_record_name: str | None = None, value_subject: str | None = None,
                 value_schema_version: int | None = None, value_schema: str | None = None,
                 key_format: Format = "binary", key_subject_strategy: SubjectStrategy = "TopicNameStrategy",
                 key_record_name: str | None = None, key_subject: str | None = None,
                 key_schema_version: int | None = None, key_schema: str | None = None,
                 mode: Mode = "FAILFAST", registry_url: str | None = None,
                 basic_auth_credentials_source: CredentialsSource = "USER_INFO",
                 basic_auth_user_info: Secret | None = None,
                 bearer_auth_credentials_source: BearerSource | None = None,
                 bearer_auth_token: Secret | None = None, bearer_auth_logical_cluster: str | None = None,
                 bearer_auth_identity_pool_id: str | None = None, ssl_ca_location: str | None = None,
                 ssl_certificate_location: str | None = None, ssl_key_location: str | None = None,
                 ssl_key_password: Secret | None = None,
                 ssl_endpoint_identification_algorithm: str = "https", max_retries: int = 3,
                 retries_wait_ms: int = 1000, retries_max_wait_ms: int = 20000,
                 request_timeout_ms: int = 30000, readers: Any = None) -> None:
        _set = object.__setattr__
        _set(self, "value_format", value_format)
        _set(self, "value_subject_strategy", value_subject_strategy)
        _set(self, "value_record_name", value_record_name)
        _set(self, "value_subject", value_subject)
        _set(self, "value_schema_version", value_schema_version)
        _set(self, "value_schema", value_schema)
        _set(self, "key_format", key_format)
        _set(self, "key_subject_strategy", key_subject_strategy)
        _set(self, "key_record_name", key_record_name)
        _set(self, "key_subject", key_subject)
        _set(self, "key_schema_version", key_schema_version)
        _set(self, "key_schema", key_schema)
        _set(self, "mode", mode)
        _set(self, "registry_url", registry_url)
        _set(self, "basic_auth_credentials_source", basic_auth_credentials_source)
        _set(self, "basic_auth_user_info", basic_auth_user_info)
        _set(self, "bearer_auth_credentials_source", bearer_auth_credentials_source)
        _set(self, "bearer_auth_token", bearer_auth_token)
        _set(self, "bearer_auth_logical_cluster", bearer_auth_logical_cluster)
        _set(self, "bearer_auth_identity_pool_id", bearer_auth_identity_pool_id)
        _set(self, "ssl_ca_location", ssl_ca_location)
        _set(self, "ssl_certificate_location", ssl_certificate_location)
        _set(self, "ssl_key_location", ssl_key_location)
        _set(self, "ssl_key_password", ssl_key_password)
        _set(self, "ssl_endpoint_identification_algorithm", ssl_endpoint_identification_algorithm)
        _set(self, "max_retries", max_retries)
        _set(self, "retries_wait_ms", retries_wait_ms)
        _set(self, "retries_max_wait_ms", retries_max_wait_ms)
        _set(self, "request_timeout_ms", request_timeout_ms)
        _set(self, "readers", readers)
        self.__post_init__()

    def __post_init__(self) -> None:
        """Checks of the whole config, run by ``__init__`` (as a dataclass runs its own)."""

    def _values(self) -> tuple:
        return (self.value_format, self.value_subject_strategy, self.value_record_name, self.value_subject,
                self.value_schema_version, self.value_schema, self.key_format, self.key_subject_strategy,
                self.key_record_name, self.key_subject, self.key_schema_version, self.key_schema, self.mode,
                self.registry_url, self.basic_auth_credentials_source, self.basic_auth_user_info,
                self.bearer_auth_credentials_source, self.bearer_auth_token,
                self.bearer_auth_logical_cluster, self.bearer_auth_identity_pool_id, self.ssl_ca_location,
                self.ssl_certificate_location, self.ssl_key_location, self.ssl_key_password,
                self.ssl_endpoint_identification_algorithm, self.max_retries, self.retries_wait_ms,
                self.retries_max_wait_ms, self.request_timeout_ms, self.readers)

    def __repr__(self) -> str:
        return (f"{type(self).__qualname__}("
                f"value_format={self.value_format!r}, "
                f"value_subject_strategy={self.value_subject_strategy!r}, "
                f"value_record_name={self.value_record_name!r}, "
                f"value_subject={self.value_subject!r}, "
                f"value_schema_version={self.value_schema_version!r}, "
                f"value_schema={self.value_schema!r}, "
                f"key_format={self.key_format!r}, "
                f"key_subject_strategy={self.key_subject_strategy!r}, "
                f"key_record_name={self.key_record_name!r}, "
                f"key_subject={self.key_subject!r}, "
                f"key_schema_version={self.key_schema_version!r}, "
                f"key_schema={self.key_schema!r}, "
                f"mode={self.mode!r}, "
                f"registry_url={self.registry_url!r}, "
                f"basic_auth_credentials_source={self.basic_auth_credentials_source!r}, "
                f"basic_auth_user_info={self.basic_auth_user_info!r}, "
                f"bearer_auth_credentials_source={self.bearer_auth_credentials_source!r}, "
                f"bearer_auth_token={self.bearer_auth_token!r}, "
                f"bearer_auth_logical_cluster={self.bearer_auth_logical_cluster!r}, "
                f"bearer_auth_identity_pool_id={self.bearer_auth_identity_pool_id!r}, "
                f"ssl_ca_location={self.ssl_ca_location!r}, "
                f"ssl_certificate_location={self.ssl_certificate_location!r}, "
                f"ssl_key_location={self.ssl_key_location!r}, "
                f"ssl_key_password={self.ssl_key_password!r}, "
                f"ssl_endpoint_identification_algorithm={self.ssl_endpoint_identification_algorithm!r}, "
                f"max_retries={self.max_retries!r}, "
                f"retries_wait_ms={self.retries_wait_ms!r}, "
                f"retries_max_wait_ms={self.retries_max_wait_ms!r}, "
                f"request_timeout_ms={self.request_timeout_ms!r}, "
                f"readers={self.readers!r})")
