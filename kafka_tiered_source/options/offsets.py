"""The structured options: what to read (``subscribe`` / ``subscribePattern`` / ``assign``) and
where to start and stop (``startingOffsets`` / ``endingOffsets`` and the timestamp forms), with
Spark's precedence and checks.  Their JSON is parsed here; the option table holds their names
and docs.

Differences from Spark's Kafka source, on purpose: what Spark only finds at run time is found
here when the options alone tell (negative timestamps, offsets other than -2/-1 below zero, an
``assign`` whose partitions differ from those of the offsets JSON, a ``subscribe`` whose topics
differ from them); ``subscribePattern`` is compiled with Python's :mod:`re` and matched against
whole names (``fullmatch``, like Java's ``Matcher.matches()``), and constructs Python lacks are
refused as invalid patterns with the error position, never silently mis-matched.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping

from ..errors import ConfigError
from ..model import (EARLIEST, LATEST, Assign, EarliestOffsets, GlobalTimestamp, LatestOffsets,
                     OffsetBound, SpecificOffsets, SpecificTimestamps, Strategy, Subscribe,
                     SubscribePattern, TopicPartition)
from .table import BY_KEY
from .values import INT32_MAX as _INT32_MAX
from .values import INT64_MAX as _INT64_MAX

_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'
_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
_INTEGER = r"^[+-]?[0-9]+$"   # compiled when first used (re caches it): not at import (issue 36)


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


def strategy(opts: Mapping[str, str]) -> Strategy:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    names = "subscribe, subscribePattern, assign"
    if not given:
        raise ConfigError(f"One of the following options must be specified for the kafka-tiered "
                          f"source: {names}", option="subscribe")
    if len(given) > 1:
        shown = ", ".join(BY_KEY[k].name for k in given)
        raise ConfigError(f"Only one of the following options can be specified for the "
                          f"kafka-tiered source: {names}; got {shown}", option=BY_KEY[given[1]].name)
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


def timestamp_strategy(opts: Mapping[str, str]) -> str:
    option = BY_KEY["startingoffsetsbytimestampstrategy"]
    return option.value(opts[option.key]) if option.key in opts else option.default


def bound(opts: Mapping[str, str], *, side: str, strategy: str, streaming: bool = False) -> OffsetBound:
    """One side's bound, by Spark's precedence: <side>Timestamp > <side>OffsetsByTimestamp >
    <side>Offsets > default (earliest for starting, latest for ending; a stream starts at the
    latest by default, as Spark's does)."""
    ts_name = f"{side}Timestamp"
    by_ts_name = f"{side}OffsetsByTimestamp"
    off_name = f"{side}Offsets"
    if ts_name.lower() in opts:
        raw = opts[ts_name.lower()]
        text = raw.strip()
        if not re.match(_INTEGER, text):
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
            if side == "starting" and not streaming:
                raise ConfigError("starting offset can't be latest for batch queries on Kafka "
                                  "(option 'startingOffsets'); a stream starts at latest when the "
                                  "option is left out", option=off_name)
            return LatestOffsets()
        if not text.startswith("{"):
            raise ConfigError(f"Option '{off_name}' must be 'earliest', 'latest' or a JSON object "
                              f"such as {_OFFSETS_EXAMPLE}; got {raw!r}", option=off_name)
        table = _per_partition(off_name, text, _OFFSETS_EXAMPLE)
        for tp, offset in table.items():
            if offset < EARLIEST:
                raise ConfigError(f"Option '{off_name}': the offset for {tp} must be >= 0, "
                                  f"-2 (earliest) or -1 (latest), got {offset}", option=off_name)
            if side == "starting" and offset == LATEST and not streaming:
                raise ConfigError(f"startingOffsets for {tp} can't be latest for batch queries "
                                  f"on Kafka (option 'startingOffsets')", option=off_name)
            if side == "ending" and offset == EARLIEST:
                raise ConfigError(f"ending offset for {tp} can't be earliest for batch queries "
                                  f"on Kafka (option 'endingOffsets')", option=off_name)
        return SpecificOffsets(tuple(sorted(table.items())))
    return EarliestOffsets() if side == "starting" and not streaming else LatestOffsets()


def _bound_option(opts: Mapping[str, str], side: str) -> str:
    """The canonical name of the option that decided a bound (for messages)."""
    for name in (f"{side}Timestamp", f"{side}OffsetsByTimestamp", f"{side}Offsets"):
        if name.lower() in opts:
            return name
    return f"{side}Offsets"


def check_bounds(opts, strategy: Strategy, start: OffsetBound, end: OffsetBound) -> None:
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
