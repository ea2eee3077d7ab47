"""What the planners need from a fetcher, as a type: reading indexes and segment tails, the
Aiven manifests, and listing the store.  :class:`~.fetcher.RemoteStorageFetcher` declares all of
it (a fetcher that cannot list or has no manifests says so with an error, or with
``reads_manifests = False``), so planners never probe for methods."""
from __future__ import annotations

from typing import Iterator, Protocol

from .aiven import SegmentManifest


class SegmentCatalog(Protocol):
    #: whether :meth:`manifest` reads Aiven manifests
    reads_manifests: bool
    #: whether any object is reachable by its layout key (listing, locators)
    can_list: bool

    def fetch_index(self, segment, index: str) -> bytes | None:
        """A segment index by kind (``offset``, ``timestamp``, ``transaction``, ...)."""

    def fetch_log_segment(self, segment, start: int = 0, end: int | None = None):
        """Bytes ``[start, end)`` of the segment's data."""

    def manifest(self, segment) -> SegmentManifest:
        """The segment's Aiven manifest (one GET, cached per fetcher)."""

    def cached_manifest(self, segment) -> SegmentManifest | None:
        """The manifest if the fetcher holds it already, without a GET."""

    def list_objects(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """``(key, size)`` of every object under ``prefix``."""
