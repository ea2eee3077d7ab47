"""The vocabulary every layer shares: topic-partitions, what to read (a subscription strategy)
and where to start or stop (offset bounds), with Kafka's special offsets.

This module imports nothing from the package: options, planning, the executors and the Spark
layer all speak in these types, so they sit below all of them.
"""
from __future__ import annotations

import re
from typing import Union

from .dataclass import dataclass

# Kafka's special offsets in the JSON forms of startingOffsets / endingOffsets, which are also
# ListOffsets' special timestamps -1 and -2.
EARLIEST = -2
LATEST = -1
# ListOffsets' other special timestamps (KIP-734, KIP-1005, KIP-1023).
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:   # Kafka's own spelling, as in Spark's messages
        return f"{self.topic}-{self.partition}"


# --- what to read: exactly one strategy -------------------------------------------------------
@dataclass(frozen=True)
class Subscribe:
    """``subscribe``: a fixed list of topics (comma separated, blanks dropped, order kept)."""
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    """``subscribePattern``: every topic whose whole name matches ``pattern`` (Python ``re``)."""
    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    """``assign``: explicit topic-partitions, sorted and de-duplicated."""
    partitions: tuple[TopicPartition, ...]

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(tp.topic for tp in self.partitions))


Strategy = Union[Subscribe, SubscribePattern, Assign]


# --- where to start / stop -------------------------------------------------------------------
@dataclass(frozen=True)
class EarliestOffsets:
    """``earliest``: the log start offset of every partition."""


@dataclass(frozen=True)
class LatestOffsets:
    """``latest``: the high watermark (read_uncommitted) or LSO (read_committed) of every
    partition, taken when the query is planned."""


@dataclass(frozen=True)
class SpecificOffsets:
    """Offsets per topic-partition; ``-2`` means earliest, ``-1`` latest."""
    offsets: tuple[tuple[TopicPartition, int], ...]

    def as_dict(self) -> dict[TopicPartition, int]:
        return dict(self.offsets)


@dataclass(frozen=True)
class GlobalTimestamp:
    """``startingTimestamp``/``endingTimestamp``: one timestamp (ms) for every partition.  The
    offset is the earliest whose timestamp is >= it (Kafka ListOffsets)."""
    timestamp_ms: int
    strategy: str = "error"        # startingOffsetsByTimestampStrategy: "error" | "latest"


@dataclass(frozen=True)
class SpecificTimestamps:
    """``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp``: a timestamp per partition."""
    timestamps: tuple[tuple[TopicPartition, int], ...]
    strategy: str = "error"

    def as_dict(self) -> dict[TopicPartition, int]:
        return dict(self.timestamps)


OffsetBound = Union[EarliestOffsets, LatestOffsets, SpecificOffsets, GlobalTimestamp,
                    SpecificTimestamps]
