"""Aiven layout: what the tasks are handed of each segment's manifest.

A task's fetcher GETs the manifest of every segment it reads, once per segment per task, unless
the segment carries :class:`~kafka_tiered_source.storage.aiven.ManifestInfo`.  The planner
attaches it for the manifests it has read anyway (segments whose index it read), and reads it
here for any other segment that two or more tasks read (one GET instead of one per task).  A
segment read by a single task costs one manifest GET wherever it is made, so that one is left
to the executor, where GETs run in parallel.
"""
from __future__ import annotations

from typing import Any

from ..dataclass import replace
from ..errors import RemoteStorageError
from ..logs import get_logger
from ..storage import aiven
from ..storage.segment import RemoteSegment
from .segment_reads import SegmentReads
from .tasks import ReadTask, RemoteRange

log = get_logger(__name__)


def wanted(options, fetcher) -> bool:
    """Whether manifests are shipped at all: the Aiven layout with a manifest-reading fetcher."""
    return options.storage.layout == "aiven" and fetcher is not None and fetcher.layout.reads_manifests


class ManifestShipping:
    """``reads``: the plan's :class:`SegmentReads` (its first storage failure stops GETs here too)."""

    def __init__(self, fetcher, reads: SegmentReads | None = None):
        self.fetcher = fetcher
        self.reads = reads
        self._infos: dict = {}   # (topic, partition, segment id) -> ManifestInfo (None: not shippable)

    def keep(self, seg: RemoteSegment) -> None:
        """Keep what the reader needs of a manifest the fetcher has just read (no GET)."""
        m = self.fetcher.layout.cached_manifest(seg)
        if m is not None:
            self._infos[_key(seg)] = aiven.ManifestInfo.of(m)

    def attach(self, tasks: list[ReadTask]) -> list[ReadTask]:
        """The tasks with ``manifest_info`` on the segments whose manifest the planner has, or
        reads now because two or more tasks read the segment."""
        infos = self._infos
        if not infos and not _shared(tasks):
            return tasks          # no manifest at hand, none worth reading here
        # one pass over the ranges (a plan of a million copies has a million): each segment's
        # first range, and the segments that two or more tasks read
        first: dict = {}
        multi: set = set()
        for t in tasks:
            i = t.index
            for r in t.ranges:
                if isinstance(r, RemoteRange):
                    s = r.segment
                    key = (s.topic, s.partition, s.segment_id)
                    j = first.get(key)
                    if j is None:
                        first[key] = (i, r)
                    elif j[0] != i:
                        multi.add(key)
        if not multi and not any(key in infos for key in first):
            return tasks          # nothing to attach: no range rebuilt
        segments: dict = {}
        for key, (_, r) in first.items():
            failed = self.reads is not None and self.reads.storage_failed is not None
            if key not in infos and key in multi and not failed:
                try:
                    infos[key] = aiven.ManifestInfo.of(self.fetcher.layout.manifest(r.segment))
                except RemoteStorageError as exc:   # the executors try again, with their fallback
                    log.info("manifest of %r not read while planning: %s", r.segment, exc)
                    infos[key] = None
                    if self.reads is not None:
                        self.reads.storage_failed = exc   # one failure is enough: no GET per segment
            info = infos.get(key)
            if info is not None:
                segments[key] = replace(r.segment, manifest_info=info)
        if not segments:
            return tasks
        return [ReadTask(t.index, tuple(_with(r, segments) for r in t.ranges), t.txn) for t in tasks]


def _shared(tasks: list[ReadTask]) -> bool:
    """Whether two tasks read ranges of segments with the same id (an upper bound on the
    segments two tasks read: ids are Kafka Uuids, the same id in two partitions only counts
    once too often)."""
    seen: dict = {}
    for t in tasks:
        i = t.index
        for r in t.ranges:
            if isinstance(r, RemoteRange):
                j = seen.setdefault(r.segment.segment_id, i)
                if j != i:
                    return True
    return False


def _with(r: Any, segments: dict) -> Any:
    """``r`` on the segment with its manifest's info, where there is one."""
    if not isinstance(r, RemoteRange):
        return r
    s = r.segment
    seg = segments.get((s.topic, s.partition, s.segment_id))
    return r if seg is None or seg is s else replace(r, segment=seg)


def _key(seg: RemoteSegment) -> tuple:
    return seg.topic, seg.partition, seg.segment_id
