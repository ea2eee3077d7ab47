"""The picklable description of one tiered segment, as the planner hands it to executors.

It is the Python counterpart of Kafka's ``RemoteLogSegmentMetadata`` (KIP-405) plus what the
KIP-1248 Fetch extension adds: custom metadata and an optional presigned URL.  When the planner
has read the segment's Aiven manifest, ``manifest_info`` carries the little of it the reader
needs (:class:`~.aiven.ManifestInfo`), so executors do not GET the manifest again.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..dataclass import dataclass, field
from ..redact import redact_url

if TYPE_CHECKING:
    from .aiven import ManifestInfo


@dataclass(frozen=True, slots=True)
class RemoteSegment:
    topic: str
    topic_id: str                  # Kafka Uuid string (22-char URL-safe base64)
    partition: int
    segment_id: str                # RemoteLogSegmentId's uuid, Kafka Uuid string
    base_offset: int               # first offset in the segment
    end_offset: int                # last offset in the segment (inclusive, as Kafka's endOffset)
    size_bytes: int | None = None  # size of the segment's .log data, when known
    custom_metadata: bytes | None = None
    presigned_url: str | None = field(default=None, compare=False)
    storage_format: str = "ApacheKafkaV1"
    # Aiven layout: what the planner learnt from the manifest; None: the reader GETs it.
    manifest_info: ManifestInfo | None = field(default=None, compare=False)
    # The largest record timestamp (ms) in the segment, when the locator learnt it (the metadata
    # topic, an Aiven manifest); None: unknown.  Pushed-down timestamp filters skip by it.
    max_timestamp: int | None = field(default=None, compare=False)
    # KIP-1248: byte positions in it come from the broker's answers (the batch holding an offset
    # or, past a compaction gap, the next one), not from its offset index (the batch ending at or
    # before it): a slice's first batch may then start after the slice's first offset.
    broker_positions: bool = field(default=False, compare=False)

    def __repr__(self) -> str:   # the presigned URL's signature must never show
        return (f"RemoteSegment(topic={self.topic!r}, partition={self.partition}, "
                f"segment_id={self.segment_id!r}, offsets=[{self.base_offset}, {self.end_offset}], "
                f"size_bytes={self.size_bytes}, presigned_url={redact_url(self.presigned_url)!r})")

    __str__ = __repr__
