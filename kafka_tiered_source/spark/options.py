"""The ``kafka-tiered`` source's options, parsed once into frozen, typed config objects.

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
* What Spark only finds at run time is found here when the options alone tell: negative
  timestamps, offsets other than ``-2``/``-1`` below zero, an ``assign`` whose partitions differ
  from those of ``startingOffsets``/``endingOffsets`` JSON, a ``subscribe`` whose topics differ
  from them.  For ``subscribe``/``subscribePattern`` the *partition* sets can only be checked
  by the planner once the topics' partitions are known.
* ``subscribePattern`` is compiled with Python's :mod:`re`, not ``java.util.regex``.  Both use
  whole-name matching here (``fullmatch``, like Java's ``Matcher.matches()``); constructs
  Python lacks (``\\p{Alpha}``, ``\\Q..\\E``, possessive quantifiers before Python 3.11,
  embedded ``(?<name>...)`` spelt ``(?P<name>...)`` in older Pythons) are refused as
  invalid patterns with the error position, never silently mis-matched.
* ``kafka.isolation.level`` is accepted in any letter case and normalised to Kafka's lower-case
  names (Kafka itself would refuse ``READ_COMMITTED``).
* Streaming-only options (``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``,
  ``maxTriggerDelay``) are accepted and ignored with a warning, as Spark does for batch; so is
  ``groupIdPrefix`` (this source joins no consumer group).  They are listed in
  :attr:`ReadOptions.ignored`.

Options of our own: ``client.id``, ``partition.target.bytes`` (target bytes per Spark task,
128 MiB) and ``fetch.remote.enabled`` (false: read everything through the brokers).  The
``remote.storage.*`` and other ``fetch.remote.*`` options are declared and parsed by the storage
layer (:class:`kafka_tiered_source.storage.config.FetcherConfig`); they are handed to it here so
that their errors, too, surface when the DataFrame is created.  An unknown ``fetch.remote.*``
name is refused here with a suggestion; an unknown ``remote.storage.*`` name by the storage
layer with its list.  Offline mode (no ``kafka.bootstrap.servers``) needs
``remote.storage.uri`` or an explicit ``remote.storage.layout``: without either the missing
bootstrap servers are the error.  Offline, ``fetch.remote.enabled=false``, the ``presigned``
fetcher and the ``template`` layout are refused (see :mod:`kafka_tiered_source.planning.offline`).
Cost, quota and metrics options (declared in ``_METRICS_OPTIONS``; meaning in
:mod:`kafka_tiered_source.cost`, :mod:`kafka_tiered_source.quota` and
:mod:`kafka_tiered_source.metrics`): ``cost.preset``, ``cost.egress``, ``cost.rate.*``,
``cost.budget.usd``, ``quota.*``, ``metrics.jsonl.path``, ``telemetry.push.enabled``.
"""
from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Iterator

from ..cost import EGRESS_CLASSES, PRESETS, CostModel
from ..errors import ConfigError
from ..model import (EARLIEST, LATEST, Assign, EarliestOffsets, GlobalTimestamp, LatestOffsets,
                     OffsetBound, SpecificOffsets, SpecificTimestamps, Strategy, Subscribe,
                     SubscribePattern, TopicPartition)
from ..quota import QuotaConfig
from ..redact import REDACTED, is_secret_key
from ..storage.config import FETCH_OPTIONS, FetcherConfig

log = logging.getLogger(__name__)

KIB = 1024
MIB = 1024 * KIB

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

# ---------------------------------------------------------------------------------------------
# The option table: every option this source knows, declared once.  Keys are the lower-cased
# names Spark delivers; values the canonical spelling used in messages.
# ---------------------------------------------------------------------------------------------
_SPARK_OPTIONS = (
    "assign", "subscribe", "subscribePattern",
    "startingOffsets", "endingOffsets",
    "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "minPartitions", "maxRecordsPerPartition", "includeHeaders",
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
)
# Accepted for compatibility with jobs written for Spark's Kafka source, and ignored (why: in
# the module docstring).
_IGNORED_OPTIONS = {
    "maxOffsetsPerTrigger": "it applies to streaming queries only",
    "minOffsetsPerTrigger": "it applies to streaming queries only",
    "maxTriggerDelay": "it applies to streaming queries only",
    "groupIdPrefix": "kafka-tiered joins no consumer group",
}
_OWN_OPTIONS = (
    "client.id",
    "partition.target.bytes",
    "fetch.remote.enabled",
)
# Cost, quota and metrics options: name -> how the value is parsed ("preset", "egress": a
# choice; "rate": a float >= 0; "positive": a float > 0; "path": a non-empty string; "bool").
_METRICS_OPTIONS = {
    "cost.preset": "preset",
    "cost.egress": "egress",
    "cost.rate.get.per.1000": "rate",
    "cost.rate.egress.per.gb": "rate",
    "cost.rate.broker.per.gb": "rate",
    "cost.budget.usd": "rate",
    "quota.remote.bytes.per.second": "positive",
    "quota.remote.requests.per.second": "positive",
    "quota.job.remote.bytes.per.second": "positive",
    "quota.job.remote.requests.per.second": "positive",
    "metrics.jsonl.path": "path",
    "telemetry.push.enabled": "bool",
}
# ``remote.storage.*`` and the other ``fetch.remote.*`` options belong to the storage layer,
# which declares and parses them (kafka_tiered_source.storage.config); they are checked here,
# at load time, by handing them to it.
_STORAGE_OPTIONS = tuple(FETCH_OPTIONS)
_KNOWN = {name.lower(): name
          for name in (*_SPARK_OPTIONS, *_IGNORED_OPTIONS, *_OWN_OPTIONS, *_METRICS_OPTIONS,
                       *_STORAGE_OPTIONS)}

KAFKA_PREFIX = "kafka."
REMOTE_STORAGE_PREFIX = "remote.storage."
FETCH_REMOTE_PREFIX = "fetch.remote."

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

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
TIMESTAMP_STRATEGIES = ("error", "latest")

_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'
_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
_INTEGER = re.compile(r"^[+-]?[0-9]+$")
# Kafka "host:port"; the host may be a bracketed IPv6 literal.
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]/]+):([0-9]{1,5})$")
# Names that hold secrets beyond what redact.is_secret_key covers: a bare "key" component
# (remote.storage.gcs.key, remote.storage.azure.key) and user-info style settings.
_EXTRA_SECRET = re.compile(r"(^|[._-])(key|userinfo|user\.info|auth)([._-]|$)", re.IGNORECASE)


def _is_secret(name: str) -> bool:
    return is_secret_key(name) or bool(_EXTRA_SECRET.search(name))


# ---------------------------------------------------------------------------------------------
# Small immutable, picklable value types.
# ---------------------------------------------------------------------------------------------
class OptionMap(Mapping):
    """An immutable, picklable ``str -> str`` mapping whose repr hides secret values.

    Used for the ``kafka.*`` pass-through settings.
    """

    __slots__ = ("_items", "_dict")

    def __init__(self, items=()):
        pairs = tuple(sorted(dict(items).items()))
        object.__setattr__(self, "_items", pairs)
        object.__setattr__(self, "_dict", dict(pairs))

    def __getitem__(self, key):
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._items)

    def __setattr__(self, name, value):
        raise AttributeError("OptionMap is immutable")

    def __eq__(self, other):
        if isinstance(other, OptionMap):
            return self._items == other._items
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __hash__(self):
        return hash(self._items)

    def __reduce__(self):
        return (OptionMap, (self._items,))

    def redacted(self) -> dict:
        return {k: (REDACTED if _is_secret(k) else v) for k, v in self._items}

    def __repr__(self) -> str:
        return f"OptionMap({self.redacted()!r})"

    __str__ = __repr__


# ---------------------------------------------------------------------------------------------
# The whole configuration.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReadOptions:
    """Everything a batch read needs from the options, parsed and checked.

    ``bootstrap_servers`` is empty in offline mode: no broker, the segments are found through
    listing remote storage (``remote.storage.uri`` or an explicit ``remote.storage.layout``).  ``kafka`` holds every
    ``kafka.*`` option with the prefix stripped, for the broker client (security settings and the
    rest).  ``storage`` is the storage layer's own parse of the ``remote.storage.*`` and
    ``fetch.remote.*`` options; ``fetch_remote_enabled`` (``fetch.remote.enabled``) false means
    every offset is fetched from the brokers.
    """
    strategy: Strategy
    bootstrap_servers: tuple[str, ...] = ()
    starting_offsets: OffsetBound = EarliestOffsets()
    ending_offsets: OffsetBound = LatestOffsets()
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    isolation_level: str = "read_uncommitted"
    client_id: str = "kafka-tiered"
    kafka: OptionMap = field(default_factory=OptionMap)
    storage: FetcherConfig = field(default_factory=FetcherConfig)
    fetch_remote_enabled: bool = True
    partition_target_bytes: int = 128 * MIB
    poll_timeout_ms: int = 120_000          # kafkaConsumer.pollTimeoutMs (Spark: network timeout)
    fetch_offset_num_retries: int = 3       # fetchOffset.numRetries
    fetch_offset_retry_interval_ms: int = 10  # fetchOffset.retryIntervalMs
    ignored: tuple[str, ...] = ()           # accepted-but-ignored options, canonical names
    cost: CostModel = field(default_factory=CostModel)       # cost.*
    quota: QuotaConfig = field(default_factory=QuotaConfig)  # quota.*
    metrics_jsonl_path: str | None = None   # metrics.jsonl.path: one JSON line per task
    telemetry_push: bool = True             # telemetry.push.enabled (KIP-714 push to the broker)

    @property
    def offline(self) -> bool:
        return not self.bootstrap_servers

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "ReadOptions":
        return _parse(options)


# ---------------------------------------------------------------------------------------------
# Parsing helpers.  Each raises ConfigError naming the option; values of secret options are
# never echoed.
# ---------------------------------------------------------------------------------------------
def _show(name: str, value: str) -> str:
    return REDACTED if _is_secret(name) else repr(value)


def _int(name: str, value: str, *, minimum: int, maximum: int = _INT64_MAX) -> int:
    text = value.strip()
    if not _INTEGER.match(text):
        raise ConfigError(f"Option '{name}' must be an integer, got {_show(name, value)}",
                          option=name)
    number = int(text)
    if number < minimum:
        what = "positive" if minimum == 1 else f">= {minimum}"
        raise ConfigError(f"Option '{name}' must be {what}, got {number}", option=name)
    if number > maximum:
        raise ConfigError(f"Option '{name}' must be <= {maximum}, got {number}", option=name)
    return number


def _bool(name: str, value: str) -> bool:
    text = value.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise ConfigError(f"Option '{name}' must be 'true' or 'false', got {_show(name, value)}",
                      option=name)


def _float(name: str, value: str, *, positive: bool) -> float:
    try:
        number = float(value.strip())
    except ValueError:
        number = None
    if number is None or number != number or number in (float("inf"), float("-inf")):
        raise ConfigError(f"Option '{name}' must be a number, got {_show(name, value)}",
                          option=name)
    if number < 0 or (positive and number == 0):
        raise ConfigError(f"Option '{name}' must be {'> 0' if positive else '>= 0'}, got {number:g}",
                          option=name)
    return number


def _metrics_options(opts: Mapping[str, str]) -> dict:
    """The cost / quota / metrics options, parsed by the kinds of ``_METRICS_OPTIONS``."""
    values = {}
    for name, kind in _METRICS_OPTIONS.items():
        key = name.lower()
        if key not in opts:
            continue
        raw = opts[key]
        if kind == "preset":
            values[name] = _choice(name, raw, tuple(PRESETS))
        elif kind == "egress":
            values[name] = _choice(name, raw, EGRESS_CLASSES)
        elif kind in ("rate", "positive"):
            values[name] = _float(name, raw, positive=kind == "positive")
        elif kind == "bool":
            values[name] = _bool(name, raw)
        else:
            if not raw.strip():
                raise ConfigError(f"Option '{name}' is empty", option=name)
            values[name] = raw.strip()
    cost = CostModel.of(values.get("cost.preset", "aws-s3-standard"),
                        values.get("cost.egress", "same-region"),
                        get_per_1000=values.get("cost.rate.get.per.1000"),
                        egress_per_gb=values.get("cost.rate.egress.per.gb"),
                        broker_per_gb=values.get("cost.rate.broker.per.gb"),
                        budget_usd=values.get("cost.budget.usd"))
    quota = QuotaConfig(values.get("quota.remote.bytes.per.second"),
                        values.get("quota.remote.requests.per.second"),
                        values.get("quota.job.remote.bytes.per.second"),
                        values.get("quota.job.remote.requests.per.second"))
    return {"cost": cost, "quota": quota, "metrics_jsonl_path": values.get("metrics.jsonl.path"),
            "telemetry_push": values.get("telemetry.push.enabled", True)}


def _choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    text = value.strip().lower()
    if text not in choices:
        raise ConfigError(f"Option '{name}' must be one of {', '.join(choices)}; "
                          f"got {_show(name, value)}", option=name)
    return text


def _reject_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


class _DuplicateKey(Exception):
    def __init__(self, key):
        self.key = key


def _json(name: str, value: str, example: str):
    try:
        return json.loads(value, object_pairs_hook=_reject_duplicates)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"Option '{name}' is not valid JSON: {exc.msg} at character {exc.pos} "
            f"(line {exc.lineno} column {exc.colno}). Expected e.g. {example}, got {value!r}",
            option=name) from None
    except _DuplicateKey as exc:
        raise ConfigError(f"Option '{name}' names {exc.key!r} twice. Expected e.g. {example}",
                          option=name) from None
    except RecursionError:
        # nested deeper than the JSON parser recurses: no offsets document looks like that
        raise ConfigError(f"Option '{name}' is not valid JSON: nested too deeply. Expected e.g. "
                          f"{example}", option=name) from None


def _json_int(name: str, where: str, raw) -> int:
    # bool is an int in Python and 1.0 parses as float: refuse both, JSON offsets are integers.
    if isinstance(raw, bool) or not isinstance(raw, int) or not -_INT64_MAX <= raw <= _INT64_MAX:
        raise ConfigError(f"Option '{name}': {where} must be a 64-bit integer, got "
                          f"{json.dumps(raw)}", option=name)
    return raw


def _topic_name(name: str, topic) -> str:
    if not isinstance(topic, str) or not topic.strip():
        raise ConfigError(f"Option '{name}': topic names must be non-empty strings, "
                          f"got {json.dumps(topic)}", option=name)
    return topic


def _partition_key(name: str, topic: str, key: str) -> int:
    if not re.fullmatch(r"[0-9]+", key) or int(key) > _INT32_MAX:
        raise ConfigError(f"Option '{name}': partition {key!r} of topic {topic!r} is not a "
                          f"partition number", option=name)
    return int(key)


def _per_partition(name: str, value: str, example: str) -> dict[TopicPartition, int]:
    """``{"topic":{"0":n,...},...}`` -> {TopicPartition: n} (values checked by the caller)."""
    parsed = _json(name, value, example)
    if not isinstance(parsed, dict) or not parsed:
        raise ConfigError(f"Option '{name}' must be a non-empty JSON object. Expected e.g. "
                          f"{example}, got {value!r}", option=name)
    out: dict[TopicPartition, int] = {}
    for topic, per_partition in parsed.items():
        _topic_name(name, topic)
        if not isinstance(per_partition, dict) or not per_partition:
            raise ConfigError(f"Option '{name}': topic {topic!r} must map to a non-empty object "
                              f"of partition -> value. Expected e.g. {example}", option=name)
        for key, raw in per_partition.items():
            partition = _partition_key(name, topic, key)
            out[TopicPartition(topic, partition)] = _json_int(
                name, f"the value for {topic}-{partition}", raw)
    return out


def _assign(value: str) -> Assign:
    name = "assign"
    if not value.strip().startswith("{"):
        raise ConfigError(f"No topicpartitions to assign as specified value for option "
                          f"'assign' is {value!r}. Expected e.g. {_ASSIGN_EXAMPLE}", option=name)
    parsed = _json(name, value, _ASSIGN_EXAMPLE)
    if not isinstance(parsed, dict):
        raise ConfigError(f"Option 'assign' must be a JSON object. Expected e.g. "
                          f"{_ASSIGN_EXAMPLE}, got {value!r}", option=name)
    partitions = set()
    for topic, numbers in parsed.items():
        _topic_name(name, topic)
        if not isinstance(numbers, list):
            raise ConfigError(f"Option 'assign': topic {topic!r} must map to a list of "
                              f"partition numbers. Expected e.g. {_ASSIGN_EXAMPLE}", option=name)
        for raw in numbers:
            number = _json_int(name, f"partition of topic {topic!r}", raw)
            if not 0 <= number <= _INT32_MAX:
                raise ConfigError(f"Option 'assign': partition {number} of topic {topic!r} "
                                  f"must be >= 0", option=name)
            partitions.add(TopicPartition(topic, number))
    if not partitions:
        # Spark would read nothing; an empty assignment in a backfill is a mistake.
        raise ConfigError(f"Option 'assign' names no partitions: {value!r}. Expected e.g. "
                          f"{_ASSIGN_EXAMPLE}", option=name)
    return Assign(tuple(sorted(partitions)))


def _strategy(opts: Mapping[str, str]) -> Strategy:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    names = "subscribe, subscribePattern, assign"
    if not given:
        raise ConfigError(f"One of the following options must be specified for the kafka-tiered "
                          f"source: {names}", option="subscribe")
    if len(given) > 1:
        shown = ", ".join(_KNOWN[k] for k in given)
        raise ConfigError(f"Only one of the following options can be specified for the "
                          f"kafka-tiered source: {names}; got {shown}", option=_KNOWN[given[1]])
    key = given[0]
    value = opts[key]
    if key == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise ConfigError(f"No topics to subscribe to as specified value for option "
                              f"'subscribe' is {value!r}", option="subscribe")
        return Subscribe(topics)
    if key == "subscribepattern":
        pattern = value.strip()
        if not pattern:
            raise ConfigError(f"Pattern to subscribe is empty as specified value for option "
                              f"'subscribePattern' is {value!r}", option="subscribePattern")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"Option 'subscribePattern' is not a valid (Python re) regular "
                              f"expression: {exc.msg} at position {exc.pos}: {pattern!r}",
                              option="subscribePattern") from None
        return SubscribePattern(pattern)
    return _assign(value)


def _timestamp_strategy(opts: Mapping[str, str]) -> str:
    key = "startingoffsetsbytimestampstrategy"
    if key not in opts:
        return "error"
    return _choice(_KNOWN[key], opts[key], TIMESTAMP_STRATEGIES)


def _bound(opts: Mapping[str, str], *, side: str, strategy: str) -> OffsetBound:
    """One side's bound, by Spark's precedence: <side>Timestamp > <side>OffsetsByTimestamp >
    <side>Offsets > default (earliest for starting, latest for ending)."""
    ts_name = f"{side}Timestamp"
    by_ts_name = f"{side}OffsetsByTimestamp"
    off_name = f"{side}Offsets"
    if ts_name.lower() in opts:
        raw = opts[ts_name.lower()]
        text = raw.strip()
        if not _INTEGER.match(text):
            raise ConfigError(f"Option '{ts_name}': expected a single long value, got {raw!r}",
                              option=ts_name)
        timestamp = int(text)
        if not 0 <= timestamp <= _INT64_MAX:
            raise ConfigError(f"Option '{ts_name}' must be a timestamp in milliseconds >= 0, "
                              f"got {timestamp}", option=ts_name)
        return GlobalTimestamp(timestamp, strategy)
    if by_ts_name.lower() in opts:
        table = _per_partition(by_ts_name, opts[by_ts_name.lower()], _TIMESTAMPS_EXAMPLE)
        for tp, timestamp in table.items():
            if timestamp < 0:
                raise ConfigError(f"Option '{by_ts_name}': the timestamp for {tp} must be >= 0 "
                                  f"(milliseconds), got {timestamp}", option=by_ts_name)
        return SpecificTimestamps(tuple(sorted(table.items())), strategy)
    if off_name.lower() in opts:
        raw = opts[off_name.lower()]
        text = raw.strip()
        if text.lower() == "earliest":
            if side == "ending":
                raise ConfigError("ending offset can't be earliest for batch queries on Kafka "
                                  "(option 'endingOffsets')", option=off_name)
            return EarliestOffsets()
        if text.lower() == "latest":
            if side == "starting":
                raise ConfigError("starting offset can't be latest for batch queries on Kafka "
                                  "(option 'startingOffsets')", option=off_name)
            return LatestOffsets()
        if not text.startswith("{"):
            raise ConfigError(f"Option '{off_name}' must be 'earliest', 'latest' or a JSON object "
                              f"such as {_OFFSETS_EXAMPLE}; got {raw!r}", option=off_name)
        table = _per_partition(off_name, text, _OFFSETS_EXAMPLE)
        for tp, offset in table.items():
            if offset < EARLIEST:
                raise ConfigError(f"Option '{off_name}': the offset for {tp} must be >= 0, "
                                  f"-2 (earliest) or -1 (latest), got {offset}", option=off_name)
            if side == "starting" and offset == LATEST:
                raise ConfigError(f"startingOffsets for {tp} can't be latest for batch queries "
                                  f"on Kafka (option 'startingOffsets')", option=off_name)
            if side == "ending" and offset == EARLIEST:
                raise ConfigError(f"ending offset for {tp} can't be earliest for batch queries "
                                  f"on Kafka (option 'endingOffsets')", option=off_name)
        return SpecificOffsets(tuple(sorted(table.items())))
    return EarliestOffsets() if side == "starting" else LatestOffsets()


def _bound_option(opts: Mapping[str, str], side: str) -> str:
    """The canonical name of the option that decided a bound (for messages)."""
    for name in (f"{side}Timestamp", f"{side}OffsetsByTimestamp", f"{side}Offsets"):
        if name.lower() in opts:
            return name
    return f"{side}Offsets"


def _check_bounds(opts, strategy: Strategy, start: OffsetBound, end: OffsetBound) -> None:
    start_name = _bound_option(opts, "starting")
    end_name = _bound_option(opts, "ending")
    # Spark's checkOffsetLimitValidity: the same partitions on both sides, start <= end
    # (earliest/latest markers are not compared).
    for kind, Type in (("offsets", SpecificOffsets), ("timestamps", SpecificTimestamps)):
        if isinstance(start, Type) and isinstance(end, Type):
            s, e = start.as_dict(), end.as_dict()
            if s.keys() != e.keys():
                only_s = ", ".join(str(tp) for tp in sorted(s.keys() - e.keys())) or "-"
                only_e = ", ".join(str(tp) for tp in sorted(e.keys() - s.keys())) or "-"
                raise ConfigError(
                    f"Options '{start_name}' and '{end_name}' must name the same partitions; "
                    f"only in {start_name}: {only_s}; only in {end_name}: {only_e}",
                    option=end_name)
            for tp, first in sorted(s.items()):
                last = e[tp]
                if first >= 0 and last >= 0 and first > last:
                    raise ConfigError(
                        f"The starting {kind[:-1]} for {tp} ({first}, option '{start_name}') is "
                        f"greater than the ending {kind[:-1]} ({last}, option '{end_name}')",
                        option=start_name)
    if (isinstance(start, GlobalTimestamp) and isinstance(end, GlobalTimestamp)
            and start.timestamp_ms > end.timestamp_ms):
        raise ConfigError(f"Option 'startingTimestamp' ({start.timestamp_ms}) is greater than "
                          f"'endingTimestamp' ({end.timestamp_ms})", option="startingTimestamp")
    # Partitions named by explicit offsets/timestamps must be exactly what is read (Spark:
    # "If startingOffsets contains specific offsets, you must specify all TopicPartitions").
    for bound, name in ((start, start_name), (end, end_name)):
        if not isinstance(bound, (SpecificOffsets, SpecificTimestamps)):
            continue
        named = set(bound.as_dict())
        if isinstance(strategy, Assign):
            assigned = set(strategy.partitions)
            if named != assigned:
                missing = ", ".join(str(tp) for tp in sorted(assigned - named)) or "-"
                extra = ", ".join(str(tp) for tp in sorted(named - assigned)) or "-"
                raise ConfigError(
                    f"Option '{name}' must give every assigned partition and only those; "
                    f"missing: {missing}; not assigned: {extra}", option=name)
        elif isinstance(strategy, Subscribe):
            topics = {tp.topic for tp in named}
            if topics != set(strategy.topics):
                missing = ", ".join(sorted(set(strategy.topics) - topics)) or "-"
                extra = ", ".join(sorted(topics - set(strategy.topics))) or "-"
                raise ConfigError(
                    f"Option '{name}' must cover every subscribed topic and only those; "
                    f"missing: {missing}; not subscribed: {extra}", option=name)
        else:
            stray = sorted({tp.topic for tp in named if not strategy.matches(tp.topic)})
            if stray:
                raise ConfigError(f"Option '{name}' names topics that do not match "
                                  f"subscribePattern {strategy.pattern!r}: {', '.join(stray)}",
                                  option=name)


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


def _unknown(key: str) -> ConfigError:
    if key in _MISPLACED:
        return ConfigError(_MISPLACED[key], option=key)
    choices = sorted(_KNOWN.values(), key=str.lower)
    close = difflib.get_close_matches(key, list(_KNOWN), n=1, cutoff=0.75)
    hint = f" Did you mean '{_KNOWN[close[0]]}'?" if close else ""
    return ConfigError(
        f"Unknown option '{key}' for the kafka-tiered source.{hint} Valid options: "
        f"{', '.join(choices)}, plus 'kafka.<Kafka client setting>' and "
        f"'remote.storage.<storage setting>'", option=key)


def _parse(options: Mapping[str, str]) -> ReadOptions:
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
            kafka[setting] = value
        elif key.startswith(REMOTE_STORAGE_PREFIX) or (key.startswith(FETCH_REMOTE_PREFIX)
                                                        and key in _KNOWN):
            storage_opts[key] = value
        elif key not in _KNOWN:
            raise _unknown(key)

    strategy = _strategy(opts)

    ts_strategy = _timestamp_strategy(opts)
    starting = _bound(opts, side="starting", strategy=ts_strategy)
    ending = _bound(opts, side="ending", strategy=ts_strategy)
    _check_bounds(opts, strategy, starting, ending)

    def opt_int(name: str, default, *, minimum: int, maximum: int = _INT64_MAX):
        key = name.lower()
        return _int(name, opts[key], minimum=minimum, maximum=maximum) if key in opts else default

    def opt_bool(name: str, default: bool) -> bool:
        key = name.lower()
        return _bool(name, opts[key]) if key in opts else default

    # Remote storage first: it decides whether a broker is required.  The storage layer owns
    # these options; a third-party fetcher's own "remote.storage.<name>.*" options pass.
    fetcher_name = opts.get("remote.storage.fetcher", "").strip().lower()
    storage = FetcherConfig.from_options(
        storage_opts, extra_names=(fetcher_name,) if fetcher_name else ())
    fetch_remote_enabled = opt_bool("fetch.remote.enabled", True)

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
        if not fetch_remote_enabled:
            raise ConfigError("Option 'fetch.remote.enabled' is false but no "
                              "'kafka.bootstrap.servers' is given: with neither a broker nor "
                              "remote storage there is nothing to read from",
                              option="fetch.remote.enabled")
        bootstrap = ()

    isolation = "read_uncommitted"
    if "isolation.level" in kafka:
        isolation = _choice("kafka.isolation.level", kafka["isolation.level"], ISOLATION_LEVELS)
        kafka["isolation.level"] = isolation

    client_id = "kafka-tiered"
    if "client.id" in opts:
        client_id = opts["client.id"].strip()
        if not client_id:
            raise ConfigError("Option 'client.id' is empty", option="client.id")
        if "client.id" in kafka and kafka["client.id"].strip() != client_id:
            raise ConfigError("Options 'client.id' and 'kafka.client.id' differ; give one",
                              option="client.id")
    elif "client.id" in kafka and kafka["client.id"].strip():
        client_id = kafka["client.id"].strip()

    min_off = opts.get("minoffsetspertrigger")
    max_off = opts.get("maxoffsetspertrigger")
    if min_off is not None and max_off is not None:
        # Spark checks this even for batch queries, which then ignore both.
        low = _int("minOffsetsPerTrigger", min_off, minimum=0)
        high = _int("maxOffsetsPerTrigger", max_off, minimum=0)
        if low > high:
            raise ConfigError(f"The value of minOffsetsPerTrigger ({low}) is higher than "
                              f"maxOffsetsPerTrigger ({high})", option="minOffsetsPerTrigger")
    ignored = []
    for name, why in _IGNORED_OPTIONS.items():
        if name.lower() in opts:
            log.warning("Option '%s' ignored: %s", name, why)
            ignored.append(name)

    return ReadOptions(
        strategy=strategy,
        bootstrap_servers=bootstrap,
        starting_offsets=starting,
        ending_offsets=ending,
        fail_on_data_loss=opt_bool("failOnDataLoss", True),
        min_partitions=opt_int("minPartitions", None, minimum=1, maximum=_INT32_MAX),
        max_records_per_partition=opt_int("maxRecordsPerPartition", None, minimum=1),
        include_headers=opt_bool("includeHeaders", False),
        isolation_level=isolation,
        client_id=client_id,
        kafka=OptionMap(kafka),
        storage=storage,
        fetch_remote_enabled=fetch_remote_enabled,
        partition_target_bytes=opt_int("partition.target.bytes", 128 * MIB, minimum=1),
        poll_timeout_ms=opt_int("kafkaConsumer.pollTimeoutMs", 120_000, minimum=1),
        fetch_offset_num_retries=opt_int("fetchOffset.numRetries", 3, minimum=0,
                                         maximum=_INT32_MAX),
        fetch_offset_retry_interval_ms=opt_int("fetchOffset.retryIntervalMs", 10, minimum=0),
        ignored=tuple(ignored),
        **_metrics_options(opts),
    )


def include_headers(options: Mapping[str, str]) -> bool:
    """Just ``includeHeaders``, for ``DataSource.schema()`` (Spark reads only this to build the
    schema); invalid values raise ConfigError like the full parse."""
    for key, value in options.items():
        if str(key).lower() == "includeheaders":
            return _bool("includeHeaders", value)
    return False


def client_properties(options: ReadOptions) -> dict:
    """Kafka client properties from :class:`ReadOptions` (``kafka.*`` with the prefix stripped)."""
    props = dict(options.kafka)
    props["bootstrap.servers"] = ",".join(options.bootstrap_servers)
    props.setdefault("client.id", options.client_id)
    props["isolation.level"] = options.isolation_level
    return props
