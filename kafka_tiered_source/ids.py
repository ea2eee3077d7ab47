"""Kafka ``Uuid`` values (topic ids, remote segment ids).

Kafka's ``Uuid.toString()`` is the 16 bytes in URL-safe base64 without padding (22 chars); the
object layouts of tiered storage use that form in keys, so we keep both forms at hand.
"""
from __future__ import annotations

import base64
import os

ZERO_UUID = bytes(16)


def uuid_to_str(raw: bytes) -> str:
    if len(raw) != 16:
        raise ValueError(f"a Kafka Uuid is 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_from_str(text: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a Kafka Uuid string: {text!r}") from exc
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid string (decodes to {len(raw)} bytes): {text!r}")
    return raw


def random_uuid() -> bytes:
    """A random Uuid as Kafka makes them: never the zero/sentinel value, never starting with '-'."""
    while True:
        raw = os.urandom(16)
        if raw != ZERO_UUID and not uuid_to_str(raw).startswith("-"):
            return raw
