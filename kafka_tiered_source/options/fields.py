"""The option-backed fields of the frozen configs, one per row of the option table that has a
``field``.  Generated from :mod:`.table` by ``python -m kafka_tiered_source.options.codegen``:
edit the table, not this file."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..redact import Secret

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


@dataclass(frozen=True)
class ReadOptionsFields:
    """The fields of :class:`ReadOptions` that are one option each."""
    #: ``failOnDataLoss``: fail when offsets were deleted by retention
    fail_on_data_loss: bool = True
    #: ``minPartitions``: at least this many Spark partitions
    min_partitions: int | None = None
    #: ``maxRecordsPerPartition``: at most this many offsets per Spark partition
    max_records_per_partition: int | None = None
    #: ``includeHeaders``: add the `headers` column
    include_headers: bool = False
    #: ``kafkaConsumer.pollTimeoutMs``: the longest a fetch of broker records (ms) may take, retries included, before the task fails (Spark: spark.network.timeout)
    poll_timeout_ms: int = 120000
    #: ``fetchOffset.numRetries``: attempts of each offset look-up (ListOffsets) before the read fails, as Spark counts them
    fetch_offset_num_retries: int = 3
    #: ``fetchOffset.retryIntervalMs``: wait between those attempts (ms)
    fetch_offset_retry_interval_ms: int = 10
    #: ``maxOffsetsPerTrigger``: at most this many offsets per micro-batch, split over the partitions by lag
    max_offsets_per_trigger: int | None = None
    #: ``minOffsetsPerTrigger``: wait for this many new offsets (or maxTriggerDelay) before a micro-batch
    min_offsets_per_trigger: int | None = None
    #: ``maxTriggerDelay``: the longest a micro-batch waits for minOffsetsPerTrigger
    max_trigger_delay_ms: int = 900000
    #: ``maxBytesPerTrigger``: at most this many log bytes per micro-batch (kafka-tiered's own)
    max_bytes_per_trigger: int | None = None
    #: ``partition.target.bytes``: bytes per Spark partition
    partition_target_bytes: int = 134217728
    #: ``fetch.remote.enabled``: read tiered segments directly; `false` reads everything through brokers
    fetch_remote_enabled: bool = True
    #: ``remote.segment.locator``: how tiered segments are found: `auto` (KIP-1248 answers, then `__remote_log_metadata`, then listing the store), `kip1248`, `metadata-topic` or `listing`
    segment_locator: Locator = "auto"
    #: ``remote.log.metadata.topic``: the topic today's brokers keep tiered segments in (TopicBasedRemoteLogMetadataManager)
    metadata_topic: str = "__remote_log_metadata"
    #: ``remote.log.metadata.cache.dir``: where the catalog of that topic is kept between processes, so a plan reads only what was written since the last one: a path, or an fsspec URL several drivers share (s3://bucket/kt-cache); `none` keeps it in the process only (default: $KAFKA_TIERED_CACHE_DIR, else the user's cache directory)
    metadata_cache_dir: str | None = None
    #: ``fetch.remote.fallback``: when tiered ranges go through the brokers: `auto` (a range whose direct read fails on a storage fault), `never` (the task fails; Spark retries it) or `always` (all of them, on purpose)
    fetch_remote_fallback: Fallback = "auto"
    #: ``fetch.remote.fallback.max.bytes``: a task fails once more than this many bytes came through the brokers because direct reads failed
    fetch_remote_fallback_max_bytes: int | None = None
    #: ``metrics.jsonl.path``: each task appends its metrics here as a JSON line
    metrics_jsonl_path: str | None = None
    #: ``metrics.dir``: each task writes its metrics under `<dir>/<read id>/`, where `last_read_stats` finds them without an accumulator (Spark Connect): a path or fsspec URL every executor can write (default on Connect after `register()`: each machine's temp directory)
    metrics_dir: str | None = None
    #: ``telemetry.push.enabled``: push task metrics to the broker (KIP-714) when it asks
    telemetry_push: bool = True


@dataclass(frozen=True)
class FetcherConfigFields:
    """The fields of :class:`FetcherConfig` that are one option each."""
    #: ``remote.storage.fetcher``: fetcher name: s3, gcs, azure, fsspec, presigned, or one registered under the entry-point group kafka_tiered_source.fetchers
    fetcher: str | None = None
    #: ``remote.storage.fetcher.class``: dotted path (pkg.mod:Class) of your own ByteRangeStore (or RemoteStorageFetcher) subclass; wins over remote.storage.fetcher
    fetcher_class: str | None = None
    #: ``remote.storage.layout``: object layout: aiven (default), kafka-local-tiered or template
    layout: Layout = "aiven"
    #: ``remote.storage.layout.template``: format string of the template layout, fields {prefix} {topic} {topic_id} {partition} {base_offset} {end_offset} {segment_id} {suffix}
    template: str | None = None
    #: ``remote.storage.layout.padded.offsets``: kafka-local-tiered: zero-pad offsets to 20 digits
    padded_offsets: bool = True
    #: ``remote.storage.prefix``: key prefix (Aiven key.prefix; root directory for kafka-local-tiered)
    prefix: str = ""
    #: ``fetch.remote.connect.timeout.ms``: connect timeout of one GET; a timeout falls back to the broker
    connect_timeout_ms: int = 1000
    #: ``fetch.remote.read.timeout.ms``: socket read timeout of one GET
    read_timeout_ms: int = 5000
    #: ``fetch.remote.part.size.bytes``: large ranges are split into GETs of this size
    part_size: int = 16777216
    #: ``fetch.remote.concurrency``: parts fetched at once by one fetcher
    concurrency: int = 4
    #: ``fetch.remote.coalesce.gap.bytes``: ranges closer than this are read in one GET
    coalesce_gap: int = 1048576
    #: ``fetch.remote.retry.max.attempts``: attempts per GET on throttling, 5xx and connection errors
    retry_max_attempts: int = 5
    #: ``fetch.remote.retry.backoff.ms``: first back-off; doubles per attempt, with jitter
    retry_backoff_ms: int = 100
    #: ``fetch.remote.retry.backoff.max.ms``: back-off cap
    retry_backoff_max_ms: int = 5000
    #: ``fetch.remote.manifest.cache.size``: Aiven manifests kept per fetcher
    manifest_cache_size: int = 1024


@dataclass(frozen=True)
class QuotaConfigFields:
    """The fields of :class:`QuotaConfig` that are one option each."""
    #: ``quota.remote.bytes.per.second``: per-task byte rate from storage
    remote_bytes_per_second: float | None = None
    #: ``quota.remote.requests.per.second``: per-task GET rate
    remote_requests_per_second: float | None = None
    #: ``quota.job.remote.bytes.per.second``: job byte rate, split over the tasks
    job_remote_bytes_per_second: float | None = None
    #: ``quota.job.remote.requests.per.second``: job GET rate, split over the tasks
    job_remote_requests_per_second: float | None = None


@dataclass(frozen=True)
class ClientConfigFields:
    """The fields of :class:`ClientConfig` that are one option each."""
    #: ``sasl.username``: SASL user
    sasl_username: str | None = None
    #: ``sasl.password``: SASL password
    sasl_password: Secret | None = None
    #: ``ssl.cafile``: CA certificates (PEM)
    ssl_cafile: str | None = None
    #: ``ssl.certfile``: client certificate (PEM)
    ssl_certfile: str | None = None
    #: ``ssl.keyfile``: client key (PEM)
    ssl_keyfile: str | None = None
    #: ``ssl.key.password``: password of the client key
    ssl_key_password: Secret | None = None
    #: ``ssl.endpoint.identification.algorithm``: `https` (any case) checks the broker's host name, `LDAP` or `LDAPS` by Java's LDAP rules; empty turns the check off (with a warning); any other value is refused
    ssl_endpoint_identification_algorithm: EndpointIdentification = "https"
    #: ``ssl.truststore.type``: JKS, PKCS12 or PEM (default: told from the file)
    ssl_truststore_type: str | None = None
    #: ``ssl.truststore.location``: truststore file (JKS, PKCS12 or PEM); must exist on every executor
    ssl_truststore_location: str | None = None
    #: ``ssl.truststore.password``: truststore password (JKS, PKCS12)
    ssl_truststore_password: Secret | None = None
    #: ``ssl.truststore.certificates``: trusted certificates as PEM text (ssl.truststore.type=PEM; KIP-651)
    ssl_truststore_certificates: str | None = None
    #: ``ssl.keystore.type``: JKS, PKCS12 or PEM (default: told from the file)
    ssl_keystore_type: str | None = None
    #: ``ssl.keystore.location``: keystore file (JKS, PKCS12 or PEM) with the client key for mutual TLS; must exist on every executor
    ssl_keystore_location: str | None = None
    #: ``ssl.keystore.password``: keystore password (JKS, PKCS12)
    ssl_keystore_password: Secret | None = None
    #: ``ssl.keystore.certificate.chain``: client certificate chain as PEM text (ssl.keystore.type=PEM)
    ssl_keystore_certificate_chain: str | None = None
    #: ``ssl.keystore.key``: client private key as PEM text (ssl.keystore.type=PEM)
    ssl_keystore_key: Secret | None = None
    #: ``client.id``: client id sent to the brokers
    client_id: str = "kafka-tiered"
    #: ``client.rack``: rack of the client (follower fetching)
    client_rack: str = ""
    #: ``request.timeout.ms``: broker request timeout
    request_timeout_ms: int = 30000
    #: ``socket.connection.setup.timeout.ms``: connect timeout
    connect_timeout_ms: int = 10000
    #: ``connections.max.idle.ms``: close idle connections after this
    connections_max_idle_ms: int = 540000
    #: ``metadata.max.age.ms``: refresh metadata this often
    metadata_max_age_ms: int = 300000
    #: ``retries``: retries of a failed request
    retries: int = 5
    #: ``retry.backoff.ms``: first back-off between retries
    retry_backoff_ms: int = 100
    #: ``retry.backoff.max.ms``: back-off cap
    retry_backoff_max_ms: int = 1000
    #: ``fetch.max.wait.ms``: how long a broker may hold a Fetch
    fetch_max_wait_ms: int = 500
    #: ``fetch.min.bytes``: bytes a broker waits for
    fetch_min_bytes: int = 1
    #: ``fetch.max.bytes``: bytes per Fetch
    fetch_max_bytes: int = 52428800
    #: ``max.partition.fetch.bytes``: bytes per partition per Fetch
    max_partition_fetch_bytes: int = 1048576


@dataclass(frozen=True)
class ValuesConfigFields:
    """The fields of :class:`ValuesConfig` that are one option each."""
    #: ``value.format``: how the record values are written: `binary` (bytes, as Spark's Kafka source), `avro`, `protobuf` or `json` (Confluent's serializers, schemas from schema.registry.url), `string` (UTF-8)
    value_format: Format = "binary"
    #: ``value.subject.name.strategy``: the subject of the value reader schema: `TopicNameStrategy` (`<topic>-value`), `RecordNameStrategy` (`<record>`) or `TopicRecordNameStrategy` (`<topic>-<record>`)
    value_subject_strategy: SubjectStrategy = "TopicNameStrategy"
    #: ``value.schema.record.name``: the full name of the value record (Avro record, Protobuf message, JSON Schema title) for the record strategies; for Protobuf also which message of the file
    value_record_name: str | None = None
    #: ``value.schema.subject``: the value reader schema's subject, given outright (instead of a strategy)
    value_subject: str | None = None
    #: ``value.schema.version``: `latest` (default) or the version of that subject the value reader schema is
    value_schema_version: int | None = None
    #: ``value.schema``: the value reader schema itself (Avro JSON; Protobuf: base64 of a FileDescriptorProto, the registry's `format=serialized`; JSON Schema), instead of the registry's
    value_schema: str | None = None
    #: ``key.format``: how the record keys are written: `binary` (bytes, as Spark's Kafka source), `avro`, `protobuf` or `json` (Confluent's serializers, schemas from schema.registry.url), `string` (UTF-8)
    key_format: Format = "binary"
    #: ``key.subject.name.strategy``: the subject of the key reader schema: `TopicNameStrategy` (`<topic>-key`), `RecordNameStrategy` (`<record>`) or `TopicRecordNameStrategy` (`<topic>-<record>`)
    key_subject_strategy: SubjectStrategy = "TopicNameStrategy"
    #: ``key.schema.record.name``: the full name of the key record (Avro record, Protobuf message, JSON Schema title) for the record strategies; for Protobuf also which message of the file
    key_record_name: str | None = None
    #: ``key.schema.subject``: the key reader schema's subject, given outright (instead of a strategy)
    key_subject: str | None = None
    #: ``key.schema.version``: `latest` (default) or the version of that subject the key reader schema is
    key_schema_version: int | None = None
    #: ``key.schema``: the key reader schema itself (Avro JSON; Protobuf: base64 of a FileDescriptorProto, the registry's `format=serialized`; JSON Schema), instead of the registry's
    key_schema: str | None = None
    #: ``mode``: a key or value that cannot be decoded (bad framing, unknown schema id, registry down, malformed payload): `FAILFAST` fails the read naming topic, partition, offset and schema id; `PERMISSIVE` gives a null and its bytes in the `corruptValue` (`corruptKey`) column
    mode: Mode = "FAILFAST"
    #: ``schema.registry.url``: the schema registry's URL (several: comma-separated, tried in turn)
    registry_url: str | None = None
    #: ``basic.auth.credentials.source``: `USER_INFO` (basic.auth.user.info), `URL` (the user info of schema.registry.url) or `SASL_INHERIT` (the Kafka client's SASL user and password)
    basic_auth_credentials_source: CredentialsSource = "USER_INFO"
    #: ``basic.auth.user.info``: `user:password` for the registry
    basic_auth_user_info: Secret | None = None
    #: ``bearer.auth.credentials.source``: `STATIC_TOKEN`: send bearer.auth.token
    bearer_auth_credentials_source: BearerSource | None = None
    #: ``bearer.auth.token``: the registry's bearer token
    bearer_auth_token: Secret | None = None
    #: ``bearer.auth.logical.cluster``: Confluent Cloud: the registry's logical cluster (header target-sr-cluster)
    bearer_auth_logical_cluster: str | None = None
    #: ``bearer.auth.identity.pool.id``: Confluent Cloud: the identity pool (header Confluent-Identity-Pool-Id)
    bearer_auth_identity_pool_id: str | None = None
    #: ``schema.registry.ssl.ca.location``: CA certificates (PEM) the registry's certificate is checked against (default: the system's)
    ssl_ca_location: str | None = None
    #: ``schema.registry.ssl.certificate.location``: client certificate (PEM) for mutual TLS
    ssl_certificate_location: str | None = None
    #: ``schema.registry.ssl.key.location``: client key (PEM)
    ssl_key_location: str | None = None
    #: ``schema.registry.ssl.key.password``: password of the client key
    ssl_key_password: Secret | None = None
    #: ``schema.registry.ssl.endpoint.identification.algorithm``: `https` (default) checks the registry's host name, empty does not (as the Kafka client's option)
    ssl_endpoint_identification_algorithm: str = "https"
    #: ``schema.registry.max.retries``: retries of a registry request that failed to connect or got 408, 429 or 5xx
    max_retries: int = 3
    #: ``schema.registry.retries.wait.ms``: first wait between retries (doubles, full jitter)
    retries_wait_ms: int = 1000
    #: ``schema.registry.retries.max.wait.ms``: longest wait between retries
    retries_max_wait_ms: int = 20000
    #: ``schema.registry.request.timeout.ms``: connect and read timeout of one registry request
    request_timeout_ms: int = 30000
