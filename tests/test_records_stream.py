"""The native decoder's zstd and snappy path: the records decompressed a piece (~256 KiB) at a
time into one window (``codecs.RecordStream``) and parsed while in cache
(``_native.Builder.append_piece``).

What must hold: the rows, the leftovers and the errors are exactly the pure-Python decoder's,
which decompresses the whole batch first and parses it after.  So a record cut by a piece's
end comes out whole, a record larger than the window grows it, a full Arrow batch starts
another mid-piece, and errors keep the precedence "decompress everything, then parse".
"""
import random
import struct

import cramjam
import pytest
import zstandard

from kafka_tiered_source.records import codecs, decode_batches
from test_records_codecs import SNAPPY, ZSTD, compress_as, kp_batch, restamp, xerial
from test_records_lz4 import outcome, same, text

pytestmark = [pytest.mark.decoder]

ENCODERS = {
    "zstd": (ZSTD, lambda d: zstandard.ZstdCompressor().compress(d)),
    "zstd-stream": (ZSTD, lambda d: (lambda c: c.compress(d) + c.flush())(
        zstandard.ZstdCompressor(write_content_size=False).compressobj())),
    "snappy-xerial": (SNAPPY, lambda d: xerial(d, 32 * 1024)),
    "snappy-raw": (SNAPPY, lambda d: bytes(cramjam.snappy.compress_raw(d))),
}


def records(n, *, value=100, seed=1, big_every=0, big=0):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        size = big if big_every and i % big_every == big_every - 1 else value + rnd.randint(-20, 20)
        headers = [("h", b"v%d" % i)] if i % 7 == 0 else []
        out.append((i, 1_700_000_000_000 + i, b"k%06d" % i, text(rnd, size), headers))
    return out


def batch(name, recs, base_offset=0):
    codec, fn = ENCODERS[name]
    return compress_as(kp_batch(recs, base_offset=base_offset), codec, fn)


@pytest.fixture(autouse=True)
def every_batch_piecewise(monkeypatch):
    """Small batches are decompressed whole (codecs.STREAM_MIN_BATCH); these tests hold the
    piecewise path to the reference whatever the batch size."""
    monkeypatch.setattr(codecs, "STREAM_MIN_BATCH", 0)


def test_small_batches_are_decompressed_whole_large_ones_piecewise(monkeypatch, streams):
    made = streams
    monkeypatch.setattr(codecs, "STREAM_MIN_BATCH", 256 * 1024)
    small = batch("zstd", records(50, value=500))
    assert len(small) < codecs.STREAM_MIN_BATCH
    assert same(small)[0] == "ok" and made == []
    large = batch("snappy-raw", records(300, value=2000))
    assert len(large) >= codecs.STREAM_MIN_BATCH
    assert same(large)[0] == "ok" and len(made) == 1


@pytest.fixture
def streams(monkeypatch):
    """Counts the batches that went through RecordStream (the native path must use it)."""
    made = []

    class Counting(codecs.RecordStream):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(codecs, "RecordStream", Counting)
    return made


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_many_pieces_give_the_reference_rows(name, streams):
    data = batch(name, records(600, value=2000))          # ~1.2 MB of records: several pieces
    got = same(data)
    assert got[0] == "ok" and sum(len(t) for t in got[1]) == 600
    assert len(streams) == 1 and streams[0].skew > 2 * codecs.PIECE   # it really went piecewise


@pytest.mark.parametrize("name", ["zstd", "snappy-xerial"])
def test_records_larger_than_a_piece_grow_the_window(name, streams):
    data = batch(name, records(20, value=50, big_every=9, big=700_000))
    got = same(data)
    assert got[0] == "ok" and sum(len(t) for t in got[1]) == 20
    assert len(streams[0].window) > codecs.PIECE


@pytest.mark.parametrize("name", ["zstd", "snappy-raw"])
def test_a_full_arrow_batch_starts_another_mid_piece(name):
    data = batch(name, records(400, value=1500))
    got = same(data, max_batch_bytes=100_000)
    assert got[0] == "ok" and len(got[1]) > 3


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_offset_bounds_and_several_batches(name):
    data = b"".join(batch(name, records(300, value=1200, seed=s), base_offset=300 * s) for s in range(3))
    got = same(data, start_offset=200, end_offset=780)
    assert got[0] == "ok" and sum(len(t) for t in got[1]) == 580


@pytest.mark.parametrize("name", sorted(ENCODERS))
@pytest.mark.parametrize("delta", [-1, +1])
def test_a_wrong_record_count_is_the_same_error(name, delta):
    data = bytearray(batch(name, records(400, value=1000)))
    struct.pack_into(">i", data, 57, 400 + delta)
    data = restamp(bytes(data))                            # a producer-valid CRC
    got = same(bytes(data))
    assert got[0] == "error" and "decompressed records" in got[2]


@pytest.mark.parametrize("name", ["zstd", "snappy-xerial"])
def test_a_bad_record_early_loses_to_a_bad_stream_later(name):
    """Decompressing first finds the broken stream before it parses the broken record."""
    raw = bytearray(kp_batch(records(400, value=1000))[61:])
    raw[1] = 0x7F                                          # record 0: a garbled attributes/length
    if name == "zstd":   # and a content checksum that does not match, found at the end
        codec, body = ZSTD, bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(bytes(raw)))
        body[-1] ^= 0xFF
    else:                # and the last xerial block cut short
        codec, body = SNAPPY, xerial(bytes(raw), 32 * 1024)[:-40]
    data = restamp(kp_batch(records(1)), attributes=codec, records=bytes(body))
    got = same(data)
    assert got[0] == "error" and got[2].startswith("cannot decompress")


@pytest.mark.parametrize("name", ["zstd", "snappy-xerial"])
def test_a_bad_record_in_a_later_piece_is_the_same_error(name):
    raw = bytearray(kp_batch(records(500, value=1500))[61:])
    at = len(raw) * 3 // 4
    raw[at:at + 8] = b"\xff" * 8                           # garbage inside the records
    codec, fn = ENCODERS[name]
    data = restamp(kp_batch(records(1)), attributes=codec, records=fn(bytes(raw)))
    got = same(data)
    assert got[0] == "error"


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_the_cap_counts_every_byte(name):
    data = batch(name, records(400, value=1000))
    got = same(data, max_decompressed_bytes=300_000)
    assert got[0] == "error" and got[1] == "DecompressionLimitError"


def test_a_snappy_framing_error_is_found_before_any_block():
    body = bytearray(xerial(kp_batch(records(400, value=1000))[61:], 32 * 1024))
    struct.pack_into(">i", body, len(body) - 200, 1 << 20)   # a late block header overruns
    data = restamp(kp_batch(records(1)), attributes=SNAPPY, records=bytes(body))
    assert outcome(data, "native") == outcome(data, "python")
