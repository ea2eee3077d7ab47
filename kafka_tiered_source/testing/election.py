"""An unclean leader election on the embedded broker, as Kafka's replicas live through one.

A replica that was not in sync becomes leader with its own log end offset ``L`` and a new leader
epoch from there (Partition.makeLeader: LeaderEpochFileCache.assign).  The embedded broker's
replicas are always in sync, so the replica made leader is first cut back to ``L``
(UnifiedLog.truncateTo, or truncateFullyAndStartAt when ``L`` lies below its local log start:
an empty log that restarts at ``L``).  Every other replica then does what Kafka's followers do
(KIP-101/279): it asks the new leader OffsetForLeaderEpoch for its own latest epoch and
truncates to the answer's end offset (at most its own log end), its epoch cache from the end
(LeaderEpochFileCache.truncateFromEnd).  Records at or past ``L`` are gone from every log; the
next ones written take those offsets again, in the new epoch.  The old leader's copies in remote
storage stay, and are never served past ``L`` (:mod:`.remote_read`).

The call is checked before anything changes: ``L`` must lie within the log (log start to log end)
and on a batch boundary of every replica and of the tiered copy that serves the offsets before
it; a refusal leaves the partition as it was.
"""
from __future__ import annotations

import bisect
import struct
from typing import Any

from ..records.header import iter_headers
from ..storage.indexes import TXN_ENTRY
from .log import PartitionLog, StorageError


def unclean_election(part: Any, offset: int, replica: int | None = None) -> int:
    """Make ``replica`` (default: the leader) the leader of ``part`` with its log ending at
    ``offset``; returns the new leader epoch.  :class:`StorageError` (nothing changed) when the
    offset or replica is refused."""
    new = part.leader if replica is None else replica
    where = {"topic": part.topic.name, "partition": part.partition}
    if not 0 <= new < len(part.replicas):
        raise StorageError("NOT_LEADER_OR_FOLLOWER", f"no replica {new} (replicas 0-{len(part.replicas) - 1})",
                           **where)
    leader: PartitionLog = part.replicas[new]
    if not part.log_start_offset <= offset <= leader.log_end_offset:
        raise StorageError("OFFSET_OUT_OF_RANGE", f"cannot make {offset} the log end offset: the log "
                           f"holds [{part.log_start_offset}, {leader.log_end_offset})", **where)
    for i, log in enumerate(part.replicas):
        inside = _batch_across(log, offset)
        if inside is not None:
            raise StorageError("OFFSET_OUT_OF_RANGE", f"offset {offset} is inside the batch at offsets "
                               f"[{inside[0]}, {inside[1]}] of replica {i}: a log ends at a batch boundary",
                               **where)
    across = _remote_batch_across(part, offset)
    if across is not None:
        raise StorageError("OFFSET_OUT_OF_RANGE", f"offset {offset} is inside the batch at offsets "
                           f"[{across[0]}, {across[1]}] of tiered copy {across[2]}: a log ends at a "
                           f"batch boundary", **where)
    epoch = max([part.epoch] + [r.epochs.latest for r in part.replicas]) + 1
    _truncate_log(leader, offset)
    if leader.epochs.assign(epoch, offset):                     # Partition.makeLeader
        leader.epochs.save()
    for i, follower in enumerate(part.replicas):
        if i == new:
            continue
        # OffsetForLeaderEpoch(follower's latest epoch) on the new leader, then truncateTo
        _, end = leader.epochs.end_offset_for(follower.epochs.latest, leader.log_end_offset)
        _truncate_log(follower, min(end if end >= 0 else offset, follower.log_end_offset))
    part.set_leader(new, epoch)
    return epoch


def _batch_across(log: PartitionLog, offset: int) -> tuple[int, int] | None:
    """(base, last) of a local batch of ``log`` holding ``offset`` and offsets before it."""
    i = log.segment_for(offset)
    if i is None:
        return None
    for h in log.segments[i].headers_from(0):
        if h.base_offset < offset <= h.last_offset:
            return h.base_offset, h.last_offset
    return None


def _remote_batch_across(part: Any, offset: int) -> tuple[int, int, str] | None:
    """The same for the tiered copy serving ``offset - 1`` on the lineage (when no local segment
    of the leader holds it)."""
    remote = part.remote
    if remote is None or offset <= part.log_start_offset or offset - 1 >= part.log.local_start_offset:
        return None
    meta = remote.lookup(offset - 1)
    if meta is None or meta.end_offset < offset:
        return None
    table = remote.batches(meta)
    i = bisect.bisect_left(table, offset, key=lambda t: t[0])
    if i == len(table):
        return None
    last, pos, _ = table[i]
    head, _ = remote.fetch_range(meta, pos, pos + 8)
    base = struct.unpack_from(">q", head)[0]
    return (base, last, meta.segment_id) if base < offset else None


def _truncate_log(log: PartitionLog, offset: int) -> None:
    """UnifiedLog.truncateTo(offset): segments from ``offset`` on go, the one holding it is cut at
    the batch that starts there, its transaction index keeps the entries before; with no segment
    left below ``offset`` the log restarts empty at ``offset`` (truncateFullyAndStartAt)."""
    if offset >= log.log_end_offset:
        return
    kept = [s for s in log.segments if s.base_offset < offset]
    for seg in log.segments[len(kept):]:
        seg.delete()
    if kept:
        last = kept[-1]
        with open(last.path, "rb") as f:
            data = f.read()
        cut = next((h.position for h in iter_headers(data) if h.base_offset >= offset), len(data))
        with open(last.path, "r+b") as f:
            f.truncate(cut)
        entries = [e for e in last.txn_entries if e.last_offset < offset]
        with open(last.file(".txnindex"), "wb") as f:
            f.write(b"".join(TXN_ENTRY.pack(0, *e) for e in entries))
    log.epochs.truncate_from_end(offset)
    log.load(kept[0].base_offset if kept else offset)    # indexes and producer state rebuilt


__all__ = ["unclean_election"]
