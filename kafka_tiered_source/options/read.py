"""The ``kafka-tiered`` source's options, parsed once into a frozen, typed :class:`ReadOptions`.

Spark hands a Python data source a case-insensitive dict of strings (keys arrive lower-cased).
:meth:`ReadOptions.parse` turns it into :class:`ReadOptions`, or raises :class:`ConfigError`
naming the offending option.  Names, defaults, precedence and error conditions follow Spark's
built-in Kafka source for batch queries (``KafkaSourceProvider``); where this source is stricter
or differs, the docstring of the relevant piece says so and why.

Differences from Spark's Kafka source, on purpose:

* Unknown options are refused (Spark ignores them): a misspelt ``startingOfsets`` silently reading
  from ``earliest`` is the costly kind of backfill mistake.  The error lists a suggestion.
* ``kafka.key.serializer`` / ``kafka.value.serializer`` are refused too (Spark refuses them only on
  its write path; this source never writes).
* What Spark only finds at run time is found here when the options alone tell; see
  :mod:`.offsets` for the structured options (strategies, offsets, timestamps).
* ``kafka.isolation.level`` is accepted in any letter case and normalised to Kafka's lower-case
  names (Kafka itself would refuse ``READ_COMMITTED``).
* Streaming-only options (``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``,
  ``maxTriggerDelay``) are accepted and ignored with a warning, as Spark does for batch; so is
  ``groupIdPrefix`` (this source joins no consumer group).  They are listed in
  :attr:`ReadOptions.ignored`.

Every option is a row of the option table (:mod:`.table`: name, parser, default, secret flag,
doc, field); the fields of :class:`ReadOptions` that are one option each are generated from it
(:class:`.fields.ReadOptionsFields`) and filled by one loop.  The ``remote.storage.*`` and
``fetch.remote.*`` ones are parsed into the storage layer's
:class:`~.storage.FetcherConfig`, and the ``kafka.*`` ones are checked against the Kafka client's
rows here and parsed into :class:`~.client.ClientConfig` when the client is built.  Offline mode
(no ``kafka.bootstrap.servers``) needs ``remote.storage.uri`` or an explicit
``remote.storage.layout``: without either the missing bootstrap servers are the error.  Offline,
``fetch.remote.enabled=false``, the ``presigned`` fetcher and the ``template`` layout are refused
(see :mod:`kafka_tiered_source.planning.offline`).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..logs import get_logger
from ..model import LatestOffsets, OffsetBound
from . import offsets
from . import values as v
from .fields import IsolationLevel
from .option_map import OptionMap
from .pricing import CostModel
from .read_fields import ReadOptionsFields
from .quotas import QuotaConfig
from .storage import FetcherConfig
from .table import BY_KEY, ISOLATION_LEVELS, OPTIONS, Option, in_group, unknown, unknown_kafka
from .tls import HOSTNAME_KEYS, hostname_rule
from .typed_values import ValuesConfig

log = get_logger(__name__)

KAFKA_PREFIX = "kafka."
REMOTE_STORAGE_PREFIX = "remote.storage."
FETCH_REMOTE_PREFIX = "fetch.remote."
# Kafka "host:port"; the host may be a bracketed IPv6 literal.
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]/]+):([0-9]{1,5})$")

# Options that explain themselves better than "unknown option".
_MISPLACED = {
    "topic": "'topic' is an option of Spark's Kafka *sink*; kafka-tiered only reads. "
             "Use 'subscribe', 'subscribePattern' or 'assign'",
    "path": "kafka-tiered takes no path; name the topics with 'subscribe', 'subscribePattern' "
            "or 'assign' and the storage with the 'remote.storage.*' options",
}

# Kafka client settings refused, with the reason Spark gives for each (Spark's wording, kept
# short).  Keys are the names after the "kafka." prefix.
_REFUSED_KAFKA = {
    "auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported. Instead set the "
                         "source option 'startingOffsets' to 'earliest' or an offsets JSON to "
                         "specify where to start, and 'endingOffsets' where to stop",
    "key.deserializer": "Kafka option 'key.deserializer' is not supported as keys are returned "
                        "as byte arrays. Use DataFrame operations to explicitly deserialize "
                        "the keys",
    "value.deserializer": "Kafka option 'value.deserializer' is not supported as values are "
                          "returned as byte arrays. Use DataFrame operations to explicitly "
                          "deserialize the values",
    "key.serializer": "Kafka option 'key.serializer' is not supported: kafka-tiered only reads",
    "value.serializer": "Kafka option 'value.serializer' is not supported: kafka-tiered only "
                        "reads",
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported: offsets are "
                          "managed by the source and never committed",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported: interceptors "
                           "can modify the records, so they are not safe",
}


class ReadOptions(ReadOptionsFields):
    """Everything a batch read needs from the options, parsed and checked.

    The fields that are one option each (``fail_on_data_loss``, ``partition_target_bytes``,
    ``poll_timeout_ms``, ...) come from the option table (:class:`.fields.ReadOptionsFields`);
    the streaming rate limits among them are set for ``readStream`` only.  The rest:
    ``bootstrap_servers`` is empty in offline mode: no broker, the segments are found through
    listing remote storage (``remote.storage.uri`` or an explicit ``remote.storage.layout``).
    ``kafka`` holds every ``kafka.*`` option with the prefix stripped, for the broker client
    (security settings and the rest).  ``storage`` is the storage layer's own parse of the
    ``remote.storage.*`` and ``fetch.remote.*`` options; ``fetch_remote_enabled``
    (``fetch.remote.enabled``) false means every offset is fetched from the brokers.  Every
    field is declared in :class:`.read_fields.ReadOptionsFields` (generated: plain, frozen).
    """
    __slots__ = ()

    @property
    def offline(self) -> bool:
        return not self.bootstrap_servers

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool = False,
              warn_ignored: bool = True) -> "ReadOptions":
        """The options of ``spark.read`` (or, ``streaming``, of ``spark.readStream``).
        ``warn_ignored=False`` leaves the warning about options this kind of read ignores to the
        caller (:func:`log_ignored`), for a parse that does not know yet which read it serves."""
        return parse_read_options(options, streaming=streaming, warn_ignored=warn_ignored)


def _bootstrap(value: str) -> tuple[str, ...]:
    name = "kafka.bootstrap.servers"
    servers = tuple(s.strip() for s in value.split(",") if s.strip())
    if not servers:
        raise ConfigError(f"Option '{name}' is empty", option=name)
    for server in servers:
        match = _HOST_PORT.match(server)
        if not match or not 0 < int(match.group(2)) <= 65535:
            raise ConfigError(f"Option '{name}': {server!r} is not host:port", option=name)
    return servers


def parse_read_options(options: Mapping[str, str], *, streaming: bool = False,
                       warn_ignored: bool = True) -> ReadOptions:
    # Spark delivers lower-cased keys; lower-case again so a plain dict behaves the same.
    opts: dict[str, str] = {}
    for raw_key, value in options.items():
        key = str(raw_key).strip().lower()
        if key in opts:
            raise ConfigError(f"Option '{raw_key}' is given twice (option names are "
                              f"case-insensitive)", option=str(raw_key))
        if value is None or not isinstance(value, str):
            raise ConfigError(f"Option '{raw_key}' must be a string, got "
                              f"{type(value).__name__}", option=str(raw_key))
        opts[key] = value

    kafka: dict[str, str] = {}
    storage_opts: dict[str, str] = {}
    for key, value in opts.items():
        if key.startswith(KAFKA_PREFIX):
            setting = key[len(KAFKA_PREFIX):]
            if not setting:
                raise ConfigError("Option 'kafka.' names no Kafka setting", option=key)
            if setting in _REFUSED_KAFKA:
                raise ConfigError(_REFUSED_KAFKA[setting], option=key)
            refusal = unknown_kafka(setting, key)
            if refusal is not None:
                raise refusal
            kafka[setting] = value
        elif key.startswith(REMOTE_STORAGE_PREFIX) or (key.startswith(FETCH_REMOTE_PREFIX)
                                                        and key in BY_KEY):
            storage_opts[key] = value
        elif key in _MISPLACED:
            raise ConfigError(_MISPLACED[key], option=key)
        else:
            refusal = unknown(key)
            if refusal is not None:
                raise refusal

    # the host-name rule is checked now, not when a client is built: fail closed, at once
    hostname_rule((f"kafka.{k}", k, value) for k, value in kafka.items() if k in HOSTNAME_KEYS)
    strategy = offsets.strategy(opts)

    ts_strategy = offsets.timestamp_strategy(opts)
    if streaming:
        # A stream has no end; where each micro-batch ends is the stream reader's business.
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if name.lower() in opts:
                raise ConfigError(f"Option '{name}' is for batch queries; a streaming query reads "
                                  f"on (bound each micro-batch with maxOffsetsPerTrigger or "
                                  f"maxBytesPerTrigger, or use Trigger.AvailableNow)", option=name)
        starting = offsets.bound(opts, side="starting", strategy=ts_strategy, streaming=True)
        ending: OffsetBound = LatestOffsets()
    else:
        starting = offsets.bound(opts, side="starting", strategy=ts_strategy)
        ending = offsets.bound(opts, side="ending", strategy=ts_strategy)
    offsets.check_bounds(opts, strategy, starting, ending)

    def parsed(option: Option) -> Any:
        """The option's parsed value, or the table's default."""
        return option.value(opts[option.key]) if option.key in opts else option.default

    def opt(name: str) -> Any:
        return parsed(BY_KEY[name.lower()])

    # Every field that is one option, in one loop; a batch read ignores the streaming limits.
    fields = {str(o.field): parsed(o) for o in _READ_FIELDS}
    if not streaming:
        fields.update({str(o.field): o.default for o in _READ_FIELDS if o.group == "streaming"})

    # Remote storage first: it decides whether a broker is required.  The storage layer owns
    # these options; a third-party fetcher's own "remote.storage.<name>.*" options pass.
    storage = FetcherConfig.from_options(storage_opts)
    fetch_remote_enabled = fields["fetch_remote_enabled"]

    if "bootstrap.servers" in kafka:
        bootstrap = _bootstrap(kafka["bootstrap.servers"])
    else:
        # Offline mode: the segments are found from the storage layout alone.
        if "remote.storage.layout" not in opts and "remote.storage.uri" not in opts:
            raise ConfigError("Option 'kafka.bootstrap.servers' must be specified for "
                              "configuring the Kafka client (or, to read without a broker, "
                              "'remote.storage.uri' or 'remote.storage.layout' with the storage "
                              "location options)", option="kafka.bootstrap.servers")
        if storage.fetcher == "presigned":
            raise ConfigError("Option 'remote.storage.fetcher' is 'presigned' but no "
                              "'kafka.bootstrap.servers' is given: presigned URLs come from the "
                              "broker, and a URL cannot list a bucket to find segments",
                              option="remote.storage.fetcher")
        if storage.layout == "template":
            raise ConfigError("Option 'remote.storage.layout' is 'template' but no "
                              "'kafka.bootstrap.servers' is given: segments are found offline by "
                              "listing, which needs the aiven or kafka-local-tiered layout",
                              option="remote.storage.layout")
        locator = fields["segment_locator"]
        if locator not in ("auto", "listing"):
            raise ConfigError(f"Option 'remote.segment.locator' is '{locator}' but no "
                              f"'kafka.bootstrap.servers' is given: without a broker segments are "
                              f"found by listing the store (auto or listing)",
                              option="remote.segment.locator")
        if fields["fetch_remote_fallback"] == "always":
            raise ConfigError("option fetch.remote.fallback is 'always' but no 'kafka.bootstrap.servers' "
                              "is given: there is no broker to read through", option="fetch.remote.fallback")
        if not fetch_remote_enabled:
            raise ConfigError("Option 'fetch.remote.enabled' is false but no "
                              "'kafka.bootstrap.servers' is given: with neither a broker nor "
                              "remote storage there is nothing to read from",
                              option="fetch.remote.enabled")
        bootstrap = ()

    isolation: IsolationLevel = "read_uncommitted"
    if "isolation.level" in kafka:
        isolation = "read_committed" if v.choice(
            "Option 'kafka.isolation.level'", "kafka.isolation.level", kafka["isolation.level"],
            choices=ISOLATION_LEVELS) == "read_committed" else "read_uncommitted"
        kafka["isolation.level"] = isolation

    client_id = "kafka-tiered"
    if "client.id" in opts:
        client_id = opt("client.id")
        if "client.id" in kafka and kafka["client.id"].strip() != client_id:
            raise ConfigError("Options 'client.id' and 'kafka.client.id' differ; give one",
                              option="client.id")
    elif "client.id" in kafka and kafka["client.id"].strip():
        client_id = kafka["client.id"].strip()

    if "minoffsetspertrigger" in opts and "maxoffsetspertrigger" in opts:
        # Spark checks this even for batch queries, which then ignore both.
        low, high = opt("minOffsetsPerTrigger"), opt("maxOffsetsPerTrigger")
        if low > high:
            raise ConfigError(f"The value of minOffsetsPerTrigger ({low}) is higher than "
                              f"maxOffsetsPerTrigger ({high})", option="minOffsetsPerTrigger")
    ignored = []
    for option in in_group("streaming"):
        if option.key in opts and (not streaming or option.name == "groupIdPrefix"):
            if warn_ignored:
                log_ignored(option.name)
            ignored.append(option.name)

    return ReadOptions(
        **fields,
        strategy=strategy,
        bootstrap_servers=bootstrap,
        starting_offsets=starting,
        ending_offsets=ending,
        isolation_level=isolation,
        client_id=client_id,
        kafka=OptionMap(kafka),
        storage=storage,
        ignored=tuple(ignored),
        cost=CostModel.of(opt("cost.preset"), opt("cost.egress"),
                          get_per_1000=opt("cost.rate.get.per.1000"),
                          egress_per_gb=opt("cost.rate.egress.per.gb"),
                          broker_per_gb=opt("cost.rate.broker.per.gb"),
                          budget_usd=opt("cost.budget.usd")),
        quota=QuotaConfig(**{str(o.field): parsed(o) for o in _QUOTA_FIELDS}),
        streaming=streaming,
        values=ValuesConfig.from_options(opts),
    )


#: the rows that are fields of ReadOptions and of QuotaConfig
_READ_FIELDS = tuple(o for o in OPTIONS if o.config == "ReadOptions")
_QUOTA_FIELDS = tuple(o for o in OPTIONS if o.config == "QuotaConfig")


def log_ignored(name: str) -> None:
    why = BY_KEY[name.lower()].doc if name == "groupIdPrefix" else "it applies to streaming queries only"
    log.warning("Option '%s' ignored: %s", name, why)


def include_headers(options: Mapping[str, str]) -> bool:
    """Just ``includeHeaders``, for ``DataSource.schema()`` (Spark reads only this to build the
    schema); invalid values raise ConfigError like the full parse."""
    for key, value in options.items():
        if str(key).lower() == "includeheaders":
            return BY_KEY["includeheaders"].value(value)
    return False


def with_default_client_id(options: Mapping[str, str], name: str | None) -> dict:
    """A copy of ``options`` with ``client.id`` = ``name`` (a Spark read's default: the
    application's name) unless ``client.id`` or ``kafka.client.id`` is given.  Every Spark entry
    point (the format, ``read()``, ``estimate()``, ``describe_read()``) defaults it here."""
    opts = dict(options)
    if name and not any(str(k).lower() in ("client.id", "kafka.client.id") for k in opts):
        opts["client.id"] = name
    return opts


def client_properties(options: ReadOptions) -> dict:
    """Kafka client properties from :class:`ReadOptions` (``kafka.*`` with the prefix stripped)."""
    props = dict(options.kafka)
    props["bootstrap.servers"] = ",".join(options.bootstrap_servers)
    props.setdefault("client.id", options.client_id)
    props["isolation.level"] = options.isolation_level
    return props
