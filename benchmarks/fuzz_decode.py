"""Coverage-guided fuzzing of both decoder backends with atheris (libFuzzer for Python).

Every input is decoded by the native and the pure-Python backend; the run fails on any
exception other than CorruptRecordError, on a disagreement between the two (rows, leftover,
error position), or — under the sanitizer build — on any memory error in native/*.c.

Run it against an AddressSanitizer build of the extension, built into a copy of the package so
the normal in-place build that the tests use is left alone.  For coverage-guided fuzzing the ASan
runtime must be the one atheris ships with libFuzzer, hence KAFKA_TIERED_SANITIZE=atheris (ASan
instrumentation, runtime not linked):

    rm -rf /tmp/kt-asan && mkdir -p /tmp/kt-asan && cp -r kafka_tiered_source /tmp/kt-asan/
    rm -f /tmp/kt-asan/kafka_tiered_source/_native*.so
    KAFKA_TIERED_SANITIZE=atheris python setup.py build_ext --build-lib /tmp/kt-asan \
        --build-temp /tmp/kt-asan/tmp --force
    cd /tmp/kt-asan && PYTHONPATH=/tmp/kt-asan ASAN_OPTIONS=detect_leaks=0,allocator_may_return_null=1 \
        LD_PRELOAD=$(python -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so \
        python /work/main/benchmarks/fuzz_decode.py -max_total_time=600 -rss_limit_mb=4096 corpus/

The KAFKA_TIERED_SANITIZE=1 build (gcc ASan + UBSan, runtime linked) also runs it, with
``LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)``, but then
libFuzzer gets no coverage feedback and only mutates the seeds blindly.  With the normal build
it runs without sanitizers.  The seed corpus is
written to the corpus directory on first use: batches of every codec from the Kafka 3.9.1
fixtures plus synthetic transactional/control batches.  Input layout: byte 0 selects options
(CRC check, start offset, headers, read_committed), the rest is the log.
"""
from __future__ import annotations

import os
import struct
import sys

import atheris

with atheris.instrument_imports():
    from kafka_tiered_source.errors import CorruptRecordError
    from kafka_tiered_source.records import ReadCommittedFilter, decode_batches

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "kafka-3.9.1", "segments")


def outcome(data, backend, flags):
    filt = ReadCommittedFilter([(1001, 0), (1002, 50)], 10**6) if flags & 8 else None
    try:
        res = decode_batches(data, backend=backend, verify_crc=bool(flags & 1),
                             start_offset=5 if flags & 2 else None,
                             include_headers=not flags & 4, filter=filt,
                             max_batch_bytes=4096 if flags & 16 else 1 << 30,
                             max_decompressed_bytes=1 << 20)
    except CorruptRecordError as exc:
        return ("corrupt", type(exc).__name__, exc.position, exc.base_offset)
    t = res.table(not flags & 4)
    t = t.set_column(5, "timestamp", t.column("timestamp").cast("int64"))
    return ("ok", t.to_pylist(), res.consumed, res.leftover, res.next_offset, res.done)


def TestOneInput(buf: bytes):
    if not buf:
        return
    flags, data = buf[0], buf[1:]
    native = outcome(data, "native", flags)
    python = outcome(data, "python", flags)
    if native != python:
        raise AssertionError(f"backends disagree:\n native {native!r}\n python {python!r}")


def seed_corpus(path):
    os.makedirs(path, exist_ok=True)
    if os.listdir(path):
        return
    n = 0
    for part in sorted(os.listdir(FIXTURES)):
        log = sorted(f for f in os.listdir(os.path.join(FIXTURES, part)) if f.endswith(".log"))
        data = open(os.path.join(FIXTURES, part, log[0]), "rb").read()
        pos = 0
        while pos + 12 <= len(data) and n < 60:
            (length,) = struct.unpack_from(">i", data, pos + 8)
            batch = data[pos:pos + 12 + length]
            if len(batch) <= 20_000:   # small inputs fuzz faster
                for flags in (1, 9):
                    with open(os.path.join(path, f"seed-{n}"), "wb") as f:
                        f.write(bytes([flags]) + batch)
                    n += 1
            pos += 12 + length


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    if args:
        seed_corpus(args[0])
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
