"""What the planner itself reads of tiered segments: offset indexes, to enter a segment mid-way
and to split large segments into tasks.  Best effort: the first storage failure stops further
reads (a segment then stays one piece), and whether storage can be read at all is the
preflight's to say (one clear error, before any task)."""
from __future__ import annotations

from typing import Callable

from ..errors import RemoteStorageError
from ..logs import get_logger
from ..storage.indexes import parse_offset_index
from ..storage.protocols import SegmentCatalog
from ..storage.segment import RemoteSegment
from .packing import PartitionWork, SegmentSlice, index_checkpoints

log = get_logger(__name__)


class SegmentReads:
    """``fetcher`` (None: nothing is read, segments are never split below whole segments);
    ``on_index(segment)`` runs after each index read (the Aiven manifest read on the way is
    worth keeping, :mod:`.aiven_manifests`)."""

    def __init__(self, fetcher: SegmentCatalog | None, options,
                 on_index: Callable[[RemoteSegment], None] | None = None):
        self.fetcher = fetcher
        self.options = options
        self.on_index = on_index
        self._indexes: dict[str, bytes | None] = {}   # segment id -> offset index bytes (one GET each)
        self.storage_failed: Exception | None = None  # the first storage error of this plan

    def offset_index(self, seg: RemoteSegment) -> bytes | None:
        """A segment's offset index, read once per plan."""
        if seg.segment_id not in self._indexes:
            self._indexes[seg.segment_id] = self.fetcher.fetch_index(seg, "offset") if self.fetcher else None
            if self.on_index is not None:
                self.on_index(seg)
        return self._indexes[seg.segment_id]

    def checkpoints(self, piece: SegmentSlice) -> SegmentSlice:
        """The slice with the segment's offset-index entries from its start on, for splitting.

        The slice's first checkpoint is (first offset, hinted start position): the batch at the
        hinted start holds ``first``; claiming ``first`` as its last offset is safe for the
        splitter, which only relies on "records before P are <= O" and "records at the next
        entry are > O".  Costs one GET of the index (Aiven: a range of ``.indexes``)."""
        seg = piece.segment
        if self.fetcher is None or self.storage_failed is not None:
            return piece
        try:
            index = self.offset_index(seg)
        except RemoteStorageError as exc:
            log.info("offset index of %r not read while planning: %s", seg, exc)
            self.storage_failed = exc
            return piece
        if not index:
            return piece
        entries = ((seg.base_offset + rel, pos) for rel, pos in parse_offset_index(index))
        return SegmentSlice(seg, piece.offset_start, piece.offset_end,
                            index_checkpoints(seg, entries, piece.checkpoints))

    def with_indexes(self, works: list[PartitionWork]) -> list[PartitionWork]:
        """Read the offset index only of the segments that will be split: those larger than a
        task, all of them when ``maxRecordsPerPartition`` bounds offsets, and, for
        ``minPartitions``, the largest ones until there are enough pieces to split."""
        opts = self.options
        slices = [p for w in works for p in w.pieces if isinstance(p, SegmentSlice)]

        def span(p):
            return (p.segment.size_bytes or 0) - p.checkpoints[0][1]

        chosen = {id(p) for p in slices
                  if opts.max_records_per_partition or span(p) > opts.partition_target_bytes}
        if opts.min_partitions:
            missing = opts.min_partitions - sum(len(w.pieces) for w in works) - len(chosen)
            for p in sorted(slices, key=lambda p: -span(p)):
                if missing <= 0:
                    break
                if id(p) not in chosen:
                    chosen.add(id(p))
                    missing -= 1
        if not chosen:
            return works
        return [PartitionWork(w.topic, w.partition, w.topic_id,
                              tuple(self.checkpoints(p) if isinstance(p, SegmentSlice) and id(p) in chosen else p
                                    for p in w.pieces), w.txn)
                for w in works]
