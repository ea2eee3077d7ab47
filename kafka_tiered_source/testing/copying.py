"""The embedded broker's RemoteLogManager tasks: copying closed segments to remote storage, local
retention of what is copied, and remote retention (the expiration task)."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .remote_read import lineage_end
from .tiering import RemotePartition, RemoteSegmentMetadata

if TYPE_CHECKING:
    from .partition import Partition
    from .storage import BrokerStorage


def tier(storage: "BrokerStorage", parts: list["Partition"]) -> list[RemoteSegmentMetadata]:
    """What RemoteLogManager.copyLogSegmentsToRemote copies, from each partition leader's log:
    the segments from the one holding (highest copied offset + 1) on (``log.logSegments(
    highestCopied + 1, MAX)``; the highest copied offset is findHighestRemoteOffset's, over the
    leader's epochs), each closed segment whose next segment starts at or below the last stable
    offset, copied with its end offset at that next segment's base - 1.  Then local retention on
    every replica."""
    copied = []
    for part in parts:
        remote = _remote(part)
        with part.lock:
            log = part.log
            lso = log.last_stable_offset
            start = max(remote.highest_offset + 1, part.log_start_offset)
            segs = log.segments
            first = log.segment_for(start)
            for i in range(first if first is not None else 0, len(segs) - 1):
                nxt = segs[i + 1].base_offset
                if nxt > lso:
                    break
                # an empty segment (a cleaned one, LogCleaner keeps them) is copied too:
                # RemoteLogManager.candidateLogSegments takes every closed segment
                copied.append(remote.copy(segs[i], nxt, log.epochs))
            local_retention(storage, part)
    return copied


def local_retention(storage: "BrokerStorage", part: "Partition") -> None:
    """Per replica, delete local segments wholly in remote storage (next segment's base - 1 <=
    the highest remote offset: UnifiedLog.deletableSegments with remote storage) that local
    retention lets go; the log start offset does not move."""
    tiered_end = _remote(part).highest_offset
    now = int(time.time() * 1000)
    keep_bytes, keep_ms = storage.local_retention_bytes, storage.local_retention_ms
    for log in part.replicas:
        segs = log.segments
        total = sum(s.size for s in segs)
        cut = None
        for i, seg in enumerate(segs[:-1]):
            if segs[i + 1].base_offset - 1 > tiered_end:
                break
            if keep_bytes is None and keep_ms is None:
                delete = True
            else:
                # Kafka's size rule: delete only while what stays is still >= the limit
                by_bytes = keep_bytes is not None and keep_bytes >= 0 and total - seg.size >= keep_bytes
                by_time = keep_ms is not None and keep_ms >= 0 and seg.max_timestamp >= 0 \
                    and now - seg.max_timestamp > keep_ms
                delete = by_bytes or by_time
            if not delete:
                break
            total -= seg.size
            cut = segs[i + 1].base_offset
        if cut is not None:
            log.delete_segments_before(cut)


def expire(parts: list["Partition"], now: int) -> list[RemoteSegmentMetadata]:
    """Remote retention, as RemoteLogManager's expiration task applies it to each partition whose
    topic sets ``retention_ms`` / ``retention_bytes``: the leading copies (in the order they
    serve offsets from the log start) whose max timestamp <= now - retention.ms, then those the
    size over retention.bytes (remote plus local-only bytes) allows, each deleted with
    DELETE_SEGMENT_STARTED / FINISHED; the log start offset moves past the last one deleted, and
    copies wholly below it go too."""
    deleted: list[RemoteSegmentMetadata] = []
    for part in parts:
        info = part.topic
        remote = _remote(part)
        if info.retention_ms is None and info.retention_bytes is None:
            continue
        with part.lock:
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
