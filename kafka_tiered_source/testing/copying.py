"""The embedded broker's RemoteLogManager tasks: copying closed segments to remote storage, local
retention of what is copied, and remote retention (the expiration task).

Each runs on one partition at a time under that partition's ``tasks`` lock, as Kafka runs one
partition's RLMCopyTask and RLMExpirationTask one after the other, whether the scheduler
(:mod:`.rlm_tasks`) or a test (``tier()``, ``expire()``) starts it.  The copy takes the
partition's ``lock`` per segment, so produce and fetch go on between copies.
"""
from __future__ import annotations

import bisect
import os
import time
from typing import TYPE_CHECKING, Callable

from . import logconfig
from .batches import StorageError
from .remote_read import lineage_end
from .tiering import RemotePartition, RemoteSegmentMetadata

if TYPE_CHECKING:
    from .log import PartitionLog, Segment
    from .partition import Partition
    from .storage_view import StorageView


def _held(storage: "StorageView", part: "Partition") -> bool:
    """Whether ``part`` is still the broker's (a deleted topic's tasks end: RemoteLogManager.
    stopPartitions cancels them)."""
    try:
        return storage.partition(part.topic.name, part.partition) is part
    except StorageError:
        return False


def tier(storage: "StorageView", parts: list["Partition"],
         stopping: Callable[[], bool] = lambda: False) -> list[RemoteSegmentMetadata]:
    """RLMCopyTask.copyLogSegmentsToRemote on each partition leader's log, one segment at a time
    (:func:`next_copy`), then local retention on every replica (:func:`local_retention`).
    ``stopping()`` true ends the task between two segments, as a cancelled RLMTask does."""
    copied = []
    for part in parts:
        with part.tasks:
            if not _held(storage, part):
                continue
            done = -1        # one pass over the candidates, whatever the highest offset says after
            while not stopping():
                with part.lock:
                    found = next_copy(part, done + 1)
                    if found is None:
                        break
                    copied.append(_remote(part).copy(found[0], found[1], part.log.epochs))
                    done = found[1] - 1
            if not stopping():
                with part.lock:
                    local_retention(storage, part)
    return copied


def next_copy(part: "Partition", at_least: int = 0) -> tuple["Segment", int] | None:
    """The next segment RemoteLogManager.copyLogSegmentsToRemote copies, with its next segment's
    base: from the one holding (highest copied offset + 1) on (``log.logSegments(highestCopied
    + 1, MAX)``; the highest copied offset is findHighestRemoteOffset's, over the leader's
    epochs; candidateLogSegments), a closed segment whose next segment starts at or below the
    last stable offset (never the active one).  Copies end at that next base - 1.  ``at_least``:
    where this run's previous copy ended + 1."""
    log = part.log
    start = max(_remote(part).highest_offset + 1, part.log_start_offset, at_least)
    segs = log.segments
    first = max(bisect.bisect_right(segs, start, key=lambda s: s.base_offset) - 1, 0)
    lso = log.last_stable_offset
    for i in range(first, len(segs) - 1):
        nxt = segs[i + 1].base_offset
        if nxt > lso:
            return None
        # an empty segment (a cleaned one: LogCleaner keeps them) is copied too:
        # RemoteLogManager.candidateLogSegments takes every closed segment
        return segs[i], nxt
    return None


def local_retention(storage: "StorageView", part: "Partition") -> None:
    """Per replica, delete local segments that remote storage holds as UnifiedLog.deleteOldSegments
    does with remote storage on, with the topic's local retention (:func:`.logconfig.
    local_retention`): by size, then by time, each from the oldest segment while the rule allows
    and the segment is copied (UnifiedLog.deletableSegments' isSegmentEligibleForDeletion: its
    next segment's base - 1 <= the highest remote offset, or the log start offset is past it).
    Only the local log start offset moves.  Without local retention set anywhere, every copied
    segment's local copy goes at once."""
    limits = logconfig.local_retention(storage.local_retention_ms, storage.local_retention_bytes, part.topic)
    tiered_end = _remote(part).highest_offset
    for log in part.replicas:
        if limits is None:
            _delete_leading(log, part, tiered_end, lambda seg: True, roll=False)
            continue
        ms, size = limits
        # UnifiedLog.deleteRetentionSizeBreachedSegments
        total = sum(s.size for s in log.segments)
        if size >= 0 and total >= size:
            over = [total - size]

            def by_size(seg, over=over):
                if over[0] - seg.size < 0:
                    return False
                over[0] -= seg.size
                return True
            _delete_leading(log, part, tiered_end, by_size)
        # UnifiedLog.deleteRetentionMsBreachedSegments
        if ms >= 0:
            now = int(time.time() * 1000)
            _delete_leading(log, part, tiered_end, lambda seg, now=now, ms=ms: now - _largest_timestamp(seg) > ms)


def _largest_timestamp(seg: "Segment") -> int:
    """LogSegment.largestTimestamp: the max timestamp, else the file's last modification."""
    return seg.max_timestamp if seg.max_timestamp >= 0 else int(os.path.getmtime(seg.path) * 1000)


def _delete_leading(log: "PartitionLog", part: "Partition", tiered_end: int, breached: Callable,
                    roll: bool = True) -> None:
    """UnifiedLog.deletableSegments + deleteSegments: the leading segments that ``breached`` and
    that are copied (or below the log start offset) go.  When the rule reaches the active
    segment and it holds data, it is rolled so a later copy and retention can take it ("Rolling
    the active segment to make it eligible for deletion")."""
    segs = log.segments
    n = 0
    while n < len(segs):
        seg, last = segs[n], n + 1 == len(segs)
        if not breached(seg) or (last and (seg.size == 0 or not roll)):
            break
        if last:
            log.roll()          # segs, the log's own list, now ends with a new active segment
        upper = segs[n + 1].base_offset
        if not ((upper > 0 and upper - 1 <= tiered_end) or part.log_start_offset >= upper):
            break
        n += 1
    if n:
        log.delete_segments_before(segs[n].base_offset)


def expire(storage: "StorageView", parts: list["Partition"], now: int) -> list[RemoteSegmentMetadata]:
    """Remote retention, as RLMExpirationTask.cleanupExpiredRemoteLogSegments applies it to each
    partition whose topic sets ``retention_ms`` / ``retention_bytes``: the leading copies (in the
    order they serve offsets from the log start) whose max timestamp <= now - retention.ms, then
    those the size over retention.bytes (remote plus local-only bytes) allows, each deleted with
    DELETE_SEGMENT_STARTED / FINISHED; the log start offset moves past the last one deleted, and
    copies wholly below it go too."""
    deleted: list[RemoteSegmentMetadata] = []
    for part in parts:
        info = part.topic
        remote = _remote(part)
        if info.retention_ms is None and info.retention_bytes is None:
            continue
        with part.tasks, part.lock:
            if not _held(storage, part):
                continue
            chain = list(remote.chain(part.log_start_offset))
            gone: list = []
            if info.retention_ms is not None and info.retention_ms >= 0:
                for meta in chain:
                    if meta.max_timestamp > now - info.retention_ms:
                        break
                    gone.append(meta)
            if info.retention_bytes is not None and info.retention_bytes >= 0:
                highest = remote.highest_offset
                local_only = sum(seg.size for seg in part.log.segments if seg.base_offset > highest)
                breach = sum(m.size_bytes for m in chain) + local_only - info.retention_bytes
                for meta in chain[len(gone):]:
                    if breach - meta.size_bytes < 0:
                        break
                    breach -= meta.size_bytes
                    gone.append(meta)
            if not gone:
                continue
            # the log start moves past the deleted copies' parts on the lineage: an old leader's
            # copy holds offsets past an unclean election's cut that are not the log's
            new_start = min(max(part.log_start_offset,
                                max(lineage_end(remote, m, m.base_offset) for m in gone)),
                            part.log.log_end_offset)
            gone += [m for m in remote.segments if m.end_offset < new_start and m not in gone]
            deleted += remote.delete(gone)
            part.move_log_start(new_start)
    return deleted


def _remote(part: "Partition") -> RemotePartition:
    if part.remote is None:
        raise ValueError(f"{part.topic.name}-{part.partition} has no remote storage")
    return part.remote
