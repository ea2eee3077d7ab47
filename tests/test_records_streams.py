"""The native decoder's zstd and snappy paths: a zstd batch pulled from python-zstandard a piece
at a time by the C record loop (``_native.Builder.append_stream``), a snappy batch through the
decoder's own snappy reader (native/snappy.c, ``Builder.append_snappy``) block by block, each
piece parsed while it is in cache instead of the batch decompressed whole first.

What must hold, whatever the input: the rows, the leftovers and the errors are the ones the
pure-Python decoder gives on the whole decompressed batch.  So the snappy reader may refuse more
than cramjam (the batch then goes through cramjam), never less; a record cut by a piece's end
must come out whole, an Arrow batch that fills up mid-batch goes on in the next, and errors keep
the precedence of "check the CRC, decompress everything, then parse".
"""
import random
import re
import struct

import cramjam
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.decode import _xerial as xerial   # as Kafka's Java producer writes it
from kafka_tiered_source import _native
from kafka_tiered_source.errors import CorruptRecordError, DecompressionLimitError
from kafka_tiered_source.records import codecs, decode_batches
from test_records_codecs import SNAPPY, ZSTD, compress_as, kp_batch, restamp
from test_records_lz4 import (PIECE, Verdicts, assert_pieced_batch, corrupt_record, mutated, outcome,
                              record_starts, records_of, same, text)


def java_like(data):
    """As Kafka's Java producer writes zstd: a stream, no content size in the frame header."""
    c = zstandard.ZstdCompressor(level=3).compressobj()
    return c.compress(data) + c.flush()


def sized(data):
    return zstandard.ZstdCompressor(level=1).compress(data)


def two_frames(data):
    """Two frames back to back (the reader reads across frames, as the pure decoder's does)."""
    half = len(data) // 2
    return sized(data[:half]) + java_like(data[half:])


FRAMINGS = {"java-like": java_like, "content-size": sized, "two-frames": two_frames}


def zstd_batch(records, base_offset=0, framing=java_like):
    return compress_as(kp_batch(records, base_offset=base_offset), ZSTD, framing)


@pytest.mark.parametrize("framing", FRAMINGS.values(), ids=FRAMINGS.keys())
def test_records_cut_by_pieces_come_out_whole(framing):
    assert_pieced_batch(lambda records: zstd_batch(records, base_offset=1000, framing=framing))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_batches_agree(data):
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    n = data.draw(st.integers(0, 80))
    records = records_of(rnd, n, value_sizes=(0, 1, 50, 5000, 40_000))
    batch = zstd_batch(records, framing=data.draw(st.sampled_from(list(FRAMINGS.values()))))
    same(batch, max_batch_bytes=data.draw(st.sampled_from([1 << 30, 60_000, 1])),
         start_offset=data.draw(st.sampled_from([None, 3])),
         include_headers=data.draw(st.booleans()))


def test_zstd_batches_are_streamed_not_decompressed_whole(monkeypatch):
    batch = zstd_batch(records_of(random.Random(3), 300))

    def refuse(*a, **kw):
        raise AssertionError("a zstd data batch was decompressed whole")

    monkeypatch.setattr(codecs, "decompress", refuse)
    assert len(outcome(batch, "native")[1][0]) == 300
    with pytest.raises(AssertionError, match="decompressed whole"):
        decode_batches(batch, backend="python")


def test_record_error_in_a_later_piece_names_its_place():
    rnd = random.Random(17)
    records = [(i, 1, b"k", rnd.randbytes(20_000), []) for i in range(100)]
    plain = kp_batch(records)
    late = next(p for p in record_starts(plain) if p > 3 * PIECE)
    batch = restamp(plain, attributes=ZSTD, records=java_like(corrupt_record(plain[61:], late)))
    got = same(batch)
    assert got[0] == "error" and "invalid value length -54" in got[2], got
    where = int(re.search(r"at byte (\d+) of the decompressed records", got[2]).group(1))
    assert late < where < late + 10


def test_decompression_error_after_a_record_error_wins():
    records = [(i, 1, b"k", text(random.Random(i), 20_000), []) for i in range(60)]
    plain = kp_batch(records)
    whole = java_like(corrupt_record(plain[61:], 0))
    # garbage late in the frame: the library's error, although record 0 is bad too
    garbled = bytearray(whole)
    garbled[-300:-236] = bytes(64)
    batch = restamp(plain, attributes=ZSTD, records=bytes(garbled))
    got = same(batch)
    assert got[0] == "error" and "cannot decompress zstd records: ZstdError" in got[2], got
    # a frame cut short ends the stream early without a library error (python-zstandard's
    # reader reads what is there): both decoders then report the first bad record
    got = same(restamp(plain, attributes=ZSTD, records=whole[:len(whole) - 200]))
    assert got[0] == "error" and "invalid value length -54" in got[2], got
    # the same batch with a stale CRC: the CRC is what is reported
    stale = bytearray(batch)
    stale[100] ^= 1
    got = same(bytes(stale))
    assert "CRC-32C mismatch" in got[2]
    assert same(bytes(stale), verify_crc=False)[2] != got[2]


@pytest.mark.parametrize("framing", [java_like, sized], ids=["streamed", "content-size"])
def test_over_the_decompressed_limit(framing):
    records = [(i, 1, None, b"z" * 10_000, []) for i in range(100)]
    batch = zstd_batch(records, framing=framing)
    for backend in ("native", "python"):
        with pytest.raises(DecompressionLimitError):
            decode_batches(batch, backend=backend, max_decompressed_bytes=500_000)
    same(batch, max_decompressed_bytes=500_000)
    # exactly the records' size is allowed, one byte less is not
    size = len(kp_batch(records)) - 61
    assert same(batch, max_decompressed_bytes=size)[0] == "ok"
    assert same(batch, max_decompressed_bytes=size - 1)[0] == "error"


def test_control_and_aborted_batches_around_streamed_ones():
    """read_committed over zstd data: the filter decides per batch, streamed or not."""
    from kafka_tiered_source.records import ReadCommittedFilter
    from test_records_codecs import control_batch, txn_batch

    pid = 7
    data = (compress_as(txn_batch(0, pid, n=5), ZSTD, java_like) + control_batch(5, pid, 0)
            + zstd_batch(records_of(random.Random(1), 20), base_offset=6))
    for backend in ("native", "python"):
        res = decode_batches(data, backend=backend,
                             filter=ReadCommittedFilter([(pid, 0)], None))
        assert [r["offset"] for b in res.batches for r in b.to_pylist()] == list(range(6, 26))


# ---- snappy: the own reader against cramjam ----

def raw(data):
    """As librdkafka writes it: one raw block."""
    return bytes(cramjam.snappy.compress_raw(data))


def reference(records, limit=1 << 30):
    """The pure decoder's verdict on a batch's snappy records (cramjam behind records/codecs.py's
    framing checks): bytes, or None."""
    try:
        return bytes(codecs.decompress(SNAPPY, records, limit, position=0, base_offset=0))
    except (CorruptRecordError, DecompressionLimitError):
        return None


def own(records, limit=1 << 30):
    try:
        return _native.snappy_decompress(records, limit)
    except ValueError:
        return None


@pytest.mark.parametrize("block", [1, 100, 32 * 1024, 64 * 1024, 1 << 20])
def test_snappy_reader_decodes_every_framing(block):
    rnd = random.Random(block)
    for data in (text(rnd, 300_000), rnd.randbytes(5000), b"\1" * 100_000, b"ab" * 9):
        assert own(xerial(data, block)) == data
        assert own(raw(data)) == data


def made_up_block(rnd):
    """A raw snappy block of random elements near the format's limits: literals with 1-4 length
    bytes, copies of each kind with offsets of 0, inside, at and past what was produced, and a
    declared size that may not match."""
    out, produced = b"", 0
    for _ in range(rnd.randint(0, 8)):
        kind = rnd.randrange(4)
        if kind == 0:
            n = rnd.choice([1, 2, 16, 17, 60, 61, 64, 65, 300, 70_000])
            if n <= 60:
                out += bytes([(n - 1) << 2])
            else:
                nb = 1 if n - 1 < 256 else 2 if n - 1 < 65536 else 3
                out += bytes([(59 + nb) << 2]) + (n - 1).to_bytes(nb, "little")
            out += rnd.randbytes(n if rnd.random() < 0.95 else rnd.randrange(n))
            produced += n
        else:
            n = rnd.choice([1, 4, 11, 16, 17, 64]) if kind > 1 else rnd.randint(4, 11)
            offset = rnd.choice([0, 1, 3, 7, 8, 15, 16, 17, produced, produced + 1,
                                 rnd.randint(1, 2047)])
            if kind == 1:
                out += bytes([1 | ((n - 4) << 2) | ((offset >> 8 & 7) << 5), offset & 0xFF])
            elif kind == 2:
                out += bytes([2 | ((n - 1) << 2)]) + struct.pack("<H", offset & 0xFFFF)
            else:
                out += bytes([3 | ((n - 1) << 2)]) + struct.pack("<I", offset)
            produced += n
    size = produced + rnd.choice([0, 0, 0, -1, 1])
    pre = bytearray()
    while True:
        pre.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
        size >>= 7
        if not pre[-1] & 0x80:
            break
    return bytes(pre) + out


def test_snappy_reader_refuses_what_cramjam_refuses():
    """Flipped bits, cut and padded blocks, bad framing, and blocks of made-up elements (offsets
    0 or past the output, literals running past the input, sizes that do not match): whenever
    the reader accepts, cramjam gives the same bytes."""
    rnd = random.Random(1254)
    verdicts = Verdicts(lambda r: own(r, 1 << 22), lambda r: reference(r, 1 << 22), "cramjam")
    check = verdicts.check
    for _ in range(300):
        data = rnd.choice([text(rnd, rnd.randint(0, 100_000)), rnd.randbytes(rnd.randint(0, 3000)),
                           b"\1" * rnd.randint(0, 50_000)])
        framed = rnd.choice([xerial(data, rnd.choice([100, 4096, 32768])), raw(data)])
        check(framed)
        for _ in range(4):
            check(mutated(rnd, framed))
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for _ in range(3000):
        blocks = [made_up_block(rnd) for _ in range(rnd.randint(1, 3))]
        if rnd.random() < 0.5:
            check(blocks[0])
        else:
            check(header + b"".join(struct.pack(">i", len(b)) + b for b in blocks))
    for odd in (b"", b"\0", header[:12], header, header + b"\0\0\0\1", header + b"\0\0\0\0",
                header + struct.pack(">i", -1) + b"x", b"\x80\x80\x80\x80\x80\x01"):
        check(odd)
    verdicts.done()


def snappy_batch(records, base_offset=0, framing=xerial):
    return compress_as(kp_batch(records, base_offset=base_offset), SNAPPY, framing)


SNAPPY_FRAMINGS = {"xerial-32k": xerial, "xerial-1k": lambda d: xerial(d, 1024), "raw": raw}


@pytest.mark.parametrize("framing", SNAPPY_FRAMINGS.values(), ids=SNAPPY_FRAMINGS.keys())
def test_snappy_records_cut_by_blocks_and_pieces_come_out_whole(framing):
    assert_pieced_batch(lambda records: snappy_batch(records, base_offset=1000, framing=framing))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_snappy_random_batches_agree(data):
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    records = records_of(rnd, data.draw(st.integers(0, 80)),
                         value_sizes=(0, 1, 50, 5000, 40_000))
    batch = snappy_batch(records, framing=data.draw(st.sampled_from(list(SNAPPY_FRAMINGS.values()))))
    same(batch, max_batch_bytes=data.draw(st.sampled_from([1 << 30, 60_000, 1])),
         start_offset=data.draw(st.sampled_from([None, 3])),
         include_headers=data.draw(st.booleans()))


def test_valid_snappy_never_goes_through_cramjam(monkeypatch):
    for framing in (xerial, raw):
        batch = snappy_batch(records_of(random.Random(3), 300), framing=framing)

        def refuse(*a, **kw):
            raise AssertionError("cramjam used for snappy records the native reader reads")

        monkeypatch.setattr(codecs, "decompress", refuse)
        assert len(outcome(batch, "native")[1][0]) == 300
        monkeypatch.undo()


def test_snappy_the_reader_refuses_goes_through_cramjam(monkeypatch):
    """An empty raw block inside xerial framing: cramjam reads it (no bytes), the reader leaves
    it to cramjam, and the records go on from where the reader stopped."""
    records = records_of(random.Random(5), 200)
    plain = kp_batch(records)
    body = xerial(plain[61:], 4096)
    empty = b"\0"   # a raw block declaring 0 bytes
    with_empty = body + struct.pack(">i", len(empty)) + empty
    assert own(with_empty) is None and reference(with_empty) == plain[61:]
    calls = []
    real = codecs.decompress
    monkeypatch.setattr(codecs, "decompress", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    got = same(restamp(plain, attributes=SNAPPY, records=with_empty))
    assert calls and len(got[1][0]) == 200


def test_snappy_errors_keep_their_order():
    records = [(i, 1, b"k", text(random.Random(i), 20_000), []) for i in range(60)]
    plain = kp_batch(records)
    late = next(p for p in record_starts(plain) if p > 3 * PIECE)
    bad = corrupt_record(plain[61:], late)
    got = same(restamp(plain, attributes=SNAPPY, records=xerial(bad)))
    assert got[0] == "error" and "invalid value length -54" in got[2], got
    where = int(re.search(r"at byte (\d+) of the decompressed records", got[2]).group(1))
    assert late < where < late + 10
    # a record error early, a corrupt block late: the codec's error wins
    framed = bytearray(xerial(corrupt_record(plain[61:], 0)))
    framed[-50:-40] = b"\xff" * 10
    got = same(restamp(plain, attributes=SNAPPY, records=bytes(framed)))
    assert got[0] == "error" and "cannot decompress snappy" in got[2], got
    stale = bytearray(restamp(plain, attributes=SNAPPY, records=bytes(framed)))
    stale[100] ^= 1
    assert "CRC-32C mismatch" in same(bytes(stale))[2]
    # over the limit, framed or raw: the limit error, as the pure decoder gives it
    for framing in (xerial, raw):
        batch = snappy_batch(records, framing=framing)
        with pytest.raises(DecompressionLimitError):
            decode_batches(batch, max_decompressed_bytes=500_000)
        same(batch, max_decompressed_bytes=500_000)
        size = len(plain) - 61
        assert same(batch, max_decompressed_bytes=size)[0] == "ok"
