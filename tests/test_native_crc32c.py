"""The C extension's CRC-32C against the reference package (``crc32c``, Castagnoli as Kafka's
batches use it), over the lengths and alignments where its paths meet: the byte-wise head up to
8-byte alignment, the three interleaved 1 KiB streams of each 3 KiB block (whose successor it
prefetches, past the buffer's end for the last one), the 8-byte tail, the last bytes.  Both
implementations the module can pick at load: the SSE4.2 instruction and the slicing-by-8
tables (``KAFKA_TIERED_CRC32C_TABLE``)."""
from __future__ import annotations

import os
import random
import subprocess
import sys

import crc32c
import pytest

from conftest import ROOT
from kafka_tiered_source import _native

LENGTHS = [0, 1, 7, 8, 9, 1023, 3071, 3072, 3073, 6143, 6144, 6145, 9216 + 5, (1 << 20) + 13]
STARTS = [0, 1, 3, 7]


def _data() -> bytes:
    return random.Random(36).randbytes((1 << 20) + 64)


def test_every_length_and_alignment_matches_the_reference():
    data = _data()
    for start in STARTS:
        for n in LENGTHS:
            want = crc32c.crc32c(data[start:start + n])
            assert _native.crc32c(data, start, start + n) == want, (start, n)


def test_a_buffer_that_ends_at_a_page_edge():
    # the last block's prefetch points past the buffer: a prefetch never faults, so a buffer
    # whose end is the end of its mapping must still be summed (an mmap of exactly 3 pages)
    import mmap
    m = mmap.mmap(-1, 3 * mmap.PAGESIZE)
    payload = random.Random(7).randbytes(len(m))
    m[:] = payload
    try:
        assert _native.crc32c(m) == crc32c.crc32c(payload)
        assert _native.crc32c(m, 5, len(m)) == crc32c.crc32c(payload[5:])
    finally:
        m.close()


@pytest.mark.skipif(_native.crc32c_impl() != "sse4.2",
                    reason="this CPU has no SSE4.2: the tables are the only implementation")
def test_the_tables_agree_with_the_instruction():
    code = ("import random, crc32c\n"
            "from kafka_tiered_source import _native\n"
            "assert _native.crc32c_impl() == 'table', _native.crc32c_impl()\n"
            f"d = random.Random(36).randbytes({(1 << 20) + 64})\n"
            f"for s in {STARTS}:\n"
            f"    for n in {LENGTHS}:\n"
            "        assert _native.crc32c(d, s, s + n) == crc32c.crc32c(d[s:s + n]), (s, n)\n")
    env = dict(os.environ, KAFKA_TIERED_CRC32C_TABLE="1")
    env.pop("KAFKA_TIERED_NO_EXTENSIONS", None)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
