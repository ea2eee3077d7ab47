"""Batches built by kafka-python's record builder (a second, independent implementation of the
format) decode to exactly what kafka-python's own reader sees — for every codec — and the
format corners the fixtures do not reach: raw snappy, zstd frames without a content size,
LogAppendTime, control batches, transactions, decompression bombs."""
import gzip
import struct

import crc32c
import cramjam
import lz4.frame
import pyarrow as pa
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafka_tiered_source.errors import CorruptRecordError, DecompressionLimitError
from kafka_tiered_source.records import ReadCommittedFilter, decode, decode_batches

pytestmark = pytest.mark.decoder

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)


def kp_batch(records, *, codec=NONE, base_offset=0, transactional=False, producer_id=-1,
             producer_epoch=-1):
    """One v2 batch from kafka-python's builder.  records: (offset delta, ts, key, value,
    headers)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=0 if producer_id >= 0 else -1,
                                  batch_size=1 << 30)
    for off, ts, key, value, headers in records:
        b.append(off, timestamp=ts, key=key, value=value, headers=headers)
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def restamp(batch, *, attributes=None, records=None, max_timestamp=None, producer_id=None):
    """Rewrite fields of a batch and fix its length and CRC, as a producer would have written
    it."""
    head = bytearray(batch[:61])
    body = batch[61:] if records is None else records
    if attributes is not None:
        struct.pack_into(">h", head, 21, attributes)
    if max_timestamp is not None:
        struct.pack_into(">q", head, 35, max_timestamp)
    if producer_id is not None:
        struct.pack_into(">q", head, 43, producer_id)
    struct.pack_into(">i", head, 8, len(head) + len(body) - 12)
    out = bytearray(head + body)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def compress_as(batch, codec, fn):
    """Re-encode an uncompressed batch's records with ``fn`` and mark it ``codec``."""
    attrs = struct.unpack_from(">h", batch, 21)[0]
    return restamp(batch, attributes=(attrs & ~7) | codec, records=fn(batch[61:]))


def xerial(data, block=1000):
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, len(data), block):
        blk = bytes(cramjam.snappy.compress_raw(data[i:i + block]))
        out += struct.pack(">i", len(blk)) + blk
    return bytes(out)


ENCODERS = {
    "gzip": (GZIP, gzip.compress),
    "snappy-xerial": (SNAPPY, xerial),
    "snappy-raw": (SNAPPY, lambda d: bytes(cramjam.snappy.compress_raw(d))),
    "lz4": (LZ4, lz4.frame.compress),
    "zstd": (ZSTD, lambda d: zstandard.ZstdCompressor().compress(d)),
    "zstd-no-content-size": (ZSTD, lambda d: zstandard.ZstdCompressor(
        write_content_size=False).compress(d)),
    "zstd-streamed": (ZSTD, lambda d: _zstd_streamed(d)),
}


def _zstd_streamed(d):
    c = zstandard.ZstdCompressor().compressobj()
    return c.compress(d[: len(d) // 2]) + c.compress(d[len(d) // 2:]) + c.flush()


def kafka_python_view(batch):
    """What kafka-python's reader sees, in this decoder's row shape."""
    rows = []
    for r in DefaultRecordBatch(bytearray(batch)):
        rows.append({"offset": r.offset, "ts": r.timestamp, "tst": r.timestamp_type,
                     "key": r.key, "value": r.value,
                     "headers": [(k, v) for k, v in r.headers] or None})
    return rows


def our_view(table):
    d = table.to_pydict()
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    return [{"offset": d["offset"][i], "ts": micros[i] // 1000, "tst": d["timestampType"][i],
             "key": d["key"][i], "value": d["value"][i],
             "headers": None if d["headers"][i] is None
             else [(h["key"], h["value"]) for h in d["headers"][i]]}
            for i in range(table.num_rows)]


blobs = st.one_of(st.none(), st.binary(max_size=40),
                  st.binary(max_size=4).map(lambda b: b * 50))   # compressible too
headers = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=12))),
                   max_size=3)
records = st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 2**42), blobs, blobs, headers),
                   min_size=0, max_size=12)


def with_offsets(recs):
    out, off = [], 0
    for gap, ts, k, v, h in recs:
        out.append((off, ts, k, v, h))
        off += 1 + gap   # offset gaps, as compaction leaves them
    return out


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=records, base=st.integers(0, 2**40))
def test_kafka_python_batches(codec, recs, base):
    recs = with_offsets(recs) + [(10**6, 5, b"pad", b"z" * 300, [])]   # so that codecs compress
    batch = kp_batch(recs, codec=codec, base_offset=base)
    assert struct.unpack_from(">h", batch, 21)[0] & 7 == codec
    exp = kafka_python_view(batch)
    assert exp[0]["offset"] >= base
    assert our_view(decode(batch)) == exp


@pytest.mark.parametrize("name", sorted(ENCODERS))
@settings(max_examples=25, deadline=None)
@given(recs=records)
def test_every_codec_framing(name, recs):
    codec, fn = ENCODERS[name]
    plain = kp_batch(with_offsets(recs))
    batch = compress_as(plain, codec, fn)
    assert our_view(decode(batch)) == our_view(decode(plain)) == kafka_python_view(plain)


def test_log_append_time_gives_every_record_the_max_timestamp():
    plain = kp_batch([(0, 10, b"a", b"1", []), (1, 20, b"b", b"2", [])])
    batch = restamp(plain, attributes=0x08, max_timestamp=1_700_000_000_123)
    rows = our_view(decode(batch))
    assert [(r["ts"], r["tst"]) for r in rows] == [(1_700_000_000_123, 1)] * 2


def control_batch(base_offset, producer_id, ctype):
    key = struct.pack(">hh", 0, ctype)
    value = struct.pack(">hi", 0, 0)
    plain = kp_batch([(0, 1, key, value, [])], base_offset=base_offset, transactional=True,
                     producer_id=producer_id, producer_epoch=0)
    return restamp(plain, attributes=0x30)


def txn_batch(base_offset, producer_id, n=2):
    return kp_batch([(i, 1, b"k", b"%d" % (base_offset + i), []) for i in range(n)],
                    base_offset=base_offset, transactional=True, producer_id=producer_id,
                    producer_epoch=0)


def test_read_committed_drops_aborted_and_control_and_stops_at_lso():
    log = b"".join([
        txn_batch(0, 7),             # aborted
        txn_batch(2, 8),             # committed
        control_batch(4, 7, 0),      # ABORT pid 7
        control_batch(5, 8, 1),      # COMMIT pid 8
        txn_batch(6, 7),             # pid 7 again, a new transaction: committed
        control_batch(8, 7, 1),
        txn_batch(9, 9),             # still open: at the LSO
    ])
    uncommitted = decode(log).column("offset").to_pylist()
    assert uncommitted == [0, 1, 2, 3, 6, 7, 9, 10]   # control records never shown
    committed = decode(log, isolation_level="read_committed", aborted_transactions=[(7, 0)],
                       last_stable_offset=9).column("offset").to_pylist()
    assert committed == [2, 3, 6, 7]
    # The same with the filter carried across calls, batch by batch, and a start offset past
    # the ABORT marker: the marker must still clear pid 7.
    filt = ReadCommittedFilter([(7, 0)], 9)
    got, pos = [], 0
    while pos < len(log):
        (length,) = struct.unpack_from(">i", log, pos + 8)
        res = decode_batches(log[pos:pos + length + 12], filter=filt, start_offset=5)
        got += res.table().column("offset").to_pylist()
        pos += length + 12
        if res.done:
            break
    assert got == [6, 7]


def test_control_batch_with_short_key_is_corrupt():
    plain = kp_batch([(0, 1, b"\x00", None, [])], transactional=True, producer_id=3,
                     producer_epoch=0)
    batch = restamp(plain, attributes=0x30)
    assert decode(batch).num_rows == 0   # read_uncommitted never looks inside
    with pytest.raises(CorruptRecordError) as ei:
        decode(batch, isolation_level="read_committed")
    assert ei.value.base_offset == 0


def _zeros_stream(compressobj, total, chunk=1 << 20):
    zero = bytes(chunk)
    parts = [compressobj.compress(zero) for _ in range(total // chunk)]
    return b"".join(parts) + compressobj.flush()


@pytest.mark.parametrize("name", ["gzip", "lz4", "zstd", "zstd-no-content-size", "snappy-xerial",
                                  "snappy-raw"])
def test_decompression_bomb_hits_the_cap(name):
    codec, fn = ENCODERS[name]
    big = kp_batch([(0, 1, None, bytes(3 << 20), [])])   # 3 MiB of zeros
    batch = compress_as(big, codec, fn)
    assert len(batch) < 400_000
    with pytest.raises(DecompressionLimitError) as ei:
        decode(batch, max_decompressed_bytes=1 << 20)
    assert ei.value.position == 0 and ei.value.base_offset == 0
    assert decode(batch, max_decompressed_bytes=4 << 20).num_rows == 1


def _record_prefix(value_len):
    """The start of a record whose value is ``value_len`` bytes (the zeros that follow)."""
    from test_records_corrupt import zz

    body_len = 1 + 1 + 1 + 1 + len(zz(value_len)) + value_len + 1
    return zz(body_len) + b"\x00" + zz(0) + zz(0) + zz(-1) + zz(value_len)


@pytest.mark.parametrize("codec", [GZIP, ZSTD, LZ4])
def test_bomb_behind_a_valid_record_header_stops_at_the_cap(codec):
    # ~100 MiB of zeros behind a record header that announces them as one value: the decoder
    # must stop at the cap instead of collecting it all.
    size = 100 << 20
    comp = {GZIP: lambda: __import__("zlib").compressobj(9, 8, 31),
            ZSTD: lambda: zstandard.ZstdCompressor().compressobj(),
            LZ4: lambda: lz4.frame.LZ4FrameCompressor()}[codec]()
    head = comp.begin() if codec == LZ4 else b""
    records = head + comp.compress(_record_prefix(size)) + _zeros_stream(comp, size)
    batch = restamp(kp_batch([(0, 1, None, b"", [])]), attributes=codec, records=records)
    assert len(batch) < 1 << 20
    with pytest.raises(DecompressionLimitError) as ei:
        decode(batch, max_decompressed_bytes=32 << 20)
    assert ei.value.position == 0 and ei.value.base_offset == 0


def test_zeros_bomb_under_the_default_cap():
    # 300 MiB of zeros in a few KB, no content size: rejected (as a corrupt record or at the
    # 256 MiB cap) without being decompressed whole.
    for codec, comp in ((ZSTD, zstandard.ZstdCompressor().compressobj()),
                        (GZIP, __import__("zlib").compressobj(9, 8, 31))):
        records = _zeros_stream(comp, 300 << 20)
        batch = restamp(kp_batch([(0, 1, None, b"", [])]), attributes=codec, records=records)
        with pytest.raises(CorruptRecordError):
            decode(batch)


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_truncated_or_garbled_compressed_stream_is_corrupt(name):
    codec, fn = ENCODERS[name]
    plain = kp_batch([(i, 1, b"k", b"value-%d" % i * 20, [("h", b"v")]) for i in range(50)])
    comp = fn(plain[61:])
    for bad in (comp[: len(comp) // 2], comp[:-3], b"\x00" * len(comp), comp + b"junk"):
        batch = restamp(plain, attributes=codec, records=bad)
        with pytest.raises(CorruptRecordError) as ei:
            decode(batch)
        assert ei.value.base_offset == 0


def test_unknown_codec_is_corrupt():
    batch = restamp(kp_batch([(0, 1, b"k", b"v", [])]), attributes=5)
    with pytest.raises(CorruptRecordError, match="codec 5"):
        decode(batch)

