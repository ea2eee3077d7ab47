"""What a decoder backend's record builder offers, as a type.

Both backends (:mod:`._native_backend`, C; :mod:`._python`, the reference) provide a ``Builder``
that appends the records of a batch to Arrow columns and hands out a finished
``pyarrow.RecordBatch``.  The batch walk in :mod:`.decoder` drives either through this
interface.  ``fused_lz4`` declares whether the builder reads lz4 batches itself
(``append_lz4``: the C decoder's own frame reader, block by block); a builder without it gets
lz4 batches already decompressed, through ``append``.  ``fused_streams`` likewise declares
``append_snappy`` (the C decoder's own snappy reader) and ``append_stream`` (zstd pulled from
python-zstandard a piece at a time), each piece parsed while it is in cache.
"""
from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable

import pyarrow as pa


class RecordBuilder(Protocol):
    include_headers: bool
    fused_lz4: bool
    fused_streams: bool

    @property
    def rows(self) -> int:
        """Rows appended since the last :meth:`finish`."""

    def append(self, data, pos: int, end: int, remaining: int, base_offset: int,
               base_timestamp: int, max_timestamp: int, log_append: bool, min_offset: int,
               max_offset: int, origin: int, decompressed: bool) -> tuple[int, int]:
        """Append up to ``remaining`` records from ``data[pos:end]``; returns ``(pos,
        remaining)``: ``remaining > 0`` means this Arrow batch is full (finish it, go on)."""

    def finish(self, topic: str, partition: int) -> pa.RecordBatch:
        """The rows so far as one batch in Spark's Kafka schema; starts over empty."""


@runtime_checkable
class FusedRecordBuilder(RecordBuilder, Protocol):
    """A builder that reads compressed batches itself (the native one): ``append_lz4`` and
    ``append_snappy`` decompress block by block, ``append_stream`` pulls zstd pieces from
    ``fill``; each returns ``(done, pos, remaining)``, ``done`` False where it stopped and the
    codec library goes on (see ``_native.pyi``)."""

    def append_lz4(self, data, pos: int, size: int, remaining: int, base_offset: int,
                   base_timestamp: int, max_timestamp: int, log_append: bool, min_offset: int,
                   max_offset: int, origin: int, verify_crc: bool, limit: int,
                   flush: Callable[[], object]) -> tuple[bool, int, int]: ...

    def append_snappy(self, data, pos: int, size: int, remaining: int, base_offset: int,
                      base_timestamp: int, max_timestamp: int, log_append: bool, min_offset: int,
                      max_offset: int, origin: int, verify_crc: bool, limit: int,
                      flush: Callable[[], object]) -> tuple[bool, int, int]: ...

    def append_stream(self, fill: Callable[[memoryview], int], size_hint: int, in_len: int,
                      remaining: int, base_offset: int, base_timestamp: int, max_timestamp: int,
                      log_append: bool, min_offset: int, max_offset: int, origin: int, limit: int,
                      flush: Callable[[], object]) -> tuple[bool, int, int]: ...
