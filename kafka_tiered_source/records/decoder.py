"""The batch walk shared by both backends, and the public entry points.

The walk (this module) reads each batch's fixed header, applies the offset bounds, the
read_committed filter and the LSO, checks magic and CRC, and decompresses; the record loop
(``_native.Builder`` or its Python twin in ``_python``) turns a batch's records into Arrow
buffers.  Doing the walk once, in Python, is what makes the two backends agree on rows, errors
and leftovers; its cost is per batch, not per record.
"""
from __future__ import annotations

import logging
import struct
from types import ModuleType
from typing import Iterable, TypeGuard

import pyarrow as pa

from ..dataclass import dataclass, field
from ..errors import ConfigError, CorruptRecordError, KafkaTieredError
from . import codecs
from .backend import NO_EXTENSIONS_ENV, chosen, decoder_backend, native_unavailable  # noqa: F401  (re-exported)
from .builder import FusedRecordBuilder, RecordBuilder
from .header import (CODEC_LZ4, CODEC_NAMES, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD,
                     CONTROL_MASK, HEADER_SIZE, LOG_OVERHEAD, TIMESTAMP_TYPE_MASK, read_header)
from .schema import kafka_schema
from .transactions import ReadCommittedFilter, control_type

DEFAULT_MAX_BATCH_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_DECOMPRESSED_BYTES = codecs.DEFAULT_MAX_DECOMPRESSED_BYTES
INT32_MAX = 2**31 - 1
_MIN_OFFSET, _MAX_OFFSET = -(2**63), 2**63 - 1
_LENGTH = struct.Struct(">i")

log = logging.getLogger(__name__)

_backends: dict[str, ModuleType | KafkaTieredError] = {}


def _load(name: str) -> ModuleType | KafkaTieredError:
    """The backend module, or the error that says why it cannot be loaded (kept, so every
    decode after a failed import raises it again without trying again)."""
    if name in _backends:
        return _backends[name]
    mod: ModuleType | KafkaTieredError
    if name == "python":
        from . import _python
        mod = _python
    elif name == "native":
        try:
            from . import _native_backend
            mod = _native_backend
        except ImportError as exc:
            mod = native_unavailable(exc)
    else:
        raise ConfigError(f"unknown decoder backend {name!r} (native or python)", option="backend")
    _backends[name] = mod
    return mod


_FUSED: dict[type, bool] = {}


def _fused(builder: RecordBuilder) -> TypeGuard[FusedRecordBuilder]:
    """Whether the builder reads compressed batches itself, asked once per builder class (a
    runtime protocol check looks at every member)."""
    kind = type(builder)
    if kind not in _FUSED:
        _FUSED[kind] = isinstance(builder, FusedRecordBuilder)
    return _FUSED[kind]


def _backend(name: str | None) -> ModuleType:
    if name is None:
        name = chosen()
    mod = _load(name)
    if isinstance(mod, Exception):
        raise mod
    return mod


#: Rows of an Arrow batch a :class:`Batcher` aims at: the size Spark on local[2] converts fastest
#: (benchmarks/spark_read.py: batches of 4,096 rows cost its JVM ~30 % more CPU per row, batches
#: of ~500,000 rows ~15 % more).
BATCH_ROWS = 65536
#: Bytes a :class:`Batcher`'s batch holds at most in any one binary column (keys, values, header
#: keys or values): large records make smaller batches, so a task's memory stays bounded.
BATCH_BYTES = 16 * 1024 * 1024


class Batcher:
    """One record builder kept across :func:`decode_batches` calls over one partition's bytes,
    in log order, so the Arrow batches come out at about :data:`BATCH_ROWS` rows whatever the
    calls' sizes: a call passed a batcher finishes an Arrow batch each time the rows reach
    ``rows`` at the end of a Kafka batch (or a column reaches ``max_bytes``), and leaves the rest
    in the builder for the next call; :meth:`finish` hands out what is left.  Without it, each
    call makes its own batch, and a reader decoding a range piece by piece hands Spark small ones
    (the piece after a cut batch is one batch).  The rows stay in the builder's own buffers:
    nothing is copied to join them."""

    __slots__ = ("backend", "builder", "rows")

    def __init__(self, rows: int = BATCH_ROWS, *, include_headers: bool = True,
                 max_bytes: int = BATCH_BYTES, backend: str | None = None):
        if rows < 1:
            raise ConfigError("a batcher's rows must be positive", option="rows")
        if not 1 <= max_bytes <= INT32_MAX:
            raise ConfigError("max_bytes must be in [1, 2**31 - 1]", option="max_bytes")
        self.backend = _backend(backend)
        self.builder: RecordBuilder = self.backend.Builder(include_headers, max_bytes)
        self.rows = rows

    @property
    def pending(self) -> int:
        """Rows decoded and not yet handed out."""
        return self.builder.rows

    def finish(self, topic: str, partition: int) -> pa.RecordBatch | None:
        """The rows not yet handed out, as one batch (None when there are none)."""
        return self.builder.finish(topic, partition) if self.builder.rows else None


@dataclass
class DecodeResult:
    """What one :func:`decode_batches` call produced.

    ``batches``: Arrow record batches (schema :func:`kafka_schema`).  ``consumed``: bytes of
    the input taken by complete batches — the next call starts at ``data[consumed:]``.
    ``leftover``: the bytes of a batch cut off by the end of the input (``data[consumed:]``
    unless the walk stopped at the end bound); prepend them to the next range.
    ``next_offset``: last offset of the last complete batch walked + 1 (``None`` if none).
    ``records``: rows returned.  ``done``: the walk met a batch at or past ``end_offset`` (or
    the LSO): no later range of this partition can add rows.
    """

    batches: list = field(default_factory=list)
    consumed: int = 0
    leftover: bytes = b""
    next_offset: int | None = None
    records: int = 0
    done: bool = False

    def table(self, include_headers: bool = True) -> pa.Table:
        return pa.Table.from_batches(self.batches, schema=kafka_schema(include_headers))


def decode_batches(data, *, topic: str = "", partition: int = 0,
                   start_offset: int | None = None, end_offset: int | None = None,
                   filter: ReadCommittedFilter | None = None, include_headers: bool = True,
                   verify_crc: bool = True, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                   max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                   position: int = 0, backend: str | None = None,
                   batcher: Batcher | None = None, leftover: bool = True) -> DecodeResult:
    """Decode the complete v2 batches at the start of ``data`` (any buffer: bytes, bytearray,
    memoryview, mmap) — a whole segment or a byte range cut from one.

    Records with ``start_offset <= offset < end_offset`` are returned; batches wholly outside
    are skipped without being decompressed.  ``filter`` (a :class:`ReadCommittedFilter`,
    carried across calls) gives read_committed; ``None`` is read_uncommitted.  Control batches
    are never returned.  ``max_batch_bytes`` caps each binary column of one Arrow batch (Arrow's
    int32 offsets).  ``position`` is the absolute position of ``data[0]`` in its segment, so
    errors name positions in the segment when an executor decodes a range.

    Corrupt bytes raise :class:`CorruptRecordError` only (position + batch base offset); a
    batch cut off by the end of ``data`` is ``leftover``, not an error.

    ``batcher`` (a :class:`Batcher`, whose backend, headers setting and byte cap then apply
    instead of ``backend``, ``include_headers`` and ``max_batch_bytes``): the records
    go into its builder, ``batches`` holds the Arrow batches it filled during this call, and the
    rest stays in it for the next call or :meth:`Batcher.finish`.  ``leftover=False`` leaves
    ``leftover`` empty, for a caller that reads on from ``consumed`` in its own buffer (it is a
    copy).
    """
    be = batcher.backend if batcher is not None else _backend(backend)
    if not 1 <= max_batch_bytes <= INT32_MAX:
        raise ConfigError("max_batch_bytes must be in [1, 2**31 - 1]", option="max_batch_bytes")
    if max_decompressed_bytes < 1:
        raise ConfigError("max_decompressed_bytes must be positive",
                          option="max_decompressed_bytes")
    mv = data if isinstance(data, memoryview) else memoryview(data)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    n = len(mv)
    lo = _MIN_OFFSET if start_offset is None else int(start_offset)
    hi = _MAX_OFFSET if end_offset is None else int(end_offset)
    if filter is not None and filter.last_stable_offset is not None:
        hi = min(hi, filter.last_stable_offset)
    builder: RecordBuilder = (batcher.builder if batcher is not None
                              else be.Builder(include_headers, max_batch_bytes))
    target = batcher.rows if batcher is not None else None
    fast = builder if _fused(builder) else None
    lz4_fused = fast is not None and fast.fused_lz4
    streams = fast is not None and fast.fused_streams
    res = DecodeResult()
    out = res.batches

    def flush():
        out.append(builder.finish(topic, partition))

    pos = 0
    try:
        while n - pos >= LOG_OVERHEAD:
            (length,) = _LENGTH.unpack_from(mv, pos + 8)
            if length < HEADER_SIZE - LOG_OVERHEAD:
                raise CorruptRecordError(f"invalid batch length {length}", position=position + pos + 8,
                                         base_offset=struct.unpack_from(">q", mv, pos)[0])
            size = length + LOG_OVERHEAD
            if n - pos < size:
                # Cut off by the end of the range: leftover.  A wrong magic is still an error
                # when we can see it, so garbage is not mistaken for a partial batch.
                if n - pos > 16 and mv[pos + 16] != 2:
                    raise CorruptRecordError(
                        f"unsupported record batch magic {mv[pos + 16]} (only v2 is readable)",
                        position=position + pos + 16,
                        base_offset=struct.unpack_from(">q", mv, pos)[0])
                break
            h = read_header(mv, pos)
            if h.base_offset >= hi:
                res.done = True
                break
            if h.last_offset < lo and (filter is None or h.producer_id < 0):
                res.next_offset = h.last_offset + 1
                pos += size
                continue   # before the range: not checked, not decompressed
            is_control = h.attributes & CONTROL_MASK
            # lz4 and snappy data batches go to the native block-by-block path, which checks
            # the CRC itself on the way (see _native Builder.append_lz4); a batch that does not
            # get there has its CRC checked before anything else is reported about it.
            fused = not is_control and (lz4_fused and h.codec == CODEC_LZ4
                                        or streams and h.codec == CODEC_SNAPPY)
            deferred = fused and verify_crc
            be.check_batch(mv, pos, size, position, verify_crc and not deferred)
            if filter is not None:
                ctype = None
                if is_control:
                    records, origin, decompressed = batch_records(mv, h, pos, size, position,
                                                             max_decompressed_bytes)
                    ctype = control_type(records, h, origin, decompressed)
                keep = filter.keep(h, ctype)
            else:
                keep = not is_control
            res.next_offset = h.last_offset + 1
            skip = not keep or h.last_offset < lo
            if deferred and (skip or h.record_count < 0):
                be.check_batch(mv, pos, size, position, True)   # the CRC append_lz4 would check
            if skip:
                pos += size
                continue
            if h.record_count < 0:
                raise CorruptRecordError(f"invalid record count {h.record_count}",
                                         position=position + pos + 57, base_offset=h.base_offset)
            log_append = bool(h.attributes & TIMESTAMP_TYPE_MASK)
            rpos, remaining = 0, h.record_count
            if fused and fast is not None:
                append = fast.append_lz4 if h.codec == CODEC_LZ4 else fast.append_snappy
                done, rpos, remaining = append(
                    mv, pos, size, remaining, h.base_offset, h.base_timestamp, h.max_timestamp,
                    log_append, lo, hi, position, verify_crc, max_decompressed_bytes, flush)
                if done:
                    pos += size
                    if target is not None and builder.rows >= target:
                        flush()
                    continue
                # The block reader refused the input: the library raises the error the pure
                # decoder would, or decodes it; the records go on from where the reader stopped.
                log.debug("%s records of the batch at position %d (base offset %d) left to the "
                          "codec library after %d records", CODEC_NAMES[h.codec], position + pos,
                          h.base_offset, h.record_count - remaining)
            elif streams and fast is not None and h.codec == CODEC_ZSTD and not is_control:
                # zstd: the C loop pulls the records a piece at a time from python-zstandard and
                # parses each while it is in cache (Builder.append_stream)
                at = position + pos
                with codecs.ZstdStream(mv[pos + HEADER_SIZE:pos + size], max_decompressed_bytes,
                                       position=at, base_offset=h.base_offset) as fill:
                    done, rpos, remaining = fast.append_stream(
                        fill, fill.size_hint, size - HEADER_SIZE, remaining, h.base_offset,
                        h.base_timestamp, h.max_timestamp, log_append, lo, hi, at,
                        max_decompressed_bytes, flush)
                if not done:
                    raise codecs.limit_error(h.codec, max_decompressed_bytes, at, h.base_offset)
                pos += size
                if target is not None and builder.rows >= target:
                    flush()
                continue
            records, origin, decompressed = batch_records(mv, h, pos, size, position,
                                                     max_decompressed_bytes)
            while True:
                try:
                    rpos, remaining = builder.append(
                        records, rpos, len(records), remaining, h.base_offset, h.base_timestamp,
                        h.max_timestamp, log_append, lo, hi, origin, decompressed)
                except be.RecordFormatError as exc:
                    message, where = exc.args
                    raise CorruptRecordError(message, position=where,
                                             base_offset=h.base_offset) from None
                if remaining == 0:
                    break
                flush()   # Arrow batch full: start another
            pos += size
            if target is not None and builder.rows >= target:
                flush()
    except be.RecordFormatError as exc:
        message, where = exc.args
        raise CorruptRecordError(message, position=where,
                                 base_offset=struct.unpack_from(">q", mv, pos)[0]) from None
    except struct.error as exc:   # defensive: every read above is bounds-checked first
        raise CorruptRecordError(f"malformed batch: {exc}", position=position + pos) from None
    if batcher is None and (builder.rows or not out):
        out.append(builder.finish(topic, partition))
    res.consumed = pos
    res.leftover = b"" if res.done or not leftover else bytes(mv[pos:])
    res.records = sum(b.num_rows for b in out)
    if len(out) > 1 and out[-1].num_rows == 0:
        out.pop()
    return res


def check_batch(buf, at: int, size: int, position: int) -> None:
    """Check the batch of ``size`` bytes at ``buf[at:]`` whole (magic, length, CRC-32C) with the
    chosen backend; errors name ``position + at``."""
    _backend(None).check_batch(buf, at, size, position, True)


def batch_records(mv, h, pos, size, position, limit):
    """A batch's record bytes, decompressed when needed, with the origin for error positions."""
    body = mv[pos + HEADER_SIZE:pos + size]
    if h.codec == CODEC_NONE:
        return body, position + pos + HEADER_SIZE, False
    return (codecs.decompress(h.codec, body, limit, position=position + pos,
                              base_offset=h.base_offset), position + pos, True)


def decode(data, *, topic: str = "", partition: int = 0, start_offset: int | None = None,
           end_offset: int | None = None, isolation_level: str = "read_uncommitted",
           aborted_transactions: Iterable = (), last_stable_offset: int | None = None,
           include_headers: bool = True, verify_crc: bool = True,
           max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
           max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> pa.Table:
    """Decode consecutive v2 record batches into a ``pyarrow.Table`` with Spark's Kafka schema.

    ``isolation_level``: ``"read_uncommitted"`` (aborted_transactions and last_stable_offset
    are ignored, as a broker does) or ``"read_committed"``.  A batch cut off by the end of
    ``data`` is ignored; use :func:`decode_batches` to get it back as leftover.
    """
    if isolation_level == "read_committed":
        filt = ReadCommittedFilter(aborted_transactions, last_stable_offset)
    elif isolation_level == "read_uncommitted":
        filt = None
    else:
        raise ConfigError(f"isolation_level must be read_uncommitted or read_committed, "
                          f"not {isolation_level!r}", option="isolation_level")
    res = decode_batches(data, topic=topic, partition=partition, start_offset=start_offset,
                         end_offset=end_offset, filter=filt, include_headers=include_headers,
                         verify_crc=verify_crc, max_batch_bytes=max_batch_bytes,
                         max_decompressed_bytes=max_decompressed_bytes)
    return res.table(include_headers)
