"""The exception hierarchy.  Every error this package raises on purpose derives from
:class:`KafkaTieredError`, so callers can catch one class.

Messages name what was wrong and where (object key, byte position, option name) and never
carry secrets: passwords, keys, tokens and presigned-URL signatures are redacted before an
exception is built (see :mod:`kafka_tiered_source.redact`).
"""
from __future__ import annotations


class KafkaTieredError(Exception):
    """Base class of every error raised by kafka-tiered."""


class CorruptRecordError(KafkaTieredError):
    """Bytes that are not a valid v2 record batch.

    ``position`` is the absolute byte position in the input where the problem was found and
    ``base_offset`` the base offset of the batch being decoded (``None`` when the header itself
    could not be read).
    """

    def __init__(self, message: str, *, position: int | None = None,
                 base_offset: int | None = None, source: str | None = None):
        self.position = position
        self.base_offset = base_offset
        self.source = source
        where = []
        if source:
            where.append(source)
        if position is not None:
            where.append(f"byte position {position}")
        if base_offset is not None:
            where.append(f"batch base offset {base_offset}")
        full = f"{message} ({', '.join(where)})" if where else message
        super().__init__(full)
        self.reason = message


class DecompressionLimitError(CorruptRecordError):
    """A compressed batch would decompress past the configured cap."""


class ConfigError(KafkaTieredError, ValueError):
    """An invalid or unknown option.  ``option`` names it."""

    def __init__(self, message: str, *, option: str | None = None):
        self.option = option
        super().__init__(message)


class ProtocolError(KafkaTieredError):
    """A Kafka frame that could not be encoded or decoded."""


class BrokerError(KafkaTieredError):
    """A broker answered with an error code, or could not be reached.

    Carries the broker, API, topic and partition so the user can tell which request failed.
    ``refresh_metadata`` says whether the client must re-learn leaders before a retry
    (:class:`InvalidMetadataError`).
    """

    refresh_metadata = False

    def __init__(self, message: str, *, error_code: int | None = None, error_name: str | None = None,
                 retriable: bool = False, broker: str | None = None, api: str | None = None,
                 topic: str | None = None, partition: int | None = None):
        self.error_code = error_code
        self.error_name = error_name
        self.retriable = retriable
        self.broker = broker
        self.api = api
        self.topic = topic
        self.partition = partition
        ctx = []
        if broker:
            ctx.append(f"broker {broker}")
        if api:
            ctx.append(f"api {api}")
        if topic is not None:
            ctx.append(f"topic {topic}" + (f" partition {partition}" if partition is not None else ""))
        super().__init__(f"{message} ({', '.join(ctx)})" if ctx else message)


class NoRecordsError(BrokerError):
    """A broker kept answering an offset below its high watermark with no records, for longer
    than ``kafkaConsumer.pollTimeoutMs``, and nothing proved the offsets empty (Kafka answers so
    for a compacted tail no later copy follows, and for a remote read that outlasts
    ``remote.fetch.max.wait.ms``; the message says why neither the copy's bytes nor the answers'
    timing proved it).  ``offset`` is the offset asked."""

    def __init__(self, message: str, *, offset: int, **kwargs):
        self.offset = offset
        super().__init__(message, **kwargs)


class InvalidMetadataError(BrokerError):
    """A broker error after which the client's metadata is stale: a leader moved, a topic or
    partition is unknown to the broker asked, the connection was lost (Kafka's
    ``InvalidMetadataException`` family).  The client refreshes its metadata before retrying."""

    refresh_metadata = True


class RemoteStorageError(KafkaTieredError):
    """A read from remote (tiered) storage failed.  ``location`` names the object, redacted."""

    retriable = False

    def __init__(self, message: str, *, location: str | None = None, backend: str | None = None):
        self.location = location
        self.backend = backend
        ctx = [p for p in (f"backend {backend}" if backend else None,
                           f"object {location}" if location else None) if p]
        super().__init__(f"{message} ({', '.join(ctx)})" if ctx else message)


class RemoteObjectNotFound(RemoteStorageError):
    """The object is not there (deleted by retention, or a wrong layout/prefix)."""


class RemoteAccessDenied(RemoteStorageError):
    """The storage refused the credentials; never retried."""


class RemoteTimeout(RemoteStorageError):
    """A connect or read timeout fired (``fetch.remote.connect/read.timeout.ms``)."""

    retriable = True


class RemoteThrottled(RemoteStorageError):
    """The storage kept throttling (503 SlowDown and similar) after all retries."""

    retriable = True


class RemoteServerError(RemoteStorageError):
    """The storage kept answering 5xx after all retries."""

    retriable = True


class SegmentFormatError(RemoteStorageError):
    """A segment's object layout could not be understood (manifest, encryption, chunk index)."""


class SegmentDecryptionError(SegmentFormatError):
    """An encrypted Aiven segment could not be opened.  ``kind`` says why: ``no-keys`` (no
    ``remote.storage.aiven.encryption.key.pairs``), ``unknown-key-pair`` (no private key for
    the manifest's key-pair id), ``key-unreadable`` (the configured file or variable holds no
    usable RSA private key), ``wrong-key`` (the key does not open the segment's data key),
    ``tampered`` (a chunk fails AES-GCM authentication) or ``truncated`` (a chunk is cut
    short).  ``key_id`` is the manifest's key-pair id.  Nothing of a chunk that fails is ever
    returned, and a direct read does not fall back to the broker on it (``auto``): the keys
    are this reader's configuration, and bytes that fail their tag fail the task as a batch
    CRC does."""

    def __init__(self, message: str, *, kind: str, key_id: str | None = None,
                 location: str | None = None, backend: str | None = None):
        self.kind = kind
        self.key_id = key_id
        super().__init__(message, location=location, backend=backend)


class SliceMismatchError(SegmentFormatError):
    """A tiered slice did not yield the offsets its plan gave it: its first batch starts after
    the planned start, a batch lies outside the copy's offsets, or it ends before both the
    planned end and the copy's end.  The plan's metadata (a catalog snapshot, a listing, a
    broker's answer) does not match the object, which ``location`` names.  ``planned`` is the
    slice's ``(start, end)`` (end exclusive), ``copy`` the copy's ``(base, end)`` offsets as the
    plan has them (end inclusive), ``found`` the ``(first, last)`` offsets of the batch at
    fault (None: the bytes ended).  Handled as any failed direct read: a fallback to the
    brokers by ``fetch.remote.fallback``, never a row missing."""

    def __init__(self, message: str, *, planned: tuple[int, int], copy: tuple[int, int],
                 found: tuple[int, int] | None = None, location: str | None = None, backend: str | None = None):
        self.planned = planned
        self.copy = copy
        self.found = found
        super().__init__(message, location=location, backend=backend)


class StoragePreflightError(KafkaTieredError):
    """The driver's check of remote storage before any task was launched failed for a reason
    that does not heal (unreachable endpoint, access denied, no such bucket, no key for an
    encrypted segment).  ``backend``, ``location`` and ``reason`` say what was tried."""

    def __init__(self, message: str, *, backend: str | None = None, location: str | None = None,
                 reason: str | None = None):
        self.backend = backend
        self.location = location
        self.reason = reason
        super().__init__(message)


class FallbackLimitError(KafkaTieredError):
    """A task moved more bytes through the brokers after failed direct reads than
    ``fetch.remote.fallback.max.bytes`` allows."""


class DataLossError(KafkaTieredError):
    """Requested offsets are gone (retention) and ``failOnDataLoss`` is true."""


class PlanningError(KafkaTieredError, ValueError):
    """The planner handed :func:`plan_read_tasks` inconsistent input (a bug, not bad options)."""


class OfflinePlanningError(KafkaTieredError):
    """What is in remote storage cannot be read consistently without a broker (two copies of a
    segment, overlapping segments, two topic ids for one topic name)."""


class UnresolvedTransactionError(KafkaTieredError):
    """read_committed cannot tell whether a transaction with records in the read aborted: its
    marker lies past the read's end where nothing reachable says (a copy's transaction index
    cannot be read and no broker may be asked).  Names ``topic``, ``partition``, ``offset`` (the
    read's end) and the ``producer_ids`` open there (empty when they could not be read either);
    an outcome is never guessed."""

    def __init__(self, message: str, *, topic: str, partition: int, offset: int,
                 producer_ids: tuple[int, ...] = ()):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.producer_ids = producer_ids
        super().__init__(message)


class BudgetExceededError(KafkaTieredError):
    """The estimate of a read exceeds ``cost.budget.usd``: the read was refused before reading."""


class RemoteConnectionError(RemoteStorageError):
    """The storage could not be reached (refused, reset, DNS) after all retries."""

    retriable = True


class ListingNotSupported(RemoteStorageError):
    """The fetcher cannot list objects (a presigned URL names one object), so segments cannot
    be discovered without a broker."""


class SaslError(KafkaTieredError):
    """A SASL exchange failed (bad credentials, a malformed or dishonest peer message)."""


class TokenExpiredError(SaslError):
    """The OAUTHBEARER token expired and the token endpoint gave no new one: refreshing it in
    the background failed while it lasted (retried with ``sasl.login.retry.backoff.ms`` /
    ``.max.ms``), and so did one more try when a connection needed it.  ``principal`` and
    ``expired_at_ms`` name the token, ``attempts`` counts the failed tries, ``reason`` is the
    last one's error (never a secret)."""

    def __init__(self, message: str, *, principal: str, expired_at_ms: int, attempts: int, reason: str):
        self.principal = principal
        self.expired_at_ms = expired_at_ms
        self.attempts = attempts
        self.reason = reason
        super().__init__(message)


class UnsupportedVersionError(ProtocolError):
    """A request for an API/version this code does not declare.  ``header`` is the parsed
    request header, so a broker can still answer (ApiVersions: v0 body, UNSUPPORTED_VERSION)."""

    def __init__(self, message, *, header=None):
        super().__init__(message)
        self.header = header


class UnsupportedSparkError(KafkaTieredError, RuntimeError):
    """The Spark session cannot run what was asked: a Spark version outside the supported
    range, or the ``kafka-tiered`` format on a Spark without the Python data source API."""


class SchemaRegistryError(KafkaTieredError):
    """A schema registry refused a request or answered what cannot be used.  ``status`` is the
    HTTP status (None when no answer came), ``error_code`` the registry's own code (40401
    subject not found, 40402 version not found, 40403 schema not found, ...), ``url`` the
    registry, redacted."""

    def __init__(self, message: str, *, status: int | None = None, error_code: int | None = None,
                 url: str | None = None):
        self.status = status
        self.error_code = error_code
        self.url = url
        super().__init__(f"{message} (schema registry {url})" if url else message)


class SchemaNotFoundError(SchemaRegistryError):
    """The registry has no such schema id, subject or version (HTTP 404)."""


class SchemaRegistryUnavailableError(SchemaRegistryError):
    """The registry could not be reached, or kept answering 408/429/5xx, after every retry
    (``schema.registry.max.retries``)."""


class SchemaError(KafkaTieredError, ValueError):
    """A reader or writer schema that cannot be used: unparsable, of another format than
    ``value.format``/``key.format`` says, or a writer schema that cannot be resolved to the
    reader schema.  ``schema_id`` names the registry's schema when there is one."""

    def __init__(self, message: str, *, schema_id: int | None = None):
        self.schema_id = schema_id
        super().__init__(message)


class ValueDecodeError(KafkaTieredError):
    """A record's key or value could not be decoded (``mode=FAILFAST``): bad framing, an
    unknown schema id, a registry that is down, a malformed payload.  ``side`` is ``key`` or
    ``value``; ``topic``, ``partition``, ``offset`` and ``schema_id`` say which record."""

    def __init__(self, message: str, *, side: str, topic: str, partition: int, offset: int,
                 schema_id: int | None = None):
        self.side = side
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.schema_id = schema_id
        self.reason = message
        sid = f", schema id {schema_id}" if schema_id is not None else ""
        super().__init__(f"cannot decode the {side} of {topic}-{partition} offset {offset}{sid}: {message} "
                         f"(mode=PERMISSIVE keeps such records, with a null {side} and its bytes in "
                         f"corrupt{side.capitalize()})")
