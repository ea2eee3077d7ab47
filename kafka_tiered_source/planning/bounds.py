"""From ``startingOffsets`` / ``endingOffsets`` (and their timestamp forms) to one offset range
per partition, and the checks every range passes, whoever supplied the partition's limits.

The limits differ by where they come from: a broker's ListOffsets (log start offset, high
watermark or LSO) or, offline, the tiered segments themselves (first and last tiered offset).
The rules are Spark's Kafka source's, stated once here: a start below the lowest readable offset
is data loss (``failOnDataLoss``), an end past the highest is an error, and start <= end.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from ..dataclass import dataclass
from ..errors import ConfigError, DataLossError
from ..logs import get_logger
from ..model import (EARLIEST, LATEST, EarliestOffsets, GlobalTimestamp, LatestOffsets,
                     SpecificOffsets, SpecificTimestamps, TopicPartition)

log = get_logger(__name__)

Key = tuple  # (topic, partition)
# ``{(topic, partition): timestamp}`` -> ``{(topic, partition): offset}``; an offset < 0 means no
# record at or after the timestamp (ListOffsets' answer).  None: timestamps cannot be resolved.
OffsetsForTimes = Optional[Callable[[dict], dict]]


def resolve_bound(bound, keys: Sequence[Key], earliest: dict, latest: dict, *, starting: bool,
                  offsets_for_times: OffsetsForTimes) -> dict:
    """``{(topic, partition): offset}`` of one side of the read, for every key."""
    side = "starting" if starting else "ending"
    name = f"{side}Offsets"
    if isinstance(bound, EarliestOffsets):
        return {k: earliest[k] for k in keys}
    if isinstance(bound, LatestOffsets):
        return {k: latest[k] for k in keys}
    if isinstance(bound, SpecificOffsets):
        given = bound.as_dict()
        out = {}
        for topic, p in keys:
            off = given.get(TopicPartition(topic, p))
            if off is None:
                raise ConfigError(f"{name} does not name partition {topic}-{p}; with specific "
                                  f"offsets every partition read must be given", option=name)
            out[(topic, p)] = (earliest[(topic, p)] if off == EARLIEST
                               else latest[(topic, p)] if off == LATEST else off)
        return out
    if isinstance(bound, (GlobalTimestamp, SpecificTimestamps)):
        option = (f"{side}Timestamp" if isinstance(bound, GlobalTimestamp)
                  else f"{side}OffsetsByTimestamp")
        if offsets_for_times is None:
            raise ConfigError(f"{option} is not supported without kafka.bootstrap.servers: "
                              f"offsets for timestamps come from the broker (ListOffsets); "
                              f"give {side}Offsets instead", option=option)
        if isinstance(bound, GlobalTimestamp):
            stamps = {k: bound.timestamp_ms for k in keys}
        else:
            given = bound.as_dict()
            stamps = {}
            for topic, p in keys:
                ts = given.get(TopicPartition(topic, p))
                if ts is None:
                    raise ConfigError(f"{option} does not name partition {topic}-{p}", option=option)
                stamps[(topic, p)] = ts
        out = {}
        for key, off in offsets_for_times(stamps).items():
            if off < 0:   # no record at or after the timestamp
                if starting and bound.strategy == "error":
                    raise ConfigError(
                        f"{option}: partition {key[0]}-{key[1]} has no record with a timestamp "
                        f">= {stamps[key]}; set startingOffsetsByTimestampStrategy=latest to "
                        f"start at the latest offset instead", option=option)
                off = latest[key]
            out[key] = off
        return out
    raise ConfigError(f"unsupported {name} {bound!r}", option=name)


def resolve_bounds(options, keys: Sequence[Key], earliest: dict, latest: dict, *,
                   offsets_for_times: OffsetsForTimes) -> dict[Key, tuple[int, int]]:
    """``{(topic, partition): (start, end)}`` from the options' starting and ending bounds."""
    start = resolve_bound(options.starting_offsets, keys, earliest, latest, starting=True,
                          offsets_for_times=offsets_for_times)
    end = resolve_bound(options.ending_offsets, keys, earliest, latest, starting=False,
                        offsets_for_times=offsets_for_times)
    return {k: (start[k], end[k]) for k in keys}


@dataclass(frozen=True)
class Limits:
    """How the readable offsets of a partition are named in messages, by their source."""
    low: str        # "log start offset" / "first tiered offset"
    low_short: str  # for the warning: "log start" / "first tiered offset"
    low_why: str    # why offsets below it are gone
    high: str       # what lies past the end; formatted with latest, last (= latest - 1), why


BROKER = Limits("log start offset", "log start", "the records were deleted by retention",
                "the latest offset {latest}")
TIERED = Limits("first tiered offset", "first tiered offset", "deleted by retention, or never tiered",
                "what can be read without a broker (up to offset {last}): {why}")


def check_range(where: str, start: int, end: int, low: int, latest: int, *, limits: Limits,
                fail_on_data_loss: bool, why: str | None = None) -> tuple[int, int]:
    """The range to read, or the error Spark's Kafka source would give for it."""
    if start < low:
        if fail_on_data_loss:
            raise DataLossError(f"{where}: starting offset {start} is below the {limits.low} {low} "
                                f"({limits.low_why}); set failOnDataLoss=false to start at {low}")
        log.warning("%s: starting offset %d < %s %d; starting at %d", where, start,
                    limits.low_short, low, low)
        start = low
    if end > latest:
        past = limits.high.format(latest=latest, last=latest - 1, why=why)
        raise ConfigError(f"{where}: ending offset {end} is past {past}", option="endingOffsets")
    if start > end:
        raise ConfigError(f"{where}: starting offset {start} is after ending offset {end}",
                          option="startingOffsets")
    return start, end
