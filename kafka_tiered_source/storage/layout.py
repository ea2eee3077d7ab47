"""What every object layout is: the :class:`Layout` base (object keys, read plans, index and
manifest reads through the fetcher it is bound to) and the :class:`ObjectReader` it reads through.
The layouts themselves are :mod:`.layouts` (LocalTieredStorage, templates, presigned URLs) and
:mod:`.aiven_layout` (Aiven's plugin)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

from ..dataclass import replace
from ..errors import RemoteObjectNotFound, RemoteStorageError, SegmentFormatError
from ..options.storage import FetcherConfig
from .parts import Part, ReadPlan

if TYPE_CHECKING:
    from . import aiven


class ObjectReader(Protocol):
    """What a layout reads through: the fetcher it is bound to (retried, counted GETs)."""
    backend: str
    config: FetcherConfig

    def get_object(self, key: str, start: int, end: int | None) -> bytes: ...

    def location(self, key: str) -> str: ...


class Layout:
    """The behaviour every layout shares; a plain fetcher without object keys has this one
    (``name`` ``"none"``: no manifests, no keys).  ``reader`` is the fetcher it reads through."""

    name = "none"
    #: whether :meth:`manifest` reads Aiven manifests (offline planning needs them; online
    #: planning ships what it read to the tasks)
    reads_manifests = False
    reader: ObjectReader | None = None

    def bind(self, reader: ObjectReader) -> "Layout":
        """This layout reading through ``reader`` (a fetcher)."""
        return replace(cast(Any, self), reader=reader)

    @property
    def io(self) -> ObjectReader:
        """The fetcher this layout reads through."""
        if self.reader is None:
            raise RemoteStorageError(f"the {self.name} layout is not bound to a fetcher")
        return self.reader

    def log_key(self, segment) -> str:
        raise SegmentFormatError(f"the {self.name} layout names no objects")

    def index_key(self, segment, index: str) -> str:
        raise SegmentFormatError(f"the {self.name} layout names no index objects")

    def read_plan(self, segment) -> ReadPlan:
        """How to read ``segment``'s data: its object, original size and chunking."""
        return ReadPlan(self.log_key(segment), segment.size_bytes)

    def read_part(self, plan: ReadPlan, part: Part):
        """One GET of ``part``, as original segment bytes (a chunked layout undoes its
        transforms here)."""
        return self.io.get_object(plan.key, part.obj_start, part.obj_end)

    def fetch_index(self, segment, index: str) -> bytes | None:
        """A segment index by kind; None for a missing transaction index (optional in Kafka's
        fileset)."""
        key = self.index_key(segment, index)
        try:
            return bytes(self.io.get_object(key, 0, None))
        except RemoteObjectNotFound:
            if index == "transaction":
                return None
            raise

    def manifest(self, segment) -> "aiven.SegmentManifest":
        """The segment's Aiven manifest (layouts with ``reads_manifests``)."""
        raise SegmentFormatError(f"the {self.name} layout has no Aiven manifests",
                                 backend=getattr(self.reader, "backend", None))

    def cached_manifest(self, segment) -> "aiven.SegmentManifest | None":
        """The segment's Aiven manifest if already read (no GET), else None."""
        return None

    def cipher(self, encryption, location: str | None = None):
        """The chunk cipher of an encrypted Aiven manifest's ``encryption``."""
        raise SegmentFormatError(f"the {self.name} layout has no encrypted segments")


NO_LAYOUT = Layout()
