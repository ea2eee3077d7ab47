"""The native decoder's streamed codecs: a zstd batch pulled from python-zstandard a piece at a
time by the C record loop (``_native.Builder.append_stream``) and parsed while the piece is in
cache, instead of decompressed whole first.

What must hold, whatever the input: the rows, the leftovers and the errors are the ones the
pure-Python decoder gives on the whole decompressed batch.  So a record cut by a piece's end
must come out whole, an Arrow batch that fills up mid-batch goes on in the next, and errors keep
the precedence of "check the CRC, decompress everything, then parse".
"""
import random
import re
import struct

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_tiered_source.errors import DecompressionLimitError
from kafka_tiered_source.records import codecs, decode_batches
from test_records_codecs import ZSTD, compress_as, kp_batch, restamp
from test_records_lz4 import PIECE, corrupt_record, outcome, record_starts, records_of, same, text


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
    rnd = random.Random(7)
    records = records_of(rnd, 400) + [(400, 1, b"big", b"v" * (1 << 20), [])]
    assert len(kp_batch(records)) > 10 * PIECE
    batch = zstd_batch(records, base_offset=1000, framing=framing)
    got = same(batch)
    rows = [r for t in got[1] for r in t]
    assert len(rows) == len(records)
    assert [r["value"] for r in rows] == [r[3] for r in records]
    assert [r["offset"] for r in rows] == [1000 + r[0] for r in records]
    assert [r["headers"] for r in rows] == [[{"key": k, "value": v} for k, v in r[4]] or None
                                           for r in records]
    # bounds, no headers, and Arrow batches that fill up mid-batch (flush from C)
    same(batch, start_offset=1100, end_offset=1390, include_headers=False)
    small = same(batch, max_batch_bytes=200_000)
    assert len(small[1]) > 5
    two = same(batch + batch)   # the window is reused for the next batch
    assert sum(len(t) for t in two[1]) == 2 * len(records)


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


@pytest.mark.parametrize("case", ["trailing bytes", "count too high", "count too low"])
def test_records_and_count_disagree(case):
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
    got = same(compress_as(bytes(batch), ZSTD, java_like))
    assert got[0] == "error", got


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
