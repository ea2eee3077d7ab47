"""The embedded broker's Fetch requests of flexible versions (12+) read without the codec's
field-by-field plan when they have the usual shape: the codec made a ``FetchPartition`` per
partition through its generic reader and ``__init__`` (keyword defaults, per-field set), a
third of the synthesized KIP-1248 broker's CPU once its answers were held (a planner asks
5,000 partitions a request).  Kafka's broker reads them with the generated ``FetchRequestData``
reader, as fast as a field read; this stands in for that.

The usual shape: the request header's and every partition's tagged sections empty (no
ReplicaDirectoryId, no HighWatermark), no forgotten topics, no request tags but the KIP-1248
ones (``RemoteLogSegmentLocationRequested``, ``SupportedStorageFormatVersions``; no ClusterId,
no ReplicaState).  Anything else, anything cut short or left over, or text that is not UTF-8:
None, and the codec reads the request (and names the fault).  What is read is the codec's
objects with the codec's values: tests/test_fetch_request.py holds the two to each other.
"""
from __future__ import annotations

import struct

from ...errors import ProtocolError
from ...protocol import codec, kip1248 as K, messages as m
from ...protocol.primitives import read_uvarint
from ...records.backend import slots_maker

_HEAD = struct.Struct(">hhih")          # api key, api version, correlation id, client id length
_BODY = struct.Struct(">iiibii")        # max wait, min bytes, max bytes, isolation, session id, epoch
_PART = struct.Struct(">iiqiqiB")       # a partition with an empty tagged section
_FIELDS = ("partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch", "log_start_offset",
           "partition_max_bytes")
_ZERO_UUID = bytes(16)
_HIGH_WATERMARK = 2**63 - 1             # FetchPartition.HighWatermark's default (v18)


# the codec's FetchPartition made from every slot's value in order (its __init__ takes keywords
# and sets each through object.__setattr__): records/backend.slots_maker, an instance equal to
# the codec's either way
_SLOTS = (*_FIELDS, "replica_directory_id", "high_watermark", "unknown_tags")


class _Declined(Exception):
    """Not the usual shape: the codec reads the request."""


def _uvarint(buf, pos: int) -> tuple[int, int]:
    """The codec's varint reader; a varint cut short or longer than 5 bytes declines."""
    try:
        return read_uvarint(buf, pos)
    except ProtocolError:
        raise _Declined from None


def _compact_string(buf, pos: int) -> tuple[str, int]:
    n, pos = _uvarint(buf, pos)
    if n == 0 or pos + n - 1 > len(buf):
        raise _Declined                  # null where a string is due, or cut short
    return bytes(buf[pos:pos + n - 1]).decode("utf-8"), pos + n - 1


def read(data: bytes):
    """``(header, FetchRequest)`` as ``codec.decode_request`` reads ``data`` (a frame without
    its size), or None when ``data`` is not a flexible Fetch of the usual shape."""
    try:
        return _read(memoryview(data))
    except (_Declined, UnicodeDecodeError, struct.error):
        return None


def _read(buf: memoryview):
    if len(buf) < _HEAD.size:
        return None
    key, version, cid, n = _HEAD.unpack_from(buf, 0)
    if key != m.FetchRequest.API_KEY or version not in m.FetchRequest.VALID_VERSIONS or version < 12:
        return None
    pos = _HEAD.size
    client_id = None
    if n >= 0:
        if pos + n > len(buf):
            return None
        client_id = bytes(buf[pos:pos + n]).decode("utf-8")
        pos += n
    elif n != -1:
        return None
    if pos >= len(buf) or buf[pos] != 0:        # header tags
        return None
    pos += 1
    hdr = codec.RequestHeader(request_api_key=key, request_api_version=version, correlation_id=cid,
                              client_id=client_id)
    R = m.FetchRequest
    FT = R.FetchTopic
    if version <= 14:                           # ReplicaId, a regular field up to v14
        (replica_id,) = struct.unpack_from(">i", buf, pos)
        pos += 4
    else:
        replica_id = -1
    max_wait, min_bytes, max_bytes, iso, session_id, session_epoch = _BODY.unpack_from(buf, pos)
    pos += _BODY.size
    n_topics, pos = _uvarint(buf, pos)
    if n_topics == 0:                           # a null array where one is due
        return None
    topics = []
    size = _PART.size
    for _ in range(n_topics - 1):
        if version >= 13:
            topic_id = bytes(buf[pos:pos + 16])
            if len(topic_id) != 16:
                return None
            pos += 16
            name = ""
        else:
            name, pos = _compact_string(buf, pos)
            topic_id = _ZERO_UUID
        n_parts, pos = _uvarint(buf, pos)
        if n_parts == 0:
            return None
        end = pos + (n_parts - 1) * size
        if end + 1 > len(buf):
            return None
        parts = []
        make = slots_maker(m.FetchRequest.FetchPartition, _SLOTS)
        for values in _PART.iter_unpack(buf[pos:end]):
            if values[6]:                       # a partition's tags: the codec's
                return None
            parts.append(make(*values[:6], _ZERO_UUID, _HIGH_WATERMARK, None))
        pos = end
        if buf[pos] != 0:                       # the topic's tags
            return None
        pos += 1
        topics.append(FT(topic=name, topic_id=topic_id, partitions=parts))
    if pos + 1 > len(buf) or buf[pos] != 1:     # ForgottenTopicsData: empty
        return None
    rack, pos = _compact_string(buf, pos + 1)
    n_tags, pos = _uvarint(buf, pos)
    requested, last = False, -1
    formats: list[str] = []
    for _ in range(n_tags):
        tag, pos = _uvarint(buf, pos)
        length, pos = _uvarint(buf, pos)
        if tag <= last or pos + length > len(buf):
            return None
        last, body, pos = tag, buf[pos:pos + length], pos + length
        if tag == K.TAG_REMOTE_LOG_SEGMENT_LOCATION_REQUESTED and length == 1 and body[0] in (0, 1):
            requested = bool(body[0])
        elif tag == K.TAG_SUPPORTED_STORAGE_FORMAT_VERSIONS:
            count, at = _uvarint(body, 0)
            if count == 0:
                return None
            formats = []
            for _ in range(count - 1):
                text, at = _compact_string(body, at)
                formats.append(text)
            if at != len(body):
                return None
        else:
            return None
    # trailing bytes after the body are ignored, as codec.decode_request (and Kafka) ignore them
    req = R(replica_id=replica_id, max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
            isolation_level=iso, session_id=session_id, session_epoch=session_epoch, topics=topics,
            forgotten_topics_data=[], rack_id=rack, remote_log_segment_location_requested=requested,
            supported_storage_format_versions=formats)
    return hdr, req
