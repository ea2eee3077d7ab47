"""What the planners need from a fetcher, as a type: reading indexes and segment tails, its
layout (keys, Aiven manifests: ``fetcher.layout.manifest(segment)``), and listing the store.
:class:`~.fetcher.RemoteStorageFetcher` declares all of it (a fetcher that cannot list says so
with ``can_list``; one without manifests has a layout whose ``reads_manifests`` is False), so
planners never probe for methods."""
from __future__ import annotations

from typing import Iterator, Protocol

from .layout import Layout


class SegmentCatalog(Protocol):
    #: whether any object is reachable by its layout key (listing, locators)
    can_list: bool
    #: keys, manifests (``layout.reads_manifests``, ``layout.manifest(segment)``, ...)
    layout: Layout

    def fetch_index(self, segment, index: str) -> bytes | None:
        """A segment index by kind (``offset``, ``timestamp``, ``transaction``, ...)."""

    def fetch_log_segment(self, segment, start: int = 0, end: int | None = None):
        """Bytes ``[start, end)`` of the segment's data."""

    def list_objects(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """``(key, size)`` of every object under ``prefix``."""
