"""The embedded broker's Fetch responses (flexible versions) written straight from the handler's
objects, without the codec's field-by-field plan (each tagged field encoded into a buffer of
its own, compared with its default): the codec's encoding cost the KIP-1248 benchmark's broker
more than the answers' look-ups.  Kafka's broker writes its answers with the generated
``FetchResponseData`` serializer, as fast as a field write; this stands in for that.

Only what :mod:`.fetch` puts in an answer is written: the partition's fields, its aborted list,
records, and the KIP-1248 tags where they differ from their defaults (Kafka's rule for tagged
fields, ascending); ``DivergingEpoch``, ``CurrentLeader``, ``SnapshotId`` and the top-level
``NodeEndpoints`` are never set by the handler, so never written (their defaults).  A
partition that holds unknown tags, or any of those set, goes through the codec with the whole
response.  tests/test_fetch_answers.py holds the bytes to the codec's.
"""
from __future__ import annotations

import struct
from typing import Any

from ...protocol import kip1248 as K
from ...protocol.primitives import write_bytes, write_string, write_uvarint

_HEAD = struct.Struct(">ihi")
_PART = struct.Struct(">ihqqq")
_ABORTED = struct.Struct(">qqB")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ZERO = bytes(16)


class EncodedPartition:
    """One partition of a Fetch answer already written (:func:`location_partition`): the
    handler puts it among the partitions and :func:`encode` copies its bytes."""

    __slots__ = ("body", "nbytes")
    records = b""                   # a location answer carries no records

    def __init__(self, body: bytes, nbytes: int):
        self.body = body
        self.nbytes = nbytes        # the byte range granted (end - start)


# A KIP-1248 location answer of a read_uncommitted fetch, as encode() writes it from the
# PartitionData _fill_location fills: error 0, null aborted list, preferred read replica -1,
# empty records; then its tagged fields, ascending: 100 segment id, 101 custom metadata (when
# the copy has some), 102-105 the byte range and the copy's offsets, 106 the storage format
# (no 107: no presigned URL).  Tags 100-107 are one-byte uvarints.
_LOC_HEAD = struct.Struct(">ihqqqBiB")
_LOC_TAIL = struct.Struct(">BBiBBiBBqBBq")
_FORMAT_TAG = bytes([K.TAG_STORAGE_FORMAT_VERSION, len(K.STORAGE_FORMAT_APACHE_KAFKA_V1) + 1,
                     len(K.STORAGE_FORMAT_APACHE_KAFKA_V1) + 1]) + K.STORAGE_FORMAT_APACHE_KAFKA_V1.encode()
_I32_MAX = 2**31 - 1


def location_tags(segment_id: bytes, custom_metadata: bytes | None) -> bytes:
    """The tag count and tags 100-101 of a location answer of this copy (what differs per copy
    and not per fetch): held per copy by a synthesized partition (testing/synthetic_tiers.py)."""
    if len(segment_id) != 16 or segment_id == _ZERO:
        raise ValueError("a location answer names a copy by a non-zero 16-byte segment id")
    out = bytearray([7 if custom_metadata is not None else 6, K.TAG_REMOTE_LOG_SEGMENT_ID, 16])
    out += segment_id
    if custom_metadata is not None:
        b = bytearray()
        write_bytes(b, custom_metadata, True)
        out.append(K.TAG_REMOTE_LOG_SEGMENT_CUSTOM_METADATA)
        write_uvarint(out, len(b))
        out += b
    return bytes(out)


def location_partition(partition: int, high_watermark: int, last_stable_offset: int, log_start_offset: int,
                       tags: bytes, start: int, end: int, base_offset: int, end_offset: int) -> bytes | None:
    """A read_uncommitted location answer's partition (``tags``: :func:`location_tags`), byte
    for byte what :func:`encode` writes for it; None when a position does not fit an int32
    (then the codec's path raises as it does)."""
    if not 0 <= start <= end <= _I32_MAX:
        return None
    return (_LOC_HEAD.pack(partition, 0, high_watermark, last_stable_offset, log_start_offset, 0, -1, 1) + tags
            + _LOC_TAIL.pack(K.TAG_REMOTE_LOG_SEGMENT_START_POSITION, 4, start, K.TAG_REMOTE_LOG_SEGMENT_END_POSITION,
                             4, end, K.TAG_REMOTE_LOG_SEGMENT_BASE_OFFSET, 8, base_offset,
                             K.TAG_REMOTE_LOG_SEGMENT_END_OFFSET, 8, end_offset) + _FORMAT_TAG)


class EncodedResponse:
    """A response body already encoded (the server frames it with the header)."""

    __slots__ = ("body",)

    def __init__(self, body: bytes):
        self.body = body


def _plain(p: Any) -> bool:
    """Nothing set that this writer leaves out."""
    return (not p.unknown_tags and p.diverging_epoch.epoch == -1 and p.diverging_epoch.end_offset == -1
            and p.current_leader.leader_id == -1 and p.current_leader.leader_epoch == -1
            and p.snapshot_id.end_offset == -1 and p.snapshot_id.epoch == -1)


def encode(resp: Any, version: int) -> EncodedResponse | None:
    """``resp`` (a ``FetchResponse`` the handler made) encoded at ``version``; None when it is
    not a flexible version or holds what this writer does not write (the codec does then).
    A response holding an :class:`EncodedPartition` is written here or not at all (the handler
    makes those only for flexible versions, among partitions it fills as this writer expects)."""
    out = _encode(resp, version)
    if out is None and any(p.__class__ is EncodedPartition for t in resp.responses for p in t.partitions):
        raise TypeError("a Fetch response with partitions already written cannot go through the codec")
    return out


def _encode(resp: Any, version: int) -> EncodedResponse | None:
    if version < 12 or resp.unknown_tags or (version >= 16 and resp.node_endpoints):
        return None
    out = bytearray(_HEAD.pack(resp.throttle_time_ms, resp.error_code, resp.session_id))
    write_uvarint(out, len(resp.responses) + 1)
    for t in resp.responses:
        if t.unknown_tags:
            return None
        if version >= 13:
            out += t.topic_id
        else:
            write_string(out, t.topic, True)
        write_uvarint(out, len(t.partitions) + 1)
        for p in t.partitions:
            if p.__class__ is EncodedPartition:
                out += p.body
                continue
            if not _plain(p):
                return None
            out += _PART.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                              p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                out.append(0)
            else:
                write_uvarint(out, len(aborted) + 1)
                for a in aborted:
                    if a.unknown_tags:
                        return None
                    out += _ABORTED.pack(a.producer_id, a.first_offset, 0)
            out += _I32.pack(p.preferred_read_replica)
            write_bytes(out, p.records, True)
            tags: list[tuple[int, bytes | bytearray]] = []
            if p.remote_log_segment_id != _ZERO:
                tags.append((K.TAG_REMOTE_LOG_SEGMENT_ID, bytes(p.remote_log_segment_id)))
            if p.remote_log_segment_custom_metadata is not None:
                b = bytearray()
                write_bytes(b, p.remote_log_segment_custom_metadata, True)
                tags.append((K.TAG_REMOTE_LOG_SEGMENT_CUSTOM_METADATA, b))
            for tag, value, codec in ((K.TAG_REMOTE_LOG_SEGMENT_START_POSITION, p.remote_log_segment_start_position, _I32),
                                      (K.TAG_REMOTE_LOG_SEGMENT_END_POSITION, p.remote_log_segment_end_position, _I32),
                                      (K.TAG_REMOTE_LOG_SEGMENT_BASE_OFFSET, p.remote_log_segment_base_offset, _I64),
                                      (K.TAG_REMOTE_LOG_SEGMENT_END_OFFSET, p.remote_log_segment_end_offset, _I64)):
                if value != -1:
                    tags.append((tag, codec.pack(value)))
            if p.storage_format_version != "":
                b = bytearray()
                write_string(b, p.storage_format_version, True)
                tags.append((K.TAG_STORAGE_FORMAT_VERSION, b))
            if p.signed_remote_log_segment_location is not None:
                b = bytearray()
                write_string(b, p.signed_remote_log_segment_location, True)
                tags.append((K.TAG_SIGNED_REMOTE_LOG_SEGMENT_LOCATION, b))
            write_uvarint(out, len(tags))
            for tag, data in tags:
                write_uvarint(out, tag)
                write_uvarint(out, len(data))
                out += data
        out.append(0)            # the topic's tagged fields
    out.append(0)                # the response's tagged fields
    return EncodedResponse(bytes(out))
