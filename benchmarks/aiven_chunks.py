"""A chunked, zstd-compressed Aiven segment read through a fetcher, with nothing else in the way.

    python -m benchmarks.aiven_chunks                  # 64 MiB segment, 4 MiB chunks, best of 5
    python -m benchmarks.aiven_chunks --mib 16 --repeat 3

The segment is backfill-shaped record data (benchmarks.backfill's value generator: JSON-like
values from a 1,000-word vocabulary), cut into ``--chunk-mib`` chunks, each its own zstd frame,
as Aiven's plugin writes it with ``compression.enabled=true``; it sits in a ``file://`` store so
the figure is the reader's CPU (GET, chunk split, decompression, reassembly), not a network's.
The whole segment is read ``--repeat`` times through ``fetch_log_segment`` (parts fetched
concurrently, as a task does) and once more part by part in one thread (``iter_log_segment``
with concurrency 1: the single-core cost).  Prints one JSON line; with ``--python`` the same
script runs under another interpreter (another checkout's venv) for a before/after pair in one
session.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20


def segment_bytes(size: int) -> bytes:
    """``size`` bytes of v2-batch-like payload: what a backfill's segment compresses like."""
    from benchmarks.backfill import _value, _words
    rng = random.Random(7)
    words = _words(rng)
    out = bytearray()
    i = 0
    while len(out) < size:
        out += rng.randbytes(16) + _value(rng, words, i)
        i += 1
    return bytes(out[:size])


def run(mib: int, chunk_mib: int, repeat: int) -> dict:
    from kafka_tiered_source.storage import aiven, create_fetcher
    from kafka_tiered_source.storage.segment import RemoteSegment
    from kafka_tiered_source.testing import aiven_writer
    data = segment_bytes(mib * MIB)
    root = tempfile.mkdtemp(prefix="kts-aiven-chunks-")
    try:
        seg = RemoteSegment("orders", "MWJ6FHTfRYy67jzwZdeqSQ", 0, "tqimKeZwStOEOwRzT3L5oQ", 0, 999_999)
        log_obj, ci = aiven_writer.transform_chunks(data, chunk_mib * MIB, True)
        blob, si = aiven_writer.build_indexes(b"", b"", b"", b"0\n0\n", None)
        for suffix, body in (("log", log_obj), ("indexes", blob),
                             ("rsm-manifest", aiven.SegmentManifest(ci, si, True).to_json())):
            path = os.path.join(root, aiven.segment_object_key(seg, suffix, ""))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(body)
        opts = {"remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{root}"}
        fetcher = create_fetcher(opts)
        assert bytes(fetcher.fetch_log_segment(seg, 0, None)) == data   # warm: manifest cached
        walls = []
        for _ in range(repeat):
            t = time.perf_counter()
            got = fetcher.fetch_log_segment(seg, 0, None)
            walls.append(time.perf_counter() - t)
            assert len(got) == len(data)
        fetcher.close()
        one = create_fetcher({**opts, "fetch.remote.concurrency": "1"})
        one.fetch_log_segment(seg, 0, 1)
        t0, c0 = time.perf_counter(), time.process_time()
        n = sum(len(p) for p in one.iter_log_segment(seg, 0, None))
        single_wall, single_cpu = time.perf_counter() - t0, time.process_time() - c0
        one.close()
        assert n == len(data)
        return {"segment_mib": mib, "chunk_mib": chunk_mib, "object_mib": round(len(log_obj) / MIB, 2),
                "best_s": round(min(walls), 4), "mb_s": round(len(data) / min(walls) / 1e6, 1),
                "single_thread_s": round(single_wall, 4), "single_thread_cpu_s": round(single_cpu, 4),
                "single_thread_mb_s": round(len(data) / single_wall / 1e6, 1)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--chunk-mib", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--python", help="run under this interpreter instead: another checkout's .venv/bin/python")
    args = ap.parse_args(argv)
    if args.python:
        # that checkout (the venv's parent) is the package and the benchmarks imported; this
        # file runs by path, so its own checkout is not on the path
        other = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(args.python))))
        cmd = [args.python, os.path.abspath(__file__), "--mib", str(args.mib), "--chunk-mib",
               str(args.chunk_mib), "--repeat", str(args.repeat)]
        return subprocess.run(cmd, cwd=other, env={**os.environ, "PYTHONPATH": other}).returncode
    print(json.dumps(run(args.mib, args.chunk_mib, args.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
