"""Decompression of a batch's records, with a cap on the output so that a small corrupt or
hostile batch cannot exhaust memory (a "decompression bomb").

Every failure of a codec library becomes :class:`CorruptRecordError` (or
:class:`DecompressionLimitError` past the cap) naming the batch; nothing else escapes.  Both
decoder backends use this module, so they agree byte for byte.  Codec modules are imported on
first use: executors that never see a codec never load it.
"""
from __future__ import annotations

import struct
import zlib

from ..errors import CorruptRecordError, DecompressionLimitError
from .header import CODEC_GZIP, CODEC_LZ4, CODEC_NAMES, CODEC_SNAPPY, CODEC_ZSTD

DEFAULT_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16
_CHUNK = 1 << 20


def decompress(codec: int, data, limit: int, *, position: int, base_offset: int) -> bytes:
    """The decompressed records of one batch (``data`` = bytes after the 61-byte header)."""
    with _errors(codec, limit, position, base_offset):
        if codec == CODEC_GZIP:
            return _gzip(data, limit)
        if codec == CODEC_SNAPPY:
            return _snappy(data, limit)
        if codec == CODEC_LZ4:
            return _lz4(data, limit)
        if codec == CODEC_ZSTD:
            return _zstd(data, limit)
        raise CorruptRecordError(f"unknown compression codec {codec}",
                                 position=position + 21, base_offset=base_offset)


class _errors:
    """Every failure of a codec library as :class:`CorruptRecordError`, past the cap as
    :class:`DecompressionLimitError`: one translation for :func:`decompress` and
    :class:`RecordStream`, so both name the same error for the same bytes."""

    def __init__(self, codec, limit, position, base_offset):
        self.codec, self.limit, self.position, self.base_offset = codec, limit, position, base_offset

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None or isinstance(exc, (CorruptRecordError, MemoryError)) or \
                not isinstance(exc, Exception):
            return False
        if isinstance(exc, _Limit):
            raise DecompressionLimitError(
                f"{CODEC_NAMES.get(self.codec)} records decompress to more than "
                f"max_decompressed_bytes={self.limit}", position=self.position,
                base_offset=self.base_offset) from None
        # zlib.error, lz4/zstd/cramjam errors, ValueError, struct.error...
        raise CorruptRecordError(
            f"cannot decompress {CODEC_NAMES.get(self.codec)} records: {type(exc).__name__}: {exc}",
            position=self.position, base_offset=self.base_offset) from exc


#: Codecs a :class:`RecordStream` decompresses a piece at a time.
STREAMED = frozenset({CODEC_SNAPPY, CODEC_ZSTD})
PIECE = 256 * 1024
#: Compressed batches smaller than this are decompressed whole: their records fit in a core's
#: cache anyway, and the piecewise set-up then costs more than it saves (a producer's usual
#: 500-record, ~100 KB zstd batch: 5 % slower piecewise; a 5 MB batch of 100,000 records: 10 %
#: faster, BENCHMARKS.md).
STREAM_MIN_BATCH = 256 * 1024


class RecordStream:
    """A zstd or snappy batch's records, decompressed a piece (~256 KiB) at a time into one
    window, so that the record loop reads each piece while it is still in cache (decompressing
    a 13 MB batch first and parsing it after reads every byte back from memory).

    ``window[:end]`` holds decompressed records not parsed yet; byte 0 of the window is byte
    ``skew`` of the batch's records.  :meth:`used` drops what the parser has read (the rest, a
    record cut by the piece's end, moves to the front); :meth:`fill` decompresses more after
    it, growing the window when one record does not fit.  Errors are :func:`decompress`'s, in
    the same order: the snappy framing is checked before anything is decompressed, the cap
    counts every byte, and the stream must decompress cleanly to its end."""

    def __init__(self, codec: int, data, limit: int, *, position: int, base_offset: int,
                 window: bytearray | None = None):
        self._guard = _errors(codec, limit, position, base_offset)
        self.window = window if window is not None else bytearray(PIECE)
        self.end = 0
        self.skew = 0
        self.total = 0
        self.exhausted = False
        self._limit = limit
        with self._guard:
            self._source = (_zstd_pieces if codec == CODEC_ZSTD else _snappy_pieces)(self, data, limit)

    def used(self, n: int) -> None:
        rest = self.end - n
        if n and rest:
            self.window[:rest] = self.window[n:self.end]
        self.skew += n
        self.end = rest

    def room(self, need: int) -> memoryview:
        """Writable space after the data, at least ``need`` bytes (the window grows)."""
        if len(self.window) - self.end < need:
            self.window.extend(bytes(max(need - (len(self.window) - self.end), len(self.window))))
        return memoryview(self.window)[self.end:]

    def fill(self) -> None:
        """Decompress at least one more step (a zstd read, a snappy block), up to a piece."""
        with self._guard:
            start = self.end
            while not self.exhausted and (self.end == start or self.end < PIECE):
                if not next(self._source, False):
                    self.exhausted = True

    def _wrote(self, n: int) -> None:
        self.end += n
        self.total += n
        if self.total > self._limit:
            raise _Limit


def _zstd_hint(data, limit: int) -> int:
    """The frame's declared content size (-1: not declared), refused past the cap before
    anything is decompressed."""
    import zstandard
    try:
        hint = zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        hint = -1
    if hint > limit:
        raise _Limit
    return hint


def _zstd_pieces(stream: RecordStream, data, limit: int):
    import zstandard
    _zstd_hint(data, limit)

    def steps():
        with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
            while True:
                room = stream.room(max(PIECE - stream.end, PIECE // 4))
                got = reader.readinto(room)
                room.release()
                if got == 0:
                    return
                stream._wrote(got)
                yield True
    return steps()


def _snappy_pieces(stream: RecordStream, data, limit: int):
    import cramjam
    blocks = _snappy_blocks(memoryview(data), limit)   # framing and sizes checked up front

    def steps():
        for block, _, size in blocks:
            room = stream.room(size)
            n = cramjam.snappy.decompress_raw_into(block, room[:size])
            room.release()
            if n != size:
                raise _Bad("snappy block is shorter than its declared length")
            stream._wrote(size)
            yield True
    return steps()


class _Limit(Exception):
    pass


class _Bad(ValueError):
    pass


def _gzip(data, limit: int) -> bytes:
    # wbits 47 = accept a zlib or gzip header; Kafka writes gzip (GZIPOutputStream), and a
    # stream may hold several members, which GZIPInputStream reads one after the other.
    out = bytearray()
    rest = memoryview(data)
    while True:
        d = zlib.decompressobj(47)
        chunk = d.decompress(rest, limit + 1 - len(out))
        out += chunk
        if len(out) > limit:
            raise _Limit
        if d.unconsumed_tail:
            raise _Limit
        if not d.eof:
            raise _Bad("gzip stream is truncated")
        if not d.unused_data:
            return bytes(out)
        rest = memoryview(d.unused_data)


def _snappy(data, limit: int):
    import cramjam

    blocks = _snappy_blocks(memoryview(data), limit)
    total = sum(size for _, _, size in blocks)
    out = memoryview(_allocate(max(total, 1))).cast("B")[:total]
    for block, at, size in blocks:
        if cramjam.snappy.decompress_raw_into(block, out[at:at + size]) != size:
            raise _Bad("snappy block is shorter than its declared length")
    return out


def _snappy_blocks(mv, limit: int) -> list:
    """``(raw block, output position, output size)`` of every block: one raw block, or xerial
    framing (magic, int32 version, int32 compatible version, then (int32 length, raw block)*).
    The block headers are walked first, so the output is allocated once and a framing error is
    found before anything is decompressed."""
    if bytes(mv[:8]) != XERIAL_MAGIC:
        return [(mv, 0, _snappy_size(mv, limit))]
    if len(mv) < XERIAL_HEADER_SIZE:
        raise _Bad("xerial snappy header is truncated")
    blocks, total, pos = [], 0, XERIAL_HEADER_SIZE
    while pos < len(mv):
        if pos + 4 > len(mv):
            raise _Bad(f"xerial snappy block length truncated at {pos}")
        (n,) = struct.unpack_from(">i", mv, pos)
        pos += 4
        if n < 0 or pos + n > len(mv):
            raise _Bad(f"xerial snappy block of {n} bytes at {pos} overruns the data")
        block = mv[pos:pos + n]
        size = _snappy_size(block, limit - total)
        blocks.append((block, total, size))
        total += size
        pos += n
    return blocks


def _snappy_size(block, limit: int) -> int:
    """A raw snappy block's uncompressed length (its leading uvarint), checked against the
    cap before anything is allocated."""
    size, shift, i = 0, 0, 0
    while True:
        if i >= len(block) or i >= 5:
            raise _Bad("snappy block length is malformed")
        b = block[i]
        size |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            break
        shift += 7
    if size > limit:
        raise _Limit
    return size


def _lz4(data, limit: int) -> bytes:
    import lz4.frame

    # Kafka's producers write frames without a content size.  Asking the library for "up to
    # the cap" in one call makes it allocate the whole cap, so grow in steps instead.
    try:
        known = lz4.frame.get_frame_info(data).get("content_size") or 0
    except Exception:
        known = 0
    if known > limit:
        raise _Limit
    # The low-level chunk API takes any buffer; LZ4FrameDecompressor.decompress first copies a
    # memoryview (a slice of the fetched segment) into bytes, which cost ~5 % of a decode.
    ctx = lz4.frame.create_decompression_context()
    parts, total = [], 0
    # One call when the frame states its size (the library allocates max_length up front, and
    # big over-allocations cost more than the decompression), else steps from 3x the input.
    step = known + 1 if known else max(_CHUNK, 3 * len(data))
    rest = data
    while True:
        want = min(step, limit + 1 - total)
        chunk, used, eof = lz4.frame.decompress_chunk(ctx, rest, max_length=want)
        parts.append(chunk)
        total += len(chunk)
        if total > limit:
            raise _Limit
        if eof:
            if used < len(rest):
                raise _Bad(f"{len(rest) - used} bytes after the lz4 frame")
            break
        if used >= len(rest) and len(chunk) < want:   # input used up, output not cut short
            raise _Bad("lz4 frame is truncated")
        if not chunk and not used:
            raise _Bad("lz4 decompressor made no progress")
        rest = rest[used:]
        step *= 2
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _zstd(data, limit: int):
    import zstandard

    # Frames may lack the content size (Kafka's producers stream them): always decompress as a
    # stream into a buffer sized from the content size when it is there, never past the cap.
    hint = _zstd_hint(data, limit)
    size = hint + 1 if hint >= 0 else min(limit + 1, max(_CHUNK, 4 * len(data)))
    out = _allocate(size)
    n = 0
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        while True:
            if n == out.size:
                if n > limit:
                    raise _Limit
                out.resize(min(2 * n, limit + 1))
            view = memoryview(out).cast("B")
            got = reader.readinto(view[n:])
            view.release()
            if got == 0:
                break
            n += got
            if n > limit:
                raise _Limit
    out.resize(n)
    return memoryview(out).cast("B")


def _allocate(size: int):
    """An uninitialised, resizable output buffer from Arrow's allocator: no zeroing of memory
    that the codec overwrites anyway, and the allocator reuses pages between batches."""
    import pyarrow as pa

    return pa.allocate_buffer(size, resizable=True)
