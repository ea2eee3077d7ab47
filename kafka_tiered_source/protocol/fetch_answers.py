"""Fetch answers as one tuple per partition, for walks that ask thousands of partitions a round
(:func:`~.rounds.fetch_rounds`, the KIP-1248 locator): no struct object per partition and none
of the default ``DivergingEpoch``/``CurrentLeader``/``SnapshotId`` the codec makes for each.

:func:`decode` reads a whole response frame into :class:`FetchAnswers`.  Flexible versions
(12-18) are read by native/fetch_answers.c, or with ``KAFKA_TIERED_NO_EXTENSIONS=1`` by
:func:`read_answers`, its pure-Python twin rule for rule; both decline (None) anything out of
the ordinary — a value out of bounds, tags out of order, a known tag of the wrong size, bytes
left over, text that is not UTF-8 — and then the codec decodes the response, which reads it or
names what is wrong and where, and :func:`answers_of` makes the same tuples of its objects.
So a tuple is only ever what the codec would have made.

A partition's tuple (``P_*`` name each place; the codec's ``FetchResponse.PartitionData``
field in brackets): index [partition_index], error code, high watermark, last stable offset,
log start offset, aborted transactions (``((producer id, first offset), ...)``, None when the
broker sent null), preferred read replica, records (a memoryview into the frame; ``b""`` when
empty, None when null), and the KIP-1248 location: segment id (Kafka's Uuid string; None when
absent or all zero, i.e. no location), custom metadata, start and end position, base and end offset,
storage format, signed location.
"""
from __future__ import annotations

import struct
from typing import Any

from ..ids import uuid_to_str
from ..records.backend import decoder_backend
from . import kip1248

(P_INDEX, P_ERROR, P_HIGH_WATERMARK, P_LAST_STABLE, P_LOG_START, P_ABORTED, P_PREFERRED, P_RECORDS,
 P_SEGMENT_ID, P_CUSTOM_METADATA, P_START_POSITION, P_END_POSITION, P_BASE_OFFSET, P_END_OFFSET,
 P_STORAGE_FORMAT, P_SIGNED_LOCATION) = range(16)

_ZERO_ID = bytes(16)


class FetchAnswers:
    """One Fetch response: ``topics`` is ``((name or None, topic id or None, partitions), ...)``
    (the name up to v12, the id from v13), each partition a tuple (module doc)."""

    __slots__ = ("throttle_time_ms", "error_code", "topics")

    def __init__(self, throttle_time_ms: int, error_code: int, topics: tuple):
        self.throttle_time_ms = throttle_time_ms
        self.error_code = error_code
        self.topics = topics


def decode(data: Any, version: int, *, backend: str | None = None) -> FetchAnswers:
    """A response frame (correlation id first, no size prefix) of a Fetch of ``version``."""
    from .messages import FetchResponse
    buf = data if isinstance(data, memoryview) else memoryview(data)
    got = None
    if version >= kip1248.MIN_FETCH_VERSION and len(buf) > 4:
        pos = 5 if buf[4] == 0 else None          # the response header's tags: almost always none
        if pos is not None:
            if (backend or decoder_backend()) == "native":
                from .._native import fetch_answers
                got = fetch_answers(buf, pos, version)
            else:
                got = read_answers(buf, pos, version)
    if got is None:
        from .codec import decode_response
        got = answers_of(decode_response(buf, FetchResponse, version)[1], version)
    return FetchAnswers(*got)


# -- the reference: the codec's objects made into the same tuples --------------------------------
def partition_of(p: Any) -> tuple:
    """A decoded ``FetchResponse.PartitionData`` as its tuple (module doc)."""
    aborted = p.aborted_transactions
    records = p.records
    sid = p.remote_log_segment_id
    return (p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset,
            None if aborted is None else tuple((a.producer_id, a.first_offset) for a in aborted),
            p.preferred_read_replica,
            None if records is None else (records if len(records) else b""),
            None if sid is None or bytes(sid) == _ZERO_ID else uuid_to_str(bytes(sid)),
            None if p.remote_log_segment_custom_metadata is None else bytes(p.remote_log_segment_custom_metadata),
            p.remote_log_segment_start_position, p.remote_log_segment_end_position,
            p.remote_log_segment_base_offset, p.remote_log_segment_end_offset,
            p.storage_format_version, p.signed_remote_log_segment_location)


def answers_of(resp: Any, version: int) -> tuple:
    """``(throttle, error, topics)`` of a decoded ``FetchResponse``."""
    topics = tuple((None, bytes(t.topic_id), tuple(partition_of(p) for p in t.partitions)) if version >= 13
                   else (t.topic, None, tuple(partition_of(p) for p in t.partitions))
                   for t in resp.responses)
    return resp.throttle_time_ms, resp.error_code, topics


# -- the pure-Python twin of native/fetch_answers.c, rule for rule --------------------------------
class _Declined(Exception):
    pass


_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_HEAD = struct.Struct(">ihi")                 # throttle, error, session id
_PART = struct.Struct(">ihqqq")               # index, error, high watermark, last stable, log start
_PAIR = struct.Struct(">qq")
_FIXED = {0: (4, 8), 1: (4, 4), 2: (8, 4)}    # DivergingEpoch, CurrentLeader, SnapshotId: skipped
_WIDTH = {kip1248.TAG_REMOTE_LOG_SEGMENT_START_POSITION: (P_START_POSITION, _I32),
          kip1248.TAG_REMOTE_LOG_SEGMENT_END_POSITION: (P_END_POSITION, _I32),
          kip1248.TAG_REMOTE_LOG_SEGMENT_BASE_OFFSET: (P_BASE_OFFSET, _I64),
          kip1248.TAG_REMOTE_LOG_SEGMENT_END_OFFSET: (P_END_OFFSET, _I64)}


def _uvarint(buf, pos: int, end: int) -> tuple[int, int]:
    v = 0
    for i in range(5):
        if pos >= end:
            raise _Declined
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return v, pos
    raise _Declined


def _tag_header(buf, pos: int, end: int, last: int) -> tuple[int, int, int]:
    """One tagged field's (tag, size, position of its body): the tag above the section's
    previous one (``last``), the size within the frame."""
    tag, pos = _uvarint(buf, pos, end)
    if tag <= last:
        raise _Declined
    size, pos = _uvarint(buf, pos, end)
    if size > end - pos:
        raise _Declined
    return tag, size, pos


def _skip_tags(buf, pos: int, end: int) -> int:
    count, pos = _uvarint(buf, pos, end)
    last = -1
    for _ in range(count):
        last, size, pos = _tag_header(buf, pos, end, last)
        pos += size
    return pos


def _text(buf, pos: int, end: int, nullable: bool) -> tuple[str | None, int]:
    n, pos = _uvarint(buf, pos, end)
    if n == 0:
        if not nullable:
            raise _Declined
        return None, pos
    if n - 1 > end - pos:
        raise _Declined
    try:
        return str(buf[pos:pos + n - 1], "utf-8"), pos + n - 1
    except UnicodeDecodeError:
        raise _Declined from None


def _partition_tags(buf, pos: int, end: int, out: list) -> int:
    count, pos = _uvarint(buf, pos, end)
    last = -1
    for _ in range(count):
        tag, size, pos = _tag_header(buf, pos, end, last)
        last = tag
        stop = pos + size
        if tag in _FIXED:
            a, b = _FIXED[tag]
            if a + b > size or _skip_tags(buf, pos + a + b, stop) != stop:
                raise _Declined
        elif tag == kip1248.TAG_REMOTE_LOG_SEGMENT_ID:
            if size != 16:
                raise _Declined
            sid = bytes(buf[pos:stop])
            if sid != _ZERO_ID:
                out[P_SEGMENT_ID] = uuid_to_str(sid)
        elif tag == kip1248.TAG_REMOTE_LOG_SEGMENT_CUSTOM_METADATA:
            n, at = _uvarint(buf, pos, stop)
            if n == 0:
                if at != stop:
                    raise _Declined
                out[P_CUSTOM_METADATA] = None
            else:
                if n - 1 != stop - at:
                    raise _Declined
                out[P_CUSTOM_METADATA] = bytes(buf[at:stop])
        elif tag in _WIDTH:
            slot, codec = _WIDTH[tag]
            if size != codec.size:
                raise _Declined
            out[slot] = codec.unpack_from(buf, pos)[0]
        elif tag in (kip1248.TAG_STORAGE_FORMAT_VERSION, kip1248.TAG_SIGNED_REMOTE_LOG_SEGMENT_LOCATION):
            signed = tag == kip1248.TAG_SIGNED_REMOTE_LOG_SEGMENT_LOCATION
            value, at = _text(buf, pos, stop, signed)
            if at != stop:
                raise _Declined
            out[P_SIGNED_LOCATION if signed else P_STORAGE_FORMAT] = value
        pos = stop                  # unknown tags: skipped, as the codec keeps them aside
    return pos


def _partition(buf, pos: int, end: int) -> tuple[tuple, int]:
    if end - pos < _PART.size:
        raise _Declined
    out: list = [*_PART.unpack_from(buf, pos), None, -1, None, None, None, -1, -1, -1, -1, "", None]
    pos += _PART.size
    n, pos = _uvarint(buf, pos, end)
    if n:
        if n - 1 > (end - pos) // 17:
            raise _Declined
        aborted = []
        for _ in range(n - 1):
            if end - pos < 16:
                raise _Declined
            aborted.append(_PAIR.unpack_from(buf, pos))
            pos = _skip_tags(buf, pos + 16, end)
        out[P_ABORTED] = tuple(aborted)
    if end - pos < 4:
        raise _Declined
    out[P_PREFERRED] = _I32.unpack_from(buf, pos)[0]
    n, pos = _uvarint(buf, pos + 4, end)
    if n:
        if n - 1 > end - pos:
            raise _Declined
        out[P_RECORDS] = buf[pos:pos + n - 1] if n > 1 else b""
        pos += n - 1
    pos = _partition_tags(buf, pos, end, out)
    return tuple(out), pos


def read_answers(buf: memoryview, pos: int, version: int) -> tuple | None:
    """``(throttle, error, topics)`` of a flexible Fetch response body at ``pos`` of ``buf``, or
    None (declined: the codec reads it).  native/fetch_answers.c's twin."""
    if not 12 <= version <= 18:
        return None
    end = len(buf)
    try:
        if pos < 0 or end - pos < _HEAD.size:
            raise _Declined
        throttle, error, _ = _HEAD.unpack_from(buf, pos)
        n, pos = _uvarint(buf, pos + _HEAD.size, end)
        if n == 0 or n - 1 > end - pos:
            raise _Declined
        topics = []
        for _ in range(n - 1):
            name: str | None = None
            tid: bytes | None = None
            if version >= 13:
                if end - pos < 16:
                    raise _Declined
                tid = bytes(buf[pos:pos + 16])
                pos += 16
            else:
                name, pos = _text(buf, pos, end, False)
            count, pos = _uvarint(buf, pos, end)
            if count == 0 or count - 1 > (end - pos) // 36:
                raise _Declined
            parts = []
            for _ in range(count - 1):
                part, pos = _partition(buf, pos, end)
                parts.append(part)
            pos = _skip_tags(buf, pos, end)
            topics.append((name, tid, tuple(parts)))
        if _skip_tags(buf, pos, end) != end:
            raise _Declined
        return throttle, error, tuple(topics)
    except _Declined:
        return None


def check(answers: FetchAnswers, broker: str) -> None:
    """An error of the whole response raises, as :meth:`~.fetch.FetchBuilder.results` does."""
    if answers.error_code:
        from .errors import broker_error
        raise broker_error(answers.error_code, broker=broker, api="Fetch")

