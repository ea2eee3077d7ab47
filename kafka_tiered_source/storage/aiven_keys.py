"""Where Aiven's plugin puts a segment's objects: the key of each object, and the segment's
custom metadata (a Kafka tagged-fields block whose OBJECT_PREFIX and OBJECT_KEY, when present,
win over the configured prefix).  See :mod:`.aiven` for the objects themselves."""
from __future__ import annotations

from ..errors import ProtocolError, SegmentFormatError
from ..protocol.primitives import read_uvarint

SUFFIX_LOG = "log"
SUFFIX_INDEXES = "indexes"
SUFFIX_MANIFEST = "rsm-manifest"
SUFFIXES = (SUFFIX_LOG, SUFFIX_INDEXES, SUFFIX_MANIFEST)

# Custom metadata tags (SegmentCustomMetadataField ordinals; fixed forever upstream).
TAG_REMOTE_SIZE = 0
TAG_OBJECT_PREFIX = 1
TAG_OBJECT_KEY = 2


# --------------------------------------------------------------------------------------------
# object keys

def main_path(topic: str, topic_id: str, partition: int, base_offset: int, segment_id: str) -> str:
    """``{topic}-{topicId}/{partition}/{%020d startOffset}-{segmentId}`` (ObjectKeyFactory.mainPath)."""
    if base_offset < 0:
        raise ValueError(f"start offset must be >= 0, got {base_offset}")
    return f"{topic}-{topic_id}/{partition}/{base_offset:020d}-{segment_id}"


def object_key(prefix: str | None, topic: str, topic_id: str, partition: int, base_offset: int,
               segment_id: str, suffix: str) -> str:
    """The key of one of a segment's objects; ``suffix`` is ``log``, ``indexes`` or ``rsm-manifest``."""
    if suffix not in SUFFIXES:
        raise ValueError(f"unknown Aiven object suffix {suffix!r}; valid: {', '.join(SUFFIXES)}")
    return f"{prefix or ''}{main_path(topic, topic_id, partition, base_offset, segment_id)}.{suffix}"


def segment_object_key(segment, suffix: str, prefix: str | None = None) -> str:
    """The key for a :class:`~.segment.RemoteSegment`, letting its custom metadata win.

    As the plugin's ``ObjectKeyFactory.key(fields, ...)``: OBJECT_PREFIX replaces the configured
    prefix and OBJECT_KEY replaces the main path, each only when present.
    """
    if suffix not in SUFFIXES:
        raise ValueError(f"unknown Aiven object suffix {suffix!r}; valid: {', '.join(SUFFIXES)}")
    fields = decode_custom_metadata(segment.custom_metadata) if segment.custom_metadata else {}
    pfx = fields.get("object_prefix")
    main = fields.get("object_key")
    if pfx is None:
        pfx = prefix or ""
    if main is None:
        main = main_path(segment.topic, segment.topic_id, segment.partition, segment.base_offset,
                         segment.segment_id)
    return f"{pfx}{main}.{suffix}"


# --------------------------------------------------------------------------------------------
# custom metadata: a Kafka tagged-fields section

def _read_uvarint(data: bytes, pos: int, what: str, max_bytes: int = 5) -> tuple[int, int]:
    # The custom metadata is a Kafka tagged-fields block: the protocol's own varint reader, with
    # its error turned into this layer's (the byte position is in the message).
    try:
        return read_uvarint(data, pos, max_bytes)
    except ProtocolError as exc:
        raise SegmentFormatError(f"custom metadata: bad varint ({what}) at byte position {pos}: "
                                 f"{exc}") from None




def decode_custom_metadata(data: bytes | None) -> dict:
    """Decode a custom-metadata block into ``{"remote_size", "object_prefix", "object_key"}``.

    Absent fields are None; unknown tags are skipped (a newer plugin may add some), as Kafka's
    tagged-fields reader does.  Malformed input raises :class:`SegmentFormatError` naming the
    byte position.
    """
    result: dict[str, int | str | None] = {"remote_size": None, "object_prefix": None, "object_key": None}
    if not data:
        return result
    data = bytes(data)
    count, pos = _read_uvarint(data, 0, "field count")
    prev_tag = -1
    for _ in range(count):
        tag_pos = pos
        tag, pos = _read_uvarint(data, pos, "tag")
        if tag <= prev_tag:
            raise SegmentFormatError(
                f"custom metadata: tag {tag} out of order or repeated at byte position {tag_pos}")
        prev_tag = tag
        size, pos = _read_uvarint(data, pos, f"size of tag {tag}")
        end = pos + size
        if end > len(data):
            raise SegmentFormatError(
                f"custom metadata: tag {tag} claims {size} bytes at byte position {pos} "
                f"but only {len(data) - pos} remain")
        body = data[pos:end]
        if tag == TAG_REMOTE_SIZE:
            raw, used = _read_uvarint(body, 0, "remote_size", max_bytes=10)
            if used != size:
                raise SegmentFormatError(
                    f"custom metadata: REMOTE_SIZE has {size - used} trailing bytes at byte position {pos + used}")
            result["remote_size"] = (raw >> 1) ^ -(raw & 1)
        elif tag in (TAG_OBJECT_PREFIX, TAG_OBJECT_KEY):
            name = "object_prefix" if tag == TAG_OBJECT_PREFIX else "object_key"
            n1, used = _read_uvarint(body, 0, f"{name} length")
            if n1 == 0:
                raise SegmentFormatError(
                    f"custom metadata: {name} is a null compact string at byte position {pos}")
            if used + n1 - 1 != size:
                raise SegmentFormatError(
                    f"custom metadata: {name} length {n1 - 1} does not fit its field size {size} "
                    f"at byte position {pos}")
            try:
                result[name] = body[used:].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SegmentFormatError(
                    f"custom metadata: {name} is not UTF-8 at byte position {pos + used + exc.start}") from None
        pos = end
    if pos != len(data):
        raise SegmentFormatError(
            f"custom metadata: {len(data) - pos} trailing bytes at byte position {pos}")
    return result
