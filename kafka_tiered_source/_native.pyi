# Type stubs of the C extension built from native/ (module.c, records.c, fused.c, batch.c, avro.c,
# lz4.c, snappy.c, crc32c.c, rlm.c).  tests/test_native_interface.py checks that they name exactly
# what the module exports; the pure-Python backend (records/_python.py) implements the same Builder interface.
from typing import Any, Callable, Protocol

from typing_extensions import Buffer as _BytesLike

class RecordFormatError(ValueError):
    """Malformed record bytes; ``args`` is ``(message, byte position)``."""

class Buffer:
    """Read-only memory produced by the decoder (owned; freed with the object).  Supports the
    buffer protocol, so ``pyarrow.py_buffer(b)`` wraps it without a copy."""
    def __len__(self) -> int: ...

class Columns(Protocol):
    """Builder.finish(): the finished buffers of one Arrow batch, by name.  The header fields
    are None when the builder was made without headers."""
    @property
    def rows(self) -> int: ...
    @property
    def key_nulls(self) -> int: ...
    @property
    def key_validity(self) -> Buffer: ...
    @property
    def key_offsets(self) -> Buffer: ...
    @property
    def key_data(self) -> Buffer: ...
    @property
    def value_nulls(self) -> int: ...
    @property
    def value_validity(self) -> Buffer: ...
    @property
    def value_offsets(self) -> Buffer: ...
    @property
    def value_data(self) -> Buffer: ...
    @property
    def offsets(self) -> Buffer: ...
    @property
    def timestamps(self) -> Buffer: ...
    @property
    def timestamp_types(self) -> Buffer: ...
    @property
    def header_nulls(self) -> int | None: ...
    @property
    def header_validity(self) -> Buffer | None: ...
    @property
    def header_offsets(self) -> Buffer | None: ...
    @property
    def header_count(self) -> int | None: ...
    @property
    def header_key_offsets(self) -> Buffer | None: ...
    @property
    def header_key_data(self) -> Buffer | None: ...
    @property
    def header_value_nulls(self) -> int | None: ...
    @property
    def header_value_validity(self) -> Buffer | None: ...
    @property
    def header_value_offsets(self) -> Buffer | None: ...
    @property
    def header_value_data(self) -> Buffer | None: ...

class Builder:
    """Records -> Arrow buffers.  ``max_bytes`` caps the key/value/header bytes of one batch
    (Arrow's int32 offsets): a full builder stops and asks to be finished."""
    def __init__(self, include_headers: bool = True, max_bytes: int = 2**31 - 1) -> None: ...
    @property
    def rows(self) -> int: ...
    def append(self, data: _BytesLike, pos: int, end: int, remaining: int, base_offset: int,
               base_timestamp: int, max_timestamp: int, log_append: bool, min_offset: int,
               max_offset: int, origin: int, decompressed: bool) -> tuple[int, int]:
        """Append up to ``remaining`` records from ``data[pos:end]`` -> ``(pos, remaining)``."""
    def append_lz4(self, data: _BytesLike, pos: int, size: int, remaining: int, base_offset: int,
                   base_timestamp: int, max_timestamp: int, log_append: bool, min_offset: int,
                   max_offset: int, origin: int, verify_crc: bool, limit: int,
                   flush: Callable[[], object]) -> tuple[bool, int, int]:
        """Decompress an lz4 batch block by block and append its records -> ``(done, pos,
        remaining)``; ``done`` False: the frame was refused, python-lz4 continues from ``pos``."""
    def append_snappy(self, data: _BytesLike, pos: int, size: int, remaining: int,
                      base_offset: int, base_timestamp: int, max_timestamp: int,
                      log_append: bool, min_offset: int, max_offset: int, origin: int,
                      verify_crc: bool, limit: int,
                      flush: Callable[[], object]) -> tuple[bool, int, int]:
        """``append_lz4`` for a snappy batch (xerial-framed or one raw block), through the
        decoder's own snappy reader; ``done`` False: cramjam continues from ``pos``."""
    def append_stream(self, fill: Callable[[memoryview], int], size_hint: int, in_len: int,
                      remaining: int, base_offset: int, base_timestamp: int,
                      max_timestamp: int, log_append: bool,
                      min_offset: int, max_offset: int, origin: int, limit: int,
                      flush: Callable[[], object]) -> tuple[bool, int, int]:
        """Pull a batch's decompressed records from ``fill(view) -> bytes written`` (0 at the
        end) a piece at a time and append them -> ``(done, pos, remaining)``; ``done`` False:
        more than ``limit`` bytes came out.  ``size_hint``: the decompressed size if known, else
        -1; ``in_len``: the compressed size (the columns are sized once from them)."""
    def finish(self) -> Columns:
        """The buffers of the rows appended so far; the builder starts over empty."""

def lz4_decompress(frame: _BytesLike, limit: int, out: bytearray | None = None) -> bytes | int:
    """An LZ4 frame's content (at most ``limit`` bytes), or the size written into ``out``."""
def snappy_decompress(records: _BytesLike, limit: int,
                      out: bytearray | None = None) -> bytes | int:
    """A batch's snappy records (at most ``limit`` bytes), or the size written into ``out``."""
def crc32c(data: _BytesLike, start: int = 0, end: int = ...) -> int: ...
def check_batch(data: _BytesLike, pos: int, size: int, origin: int, verify_crc: bool) -> None:
    """Magic and CRC-32C of the batch at ``data[pos:pos+size]``; RecordFormatError names the
    byte position ``origin + ...``."""
def fill_constant_columns(topic_utf8: bytes, partition: int, offsets: _BytesLike, data: _BytesLike,
                          values: _BytesLike) -> None:
    """Fill the topic and partition columns (one value on every row) into Arrow buffers."""
def crc32c_impl() -> str:
    """``'sse4.2'`` or ``'table'``."""
def rlm_select(data: _BytesLike, origin: int, ids: bytes | None, verify_crc: bool,
               decompressed_base: int = -1, decompressed_count: int = 0, decode: bool = False
               ) -> tuple[list[tuple], int, int, int, list[tuple[int, int]], int,
                          tuple[str, int, int] | None, list[tuple[int, bytes | None]], int]:
    """``__remote_log_metadata`` batches -> ``(hits, consumed, next_offset, last_epoch,
    compressed, passed, error, tombstones, keyed)``: the records whose topic id is one of
    ``ids`` (16 bytes each; None: every record), see protocol/metadata_select.py."""

def rlm_apply(rows: list[tuple], mp: int, partitions: dict[Any, Any], copy_type: Any,
              apply_row: Callable[[tuple, int], None]) -> None:
    """The rows of metadata partition ``mp`` applied to ``RemoteLogState.partitions`` as
    ``apply_row(row, mp)`` applies each (native/rlm_replay.c: the usual state changes in C,
    every other row through ``apply_row``)."""

def rlm_columns(copies: list[Any], descrs: tuple[Any, ...], topic: str, topic_id: str, partition: int
                ) -> tuple[bytes, bytes, str] | None:
    """A partition's copies as a catalog snapshot's columns (planning/remote_log_columns.py):
    ``(ints, leader_epochs, ids)``, the int64 columns little-endian one after the other, the
    flat (epoch, start) pairs and the ids joined; None when any copy is not the usual one."""

def slots_maker(cls: type, names: tuple[str, ...]) -> Callable[..., Any]:
    """A function making ``cls`` with each named slot set to a positional value, in order
    (records/backend.py ``slots_maker``)."""

class AvroProgram:
    """A compiled Avro resolution (values/_avro_resolve.py), checked when made: int32 rows of
    (kind, col, a, b, c), the int32 table, the constants and their int64 offsets, int32 rows of
    (kind, nchild, child) per column and the int32 child column indexes, the root instruction."""
    def __init__(self, ops: bytes, table: bytes, consts: bytes, const_offsets: bytes,
                 columns: bytes, children: bytes, root: int) -> None: ...

def avro_decode(program: AvroProgram, validity: _BytesLike | None, offsets: _BytesLike,
                data: _BytesLike, offset: int, count: int, rows: _BytesLike | None,
                rows_offset: int, nrows: int, skip: int, permissive: bool
                ) -> tuple[list[tuple[int, int, Buffer | None, Buffer | None, Buffer | None]] | None,
                           list[tuple[int, int, str]] | None, tuple[int, int, str] | None]:
    """Decode binary values ``[offset, offset + count)`` (rows ``rows[rows_offset:][:nrows]``,
    or all) -> ``(columns, bad, error)``: per column ``(length, null_count, validity, data,
    var)``, the permissive ``(row, offset, reason)`` list, or the first error (then the rest
    are None).  See values/_avro_native.py."""

def fetch_answers(frame: _BytesLike, pos: int, version: int) -> tuple[int, int, tuple] | None:
    """A flexible Fetch response body at ``frame[pos:]`` -> ``(throttle, error, topics)``, one
    tuple per partition (protocol/fetch_answers.py), or None: declined, the codec reads it."""
