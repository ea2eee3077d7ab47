"""From located partitions to the work packing takes, through the one invariant every plan
passes (:func:`.coverage.check_cover`), whoever located the partitions."""
from __future__ import annotations

from typing import Sequence

from .coverage import Exclusion, check_cover
from .filters import skip_segments
from .locate import Located
from .packing import PartitionWork, SegmentSlice
from .plan import PartitionRange

def checked_works(ranges: Sequence[PartitionRange], located: dict, *, row_filter=None,
                  read_committed: bool = False) -> list[PartitionWork]:
    """Each range's pieces, less the tiered slices a pushed-down filter proves cannot match
    (recorded as exclusions), checked to cover the range exactly once: a PlanningError naming
    the partition and offsets otherwise."""
    works = []
    for pr in ranges:
        loc: Located = located[(pr.topic, pr.partition)]
        kept, skipped = skip_segments(loc.pieces, row_filter, read_committed=read_committed)
        exclusions = list(loc.exclusions) + [Exclusion(p.offset_start, p.offset_end, why) for p, why in skipped]
        # a copy of an empty segment (LogCleaner keeps them; RemoteLogManager copies them) holds
        # no record: nothing to GET
        empty = [p for p in kept if isinstance(p, SegmentSlice) and p.segment.size_bytes == 0]
        if empty:
            kept = [p for p in kept if not (isinstance(p, SegmentSlice) and p.segment.size_bytes == 0)]
            exclusions += [Exclusion(p.offset_start, p.offset_end, f"segment {p.segment.segment_id} is "
                                     f"empty (0 bytes): compaction left it no record") for p in empty]
        check_cover(f"{pr.topic}-{pr.partition}", pr.start, pr.end, kept, exclusions)
        if kept:
            works.append(PartitionWork(pr.topic, pr.partition, pr.topic_id, tuple(kept)))
    return works
