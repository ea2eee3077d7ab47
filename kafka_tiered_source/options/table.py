"""Every option, declared once: name, parser, default, secret flag, one line of doc, and the
typed field it fills.

The Spark source's options, the storage layer's ``remote.storage.*`` / ``fetch.remote.*`` and
the Kafka client's properties are rows of the same table, checked by the same validator
(:func:`unknown`): a name that is not declared is refused by name, with the closest declared
name as a suggestion, whatever else is set.  Only a third-party fetcher's own declared options
(``remote.storage.<its name>.*``) and ``remote.storage.custom.*`` (for a
``remote.storage.fetcher.class``) pass through.  docs/options.md is :func:`markdown_table`.

A row with ``field=`` is an attribute of a frozen config (:data:`CONFIG_OF_GROUP` says which;
``into=`` overrides it): the field's type follows the parser (``Literal`` for enumerations),
its default is the row's, and the one parse fills it.  :mod:`.fields` holds those fields,
generated from this table by :mod:`.codegen`.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Iterable

from ..dataclass import dataclass
from ..errors import ConfigError
from . import values as v
from .encryption import parse_key_pairs
from .pricing import EGRESS_CLASSES as _EGRESS
from .pricing import PRESETS
from .tls import IDENTIFICATION_ALGORITHMS, endpoint_identification

KIB = 1024
MIB = 1024 * KIB

# How each family names its options in messages (see values.py).
LABELS = {"spark": "Option '{}'", "streaming": "Option '{}'", "source": "Option '{}'",
          "cost": "Option '{}'", "quota": "Option '{}'", "metrics": "Option '{}'", "scan": "Option '{}'",
          "values": "Option '{}'",
          "storage": "option {}", "s3": "option {}", "gcs": "option {}", "azure": "option {}",
          "fsspec": "option {}", "aiven": "option {}", "fetch": "option {}", "kafka": "{}"}

GROUP_TITLES = {
    "spark": "Spark's Kafka source options", "streaming": "Streaming (`readStream`; batch reads ignore them)",
    "source": "Options of kafka-tiered", "storage": "Remote storage", "s3": "S3 (`remote.storage.fetcher=s3`)",
    "gcs": "GCS (`remote.storage.fetcher=gcs`)", "azure": "Azure Blob (`remote.storage.fetcher=azure`)",
    "fsspec": "fsspec (`remote.storage.fetcher=fsspec`)",
    "aiven": "Encrypted Aiven segments (`remote.storage.layout=aiven`)", "fetch": "Direct reads",
    "cost": "Costs", "quota": "Quotas", "metrics": "Metrics",
    "scan": "`kafka_tiered_source.scan()` and `kafka-tiered export` (Spark reads ignore them)",
    "values": "Typed keys and values (a schema registry's serializers; docs/typed-values.md)",
    "kafka": "Kafka client (`kafka.` + the property)",
}


# The frozen config each group's rows with a ``field`` belong to (``into=`` on a row overrides).
CONFIG_OF_GROUP = {"spark": "ReadOptions", "streaming": "ReadOptions", "source": "ReadOptions",
                   "metrics": "ReadOptions", "storage": "FetcherConfig", "fetch": "FetcherConfig",
                   "quota": "QuotaConfig", "kafka": "ClientConfig", "values": "ValuesConfig"}


@dataclass(frozen=True)
class Parser:
    """A parser of the table, ``(label, name, raw) -> value``, that knows the Python type of
    its values as the generated config spells it (``alias`` names a ``Literal`` of ``choices``)."""
    fn: Callable[[str, str, Any], Any]
    type: str
    choices: tuple[str, ...] = ()
    alias: str | None = None

    def __call__(self, label: str, name: str, raw: Any) -> Any:
        return self.fn(label, name, raw)


def _int(minimum: int, maximum: int = v.INT64_MAX) -> Parser:
    return Parser(partial(v.integer, minimum=minimum, maximum=maximum), "int")


def _between(minimum: float, maximum: float) -> Parser:
    return Parser(partial(v.between, minimum=minimum, maximum=maximum), "float")


def choice(alias: str, choices: Iterable[str]) -> Parser:
    """One of ``choices`` (lower-case); the config's type is ``alias = Literal[choices]``."""
    options = tuple(choices)
    return Parser(partial(v.choice, choices=options), alias, options, alias)


TEXT = Parser(v.text, "str")
NONEMPTY = Parser(v.nonempty, "str")
NAME = Parser(v.name, "str")
STRIPPED = Parser(v.stripped, "str")
DURATION = Parser(v.duration_ms, "int")
SPARK_BOOL = Parser(v.boolean, "bool")
LENIENT_BOOL = Parser(partial(v.boolean, lenient=True), "bool")
AMOUNT = Parser(partial(v.number, positive=False), "float")       # >= 0
RATE = Parser(partial(v.number, positive=True), "float")          # > 0
SECRET = Parser(v.secret, "Secret")                               # never shown: redact.Secret
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
LAYOUTS = ("aiven", "kafka-local-tiered", "template")
LOCATORS = ("auto", "kip1248", "metadata-topic", "listing")
FALLBACKS = ("auto", "never", "always")
FORMATS = ("binary", "avro", "protobuf", "json", "string")
MODES = ("FAILFAST", "PERMISSIVE")
STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."


def _named(label: str, name: str, raw: Any, *, choices: tuple[str, ...]) -> str:
    """One of ``choices`` in any letter case, as spelt there; a strategy may be given by its Java
    class name (``io.confluent.kafka.serializers.subject.TopicNameStrategy``)."""
    text = str(raw).strip()
    if text.startswith(_STRATEGY_PACKAGE):
        text = text[len(_STRATEGY_PACKAGE):]
    for c in choices:
        if c.lower() == text.lower():
            return c
    raise ConfigError(f"{label} must be one of {', '.join(choices)}; got {v.show(name, raw)}", option=name)


def named(alias: str, choices: tuple[str, ...]) -> Parser:
    return Parser(partial(_named, choices=choices), alias, choices, alias)


def _version(label: str, name: str, raw: Any) -> int | None:
    """A subject's version: ``latest`` (None) or a number >= 1."""
    return None if str(raw).strip().lower() == "latest" else v.integer(label, name, raw, minimum=1,
                                                                       maximum=v.INT32_MAX)


@dataclass(frozen=True)
class Option:
    name: str                                   # canonical spelling
    group: str
    doc: str
    parse: Callable[[str, str, Any], Any] = TEXT   # (label, name, raw) -> value
    default: Any = None
    secret: bool = False
    field: str | None = None                    # the config attribute it fills (None: read by name)
    into: str | None = None                     # that config, when not CONFIG_OF_GROUP[group]

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def label(self) -> str:
        return LABELS[self.group].format(self.name)

    @property
    def config(self) -> str | None:
        """The frozen config :attr:`field` belongs to (None for a row without one)."""
        return None if self.field is None else (self.into or CONFIG_OF_GROUP[self.group])

    @property
    def value_type(self) -> str:
        """The Python type of the field, as :mod:`.fields` spells it (``X | None`` when the
        row has no default)."""
        base = self.parse.type if isinstance(self.parse, Parser) else "Any"
        return base if self.default is not None else f"{base} | None"

    def value(self, raw: Any) -> Any:
        return self.parse(self.label, self.name, raw)


def _typed_side(side: str) -> tuple[Option, ...]:
    """The rows of ``value.*`` or ``key.*``: how that column is written and its reader schema."""
    return (
        O(f"{side}.format", "values", f"how the record {side}s are written: `binary` (bytes, as Spark's Kafka source), "
          f"`avro`, `protobuf` or `json` (Confluent's serializers, schemas from schema.registry.url), `string` "
          f"(UTF-8)", choice("Format", FORMATS), "binary", field=f"{side}_format"),
        O(f"{side}.subject.name.strategy", "values", f"the subject of the {side} reader schema: `TopicNameStrategy` "
          f"(`<topic>-{side}`), `RecordNameStrategy` (`<record>`) or `TopicRecordNameStrategy` (`<topic>-<record>`)",
          named("SubjectStrategy", STRATEGIES), "TopicNameStrategy", field=f"{side}_subject_strategy"),
        O(f"{side}.schema.record.name", "values", f"the full name of the {side} record (Avro record, Protobuf "
          f"message, JSON Schema title) for the record strategies; for Protobuf also which message of the file",
          NONEMPTY, field=f"{side}_record_name"),
        O(f"{side}.schema.subject", "values", f"the {side} reader schema's subject, given outright (instead of "
          f"a strategy)", NONEMPTY, field=f"{side}_subject"),
        O(f"{side}.schema.version", "values", f"`latest` (default) or the version of that subject the {side} "
          f"reader schema is", Parser(_version, "int"), field=f"{side}_schema_version"),
        O(f"{side}.schema", "values", f"the {side} reader schema itself (Avro JSON; Protobuf: base64 of a "
          f"FileDescriptorProto, the registry's `format=serialized`; JSON Schema), instead of the registry's",
          NONEMPTY, field=f"{side}_schema"),
    )


# Adding an option is adding a row below (name, group, doc, parser, default; secret=True for
# credentials).  Give it ``field="attr"`` and it becomes a typed, defaulted attribute of its
# group's config, filled by the one parse: then run ``python -m kafka_tiered_source.options.codegen``
# (it rewrites options/fields.py and the reference in docs/options.md); the tests of
# the table fail while either is stale.  A row without a field is read by name where it is
# used (a backend's ``config.option("remote.storage.x.y")``, the offsets JSON); a row nothing
# reads fails those tests too.
O = Option
OPTIONS: tuple[Option, ...] = (
    # -- Spark's Kafka source --------------------------------------------------------------------
    O("subscribe", "spark", "comma-separated topics to read"),
    O("subscribePattern", "spark", "regular expression (Python `re`, whole name) of the topics to read"),
    O("assign", "spark", 'JSON topic-partitions to read, e.g. `{"t":[0,1]}`'),
    O("startingOffsets", "spark", "`earliest` (default), or JSON offsets per partition (-2 earliest)"),
    O("endingOffsets", "spark", "`latest` (default), or JSON offsets per partition (-1 latest)"),
    O("startingTimestamp", "spark", "start at the first record at or after this time (ms) in every partition"),
    O("endingTimestamp", "spark", "stop before the first record at or after this time (ms)"),
    O("startingOffsetsByTimestamp", "spark", "JSON start timestamps (ms) per partition"),
    O("endingOffsetsByTimestamp", "spark", "JSON end timestamps (ms) per partition"),
    O("startingOffsetsByTimestampStrategy", "spark", "`error` (default) or `latest` when no record is that late",
      choice("TimestampStrategy", ("error", "latest")), "error"),
    O("failOnDataLoss", "spark", "fail when offsets were deleted by retention", SPARK_BOOL, True,
      field="fail_on_data_loss"),
    O("minPartitions", "spark", "at least this many Spark partitions", _int(1, v.INT32_MAX),
      field="min_partitions"),
    O("maxRecordsPerPartition", "spark", "at most this many offsets per Spark partition", _int(1),
      field="max_records_per_partition"),
    O("includeHeaders", "spark", "add the `headers` column", SPARK_BOOL, False, field="include_headers"),
    O("kafkaConsumer.pollTimeoutMs", "spark", "the longest a fetch of broker records (ms) may take, retries "
      "included, before the task fails (Spark: spark.network.timeout)", _int(1), 120_000, field="poll_timeout_ms"),
    O("fetchOffset.numRetries", "spark", "attempts of each offset look-up (ListOffsets) before the read fails, as "
      "Spark counts them", _int(1, v.INT32_MAX), 3, field="fetch_offset_num_retries"),
    O("fetchOffset.retryIntervalMs", "spark", "wait between those attempts (ms)", _int(0), 10,
      field="fetch_offset_retry_interval_ms"),
    O("maxOffsetsPerTrigger", "streaming", "at most this many offsets per micro-batch, split over the "
      "partitions by lag", _int(1), field="max_offsets_per_trigger"),
    O("minOffsetsPerTrigger", "streaming", "wait for this many new offsets (or maxTriggerDelay) before a "
      "micro-batch", _int(1), field="min_offsets_per_trigger"),
    O("maxTriggerDelay", "streaming", "the longest a micro-batch waits for minOffsetsPerTrigger",
      DURATION, 15 * 60_000, field="max_trigger_delay_ms"),
    O("maxBytesPerTrigger", "streaming", "at most this many log bytes per micro-batch (kafka-tiered's own)",
      _int(1), field="max_bytes_per_trigger"),
    O("groupIdPrefix", "streaming", "ignored: kafka-tiered joins no consumer group"),
    # -- kafka-tiered's own ----------------------------------------------------------------------
    O("client.id", "source", "client-id that metrics and costs are attributed to (default: the Spark app name)",
      NONEMPTY),
    O("partition.target.bytes", "source", "bytes per Spark partition", _int(1), 128 * MIB,
      field="partition_target_bytes"),
    O("fetch.remote.enabled", "source", "read tiered segments directly; `false` reads everything through brokers",
      SPARK_BOOL, True, field="fetch_remote_enabled"),
    O("remote.segment.locator", "source", "how tiered segments are found: `auto` (KIP-1248 answers, then "
      "`__remote_log_metadata`, then listing the store), `kip1248`, `metadata-topic` or `listing`",
      choice("Locator", LOCATORS), "auto", field="segment_locator"),
    O("pushFilters", "source", "filter pushdown for batch reads (Spark 4.1+): `auto` follows Spark's "
      "spark.sql.python.filterPushdown.enabled as seen from Spark's planner process; `true` or `false` says it "
      "outright (`true` needs that setting on: Spark refuses a pushdown reader otherwise)",
      Parser(partial(v.choice, choices=("auto", "true", "false")), "str"), "auto"),
    O("remote.log.metadata.topic", "source", "the topic today's brokers keep tiered segments in "
      "(TopicBasedRemoteLogMetadataManager)", NONEMPTY, "__remote_log_metadata", field="metadata_topic"),
    O("remote.log.metadata.cache.dir", "source", "where the catalog of that topic is kept between processes, so a "
      "plan reads only what was written since the last one: a path, or an fsspec URL several drivers share "
      "(s3://bucket/kt-cache); `none` keeps it in the process only (default: $KAFKA_TIERED_CACHE_DIR, else the "
      "user's cache directory)", NONEMPTY, field="metadata_cache_dir"),
    # -- where the objects are -------------------------------------------------------------------
    O("remote.storage.fetcher", "storage", "fetcher name: s3, gcs, azure, fsspec, presigned, or one registered "
      "under the entry-point group kafka_tiered_source.fetchers", NAME, field="fetcher"),
    O("remote.storage.fetcher.class", "storage", "dotted path (pkg.mod:Class) of your own ByteRangeStore "
      "(or RemoteStorageFetcher) subclass; wins over remote.storage.fetcher", STRIPPED, field="fetcher_class"),
    O("remote.storage.layout", "storage", "object layout: aiven (default), kafka-local-tiered or template",
      choice("Layout", LAYOUTS), "aiven", field="layout"),
    O("remote.storage.layout.template", "storage", "format string of the template layout, fields {prefix} {topic} "
      "{topic_id} {partition} {base_offset} {end_offset} {segment_id} {suffix}", field="template"),
    O("remote.storage.layout.padded.offsets", "storage", "kafka-local-tiered: zero-pad offsets to 20 digits",
      LENIENT_BOOL, True, field="padded_offsets"),
    O("remote.storage.prefix", "storage", "key prefix (Aiven key.prefix; root directory for kafka-local-tiered)",
      TEXT, "", field="prefix"),
    O("remote.storage.uri", "storage", "shortcut for fetcher, bucket and prefix: s3://bucket/prefix, gs://..., "
      "az://container/prefix, abfs://container@account.dfs.core.windows.net/prefix, file:///path, memory://path"),
    O("remote.storage.s3.bucket", "s3", "bucket"),
    O("remote.storage.s3.endpoint", "s3", "endpoint URL (MinIO, moto, ...); default AWS"),
    O("remote.storage.s3.region", "s3", "region (default: the standard chain, else us-east-1)"),
    O("remote.storage.s3.access.key.id", "s3", "access key id (default: the standard credential chain)", secret=True),
    O("remote.storage.s3.secret.access.key", "s3", "secret access key", secret=True),
    O("remote.storage.s3.session.token", "s3", "session token", secret=True),
    O("remote.storage.s3.path.style.access", "s3", "true for path-style addressing (default: true with an endpoint)",
      LENIENT_BOOL),
    O("remote.storage.gcs.bucket", "gcs", "bucket"),
    O("remote.storage.gcs.endpoint", "gcs", "endpoint URL (emulator); default Google"),
    O("remote.storage.gcs.project", "gcs", "project"),
    O("remote.storage.gcs.credentials", "gcs", "gcsfs token: path to a service-account JSON, anon, google_default "
      "(default), cloud, browser", secret=True),
    O("remote.storage.azure.container", "azure", "blob container"),
    O("remote.storage.azure.account.name", "azure", "storage account name"),
    O("remote.storage.azure.account.key", "azure", "storage account key", secret=True),
    O("remote.storage.azure.connection.string", "azure", "connection string (wins over account name and key)",
      secret=True),
    O("remote.storage.azure.sas.token", "azure", "SAS token", secret=True),
    O("remote.storage.azure.endpoint", "azure", "blob endpoint URL (Azurite: http://127.0.0.1:port/account)"),
    O("remote.storage.fsspec.url", "fsspec", "root URL (file:///data, memory://root, ...)"),
    O("remote.storage.aiven.encryption.key.pairs", "aiven", "where the private key of each key pair is, "
      "`id=file:PATH` (PKCS#8 PEM) or `id=env:NAME`, comma-separated: every key-pair id whose segments "
      "are read (the plugin's encryption.key.pairs); never the key itself", parse_key_pairs, secret=True),
    # -- how hard direct reads try ---------------------------------------------------------------
    O("fetch.remote.connect.timeout.ms", "fetch", "connect timeout of one GET; a timeout falls back to the broker",
      _int(1), 1000, field="connect_timeout_ms"),
    O("fetch.remote.read.timeout.ms", "fetch", "socket read timeout of one GET", _int(1), 5000,
      field="read_timeout_ms"),
    O("fetch.remote.part.size.bytes", "fetch", "large ranges are split into GETs of this size", _int(1), 16 * MIB,
      field="part_size"),
    O("fetch.remote.concurrency", "fetch", "parts fetched at once by one fetcher", _int(1), 4,
      field="concurrency"),
    O("fetch.remote.coalesce.gap.bytes", "fetch", "ranges closer than this are read in one GET", _int(0), 1 * MIB,
      field="coalesce_gap"),
    O("fetch.remote.retry.max.attempts", "fetch", "attempts per GET on throttling, 5xx and connection errors",
      _int(1), 5, field="retry_max_attempts"),
    O("fetch.remote.retry.backoff.ms", "fetch", "first back-off; doubles per attempt, with jitter", _int(1), 100,
      field="retry_backoff_ms"),
    O("fetch.remote.retry.backoff.max.ms", "fetch", "back-off cap", _int(1), 5000, field="retry_backoff_max_ms"),
    O("fetch.remote.manifest.cache.size", "fetch", "Aiven manifests kept per fetcher", _int(0), 1024,
      field="manifest_cache_size"),
    O("fetch.remote.fallback", "fetch", "when tiered ranges go through the brokers: `auto` (a range whose "
      "direct read fails on a storage fault), `never` (the task fails; Spark retries it) or `always` (all of "
      "them, on purpose)", choice("Fallback", FALLBACKS), "auto", field="fetch_remote_fallback",
      into="ReadOptions"),
    O("fetch.remote.fallback.max.bytes", "fetch", "a task fails once more than this many bytes came through "
      "the brokers because direct reads failed", _int(0),
      field="fetch_remote_fallback_max_bytes", into="ReadOptions"),
    # -- accounting ------------------------------------------------------------------------------
    O("cost.preset", "cost", "price model: aws-s3-standard (default), gcs-standard, azure-hot",
      choice("CostPreset", PRESETS), "aws-s3-standard"),
    O("cost.egress", "cost", "egress class: same-region (default), inter-az, inter-region, internet",
      choice("EgressClass", _EGRESS), "same-region"),
    O("cost.rate.get.per.1000", "cost", "override: dollars per 1,000 GETs", AMOUNT),
    O("cost.rate.egress.per.gb", "cost", "override: dollars per GB read from storage", AMOUNT),
    O("cost.rate.broker.per.gb", "cost", "override: dollars per GB through brokers", AMOUNT),
    O("cost.budget.usd", "cost", "refuse a read estimated above this, before any GET", AMOUNT),
    O("quota.remote.bytes.per.second", "quota", "per-task byte rate from storage", RATE,
      field="remote_bytes_per_second"),
    O("quota.remote.requests.per.second", "quota", "per-task GET rate", RATE,
      field="remote_requests_per_second"),
    O("quota.job.remote.bytes.per.second", "quota", "job byte rate, split over the tasks", RATE,
      field="job_remote_bytes_per_second"),
    O("quota.job.remote.requests.per.second", "quota", "job GET rate, split over the tasks", RATE,
      field="job_remote_requests_per_second"),
    O("metrics.jsonl.path", "metrics", "each task appends its metrics here as a JSON line", NONEMPTY,
      field="metrics_jsonl_path"),
    O("metrics.dir", "metrics", "each task writes its metrics under `<dir>/<read id>/`, where `last_read_stats` "
      "finds them without an accumulator (Spark Connect): a path or fsspec URL every executor can write "
      "(default on Connect after `register()`: each machine's temp directory)", NONEMPTY,
      field="metrics_dir"),
    O("telemetry.push.enabled", "metrics", "push task metrics to the broker (KIP-714) when it asks",
      SPARK_BOOL, True, field="telemetry_push"),
    # -- scan() only: it runs the tasks itself, where Spark runs them in its executors ----------
    O("scan.workers", "scan", "tasks read at once, on threads (the native decoder releases the GIL); "
      "default: the machine's cores", _int(1, 1024)),
    # -- typed keys and values: a schema registry's serializers -> Arrow columns ----------------
    *(row for side in ("value", "key") for row in _typed_side(side)),
    O("mode", "values", "a key or value that cannot be decoded (bad framing, unknown schema id, registry down, "
      "malformed payload): `FAILFAST` fails the read naming topic, partition, offset and schema id; `PERMISSIVE` "
      "gives a null and its bytes in the `corruptValue` (`corruptKey`) column", named("Mode", MODES), "FAILFAST",
      field="mode"),
    O("schema.registry.url", "values", "the schema registry's URL (several: comma-separated, tried in turn)",
      NONEMPTY, field="registry_url"),
    O("basic.auth.credentials.source", "values", "`USER_INFO` (basic.auth.user.info), `URL` (the user info of "
      "schema.registry.url) or `SASL_INHERIT` (the Kafka client's SASL user and password)",
      named("CredentialsSource", ("USER_INFO", "URL", "SASL_INHERIT")), "USER_INFO", secret=True,
      field="basic_auth_credentials_source"),
    O("basic.auth.user.info", "values", "`user:password` for the registry", SECRET, secret=True,
      field="basic_auth_user_info"),
    O("bearer.auth.credentials.source", "values", "`STATIC_TOKEN`: send bearer.auth.token", named(
        "BearerSource", ("STATIC_TOKEN",)), secret=True, field="bearer_auth_credentials_source"),
    O("bearer.auth.token", "values", "the registry's bearer token", SECRET, secret=True, field="bearer_auth_token"),
    O("bearer.auth.logical.cluster", "values", "Confluent Cloud: the registry's logical cluster "
      "(header target-sr-cluster)", secret=True, field="bearer_auth_logical_cluster"),
    O("bearer.auth.identity.pool.id", "values", "Confluent Cloud: the identity pool (header "
      "Confluent-Identity-Pool-Id)", secret=True, field="bearer_auth_identity_pool_id"),
    O("schema.registry.ssl.ca.location", "values", "CA certificates (PEM) the registry's certificate is checked "
      "against (default: the system's)", field="ssl_ca_location"),
    O("schema.registry.ssl.certificate.location", "values", "client certificate (PEM) for mutual TLS",
      field="ssl_certificate_location"),
    O("schema.registry.ssl.key.location", "values", "client key (PEM)", secret=True, field="ssl_key_location"),
    O("schema.registry.ssl.key.password", "values", "password of the client key", SECRET, secret=True,
      field="ssl_key_password"),
    O("schema.registry.ssl.endpoint.identification.algorithm", "values", "`https` (default) checks the "
      "registry's host name, empty does not (as the Kafka client's option)", TEXT, "https",
      field="ssl_endpoint_identification_algorithm"),
    O("schema.registry.max.retries", "values", "retries of a registry request that failed to connect or got "
      "408, 429 or 5xx", _int(0, 100), 3, field="max_retries"),
    O("schema.registry.retries.wait.ms", "values", "first wait between retries (doubles, full jitter)", _int(0),
      1000, field="retries_wait_ms"),
    O("schema.registry.retries.max.wait.ms", "values", "longest wait between retries", _int(0), 20000,
      field="retries_max_wait_ms"),
    O("schema.registry.request.timeout.ms", "values", "connect and read timeout of one registry request",
      _int(1), 30000, field="request_timeout_ms"),
)

def K(name: str, doc: str, parse: Parser = TEXT, default: Any = None, *, secret: bool = False,
      field: str | None = None) -> Option:
    """A row of the Kafka client's properties (``kafka.`` + the name in the Spark source)."""
    return Option(name, "kafka", doc, parse, default, secret, field)


# The Kafka client's properties, Kafka's own names.  A row with ``field`` fills that attribute
# of ClientConfig (options/client.py); the rest are read by name there (properties that set the
# same attribute as another, or a value built from several: the servers, the protocols, OAuth).
KAFKA_OPTIONS: tuple[Option, ...] = (
    K("bootstrap.servers", "host:port,... of the brokers (none: read remote storage alone)"),
    K("security.protocol", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", TEXT, "PLAINTEXT"),
    K("sasl.mechanism", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (GSSAPI is refused: see docs/security.md)",
      TEXT, "PLAIN"),
    K("sasl.jaas.config", 'a JAAS line: username="..." password="..." (PLAIN, SCRAM); clientId="..." '
      'clientSecret="..." scope="..." (OAUTHBEARER)', secret=True),
    K("sasl.username", "SASL user", field="sasl_username"),
    K("sasl.password", "SASL password", SECRET, secret=True, field="sasl_password"),
    K("ssl.cafile", "CA certificates (PEM)", field="ssl_cafile"),
    K("ssl.certfile", "client certificate (PEM)", field="ssl_certfile"),
    K("ssl.keyfile", "client key (PEM)", secret=True, field="ssl_keyfile"),
    K("ssl.key.password", "password of the client key", SECRET, secret=True, field="ssl_key_password"),
    K("ssl.password", "password of the client key (alias)", SECRET, secret=True),
    K("ssl.check.hostname", "verify the broker's host name (kafka-python's name; given with "
      "ssl.endpoint.identification.algorithm, the two must agree)", LENIENT_BOOL, True),
    K("ssl.endpoint.identification.algorithm", "`https` (any case) checks the broker's host name, `LDAP` or "
      "`LDAPS` by Java's LDAP rules; empty turns the check off (with a warning); any other value is refused",
      Parser(endpoint_identification, "EndpointIdentification", IDENTIFICATION_ALGORITHMS, "EndpointIdentification"),
      "https", field="ssl_endpoint_identification_algorithm"),
    K("ssl.truststore.type", "JKS, PKCS12 or PEM (default: told from the file)", field="ssl_truststore_type"),
    K("ssl.truststore.location", "truststore file (JKS, PKCS12 or PEM); must exist on every executor",
      field="ssl_truststore_location"),
    K("ssl.truststore.password", "truststore password (JKS, PKCS12)", SECRET, secret=True,
      field="ssl_truststore_password"),
    K("ssl.truststore.certificates", "trusted certificates as PEM text (ssl.truststore.type=PEM; KIP-651)",
      field="ssl_truststore_certificates"),
    K("ssl.keystore.type", "JKS, PKCS12 or PEM (default: told from the file)", field="ssl_keystore_type"),
    K("ssl.keystore.location", "keystore file (JKS, PKCS12 or PEM) with the client key for mutual TLS; must "
      "exist on every executor", field="ssl_keystore_location"),
    K("ssl.keystore.password", "keystore password (JKS, PKCS12)", SECRET, secret=True,
      field="ssl_keystore_password"),
    K("ssl.keystore.certificate.chain", "client certificate chain as PEM text (ssl.keystore.type=PEM)",
      field="ssl_keystore_certificate_chain"),
    K("ssl.keystore.key", "client private key as PEM text (ssl.keystore.type=PEM)", SECRET, secret=True,
      field="ssl_keystore_key"),
    K("ssl.protocol", "TLS, TLSv1.3 or TLSv1.2"),
    K("ssl.keymanager.algorithm", "Java's default (SunX509, PKIX) is accepted and means nothing here; others are "
      "refused"),
    K("ssl.trustmanager.algorithm", "Java's default (PKIX, SunX509) is accepted and means nothing here; others are "
      "refused"),
    K("ssl.secure.random.implementation", "accepted, means nothing here (OpenSSL's generator is used)"),
    K("ssl.cipher.suites", "refused: Java cipher suite names; OpenSSL's defaults for TLSv1.2/1.3 are used"),
    K("ssl.provider", "refused: a JVM security provider"),
    K("ssl.engine.factory.class", "refused: a Java class"),
    K("ssl.enabled.protocols", "TLS versions to allow: TLSv1.2,TLSv1.3"),
    K("sasl.login.callback.handler.class", "OAUTHBEARER: Kafka's OAuthBearerLoginCallbackHandler (the only "
      "handler understood)"),
    K("sasl.oauthbearer.token.endpoint.url", "OAUTHBEARER: the OAuth token endpoint (client credentials), or "
      "file:///path of a token", secret=True),
    K("sasl.oauthbearer.client.credentials.client.id", "OAUTHBEARER: client id (instead of clientId in "
      "sasl.jaas.config)", secret=True),
    K("sasl.oauthbearer.client.credentials.client.secret",
      "OAUTHBEARER: client secret (instead of clientSecret)", secret=True),
    K("sasl.oauthbearer.scope", "OAUTHBEARER: scope to ask for (instead of scope in sasl.jaas.config)"),
    K("sasl.oauthbearer.scope.claim.name", "OAUTHBEARER: the token's scope claim", NONEMPTY, "scope"),
    K("sasl.oauthbearer.sub.claim.name", "OAUTHBEARER: the token's subject claim", NONEMPTY, "sub"),
    K("sasl.oauthbearer.header.urlencode",
      "OAUTHBEARER: URL-encode client id and secret in the Basic header", LENIENT_BOOL, False),
    K("sasl.login.connect.timeout.ms", "OAUTHBEARER: token endpoint connect timeout", _int(1), 10000),
    K("sasl.login.read.timeout.ms", "OAUTHBEARER: token endpoint read timeout", _int(1), 30000),
    K("sasl.login.retry.backoff.ms", "OAUTHBEARER: first wait between token requests, doubling (also between "
      "failed background refreshes)", _int(1), 100),
    K("sasl.login.retry.backoff.max.ms", "OAUTHBEARER: how long one login retries; the longest wait between "
      "failed background refreshes", _int(1), 10000),
    # the login refresher's four (Kafka's SaslConfigs: defaults and ranges)
    K("sasl.login.refresh.window.factor", "OAUTHBEARER: refresh in the background at this part of the token's "
      "lifetime (0.5-1.0)", _between(0.5, 1.0), 0.8),
    K("sasl.login.refresh.window.jitter", "OAUTHBEARER: plus up to this much, at random (0-0.25)",
      _between(0.0, 0.25), 0.05),
    K("sasl.login.refresh.min.period.seconds", "OAUTHBEARER: no sooner than this after the last refresh (0-900)",
      _int(0, 900), 60),
    K("sasl.login.refresh.buffer.seconds", "OAUTHBEARER: no later than this before expiry (0-3600)", _int(0, 3600),
      300),
    K("sasl.kerberos.service.name", "refused: GSSAPI (Kerberos) is not supported"),
    K("client.id", "client id sent to the brokers", TEXT, "kafka-tiered", field="client_id"),
    K("client.rack", "rack of the client (follower fetching)", TEXT, "", field="client_rack"),
    K("request.timeout.ms", "broker request timeout", _int(1), 30000, field="request_timeout_ms"),
    K("socket.connection.setup.timeout.ms", "connect timeout", _int(1), 10000, field="connect_timeout_ms"),
    K("socket.connection.setup.timeout.max.ms", "connect timeout (Kafka's cap; the same here)", _int(1),
      10000),
    K("connections.max.idle.ms", "close idle connections after this", _int(0), 540000,
      field="connections_max_idle_ms"),
    K("metadata.max.age.ms", "refresh metadata this often", _int(0), 300000, field="metadata_max_age_ms"),
    K("retries", "retries of a failed request", _int(0), 5, field="retries"),
    K("retry.backoff.ms", "first back-off between retries", _int(0), 100, field="retry_backoff_ms"),
    K("retry.backoff.max.ms", "back-off cap", _int(0), 1000, field="retry_backoff_max_ms"),
    K("fetch.max.wait.ms", "how long a broker may hold a Fetch", _int(0), 500, field="fetch_max_wait_ms"),
    K("fetch.min.bytes", "bytes a broker waits for", _int(0), 1, field="fetch_min_bytes"),
    K("fetch.max.bytes", "bytes per Fetch", _int(1), 52428800, field="fetch_max_bytes"),
    K("max.partition.fetch.bytes", "bytes per partition per Fetch", _int(1), 1048576,
      field="max_partition_fetch_bytes"),
    K("isolation.level", "read_uncommitted (default) or read_committed",
      choice("IsolationLevel", ISOLATION_LEVELS), "read_uncommitted"),
)

#: Standard Kafka consumer keys that mean nothing to this client (group management, polling,
#: deserialisation, buffer tuning).  The client accepts and ignores them so a consumer's
#: properties can be passed unchanged; the Spark source refuses some with Spark's reasons.
IGNORED_KAFKA_KEYS = frozenset({
    "group.id", "group.instance.id", "enable.auto.commit", "auto.commit.interval.ms",
    "auto.offset.reset", "key.deserializer", "value.deserializer", "session.timeout.ms",
    "heartbeat.interval.ms", "max.poll.records", "max.poll.interval.ms",
    "partition.assignment.strategy", "interceptor.classes", "metric.reporters",
    "metrics.num.samples", "metrics.sample.window.ms", "metrics.recording.level",
    "check.crcs", "exclude.internal.topics", "allow.auto.create.topics",
    "receive.buffer.bytes", "send.buffer.bytes", "client.dns.lookup", "default.api.timeout.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "enable.metrics.push",
})

BY_KEY: dict[str, Option] = {o.key: o for o in OPTIONS}
KAFKA_BY_KEY: dict[str, Option] = {o.key: o for o in KAFKA_OPTIONS}
CUSTOM_PREFIX = "remote.storage.custom."   # a remote.storage.fetcher.class's own options

def in_group(*groups: str) -> tuple[Option, ...]:
    return tuple(o for o in OPTIONS if o.group in groups)


def suggestion(key: str, candidates) -> str:
    import difflib   # here: only a wrong option name needs it (a new process's plan does not)

    close = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.75)
    return close[0] if close else ""


def unknown(key: str, *, declared: tuple[str, ...] = ()) -> ConfigError | None:
    """None when ``key`` (lower-cased, not ``kafka.``) is a declared option or passes through
    (``remote.storage.custom.*``, or one of ``declared``: a third-party fetcher's own options);
    else the error that refuses it, with the closest declared name."""
    if key in BY_KEY or key.startswith(CUSTOM_PREFIX) or key in declared:
        return None
    names = {o.key: o.name for o in OPTIONS}
    names.update({d: d for d in declared})
    close = suggestion(key, names)
    hint = f" Did you mean '{names[close]}'?" if close else ""
    if key.startswith("remote.storage."):
        valid = ", ".join(sorted(o.name for o in OPTIONS if o.name.startswith("remote.storage.")))
        return ConfigError(f"unknown option {key}.{hint} Valid remote.storage options: {valid}, "
                           f"remote.storage.custom.* (for remote.storage.fetcher.class)"
                           + (f", {', '.join(declared)}" if declared else ""), option=key)
    return ConfigError(
        f"Unknown option '{key}' for the kafka-tiered source.{hint} Valid options: "
        f"{', '.join(sorted(names.values(), key=str.lower))}, plus 'kafka.<Kafka client setting>' "
        f"and 'remote.storage.<storage setting>'", option=key)


def unknown_kafka(key: str, shown: str) -> ConfigError | None:
    """None for a Kafka client property this client reads or ignores, else its refusal."""
    if key in KAFKA_BY_KEY or key in IGNORED_KAFKA_KEYS:
        return None
    close = suggestion(key, KAFKA_BY_KEY)
    hint = f"; did you mean {KAFKA_BY_KEY[close].name!r}?" if close else ""
    return ConfigError(f"unknown Kafka client option {shown!r}{hint}", option=shown)


def markdown_table() -> str:
    """The option reference of docs/options.md, generated from the table."""
    lines = []
    for group, title in GROUP_TITLES.items():
        rows = in_group(group) if group != "kafka" else KAFKA_OPTIONS
        lines += [f"**{title}**", "", "| option | default | meaning |", "|---|---|---|"]
        for o in rows:
            name = f"kafka.{o.name}" if group == "kafka" else o.name
            default = "–" if o.default in (None, "") else f"`{str(o.default).lower() if isinstance(o.default, bool) else o.default}`"
            lines.append(f"| `{name}` | {default} | {o.doc}{' (secret)' if o.secret else ''} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
