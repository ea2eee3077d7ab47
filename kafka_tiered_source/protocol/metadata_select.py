"""The records of some topics out of ``__remote_log_metadata`` batches, without a Python object
per record passed over.

A metadata partition holds the segment events of about 1/50 of a cluster's partitions, and a
planner wants those of a few topics.  Every record's value starts with its frame and then the
topic id (:func:`~.remote_log_metadata.topic_id_of`), so the walk reads each value in place and
keeps it only when its topic id is wanted, or when it is no record :func:`topic_id_of` reads
(:func:`~.remote_log_metadata.decode_record` then says what is wrong with it).  Null values
(KIP-1266's tombstones) and control batches are passed over.

Two backends, one rule, as the record decoder has them: ``rlm_select`` (native/rlm.c),
and the pure-Python reference below (``KAFKA_TIERED_NO_EXTENSIONS=1``), which checks the same
things in the same order and names the same byte positions.  Both verify each batch's CRC-32C.
Compressed batches (the metadata manager's producer sends none unless configured to) are
decompressed here and their records walked by the same backend.
"""
from __future__ import annotations

import struct
from typing import Any, Collection

from ..dataclass import dataclass, field
from ..errors import CorruptRecordError, ProtocolError
from ..records.backend import decoder_backend
from ..records.codecs import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress
from ..records.cursor import Cursor, RecordFormatError
from ..records.header import ATTRIBUTES_OFFSET, CODEC_MASK, CONTROL_MASK, CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD
from .remote_log_metadata import decode_record, row_of, topic_id_of

_BATCH = struct.Struct(">qiib")           # base offset, length, partition leader epoch, magic
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_H16 = struct.Struct(">h")
# (hits, consumed, next offset or -1, last epoch, compressed batches, passed, error or None,
#  tombstones, keyed)
_Walk = tuple[list[tuple], int, int, int, list[tuple[int, int]], int, "tuple[str, int, int] | None",
              list[tuple[int, "bytes | None"]], int]


@dataclass
class Selected:
    """What one walk of consecutive batches found.

    ``hits``: ``(offset, value)`` of the records kept, in offset order.  ``consumed``: bytes of
    the complete batches walked (a batch cut off by the end of the input is left for the next
    fetch).  ``next_offset``: the last offset of the last complete batch + 1 (None: no batch).
    ``last_epoch``: that batch's partitionLeaderEpoch (-1: none).  ``passed``: records passed
    over (other topics', tombstones).  ``tombstones``: ``(offset, key)`` of every record with a
    null value, whatever its topic (KIP-1266: the key names the copy it ends).  ``keyed``: how
    many records had a key (a KIP-1266 topic, compacted)."""
    hits: list[tuple] = field(default_factory=list)
    consumed: int = 0
    next_offset: int | None = None
    last_epoch: int = -1
    passed: int = 0
    tombstones: list[tuple[int, bytes | None]] = field(default_factory=list)
    keyed: int = 0


def select_records(data: Any, wanted: Collection[bytes] | None, *, origin: int = 0, verify_crc: bool = True,
                   max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                   backend: str | None = None, decode: bool = False) -> Selected:
    """The records of ``data`` (consecutive v2 batches, e.g. a Fetch answer) whose topic id is
    in ``wanted`` (16-byte ids; None: every record with a value).  ``origin``: the position of
    ``data[0]``, for errors.  Malformed bytes raise :class:`CorruptRecordError` naming the byte
    position and the batch's base offset.  ``backend``: ``native`` or ``python`` (default: the
    decoder's, :func:`~kafka_tiered_source.records.decoder_backend`).  ``decode``: each kept
    value that is a well-formed record comes as its row
    (:func:`~.remote_log_metadata.row_of`: a tuple of 4 or more items, its api key then its
    offset) instead of ``(offset, value)``; one that is not stays ``(offset, value)``, for
    :func:`~.remote_log_metadata.decode_record` to say what is wrong with it."""
    ids = None if wanted is None else b"".join(sorted({bytes(w) for w in wanted}))
    if ids is not None and any(len(w) != 16 for w in wanted or ()):
        raise ValueError("topic ids are 16 bytes each")
    native = (backend or decoder_backend()) == "native"
    walk = _native_walk if native else _python_walk
    mv = data if isinstance(data, memoryview) else memoryview(data)
    rows = decode and native
    hits, consumed, next_offset, last_epoch, compressed, passed, error, tombstones, keyed = walk(
        mv, origin, ids, verify_crc, -1, 0, rows)
    for pos, size in compressed:
        base = _BATCH.unpack_from(mv, pos)[0]
        records = decompress(mv[pos + ATTRIBUTES_OFFSET + 1] & CODEC_MASK, mv[pos + HEADER_SIZE:pos + size],
                             max_decompressed_bytes, position=origin + pos, base_offset=base)
        count = _I32.unpack_from(mv, pos + 57)[0]
        got = walk(memoryview(records), origin + pos, ids, False, base, count, rows)
        if got[6] is not None:
            error = error if error is not None and error[1] < got[6][1] else got[6]
            break
        hits += got[0]
        passed += got[5]
        tombstones += got[7]
        keyed += got[8]
    if error is not None:
        message, position, base_offset = error
        raise CorruptRecordError(message, position=position, base_offset=base_offset)
    if decode and not native:
        hits = [_row(off, value) for off, value in hits]
    if compressed:
        hits.sort(key=_offset)
        tombstones.sort(key=lambda h: h[0])
    return Selected(hits, consumed, None if next_offset < 0 else next_offset, last_epoch, passed, tombstones, keyed)


def _offset(hit: tuple) -> int:
    return hit[0] if len(hit) == 2 else hit[1]


def _row(offset: int, value: bytes) -> tuple:
    """The pure-Python twin of native/rlm_rows.c: the record's row, or ``(offset, value)`` when
    the codec cannot read it."""
    try:
        return row_of(decode_record(value, where=""), offset)
    except ProtocolError:
        return offset, value


def _native_walk(data: Any, origin: int, ids: bytes | None, verify_crc: bool, dbase: int, dcount: int,
                 decode: bool = False) -> _Walk:
    from .._native import rlm_select
    return rlm_select(data, origin, ids, verify_crc, dbase, dcount, decode)


# -- the pure-Python reference: native/rlm.c, rule for rule -------------------------------------
class _Reader(Cursor):
    """The record decoder's bounded cursor (native/cursor.h's words in its errors), plus skip."""

    __slots__ = ()

    def skip(self, n: int, what: str) -> int:
        at = self.pos
        if n > 0:
            self.need(n, what)
            self.pos += n
        return at


def _walk_records(r: _Reader, count: int, base: int, ids: bytes | None, out: "_Out") -> None:
    for _ in range(count):
        start = r.pos
        length = r.varint("record length")
        if length < 6:
            raise r.fail(start, f"invalid record length {length}")
        r.need(length, "record")
        body = r.pos
        rec = _Reader(r.buf, body + 1, body + length, r.origin, r.decompressed)   # +1: attributes
        rec.varint("timestamp delta", 10, 0xFE)
        delta = rec.varint("offset delta")
        klen = rec.varint("key length")
        if klen < -1:
            raise rec.fail(rec.pos - 1, f"invalid key length {klen}")
        kpos = rec.skip(klen, "record key")
        vlen = rec.varint("value length")
        if vlen < -1:
            raise rec.fail(rec.pos - 1, f"invalid value length {vlen}")
        vpos = rec.skip(vlen, "record value")
        hcount = rec.varint("header count")
        if hcount < 0:
            raise rec.fail(rec.pos - 1, f"invalid header count {hcount}")
        for _ in range(hcount):
            hk = rec.varint("header key length")
            if hk < 0:
                raise rec.fail(rec.pos - 1, f"invalid header key length {hk}")
            rec.need(hk, "header key")
            rec.pos += hk
            hv = rec.varint("header value length")
            if hv < -1:
                raise rec.fail(rec.pos - 1, f"invalid header value length {hv}")
            rec.skip(hv, "header value")
        if rec.pos != rec.end:
            raise rec.fail(rec.pos, f"record length {length} does not match its fields ({rec.pos - body} bytes)")
        r.pos = rec.end
        out.keyed += klen >= 0
        value = None if vlen < 0 else bytes(r.buf[vpos:vpos + vlen])
        if value is None:
            out.tombstones.append((base + delta, None if klen < 0 else bytes(r.buf[kpos:kpos + klen])))
        if value is None or not _selected(value, ids):
            out.passed += 1
        else:
            out.hits.append((base + delta, value))
    if r.pos != r.end:
        raise r.fail(r.pos, f"{r.end - r.pos} bytes after the last of the batch's {count} records")


class _Out:
    __slots__ = ("hits", "tombstones", "passed", "keyed")

    def __init__(self) -> None:
        self.hits: list[tuple[int, bytes]] = []
        self.tombstones: list[tuple[int, bytes | None]] = []
        self.passed = self.keyed = 0


def _selected(value: bytes, ids: bytes | None) -> bool:
    if ids is None:
        return True
    tid = topic_id_of(value)
    return tid is None or any(ids[i:i + 16] == tid for i in range(0, len(ids), 16))


def _python_walk(data: Any, origin: int, ids: bytes | None, verify_crc: bool, dbase: int, dcount: int,
                 decode: bool = False) -> _Walk:
    import crc32c
    out = _Out()
    n = len(data)
    pos, next_offset, last_epoch, base = 0, -1, -1, 0
    compressed: list = []
    try:
        if dbase >= 0:
            base = dbase
            _walk_records(_Reader(data, 0, n, origin, True), dcount, dbase, ids, out)
            pos = n
        while dbase < 0 and n - pos >= LOG_OVERHEAD:
            r = _Reader(data, pos, n, origin, False)
            base, length = struct.unpack_from(">qi", data, pos)
            if length < HEADER_SIZE - LOG_OVERHEAD:
                raise r.fail(pos + 8, f"invalid batch length {length}")
            size = length + LOG_OVERHEAD
            if n - pos < size:
                if n - pos > 16 and data[pos + 16] != 2:
                    raise r.fail(pos + 16, f"unsupported record batch magic {data[pos + 16]} (only v2 is readable)")
                break
            _, _, epoch, magic = _BATCH.unpack_from(data, pos)
            if magic != 2:
                raise r.fail(pos + 16, f"unsupported record batch magic {magic} (only v2 is readable)")
            if verify_crc:
                stored = _U32.unpack_from(data, pos + CRC_OFFSET)[0]
                computed = crc32c.crc32c(data[pos + ATTRIBUTES_OFFSET:pos + size])
                if stored != computed:
                    raise r.fail(pos + CRC_OFFSET, f"CRC-32C mismatch: stored 0x{stored:08x}, computed 0x{computed:08x}")
            attributes = _H16.unpack_from(data, pos + ATTRIBUTES_OFFSET)[0]
            last_delta = _I32.unpack_from(data, pos + 23)[0]
            count = _I32.unpack_from(data, pos + 57)[0]
            if not attributes & CONTROL_MASK:
                if attributes & CODEC_MASK:
                    compressed.append((pos, size))
                elif count < 0:
                    raise r.fail(pos + 57, f"invalid record count {count}")
                else:
                    _walk_records(_Reader(data, pos + HEADER_SIZE, pos + size, origin, False), count, base, ids,
                                  out)
            next_offset, last_epoch = base + last_delta + 1, epoch
            pos += size
    except RecordFormatError as bad:
        message, position = bad.args
        error: tuple[str, int, int] | None = (message, position, base)
    else:
        error = None
    return out.hits, pos, next_offset, last_epoch, compressed, out.passed, error, out.tombstones, out.keyed
