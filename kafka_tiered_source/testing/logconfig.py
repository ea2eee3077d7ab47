"""The embedded broker's log settings, as Kafka's LogConfig has them: when a segment rolls
(``segment.bytes``, ``segment.ms``, ``segment.jitter.ms``) and what local retention keeps of a
tiered partition (``local.retention.ms`` / ``local.retention.bytes``, -2 meaning "as
``retention.ms`` / ``retention.bytes``").

Broker-wide defaults come from :class:`~.storage.BrokerStorage` (Kafka's ``log.*`` settings);
a topic's own value, given when it is created, wins.  A topic whose ``retention_ms`` /
``retention_bytes`` is None keeps its data without limit (-1).
"""
from __future__ import annotations

import random
import time
from typing import Protocol

from ..errors import ConfigError
from .batches import StorageError

DEFAULT_SEGMENT_MS = 7 * 24 * 60 * 60 * 1000      # segment.ms (log.roll.hours=168)
DEFAULT_TASK_INTERVAL_MS = 30_000                  # remote.log.manager.task.interval.ms
SAME_AS_RETENTION = -2                              # local.retention.ms / .bytes default
MAX_RELATIVE_OFFSET = 0x7FFFFFFF                    # an index entry's offset is relative, int32


class RollingSegment(Protocol):
    """What the roll check reads of a :class:`.log.Segment`."""
    base_offset: int
    size: int
    created_ms: int
    rolling_timestamp: int
    roll_jitter_ms: int


class TopicRetention(Protocol):
    """What local retention reads of a :class:`.answers.TopicInfo` (frozen: read-only)."""
    @property
    def retention_ms(self) -> int | None: ...
    @property
    def retention_bytes(self) -> int | None: ...
    @property
    def local_retention_ms(self) -> int | None: ...
    @property
    def local_retention_bytes(self) -> int | None: ...


def check_broker(*, segment_ms: int | None, segment_jitter_ms: int, local_retention_ms: int | None,
                 local_retention_bytes: int | None) -> None:
    """The broker-wide settings' ranges (LogConfig's definitions: segment.ms >= 1, jitter >= 0,
    local retention >= -2)."""
    if segment_ms is not None and segment_ms < 1:
        raise ConfigError(f"segment_ms must be >= 1, got {segment_ms}", option="segment_ms")
    if segment_jitter_ms < 0:
        raise ConfigError(f"segment_jitter_ms must be >= 0, got {segment_jitter_ms}", option="segment_jitter_ms")
    for name, v in (("local_retention_ms", local_retention_ms), ("local_retention_bytes", local_retention_bytes)):
        if v is not None and v < SAME_AS_RETENTION:
            raise ConfigError(f"{name} must be >= -2 (-2: as retention), got {v}", option=name)


def check_topic(name: str, *, retention_ms, retention_bytes, local_retention_ms, local_retention_bytes,
                segment_ms, segment_jitter_ms) -> None:
    """A topic's settings at creation, refused with INVALID_CONFIG as Kafka's CreateTopics
    refuses them: LogConfig's ranges, then validateRemoteStorageRetentionTime / ...Size (local
    retention may be -2, else neither -1 nor more than a limited retention)."""
    def bad(key, value, why):
        raise StorageError("INVALID_CONFIG", f"topic {name!r}: {key}={value}: {why}")
    for key, v, low in (("retention.ms", retention_ms, -1), ("local.retention.ms", local_retention_ms, -2),
                        ("local.retention.bytes", local_retention_bytes, -2), ("segment.ms", segment_ms, 1),
                        ("segment.jitter.ms", segment_jitter_ms, 0)):
        if v is not None and v < low:
            bad(key, v, f"must be >= {low}")
    for key, local, limit in (("ms", local_retention_ms, retention_ms), ("bytes", local_retention_bytes, retention_bytes)):
        if limit is None or limit < 0 or local is None or local == SAME_AS_RETENTION:
            continue
        if local == -1:
            bad(f"local.retention.{key}", local, f"must not be -1 as retention.{key} is {limit}")
        if local > limit:
            bad(f"local.retention.{key}", local, f"must not be more than retention.{key} ({limit})")


def roll_jitter(segment_ms: int | None, segment_jitter_ms: int) -> int:
    """LogConfig.randomSegmentJitter: each new segment's roll comes up to this much earlier."""
    if segment_ms is None or segment_jitter_ms <= 0:
        return 0
    return random.randrange(min(segment_jitter_ms, segment_ms))


def should_roll(seg: RollingSegment, incoming: int, max_timestamp: int, last_offset: int, *, segment_bytes: int,
                segment_ms: int | None) -> bool:
    """LogSegment.shouldRoll, asked before an append of ``incoming`` bytes whose batches' max
    timestamp is ``max_timestamp``: the segment is full, or it has waited segment.ms less its
    jitter (LogSegment.timeWaitedForRoll: from its first batch's max timestamp to the new
    batches', or, when the first batch has none, its age on the wall clock), or the new last
    offset would not fit its index.  An empty segment never rolls (Kafka's roll of an empty
    active segment recreates it at the same base).  ``segment_ms`` None: no roll by time."""
    if seg.size == 0:
        return False
    if seg.size > segment_bytes - incoming or last_offset - seg.base_offset > MAX_RELATIVE_OFFSET:
        return True
    if segment_ms is None:
        return False
    first = seg.rolling_timestamp
    waited = max_timestamp - first if first >= 0 else int(time.time() * 1000) - seg.created_ms
    return waited > segment_ms - seg.roll_jitter_ms


def local_retention(broker_ms: int | None, broker_bytes: int | None,
                    topic: TopicRetention) -> tuple[int, int] | None:
    """(ms, bytes) of local retention for a tiered partition of ``topic`` (UnifiedLog.
    localRetentionMs / localRetentionSize with remote storage on: -2 is retention.ms / .bytes;
    -1 keeps without limit).  None when neither the topic nor the broker sets either: the
    embedded broker's default, where a segment's local copy goes as soon as it is tiered."""
    ms = topic.local_retention_ms if topic.local_retention_ms is not None else broker_ms
    size = topic.local_retention_bytes if topic.local_retention_bytes is not None else broker_bytes
    if ms is None and size is None:
        return None

    def resolve(local, retention):
        if local is None or local == SAME_AS_RETENTION:
            return retention if retention is not None else -1
        return local
    return resolve(ms, topic.retention_ms), resolve(size, topic.retention_bytes)
