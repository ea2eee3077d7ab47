"""Aiven layout: what the tasks are handed of each segment's manifest.

A task's fetcher GETs the manifest of every segment it reads, once per segment per task, unless
the segment carries :class:`~kafka_tiered_source.storage.aiven.ManifestInfo`.  The planner
attaches it for the manifests it has read anyway (segments whose index it read), and reads it
here for any other segment that two or more tasks read (one GET instead of one per task).  A
segment read by a single task costs one manifest GET wherever it is made, so that one is left
to the executor, where GETs run in parallel.
"""
from __future__ import annotations

import logging
from typing import Any
from collections import Counter
from dataclasses import replace

from ..errors import RemoteStorageError
from ..storage import aiven
from ..storage.segment import RemoteSegment
from .segment_reads import SegmentReads
from .tasks import ReadTask, RemoteRange

log = logging.getLogger(__name__)


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
        # each range's key once (a plan of a million copies has a million ranges)
        keyed: list[list[Any]] = [[(_key(r.segment), r) if isinstance(r, RemoteRange) else (None, r) for r in t.ranges]
                 for t in tasks]
        readers = Counter(key for t in keyed for key in {k for k, _ in t if k is not None})
        segments: dict = {}
        for key, r in (kr for t in keyed for kr in t if kr[0] is not None):
            if key in segments:
                continue
            failed = self.reads is not None and self.reads.storage_failed is not None
            if key not in self._infos and readers[key] > 1 and not failed:
                try:
                    self._infos[key] = aiven.ManifestInfo.of(self.fetcher.layout.manifest(r.segment))
                except RemoteStorageError as exc:   # the executors try again, with their fallback
                    log.info("manifest of %r not read while planning: %s", r.segment, exc)
                    self._infos[key] = None
                    if self.reads is not None:
                        self.reads.storage_failed = exc   # one failure is enough: no GET per segment
            info = self._infos.get(key)
            segments[key] = r.segment if info is None else replace(r.segment, manifest_info=info)
        if all(segments[k] is r.segment for t in keyed for k, r in t if k is not None):
            return tasks          # nothing to attach: no range rebuilt
        return [ReadTask(t.index, tuple(replace(r, segment=segments[k]) if k is not None and segments[k] is not r.segment
                                        else r for k, r in kt), t.txn) for t, kt in zip(tasks, keyed, strict=True)]


def _key(seg: RemoteSegment) -> tuple:
    return seg.topic, seg.partition, seg.segment_id
