"""Bad bytes: every failure is a CorruptRecordError naming a position and a batch (or a correct
leftover), never another exception, a crash, a hang or wrong rows — and the native and the
pure-Python backends agree on every input, good or bad."""
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_tiered_source import _native  # noqa: F401  (the agreement tests need both backends)
from kafka_tiered_source.errors import CorruptRecordError
from kafka_tiered_source.records import decode, decode_batches
from test_records_codecs import ENCODERS, compress_as, kp_batch, restamp

pytestmark = pytest.mark.decoder


def outcome(data, backend, **kw):
    """A comparable summary of what one backend made of ``data``."""
    try:
        res = decode_batches(data, backend=backend, **kw)
    except CorruptRecordError as exc:
        return ("corrupt", type(exc).__name__, exc.position, exc.base_offset)
    except Exception as exc:   # anything else is a bug: fail with it
        raise AssertionError(f"{backend} raised {type(exc).__name__}: {exc}") from exc
    t = res.table()
    # compare timestamps as integers: valid Kafka timestamps can lie outside Python's datetime
    t = t.set_column(5, "timestamp", t.column("timestamp").cast(pa.int64()))
    return ("ok", t.to_pylist(), res.consumed, res.leftover, res.next_offset)


def both(data, **kw):
    n = outcome(data, "native", **kw)
    p = outcome(data, "python", **kw)
    assert n == p
    return n


def zz(n, bits=64):
    u = (n << 1) ^ (n >> (bits - 1))
    u &= (1 << bits) - 1
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def raw_record(*, off=0, ts=0, key=b"k", value=b"v", headers=(), length=None, klen=None,
               vlen=None, hcount=None, tail=b""):
    body = b"\x00" + zz(ts) + zz(off)
    body += zz(len(key) if klen is None else klen) + key
    body += zz(len(value) if vlen is None else vlen) + value
    body += zz(len(headers) if hcount is None else hcount)
    for hk, hv in headers:
        body += zz(len(hk)) + hk + (zz(-1) if hv is None else zz(len(hv)) + hv)
    body += tail
    return zz(len(body) if length is None else length) + body


def batch_of(raw_records, count, attributes=0):
    plain = kp_batch([(0, 0, b"k", b"v", [])])
    head = bytearray(plain[:61])
    struct.pack_into(">i", head, 57, count)
    return restamp(bytes(head), attributes=attributes, records=raw_records)


GOOD = kp_batch([(i, 1000 + i, b"key-%d" % i, b"value-%d" % i, [("h", b"x"), ("n", None)])
                 for i in range(4)], base_offset=100)
GOOD2 = kp_batch([(0, 7, None, b"second", [])], base_offset=104)


def test_truncation_at_every_position_is_leftover():
    log = GOOD + GOOD2
    full = both(log)
    assert full[0] == "ok" and [r["offset"] for r in full[1]] == [100, 101, 102, 103, 104]
    for cut in range(len(log) + 1):
        res = both(log[:cut])
        assert res[0] == "ok", (cut, res)
        _, rows, consumed, leftover, _ = res
        complete = len(GOOD) if len(GOOD) <= cut < len(log) else (len(log) if cut == len(log) else 0)
        assert consumed == complete and leftover == log[complete:cut]
        assert [r["offset"] for r in rows] == [r["offset"] for r in full[1]][:4 if complete == len(GOOD) else (5 if complete else 0)]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy-xerial", "lz4", "zstd"])
@pytest.mark.parametrize("verify_crc", [True, False])
def test_every_flipped_bit(codec, verify_crc):
    batch = GOOD if codec == "none" else compress_as(GOOD, *ENCODERS[codec])
    expected_rows = both(batch)[1]
    for byte in range(len(batch)):
        for bit in range(8):
            bad = bytearray(batch)
            bad[byte] ^= 1 << bit
            res = both(bytes(bad), verify_crc=verify_crc)
            if verify_crc and byte >= 21:
                # covered by the CRC: never rows from a damaged batch
                assert res[0] == "corrupt", (byte, bit, res)
            if res[0] == "corrupt":
                assert res[1] in ("CorruptRecordError", "DecompressionLimitError")
                assert res[2] is not None and 0 <= res[2] <= len(batch)
            elif byte >= 17 and byte not in range(21, 23) and codec == "none" and verify_crc:
                assert res[1] == expected_rows


def test_magic_other_than_2_is_corrupt():
    bad = bytearray(GOOD)
    bad[16] = 1
    assert both(bytes(bad)) == ("corrupt", "CorruptRecordError", 16, 100)
    # also when the batch is cut off: garbage is not mistaken for a partial batch
    for cut in (17, 40, 100):
        assert both(bytes(bad[:cut])) == ("corrupt", "CorruptRecordError", 16, 100)


def test_batch_length_absurd():
    bad = bytearray(GOOD)
    struct.pack_into(">i", bad, 8, 2**31 - 1)
    res = both(bytes(bad))
    assert res[0] == "ok" and res[2] == 0 and res[3] == bytes(bad)   # leftover: may be a range
    for length in (-1, 0, 48):
        struct.pack_into(">i", bad, 8, length)
        assert both(bytes(bad))[:3] == ("corrupt", "CorruptRecordError", 8)


@pytest.mark.parametrize("records,count,what", [
    (raw_record(), 2, "truncated"),                                 # fewer records than count
    (raw_record() + raw_record(), 1, "left after"),                 # more bytes than count
    (raw_record(), -1, "record count"),
    (raw_record(length=2**31 - 1), 1, "truncated record"),
    (raw_record(length=-5), 1, "invalid record length"),
    (raw_record(klen=2**31 - 1), 1, "truncated record key"),
    (raw_record(klen=-2), 1, "invalid key length"),
    (raw_record(vlen=10**9), 1, "truncated record value"),
    (raw_record(vlen=-7), 1, "invalid value length"),
    (raw_record(hcount=2**31 - 1), 1, "header count"),
    (raw_record(hcount=-1), 1, "invalid header count"),
    (raw_record(headers=[(b"\xff\xfe", b"v")]), 1, "UTF-8"),
    (raw_record(headers=[(b"\xed\xa0\x80", b"v")]), 1, "UTF-8"),   # a surrogate
    (raw_record(tail=b"\x00"), 1, "does not match"),
    (b"\xff" * 6 + b"\x01" + raw_record(), 1, "longer than 5 bytes"),
    (raw_record(ts=2**62), 1, "out of range"),
    (b"", 1, "truncated"),
])
def test_bad_records(records, count, what):
    batch = batch_of(records, count)
    res = both(batch)
    assert res[0] == "corrupt" and res[3] == 0, res
    with pytest.raises(CorruptRecordError, match=what) as ei:
        decode(batch)
    assert ei.value.position == res[2] and 0 <= ei.value.position <= len(batch)


def test_error_positions_are_absolute_within_the_input():
    bad = batch_of(raw_record(klen=-2), 1)
    res = both(GOOD + bad, position=1000)
    assert res[0] == "corrupt" and res[3] == 0
    assert 1000 + len(GOOD) + 61 <= res[2] < 1000 + len(GOOD) + len(bad)


def test_record_errors_inside_compressed_batches_name_the_batch():
    bad = compress_as(batch_of(raw_record(klen=-2), 1), *ENCODERS["zstd"])
    with pytest.raises(CorruptRecordError, match="decompressed records") as ei:
        decode(GOOD + bad)
    assert ei.value.position == len(GOOD)


def test_crc_check_can_be_switched_off():
    bad = bytearray(GOOD)
    i = GOOD.index(b"value-3")
    bad[i] = ord("V")
    assert both(bytes(bad))[:3] == ("corrupt", "CorruptRecordError", 17)
    res = both(bytes(bad), verify_crc=False)
    assert res[0] == "ok" and res[1][3]["value"] == b"Value-3"


def test_empty_input_and_empty_batches():
    assert both(b"")[1:] == ([], 0, b"", None)
    empty = batch_of(b"", 0)
    res = both(empty + GOOD)
    assert [r["offset"] for r in res[1]] == [100, 101, 102, 103] and res[2] == len(empty + GOOD)


# ---- a CI-sized fuzz pass: mutated logs, both backends, both CRC modes ----

LOGS = [GOOD + GOOD2, compress_as(GOOD, *ENCODERS["lz4"]) + GOOD2,
        compress_as(GOOD, *ENCODERS["snappy-raw"]), compress_as(GOOD, *ENCODERS["gzip"]),
        compress_as(GOOD, *ENCODERS["zstd-no-content-size"]) + GOOD2]


@st.composite
def mutated(draw):
    data = bytearray(draw(st.sampled_from(LOGS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        i = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[i] = draw(st.sampled_from([0, 0x7F, 0x80, 0xFF, draw(st.integers(0, 255))]))
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[i:i + draw(st.integers(1, 8))]
        else:
            del data[i:]
    return bytes(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated(), verify_crc=st.booleans(), lo=st.sampled_from([None, 101]))
def test_fuzz_backends_agree_and_fail_cleanly(data, verify_crc, lo):
    both(data, verify_crc=verify_crc, start_offset=lo, max_decompressed_bytes=1 << 16)


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=300))
def test_fuzz_random_bytes(data):
    both(data, verify_crc=False)
