"""Where a segment's objects live and how their bytes become the segment's: one layout per object
layout, above the byte-range store (:mod:`.store`) that only moves bytes.

A layout turns a :class:`~.segment.RemoteSegment` into object keys (relative to the backend's
bucket / container / root URL), says how a byte range of the segment maps onto its object
(:class:`~.parts.ReadPlan`: the key, the size, a chunk index and transforms), reads its index
files, and undoes the transforms of what a GET brought (:meth:`Layout.read_part`).  It reads
through the fetcher it is bound to (:meth:`Layout.bind`), whose GETs are retried and counted.

``aiven``
    Aiven's tiered-storage plugin (:mod:`.aiven_layout`): keys under ``key.prefix``, custom
    metadata (OBJECT_PREFIX, OBJECT_KEY) winning over it, manifests (read once per fetcher,
    LRU), chunk indexes, zstd chunks, AES-GCM chunks and indexes (:mod:`.aiven_crypto`).
``kafka-local-tiered``
    Kafka's test ``LocalTieredStorage``:
    ``{root}/{topic}-{partition}-{topicId}/{%020d startOffset}-{segmentId}.{suffix}``.
    Upstream history differs on the offset: recent ``RemoteLogSegmentFileset`` pads it with
    ``LogFileUtils.filenamePrefixFromOffset`` (20 digits), older versions wrote it unpadded
    (``padded_offsets=False``, option ``remote.storage.layout.padded.offsets=false``).
``template``
    A user format string with named fields, e.g.
    ``"{prefix}{topic}/{partition}/{base_offset:020d}-{segment_id}.{suffix}"``.
``presigned``
    The object is the segment's presigned URL, handed out by the broker (KIP-1248); its indexes
    come from the broker, not from here.
"""
from __future__ import annotations

import re

from ..dataclass import dataclass, field
from ..errors import ConfigError, RemoteStorageError, SegmentFormatError
from ..redact import redact_url
from . import aiven
from .layout import Layout, ObjectReader

# Kafka's file suffixes (LogFileUtils + RemoteLogSegmentFileset) by the index names used here.
LOCAL_TIERED_SUFFIXES = {
    "log": "log",
    "offset": "index",
    "timestamp": "timeindex",
    "transaction": "txnindex",
    "producer_snapshot": "snapshot",
    "leader_epoch": "leader_epoch_checkpoint",
}
INDEX_NAMES = ("offset", "timestamp", "producer_snapshot", "leader_epoch", "transaction")

TEMPLATE_FIELDS = ("prefix", "topic", "topic_id", "partition", "base_offset", "end_offset",
                   "segment_id", "suffix")


def local_tiered_key(root: str, topic: str, topic_id: str, partition: int, base_offset: int,
                     segment_id: str, suffix: str, *, padded_offsets: bool = True) -> str:
    """``{root}/{topic}-{partition}-{topicId}/{startOffset}-{segmentId}.{suffix}``; ``suffix`` is
    one of ``log index timeindex txnindex snapshot leader_epoch_checkpoint``."""
    if suffix not in LOCAL_TIERED_SUFFIXES.values():
        raise ValueError(f"unknown LocalTieredStorage suffix {suffix!r}; valid: "
                         f"{', '.join(LOCAL_TIERED_SUFFIXES.values())}")
    if base_offset < 0:
        raise ValueError(f"start offset must be >= 0, got {base_offset}")
    off = f"{base_offset:020d}" if padded_offsets else str(base_offset)
    head = f"{root.rstrip('/')}/" if root else ""
    return f"{head}{topic}-{partition}-{topic_id}/{off}-{segment_id}.{suffix}"


@dataclass(frozen=True)
class KafkaLocalTieredLayout(Layout):
    root: str = ""
    padded_offsets: bool = True
    reader: ObjectReader | None = field(default=None, compare=False, repr=False)
    name = "kafka-local-tiered"

    def log_key(self, segment) -> str:
        return self.index_key(segment, "log")

    def index_key(self, segment, index: str) -> str:
        return local_tiered_key(self.root, segment.topic, segment.topic_id, segment.partition,
                                segment.base_offset, segment.segment_id, LOCAL_TIERED_SUFFIXES[index],
                                padded_offsets=self.padded_offsets)


@dataclass(frozen=True)
class TemplateLayout(Layout):
    template: str = ""
    prefix: str = ""
    reader: ObjectReader | None = field(default=None, compare=False, repr=False)
    _has_suffix: bool = field(default=False, init=False, repr=False, compare=False)
    name = "template"

    def __post_init__(self):
        import string   # here: its Template class compiles a pattern at import (issue 36's cold start)
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None]
        except ValueError as exc:
            raise ConfigError(f"remote.storage.layout.template is not a valid format string: {exc}",
                              option="remote.storage.layout.template") from None
        for f in fields:
            base = f.split(".")[0].split("[")[0]
            if base not in TEMPLATE_FIELDS:
                raise ConfigError(
                    f"remote.storage.layout.template uses unknown field {{{f}}}; valid fields: "
                    f"{', '.join(TEMPLATE_FIELDS)}", option="remote.storage.layout.template")
        object.__setattr__(self, "_has_suffix", "suffix" in fields)

    def _render(self, segment, suffix: str) -> str:
        return self.template.format(prefix=self.prefix, topic=segment.topic, topic_id=segment.topic_id,
                                    partition=segment.partition, base_offset=segment.base_offset,
                                    end_offset=segment.end_offset, segment_id=segment.segment_id,
                                    suffix=suffix)

    def log_key(self, segment) -> str:
        return self._render(segment, "log")

    def index_key(self, segment, index: str) -> str:
        if not self._has_suffix:
            raise SegmentFormatError(
                f"the template layout has no {{suffix}} field, so the {index} index cannot be located",
                location=self.log_key(segment))
        return self._render(segment, LOCAL_TIERED_SUFFIXES[index])


@dataclass(frozen=True)
class PresignedLayout(Layout):
    """The object of a segment is its presigned URL (KIP-1248: the broker hands one out per
    segment); nothing else is reachable."""
    reader: ObjectReader | None = field(default=None, compare=False, repr=False)
    name = "presigned"

    def log_key(self, segment) -> str:
        if not segment.presigned_url:
            raise RemoteStorageError(
                f"segment {segment.topic}-{segment.partition} {segment.segment_id} has no presigned URL "
                "(the broker did not hand one out)", backend=getattr(self.reader, "backend", None))
        return segment.presigned_url

    def fetch_index(self, segment, index: str) -> bytes | None:
        raise RemoteStorageError("the presigned fetcher reads log data only; indexes come from the broker",
                                 location=redact_url(segment.presigned_url),
                                 backend=getattr(self.reader, "backend", None))


def layout_for(config, reader=None) -> Layout:
    """The layout ``config`` (a FetcherConfig) names, bound to ``reader``."""
    if config.layout == "aiven":
        from .aiven_layout import AivenLayout
        return AivenLayout(config.prefix, reader)
    if config.layout == "kafka-local-tiered":
        return KafkaLocalTieredLayout(config.prefix, config.padded_offsets, reader)
    return TemplateLayout(config.template or "", config.prefix, reader)


def __getattr__(name: str):
    if name == "AivenLayout":       # lives with the rest of the plugin's read side
        from .aiven_layout import AivenLayout
        return AivenLayout
    raise AttributeError(name)


# ---------------------------------------------------------------------------------------------
# Keys back into segments (offline planning lists the store and inverts the key functions).
# Topic ids and segment ids are Kafka Uuid strings: always 22 URL-safe base64 characters, which
# may themselves contain "-" — so they are cut by width, never by splitting on "-".
# ---------------------------------------------------------------------------------------------
_UUID = r"[A-Za-z0-9_-]{22}"
_TOPIC = r"[A-Za-z0-9._-]{1,249}"   # Kafka's legal topic names (Topic.validate)
# (patterns as strings, compiled when first used (re caches them): not at import, issue 36)
_AIVEN_KEY = (rf"^(?P<topic>{_TOPIC})-(?P<topic_id>{_UUID})/(?P<partition>0|[1-9][0-9]*)/"
              rf"(?P<base>[0-9]{{20}})-(?P<segment_id>{_UUID})\.(?P<suffix>[a-z-]+)$")
_LOCAL_KEY = (rf"^(?P<topic>{_TOPIC})-(?P<partition>0|[1-9][0-9]*)-(?P<topic_id>{_UUID})/"
              rf"(?P<base>[0-9]+)-(?P<segment_id>{_UUID})\.(?P<suffix>[a-z_]+)$")


@dataclass(frozen=True)
class ParsedKey:
    """What an object key says about its segment: the inverse of the layouts' key functions."""
    topic: str
    topic_id: str
    partition: int
    base_offset: int
    segment_id: str
    suffix: str


def _valid_ids(*ids: str) -> bool:
    from ..ids import uuid_from_str, uuid_to_str
    try:   # canonical only: Kafka writes Uuid.toString(), which round-trips
        return all(uuid_to_str(uuid_from_str(i)) == i for i in ids)
    except ValueError:
        return False


def parse_aiven_key(key: str, prefix: str = "") -> ParsedKey | None:
    """The segment named by an Aiven key ``{prefix}{topic}-{topicId}/{partition}/{%020d
    base}-{segmentId}.{log|indexes|rsm-manifest}``; None for a key of any other shape (or
    outside ``prefix``).  Inverse of :func:`.aiven.object_key`."""
    if prefix and not key.startswith(prefix):
        return None
    m = re.match(_AIVEN_KEY, key[len(prefix):])
    if m is None or m["suffix"] not in aiven.SUFFIXES or not _valid_ids(m["topic_id"], m["segment_id"]):
        return None
    return ParsedKey(m["topic"], m["topic_id"], int(m["partition"]), int(m["base"]),
                     m["segment_id"], m["suffix"])


def parse_local_tiered_key(key: str, root: str = "", *, padded_offsets: bool = True) -> ParsedKey | None:
    """The segment named by a LocalTieredStorage key ``{root}/{topic}-{partition}-{topicId}/
    {startOffset}-{segmentId}.{suffix}``; None for any other shape.  Inverse of
    :func:`local_tiered_key`."""
    head = f"{root.rstrip('/')}/" if root else ""
    if head and not key.startswith(head):
        return None
    m = re.match(_LOCAL_KEY, key[len(head):])
    if m is None or m["suffix"] not in LOCAL_TIERED_SUFFIXES.values() \
            or not _valid_ids(m["topic_id"], m["segment_id"]):
        return None
    base = m["base"]
    if padded_offsets and len(base) != 20 or not padded_offsets and base != str(int(base)):
        return None
    return ParsedKey(m["topic"], m["topic_id"], int(m["partition"]), int(base), m["segment_id"],
                     m["suffix"])


def listing_prefix(layout: str, prefix: str) -> str:
    """The key prefix under which every object of ``layout`` lives (what to list)."""
    if layout == "kafka-local-tiered":
        return f"{prefix.rstrip('/')}/" if prefix else ""
    return prefix
