"""The native decoder's lz4 path: its own LZ4 frame reader (native/lz4.c), fed block by block
into the record loop (``_native.Builder.append_lz4``), with the CRC taken on the way.

What must hold, whatever the input: the rows, the leftovers and the errors are the ones the
pure-Python decoder gives on python-lz4's output.  So the reader may refuse more than liblz4
(the batch then goes through python-lz4), never less; a record cut by a piece's end must come
out whole; and errors keep the precedence of "check the CRC, decompress everything, then parse".
"""
import random
import re
import struct

import lz4.frame
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_tiered_source import _native
from kafka_tiered_source.errors import CorruptRecordError, DecompressionLimitError
from kafka_tiered_source.records import codecs, decode_batches
from test_records_codecs import ENCODERS, LZ4, compress_as, kp_batch, restamp

PIECE = 256 * 1024   # native/records.c KT_PIECE: records are parsed this many bytes at a time

BLOCK_SIZES = [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB,
               lz4.frame.BLOCKSIZE_MAX1MB, lz4.frame.BLOCKSIZE_MAX4MB]


def python_lz4(frame, limit=1 << 30):
    """python-lz4's verdict, the way records/codecs.py reads a frame: bytes, or None."""
    try:
        ctx = lz4.frame.create_decompression_context()
        out, used, eof = lz4.frame.decompress_chunk(ctx, frame, max_length=limit)
    except RuntimeError:
        return None
    return out if eof and used == len(frame) else None


def own_reader(frame, limit=1 << 30):
    try:
        return _native.lz4_decompress(frame, limit)
    except ValueError:
        return None


def frame(data, *, block_size=lz4.frame.BLOCKSIZE_MAX64KB, linked=False, content_checksum=False,
          block_checksum=False, store_size=False, level=0):
    return lz4.frame.compress(data, block_size=block_size, block_linked=linked,
                              content_checksum=content_checksum, block_checksum=block_checksum,
                              store_size=store_size, compression_level=level)


def text(rnd, n):
    words = [bytes(rnd.choice(b"abcdefghij ") for _ in range(rnd.randint(1, 9)))
             for _ in range(300)]
    return b"".join(rnd.choice(words) for _ in range(n // 4 + 1))[:n]


def outcome(data, backend, **kw):
    """Everything a caller can see of one decode: rows and walk state, or the error."""
    try:
        res = decode_batches(data, backend=backend, **kw)
    except CorruptRecordError as exc:
        return ("error", type(exc).__name__, str(exc), exc.position, exc.base_offset)
    tables = [b.to_pylist() for b in res.batches]
    return ("ok", tables, res.consumed, res.leftover, res.next_offset, res.done)


def same(data, **kw):
    native, python = outcome(data, "native", **kw), outcome(data, "python", **kw)
    assert native == python
    return native


def lz4_batch(records, base_offset=0, **frame_kw):
    """An lz4 batch whose records frame is written with the given python-lz4 settings."""
    return compress_as(kp_batch(records, base_offset=base_offset), LZ4,
                       lambda body: frame(body, **frame_kw))


def records_of(rnd, n, value_sizes=(0, 10, 100, 3000, 70_000)):
    out = []
    for i in range(n):
        size = rnd.choice(value_sizes)
        headers = [("h", b"v" * rnd.randint(0, 5))] if i % 7 == 0 else []
        key = None if i % 11 == 0 else rnd.randbytes(16)
        out.append((i, 1_700_000_000_000 + i, key, text(rnd, size), headers))
    return out


# ---- the frame reader against liblz4 ----

@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("linked", [False, True])
@pytest.mark.parametrize("checksums", [(False, False), (True, True)])
@pytest.mark.parametrize("store_size", [False, True])
def test_reader_decodes_every_frame_shape(block_size, linked, checksums, store_size):
    rnd = random.Random(block_size + linked)
    data = text(rnd, 700_000) + rnd.randbytes(50_000) + b"\0" * 90_000 + text(rnd, 5000)
    f = frame(data, block_size=block_size, linked=linked, content_checksum=checksums[0],
              block_checksum=checksums[1], store_size=store_size)
    assert _native.lz4_decompress(f, 1 << 30) == data
    for tiny in (b"", b"x", b"abc" * 5):
        assert _native.lz4_decompress(frame(tiny, linked=linked), 1 << 30) == tiny


class Verdicts:
    """An own reader against the library on many inputs: whenever the reader accepts, the
    library gives the same bytes.  ``done()`` checks that all three outcomes occurred, so the
    comparison can fail both ways."""

    def __init__(self, ours, reference, library: str):
        self.ours, self.reference, self.library = ours, reference, library
        self.counts = {"both accept": 0, "both refuse": 0, f"only {library} accepts": 0}

    def check(self, data) -> None:
        mine, ref = self.ours(data), self.reference(data)
        if mine is not None:
            assert mine == ref, f"reader accepted input {self.library} reads differently: {data[:64]!r}"
            self.counts["both accept"] += 1
        else:
            self.counts["both refuse" if ref is None else f"only {self.library} accepts"] += 1

    def done(self) -> None:
        assert all(self.counts.values()), self.counts


def mutated(rnd, data: bytes) -> bytes:
    """``data`` with a few bits flipped, cut short, or with stray bytes after it."""
    b = bytearray(data)
    op = rnd.random()
    if op < 0.5 and b:
        for _ in range(rnd.randint(1, 3)):
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
    elif op < 0.75 and b:
        del b[rnd.randrange(len(b)):]
    else:
        b += rnd.randbytes(rnd.randint(1, 4))
    return bytes(b)


def test_reader_refuses_what_liblz4_refuses():
    """Flipped bits, cut frames, stray bytes, and blocks of made-up sequences (offsets past
    the output, lengths running into the block's end): whenever the reader accepts, liblz4
    accepts with the same bytes."""
    rnd = random.Random(1248)
    # one output cap for both: no frame here holds more, and python-lz4 allocates it
    verdicts = Verdicts(lambda f: own_reader(f, 1 << 21), lambda f: python_lz4(f, 1 << 21), "liblz4")
    check = verdicts.check
    for _ in range(400):
        data = rnd.choice([text(rnd, rnd.randint(0, 200_000)), rnd.randbytes(rnd.randint(0, 3000)),
                           b"\1" * rnd.randint(0, 100_000)])
        f = frame(data, block_size=rnd.choice(BLOCK_SIZES), linked=rnd.random() < 0.5,
                  content_checksum=rnd.random() < 0.5, block_checksum=rnd.random() < 0.3,
                  store_size=rnd.random() < 0.5, level=rnd.choice([0, 9]))
        check(f)
        for _ in range(4):
            check(mutated(rnd, f))
    head = {linked: frame(b"x", linked=linked)[:7] for linked in (False, True)}
    for _ in range(3000):
        blocks = b""
        for _ in range(rnd.randint(1, 3)):
            blk = made_up_block(rnd)
            blocks += struct.pack("<I", len(blk)) + blk
        check(head[rnd.random() < 0.5] + blocks + b"\0\0\0\0")
    verdicts.done()


def made_up_block(rnd):
    """An LZ4 block of random sequences near the format's limits."""
    def length(n):
        return b"\xff" * (n // 255) + bytes([n % 255])
    out, produced = b"", 0
    for _ in range(rnd.randint(0, 6)):
        lit, ml = rnd.choice([0, 1, 8, 14, 15, 16, 40, 300]), rnd.choice([4, 5, 18, 19, 20, 200])
        out += bytes([(min(lit, 15) << 4) | min(ml - 4, 15)])
        out += (length(lit - 15) if lit >= 15 else b"") + rnd.randbytes(lit)
        produced += lit
        offset = rnd.choice([0, 1, 3, 7, 8, 15, 16, produced, produced + 1, rnd.randint(1, 65535)])
        out += struct.pack("<H", offset & 0xFFFF) + (length(ml - 19) if ml >= 19 else b"")
        produced += ml
    lit = rnd.choice([0, 1, 4, 5, 6, 12, 13, 15, 30])
    if rnd.random() < 0.9:
        out += bytes([min(lit, 15) << 4]) + (length(lit - 15) if lit >= 15 else b"")
        out += rnd.randbytes(lit)
    if out and rnd.random() < 0.2:
        out = out[:rnd.randrange(len(out))]
    return out


def test_reader_limit_and_output_buffer():
    data = b"a" * 300_000
    assert _native.lz4_decompress(frame(data), 300_000) == data
    out = bytearray(len(data) + 5 * 65536)
    assert _native.lz4_decompress(frame(data), 1 << 30, out) == len(data)
    assert out[:len(data)] == data
    with pytest.raises(ValueError, match="too small"):
        _native.lz4_decompress(frame(data), 1 << 30, bytearray(100_000))
    for f in (frame(data), frame(data, store_size=True)):
        with pytest.raises(ValueError, match="limit"):
            _native.lz4_decompress(f, 299_999)


# ---- batches: the same outcome as the pure-Python decoder ----

@pytest.mark.parametrize("frame_kw", [
    {},
    {"linked": True},
    {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "content_checksum": True, "block_checksum": True},
    {"block_size": lz4.frame.BLOCKSIZE_MAX256KB, "store_size": True, "level": 9},
], ids=["java-like", "linked", "4mb-checksums", "256kb-sized"])
def test_records_cut_by_pieces_come_out_whole(frame_kw):
    assert_pieced_batch(lambda records: lz4_batch(records, base_offset=1000, **frame_kw))


def pieced_records():
    """400 records of every size, headers and null keys, and a 1 MiB one: more than ten of the
    pieces the native decoder parses at a time."""
    records = records_of(random.Random(7), 400) + [(400, 1, b"big", b"v" * (1 << 20), [])]
    assert len(kp_batch(records)) > 10 * PIECE
    return records


def assert_pieced_batch(encode):
    """``encode(records)`` (a batch at base offset 1000) decodes as the pure decoder does: rows
    whole across piece ends, with offset bounds, without headers, into Arrow batches that fill
    up mid-batch (flush from C), and twice in a row (the window is reused)."""
    records = pieced_records()
    batch = encode(records)
    rows = [r for t in same(batch)[1] for r in t]
    assert len(rows) == len(records)
    assert [r["value"] for r in rows] == [r[3] for r in records]
    assert [r["offset"] for r in rows] == [1000 + r[0] for r in records]
    assert [r["headers"] for r in rows] == [[{"key": k, "value": v} for k, v in r[4]] or None
                                           for r in records]
    same(batch, start_offset=1100, end_offset=1390, include_headers=False)
    assert len(same(batch, max_batch_bytes=200_000)[1]) > 5
    assert sum(len(t) for t in same(batch + batch)[1]) == 2 * len(records)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_batches_agree(data):
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    n = data.draw(st.integers(0, 80))
    records = records_of(rnd, n, value_sizes=(0, 1, 50, 5000, 40_000))
    kw = {"block_size": data.draw(st.sampled_from(BLOCK_SIZES)),
          "linked": data.draw(st.booleans()), "content_checksum": data.draw(st.booleans())}
    batch = lz4_batch(records, **kw)
    same(batch, max_batch_bytes=data.draw(st.sampled_from([1 << 30, 60_000, 1])),
         start_offset=data.draw(st.sampled_from([None, 3])),
         include_headers=data.draw(st.booleans()))


def test_valid_lz4_never_goes_through_python_lz4(monkeypatch):
    batch = lz4_batch(records_of(random.Random(3), 300))

    def refuse(*a, **kw):
        raise AssertionError("python-lz4 used for a frame the native reader reads")

    monkeypatch.setattr(codecs, "decompress", refuse)
    assert len(outcome(batch, "native")[1][0]) == 300


def dict_id_frame(body):
    """A frame with a dictionary id: legal, and liblz4 reads it; the native reader leaves it
    to python-lz4.  The header checksum is whichever byte liblz4 accepts."""
    f = frame(body)
    head = bytes([f[4] | 1, f[5]]) + b"\1\2\3\4"
    for hc in range(256):
        cand = f[:4] + head + bytes([hc]) + f[7:]
        if python_lz4(cand) == body:
            return cand
    raise AssertionError("no header checksum makes liblz4 accept the frame")


def test_frame_the_reader_refuses_goes_through_python_lz4(monkeypatch):
    records = records_of(random.Random(5), 200)
    batch = compress_as(kp_batch(records), LZ4, dict_id_frame)
    assert own_reader(batch[61:]) is None
    calls = []
    real = codecs.decompress
    monkeypatch.setattr(codecs, "decompress", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    got = same(batch)
    assert calls and len(got[1][0]) == 200


def corrupt_record(records_bytes, at):
    """Make the record starting at `at` (key b"k", offset delta < 64, timestamp delta 0) say
    its key is null, so that the key byte is read as the value length: b"k" is -54."""
    b = bytearray(records_bytes)
    length_bytes = 1 + sum(1 for x in b[at:at + 5] if x & 0x80)
    key_length = at + length_bytes + 3   # after attributes, timestamp delta, offset delta
    assert b[key_length] == 2 and b[key_length + 1] == ord("k")
    b[key_length] = 1
    return bytes(b)


def record_starts(batch):
    """Positions of the records in an uncompressed batch's body."""
    body, pos, out = batch[61:], 0, []
    while pos < len(body):
        out.append(pos)
        n = shift = v = 0
        while True:
            x = body[pos + n]
            v |= (x & 0x7F) << shift
            n += 1
            shift += 7
            if not x & 0x80:
                break
        pos += n + ((v >> 1) ^ -(v & 1))
    return out


def test_record_error_in_a_later_piece_names_its_place():
    rnd = random.Random(17)
    records = [(i, 1, b"k", rnd.randbytes(20_000), []) for i in range(100)]
    plain = kp_batch(records)
    starts = record_starts(plain)
    late = next(p for p in starts if p > 3 * PIECE)
    bad = corrupt_record(plain[61:], late)
    batch = restamp(compress_as(plain, LZ4, frame), records=frame(bad))
    got = same(batch)
    assert got[0] == "error" and "invalid value length -54" in got[2], got
    where = int(re.search(r"at byte (\d+) of the decompressed records", got[2]).group(1))
    assert late < where < late + 10


def test_decompression_error_after_a_record_error_wins():
    records = [(i, 1, b"k", text(random.Random(i), 20_000), []) for i in range(60)]
    plain = kp_batch(records)
    bad_records = corrupt_record(plain[61:], 0)
    f = frame(bad_records)
    cut = f[:len(f) - 4 - 100]   # the last block loses its end, and there is no end mark
    batch = restamp(compress_as(plain, LZ4, frame), records=cut)
    got = same(batch)
    assert got[0] == "error" and "cannot decompress lz4" in got[2], got
    # the same batch with a stale CRC: the CRC is what is reported
    stale = bytearray(batch)
    stale[100] ^= 1
    got = same(bytes(stale))
    assert "CRC-32C mismatch" in got[2]
    assert same(bytes(stale), verify_crc=False)[2] != got[2]


@pytest.mark.parametrize("codec", ["lz4", "zstd-streamed", "snappy-xerial"])
@pytest.mark.parametrize("case", ["trailing bytes", "count too high", "count too low"])
def test_records_and_count_disagree(case, codec):
    """Every piece-at-a-time path (lz4 and snappy's own readers, zstd's stream) reports records
    and count that disagree as the pure decoder does on the whole decompressed batch."""
    records = [(i, 1, b"k", b"v" * 3000, []) for i in range(300)]
    plain = kp_batch(records)
    body, count = plain[61:], len(records)
    if case == "trailing bytes":
        body += b"\0\0\0"
    elif case == "count too high":
        count += 1
    else:
        count -= 1
    batch = bytearray(plain[:61] + body)
    struct.pack_into(">i", batch, 57, count)
    got = same(compress_as(bytes(batch), *ENCODERS[codec]))
    assert got[0] == "error", got


def test_over_the_decompressed_limit():
    records = [(i, 1, None, b"z" * 10_000, []) for i in range(100)]
    for store_size in (False, True):
        batch = lz4_batch(records, store_size=store_size)
        for backend in ("native", "python"):
            with pytest.raises(DecompressionLimitError):
                decode_batches(batch, backend=backend, max_decompressed_bytes=500_000)
        same(batch, max_decompressed_bytes=500_000)
        assert same(batch, max_decompressed_bytes=2_000_000)[0] == "ok"


def test_uncompressed_and_lz4_batches_in_one_segment():
    rnd = random.Random(11)
    segment = (kp_batch(records_of(rnd, 50), base_offset=0)
               + lz4_batch(records_of(rnd, 50), base_offset=50)
               + kp_batch(records_of(rnd, 50), base_offset=100)
               + lz4_batch(records_of(rnd, 50), base_offset=150, linked=True))
    got = same(segment)
    assert [r["offset"] for t in got[1] for r in t] == list(range(200))
    # cut anywhere: the cut batch is leftover, never an error
    for cut in (len(segment) - 1, len(segment) // 2, 700):
        same(segment[:cut])
