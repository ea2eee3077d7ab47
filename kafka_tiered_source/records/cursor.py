"""The bounded cursor of the pure-Python reference decoder, apart from it because it needs no
Arrow: the metadata-topic walk (:mod:`~kafka_tiered_source.protocol.metadata_select`) reads
records with it while planning, which imports nothing of Arrow."""
from __future__ import annotations


class RecordFormatError(ValueError):
    """(message, position) — the Python twin of ``_native.RecordFormatError``."""


class Cursor:
    """Bounded cursor over ``buf[pos:end]``; ``origin``/``decompressed`` as in native/cursor.h."""

    __slots__ = ("buf", "pos", "end", "origin", "decompressed")

    def __init__(self, buf, pos, end, origin, decompressed):
        self.buf, self.pos, self.end = buf, pos, end
        self.origin, self.decompressed = origin, decompressed

    def fail(self, at: int, message: str):
        if self.decompressed:
            return RecordFormatError(f"{message} at byte {at} of the decompressed records",
                                     self.origin)
        return RecordFormatError(message, self.origin + at)

    def need(self, n: int, what: str):
        """The one truncation check."""
        if n < 0 or self.end - self.pos < n:
            raise self.fail(self.pos, f"truncated {what}: needs {n} bytes, "
                                      f"{self.end - self.pos} left")

    def varint(self, what: str, max_bytes: int = 5, last_mask: int = 0xF0) -> int:
        start = self.pos
        v = 0
        for i in range(max_bytes):
            self.need(1, what)
            b = self.buf[self.pos]
            self.pos += 1
            if i == max_bytes - 1 and b & last_mask:
                break
            v |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                return (v >> 1) ^ -(v & 1)
        kind = "varint" if max_bytes == 5 else "varlong"
        raise self.fail(start, f"{kind} {what} longer than {max_bytes} bytes")

    def varlong(self, what: str) -> int:
        return self.varint(what, 10, 0xFE)

    def nullable_bytes(self, what: str, label: str):
        """A varint length (-1: null) and that many bytes: (bytes or None, length).  ``what``
        names the length in errors ("key" -> "invalid key length"), ``label`` the bytes."""
        n = self.varint(f"{what} length")
        if n < -1:
            raise self.fail(self.pos - 1, f"invalid {what} length {n}")
        if n < 0:
            return None, n
        if n > 0:
            self.need(n, label)
        data = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return data, n
