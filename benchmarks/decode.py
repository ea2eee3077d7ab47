"""Decode throughput: this project's native and pure-Python decoders against aiokafka's C
reader (bare iteration, and turned into a pyarrow table) and kafka-python, per codec, with the
codec alone as the ceiling for compressed input.

"codec only" is the codec library the pure-Python decoder uses, called as it calls it
(records/codecs.py).  The native decoder reads lz4 frames with its own block reader
(native/lz4.c), so for lz4 the reader alone is timed too, decoding into a buffer allocated
once ("own lz4 reader only"): the native decode is also shown as a share of that.

    python -m benchmarks.decode [--quick]

Material: one batch of 100,000 records (16-byte keys, ~100-byte values, one header on every
tenth record) per codec, plus a few-large-values batch (64 records of 1 MiB).  Each figure is
the best of several runs on one core; ratios are printed against the baselines of the same run.
"""
from __future__ import annotations

import argparse
import gzip
import os
import platform
import random
import struct
import sys
import time

import crc32c
import cramjam
import lz4.frame
import pyarrow as pa
import zstandard

from kafka_tiered_source import _native
from kafka_tiered_source.records import decode, decode_batches
from kafka_tiered_source.records.codecs import decompress

CODECS = {
    "none": (0, None),
    "gzip": (1, lambda d: gzip.compress(d, 6)),
    "snappy": (2, lambda d: _xerial(d)),
    # as Kafka's Java producer writes them: lz4 frames of independent 64 KiB blocks without a
    # content size, zstd from a stream (no content size in the frame header)
    "lz4": (3, lambda d: lz4.frame.compress(d, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                            block_linked=False, store_size=False)),
    "zstd": (4, lambda d: _zstd_stream(d)),
}


def _zstd_stream(data):
    c = zstandard.ZstdCompressor(level=3).compressobj()
    return c.compress(data) + c.flush()


def _xerial(data, block=32 * 1024):
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, len(data), block):
        blk = bytes(cramjam.snappy.compress_raw(data[i:i + block]))
        out += struct.pack(">i", len(blk)) + blk
    return bytes(out)


def _varint(n):
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def records_bytes(n, key_size, value_size, rnd):
    """The records section of a v2 batch, written directly (kafka-python would take seconds).
    Keys are random text; values are random words from a 1,000-word vocabulary, so they
    compress about as real payloads do (zstd ~3x, lz4 ~2x) — neither runs of one repeated
    string nor incompressible noise."""
    letters = b"abcdefghijklmnopqrstuvwxyz"
    words = [bytes(rnd.choice(letters) for _ in range(rnd.randint(2, 10))) for _ in range(1000)]
    table = bytes(letters[i % 26] for i in range(256))
    parts = []
    for i in range(n):
        k = rnd.randbytes(key_size).translate(table)
        want = value_size + rnd.randint(-8, 8) if value_size < 1000 else value_size
        v = bytearray()
        while len(v) < want:
            v += rnd.choice(words) + b" "
        v = bytes(v[:want])
        hdrs = _varint(1) + _varint(7) + b"trace-i" + _varint(8) + b"%08d" % i if i % 10 == 0 \
            else _varint(0)
        body = b"\x00" + _varint(i) + _varint(i) + _varint(len(k)) + k + _varint(len(v)) + v + hdrs
        parts.append(_varint(len(body)) + body)
    return b"".join(parts)


def make_batch(raw, count, codec, encode=None):
    """One batch of `count` records (`raw`), compressed as `codec` (or with `encode`)."""
    cid, fn = CODECS[codec]
    fn = encode or fn
    body = raw if fn is None else fn(raw)
    head = bytearray(61)
    struct.pack_into(">qiibIhiqqqhii", head, 0, 0, 49 + len(body), 0, 2, 0, cid, count - 1,
                     1_700_000_000_000, 1_700_000_000_000 + count, -1, -1, -1, count)
    data = bytearray(head + body)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def aiokafka_bare(batch):
    from aiokafka.record.default_records import DefaultRecordBatch

    def run():
        for r in DefaultRecordBatch(batch):
            _ = r.key, r.value, r.offset, r.timestamp, r.headers
    return run


def aiokafka_arrow(batch):
    from aiokafka.record.default_records import DefaultRecordBatch
    from kafka_tiered_source.records import kafka_schema

    schema = kafka_schema(True)

    def run():
        ks, vs, offs, tss, tts, hs = [], [], [], [], [], []
        for r in DefaultRecordBatch(batch):
            ks.append(r.key)
            vs.append(r.value)
            offs.append(r.offset)
            tss.append(r.timestamp * 1000)
            tts.append(r.timestamp_type)
            h = r.headers
            hs.append([{"key": k, "value": v} for k, v in h] if h else None)
        n = len(offs)
        pa.Table.from_arrays([
            pa.array(ks, pa.binary()), pa.array(vs, pa.binary()),
            pa.repeat(pa.scalar("t"), n), pa.repeat(pa.scalar(0, pa.int32()), n),
            pa.array(offs, pa.int64()), pa.array(tss, pa.int64()).cast(schema.field(5).type),
            pa.array(tts, pa.int32()), pa.array(hs, schema.field(7).type)], schema=schema)
    return run


def kafka_python_bare(batch):
    from kafka.record.default_records import DefaultRecordBatch

    def run():
        for r in DefaultRecordBatch(bytearray(batch)):
            _ = r.key, r.value, r.offset, r.timestamp, r.headers
    return run


def machine():
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"nproc {os.cpu_count()}, CPU {model}, Python {platform.python_version()}, "
            f"pyarrow {pa.__version__}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer records and repeats")
    args = ap.parse_args(argv)
    n = 20_000 if args.quick else 100_000
    rep = 2 if args.quick else 5
    rnd = random.Random(42)
    raw = records_bytes(n, 16, 100, rnd)
    print(f"# Decode benchmark — {machine()}")
    print(f"# {n} records/batch, 16 B keys, ~100 B values, {len(raw) / 1e6:.1f} MB of records; "
          f"best of {rep}; rec/s and MB/s of uncompressed record bytes")
    print(f"# load average before: {open('/proc/loadavg').read().split()[0]}")
    print(f"{'codec':8} {'decoder':22} {'Mrec/s':>8} {'MB/s':>8}  ratio")
    results = {}
    for codec in CODECS:
        batch = make_batch(raw, n, codec)
        assert decode(batch).num_rows == n
        print(f"{codec:8} batch {len(batch) / 1e6:.1f} MB ({len(raw) / len(batch):.1f}x)")
        contenders = []
        if codec != "none":
            cid, body = CODECS[codec][0], batch[61:]
            contenders.append(("codec only", lambda cid=cid, body=body: decompress(
                cid, body, 1 << 30, position=0, base_offset=0)))
        if codec == "lz4":
            out = bytearray(2 * len(raw) + (1 << 20))
            contenders.append(("own lz4 reader only",
                               lambda body=body, out=out: _native.lz4_decompress(body, 1 << 30, out)))
        contenders += [("aiokafka C (bare)", aiokafka_bare(batch)),
                       ("aiokafka C -> arrow", aiokafka_arrow(batch)),
                       ("kafka-tiered native", lambda batch=batch: decode_batches(batch, backend="native"))]
        # Round-robin, best of `rep` each: on a shared machine the load moves, and interleaving
        # exposes every decoder to the same conditions.
        rows = {name: float("inf") for name, _ in contenders}
        for _ in range(rep):
            for name, fn in contenders:
                rows[name] = min(rows[name], best(fn, 1))
        # the slow ones once each
        if codec in ("none", "zstd"):
            rows["kafka-python (bare)"] = best(kafka_python_bare(batch), 1)
        rows["kafka-tiered python"] = best(lambda batch=batch: decode_batches(batch, backend="python"), 1)
        order = ["codec only", "own lz4 reader only", "aiokafka C (bare)", "aiokafka C -> arrow", "kafka-python (bare)",
                 "kafka-tiered python", "kafka-tiered native"]
        for name in order:
            if name not in rows:
                continue
            sec = rows[name]
            ratio = ""
            if name == "kafka-tiered native":
                ratio = " ".join(f"{rows[b] / sec:5.2f}x vs {b}" for b in
                                 ("aiokafka C -> arrow", "aiokafka C (bare)", "codec only")
                                 if b in rows)
            print(f"{codec:8} {name:22} {n / sec / 1e6:8.2f} {len(raw) / sec / 1e6:8.0f}  {ratio}")
        if "codec only" in rows:
            print(f"{codec:8} {'':22} native runs at "
                  f"{rows['codec only'] / rows['kafka-tiered native'] * 100:.0f}% of codec-only speed")
        if "own lz4 reader only" in rows:
            print(f"{codec:8} {'':22} and at "
                  f"{rows['own lz4 reader only'] / rows['kafka-tiered native'] * 100:.0f}% of "
                  f"its own lz4 reader's speed")
        results[codec] = rows

    # a few large values
    big = records_bytes(64, 16, 1 << 20, rnd)
    print("# few large values: 64 records of 1 MiB")
    for codec in ("none", "zstd"):
        batch = make_batch(big, 64, codec)
        tn = best(lambda batch=batch: decode_batches(batch, backend="native"), rep)
        ta = best(aiokafka_arrow(batch), rep)
        print(f"{codec:8} {'64 x 1 MiB values':22} native {len(big) / tn / 1e6:6.0f} MB/s, "
              f"aiokafka->arrow {len(big) / ta / 1e6:6.0f} MB/s  {ta / tn:5.2f}x")
    return results


if __name__ == "__main__":
    sys.exit(0 if main() is not None else 1)
