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
    try:
        if codec == CODEC_GZIP:
            out = _gzip(data, limit)
        elif codec == CODEC_SNAPPY:
            out = _snappy(data, limit)
        elif codec == CODEC_LZ4:
            out = _lz4(data, limit)
        elif codec == CODEC_ZSTD:
            out = _zstd(data, limit)
        else:
            raise CorruptRecordError(f"unknown compression codec {codec}",
                                     position=position + 21, base_offset=base_offset)
    except _Limit:
        raise limit_error(codec, limit, position, base_offset) from None
    except (CorruptRecordError, MemoryError):
        raise
    except Exception as exc:   # zlib.error, lz4/zstd/cramjam errors, ValueError, struct.error...
        raise library_error(codec, exc, position, base_offset) from exc
    return out


def limit_error(codec: int, limit: int, position: int, base_offset: int):
    """The error of a batch whose records decompress to more than ``limit`` bytes."""
    return DecompressionLimitError(
        f"{CODEC_NAMES.get(codec)} records decompress to more than "
        f"max_decompressed_bytes={limit}", position=position, base_offset=base_offset)


def library_error(codec: int, exc: Exception, position: int, base_offset: int):
    """A codec library's failure on a batch, as the error both decoders raise for it."""
    return CorruptRecordError(
        f"cannot decompress {CODEC_NAMES.get(codec)} records: {type(exc).__name__}: {exc}",
        position=position, base_offset=base_offset)


class ZstdStream:
    """A zstd batch's records for ``Builder.append_stream``: calling it with a writable view
    decompresses the next piece into it (python-zstandard's stream reader, as :func:`_zstd`
    reads the whole batch) and returns the bytes written, 0 at the end.  The library's errors
    come out as :func:`decompress` names them; a content size past ``limit`` is refused before
    anything is decompressed, as there."""

    __slots__ = ("_reader", "_readinto", "_where", "size_hint")

    def __init__(self, data, limit: int, *, position: int, base_offset: int):
        import zstandard

        self._where = (position, base_offset)
        #: the decompressed size when the (first) frame states it, else -1
        self.size_hint = hint = _zstd_content_size(data)
        if hint > limit:
            raise limit_error(CODEC_ZSTD, limit, position, base_offset)
        self._reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        self._readinto = self._reader.readinto

    def __call__(self, view) -> int:
        try:
            return self._readinto(view)
        except MemoryError:
            raise
        except Exception as exc:
            raise library_error(CODEC_ZSTD, exc, *self._where) from exc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._reader.close()
        return False


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

    mv = memoryview(data)
    if bytes(mv[:8]) != XERIAL_MAGIC:
        size = _snappy_size(mv, limit)
        out = memoryview(_allocate(max(size, 1))).cast("B")[:size]
        if cramjam.snappy.decompress_raw_into(mv, out) != size:
            raise _Bad("snappy block is shorter than its declared length")
        return out
    # xerial framing: magic, int32 version, int32 compatible version, then (int32 length,
    # raw block)*.  Walk the block headers first so the output is allocated once.
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
    out = memoryview(_allocate(max(total, 1))).cast("B")[:total]
    for block, at, size in blocks:
        if cramjam.snappy.decompress_raw_into(block, out[at:at + size]) != size:
            raise _Bad("snappy block is shorter than its declared length")
    return out


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


def _zstd_content_size(data) -> int:
    """The decompressed size the (first) zstd frame declares, or -1."""
    import zstandard

    try:
        return zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        return -1


def _zstd(data, limit: int):
    import zstandard

    # Frames may lack the content size (Kafka's producers stream them): always decompress as a
    # stream into a buffer sized from the content size when it is there, never past the cap.
    hint = _zstd_content_size(data)
    if hint > limit:
        raise _Limit
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
