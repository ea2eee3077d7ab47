"""Remote reads of the embedded broker, as Kafka's ``RemoteLogManager.read`` serves them, and the
KIP-1248 location answers that point at the same bytes.

``RemoteLogManager.read(fetchInfo)`` takes the leader epoch of the fetch offset from the
*leader's* epoch cache (``leaderEpochCache.epochForOffset``), asks the
``RemoteLogMetadataCache`` for the copy of that epoch serving the offset
(``fetchRemoteLogSegmentMetadata``: none is ``OffsetOutOfRangeException``, "does not exist in
remote tier"), reads that copy from its offset-index position (``lookupPositionForOffset``) and
takes the first batch whose last offset is at or past the fetch offset (``findFirstBatch``).
When compaction left the copy no such batch it asks for the next copy
(``findNextSegmentMetadata``: the copy serving ``endOffset + 1``), and so on; when no copy has
one it answers **empty records with no error**.  After the first batch it reads on up to the
fetch's max bytes.

One rule is the embedded broker's own, where Kafka's code says nothing: a copy serves only the
offsets where its leader epochs are the leader's (the part of it on the partition's current
lineage).  An unclean leader election leaves the old leader's copies in remote storage (until
``RemoteLogManager``'s cleanup finds them outside ``isRemoteSegmentWithinLeaderEpochs``), and a
copy picked for an offset below the cut also holds records past it, which the lineage
truncated away: those are never served.  So a read stops at the end of the copy's lineage part,
and the next copy is the one serving that offset (the copy's ``endOffset + 1`` otherwise).
"""
from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from ..dataclass import dataclass
from ..errors import KafkaTieredError
from ..storage.indexes import lookup_position

if TYPE_CHECKING:
    from .tiering import RemotePartition, RemoteSegmentMetadata


class RemoteNotFound(KafkaTieredError):
    """No copy serves the offset (RemoteLogManager's OffsetOutOfRangeException)."""


@dataclass(frozen=True)
class Served:
    """Where a remote read of an offset is served from.  ``batch`` is the index, in the copy's
    batch table, of the first batch served, or None when no copy of the chain holds a batch at
    or after the offset (then ``segment`` is the last copy of the chain); ``lineage_end`` is
    where the copy's part on the lineage ends (exclusive)."""
    segment: "RemoteSegmentMetadata"
    batch: int | None
    lineage_end: int


@dataclass(frozen=True)
class Hint:
    segment: "RemoteSegmentMetadata"
    start: int                      # byte position of the first batch served
    end: int                        # exclusive
    next_offset: int | None         # offset after the last batch in [start, end); None: no batch
    lineage_end: int = 0            # where the copy's part on the lineage ends (exclusive)


@dataclass(frozen=True)
class RemoteRead:
    records: bytes                  # empty: no copy of the chain holds a batch at or after the offset
    next_offset: int
    segment: "RemoteSegmentMetadata"
    bytes_fetched: int


def lineage_end(remote: "RemotePartition", meta: "RemoteSegmentMetadata", offset: int) -> int:
    """The first offset from ``offset`` on (at most the copy's end + 1) where the copy's leader
    epoch is not the leader's: what the copy may serve on the current lineage ends there."""
    log = remote.leader_log() if remote.leader_log is not None else None
    end = meta.end_offset + 1
    if log is None:
        return end
    copy = sorted((o, e) for e, o in meta.leader_epochs.items())
    leader = [(o, e) for e, o in log.epochs.entries]
    starts = sorted({o for o, _ in copy + leader if offset < o < end})
    at = offset
    for nxt in [*starts, end]:
        i = bisect.bisect_right(copy, (at, float("inf"))) - 1
        if i < 0 or copy[i][1] != log.epochs.epoch_for(at):
            return at
        at = nxt
    return end


def _first_batch(remote: "RemotePartition", meta: "RemoteSegmentMetadata", offset: int, bound: int) -> int | None:
    """RemoteLogManager.findFirstBatch from lookupPositionForOffset's position: the first batch
    whose last offset >= ``offset``; None when there is none, or it lies past ``bound``."""
    table = remote.batches(meta)
    pos = lookup_position(remote.offset_index(meta), meta.base_offset, offset)
    i = bisect.bisect_left(table, pos, key=lambda t: t[1])
    i = bisect.bisect_left(table, offset, lo=i, key=lambda t: t[0])
    if i == len(table) or table[i][0] >= bound:
        return None
    return i


def serving(remote: "RemotePartition", offset: int) -> Served | None:
    """The copy and batch a remote read of ``offset`` starts from (see the module doc); None
    when the leader's epoch for it has no copy serving it (OffsetOutOfRangeException)."""
    meta = remote.lookup(offset)
    if meta is None:
        return None
    at = offset
    while True:
        bound = lineage_end(remote, meta, max(at, meta.base_offset))
        i = _first_batch(remote, meta, at, bound)
        if i is not None:
            return Served(meta, i, bound)
        # findNextSegmentMetadata: the copy serving the offset after this one's (lineage) end
        nxt = remote.lookup(bound) if bound > at else None
        if nxt is None or nxt.segment_id == meta.segment_id:
            return Served(meta, None, bound)
        meta, at = nxt, bound


def hint(remote: "RemotePartition", served: Served, max_bytes: int) -> Hint:
    """The bytes served: the first batch, then the batches after it while they fit in
    ``max_bytes`` (RemoteLogManager.read reads on to the fetch size) and lie on the lineage."""
    assert served.batch is not None
    table = remote.batches(served.segment)
    last, start, size = table[served.batch]
    end, nxt = start + size, last + 1
    for last, p, size in table[served.batch + 1:]:
        if p + size - start > max_bytes or last >= served.lineage_end:
            break
        end, nxt = p + size, last + 1
    return Hint(served.segment, start, end, nxt, served.lineage_end)


def location(remote: "RemotePartition", offset: int, max_bytes: int) -> Hint | None:
    """KIP-1248: the bytes a fetch of ``offset`` would get (:func:`hint`); where it would get
    none, the chain's last copy with an empty range where its batches on the lineage end (its
    lineage end says where a reader goes on).  None: no copy serves the offset."""
    found = serving(remote, offset)
    if found is None:
        return None
    if found.batch is not None:
        return hint(remote, found, max_bytes)
    table = remote.batches(found.segment)
    i = bisect.bisect_left(table, found.lineage_end, key=lambda t: t[0])
    at = table[i - 1][1] + table[i - 1][2] if i else 0
    return Hint(found.segment, at, at, None, found.lineage_end)


def read(remote: "RemotePartition", offset: int, max_bytes: int) -> RemoteRead:
    """Whole batches from remote storage as RemoteLogManager.read serves them (empty records
    when compaction left no batch at or after ``offset`` in the chain of copies);
    :class:`RemoteNotFound` when no copy serves the offset."""
    found = serving(remote, offset)
    if found is None:
        raise RemoteNotFound(f"offset {offset} for leader epoch {remote.epoch_for(offset)} of "
                             f"{remote.topic}-{remote.partition} does not exist in remote tier")
    if found.batch is None:
        return RemoteRead(b"", offset, found.segment, 0)
    h = hint(remote, found, max_bytes)
    data, fetched = remote.fetch_range(found.segment, h.start, h.end)
    if len(data) != h.end - h.start:
        raise KafkaTieredError(f"remote object {remote.store.location(found.segment.log_key)} returned "
                               f"{len(data)} bytes for [{h.start}, {h.end})")
    return RemoteRead(data, h.next_offset if h.next_offset is not None else offset, found.segment, fetched)
