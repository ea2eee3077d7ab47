"""Requests and responses on the wire: headers, size prefixes, and the message an API key names.

The bodies are :mod:`.bodies`' (one plan per struct class and version); this module adds what
Kafka frames them with: the request header (v1, or v2 with tagged fields in flexible versions),
the response header (ApiVersions always v0), the int32 size, and the lookup of a request's or
response's class by API key (:data:`.messages.REQUESTS`).
"""
from __future__ import annotations

import struct as _struct

from ..errors import ProtocolError, UnsupportedVersionError
from ..ids import uuid_from_str, uuid_to_str  # noqa: F401  (uuid fields are 16 raw bytes)
from . import primitives as P
from .bodies import as_view, check_version, decode_body, encode_body, plan_of
from .messages import REQUESTS, RESPONSES
from .schema import Field, Message
from .structs import MessageStruct, build_message_class

__all__ = [
    "encode_body", "decode_body", "encode_request", "decode_request", "encode_response",
    "decode_response", "request_header_version", "response_header_version", "RequestHeader",
    "UnsupportedVersionError", "frame", "peek_correlation_id", "uuid_to_str", "uuid_from_str",
]


# --- headers ---------------------------------------------------------------------------------

F = Field
_REQUEST_HEADER = build_message_class(Message(
    "RequestHeader", -1, "header", valid="1-2", flexible="2+", fields=[
        F("RequestApiKey", "int16", "0+"),
        F("RequestApiVersion", "int16", "0+"),
        F("CorrelationId", "int32", "0+"),
        F("ClientId", "string", "1+", nullable="1+", default=None, never_compact=True),
    ]), __name__)
RequestHeader = _REQUEST_HEADER

API_VERSIONS_KEY = 18


def request_header_version(cls, version: int) -> int:
    return 2 if cls.is_flexible(version) else 1


def response_header_version(cls, version: int) -> int:
    # ApiVersions responses always use header v0: a client that sent a version the broker does
    # not know must still be able to read the correlation id and the error.
    if cls.API_KEY == API_VERSIONS_KEY:
        return 0
    return 1 if cls.is_flexible(version) else 0


def frame(payload) -> bytes:
    """Prefix a payload with its int32 size."""
    return _struct.pack(">i", len(payload)) + bytes(payload)


def encode_request(msg: MessageStruct, version: int, correlation_id: int,
                   client_id: str | None = None, *, framed: bool = True) -> bytes:
    cls = type(msg)
    if cls.KIND != "request":
        raise ProtocolError(f"{cls.NAME} is not a request")
    check_version(cls, version)
    hv = request_header_version(cls, version)
    out = bytearray(b"\0\0\0\0" if framed else b"")
    hdr = _REQUEST_HEADER(request_api_key=cls.API_KEY, request_api_version=version,
                          correlation_id=correlation_id, client_id=client_id)
    plan_of(_REQUEST_HEADER, hv, hv >= 2).write(out, hdr)
    plan_of(cls, version, cls.is_flexible(version)).write(out, msg)
    if framed:
        _struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


def encode_response(msg: MessageStruct, version: int, correlation_id: int, *,
                    framed: bool = True) -> bytes:
    cls = type(msg)
    if cls.KIND != "response":
        raise ProtocolError(f"{cls.NAME} is not a response")
    check_version(cls, version)
    hv = response_header_version(cls, version)
    out = bytearray(b"\0\0\0\0" if framed else b"")
    P.write_int32(out, correlation_id)
    if hv >= 1:
        P.write_uvarint(out, 0)
    plan_of(cls, version, cls.is_flexible(version)).write(out, msg)
    if framed:
        _struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


def _unframe(buf, framed):
    if not framed:
        return buf
    size, _ = P.read_int32(buf, 0)
    if size != len(buf) - 4:
        raise ProtocolError(f"frame size field says {size} bytes, frame has {len(buf) - 4}")
    return buf[4:]


def decode_request(data, *, framed: bool = False, keep_unknown_tags: bool = True,
                   strict: bool = False):
    """Broker side: ``(header, message)`` from one request.  Unknown API keys or versions raise
    :class:`UnsupportedVersionError` carrying the header (read as v1 when the body version is
    unknown, which is all an ApiVersions fallback needs: key, version, correlation id).

    Trailing bytes after the body are ignored unless ``strict``: Kafka's broker ignores them,
    and real clients send them (librdkafka 2.x writes a 4-byte count for an empty topic list in
    flexible MetadataRequests, which a broker reads as uvarint 0 = null = all topics)."""
    buf = _unframe(as_view(data), framed)
    api_key, _ = P.read_int16(buf, 0)
    version, _ = P.read_int16(buf, 2)
    cls = REQUESTS.get(api_key)
    if cls is None or version not in cls.VALID_VERSIONS:
        hdr, _ = plan_of(_REQUEST_HEADER, 1, False).read(buf, 0)
        name = cls.NAME if cls else f"api key {api_key}"
        raise UnsupportedVersionError(f"{name} version {version} is not supported", header=hdr)
    hv = request_header_version(cls, version)
    hdr, pos = plan_of(_REQUEST_HEADER, hv, hv >= 2, keep_unknown_tags).read(buf, 0)
    body = decode_body(cls, buf, version, keep_unknown_tags=keep_unknown_tags, pos=pos, strict=strict)
    return hdr, body


def peek_correlation_id(data, *, framed: bool = False) -> int:
    buf = _unframe(as_view(data), framed)
    return P.read_int32(buf, 0)[0]


def decode_response(data, response_cls, version: int, *, framed: bool = False,
                    keep_unknown_tags: bool = True, strict: bool = True):
    """Client side: ``(correlation_id, message)``.  ``response_cls`` may be the response class,
    the request class, or an API key."""
    if isinstance(response_cls, int):
        response_cls = RESPONSES[response_cls]
    elif response_cls.KIND == "request":
        response_cls = RESPONSES[response_cls.API_KEY]
    buf = _unframe(as_view(data), framed)
    correlation_id, pos = P.read_int32(buf, 0)
    if response_header_version(response_cls, version) >= 1:
        _, pos = P.read_tagged_fields(buf, pos)
    body = decode_body(response_cls, buf, version, keep_unknown_tags=keep_unknown_tags, pos=pos,
                       strict=strict)
    return correlation_id, body
