"""``kafka_tiered_source.scan()``: threads or processes?  Does the native decoder release the GIL?

    python -m benchmarks.scan [--records N] [--repeat R]

Data: ``benchmarks.backfill``'s topic shape (16-byte keys, 100-1000-byte JSON-like values,
zstd on even partitions, lz4 on odd ones, 500-record producer batches), ``--records`` records
over 4 partitions, tiered to a ``file://`` store: no object-store latency, so the read is bound
by decoding, where threads and processes differ.  Each way reads every record, taking turns,
best of ``--repeat``:

* ``scan, 1 worker`` and ``scan, 2 workers``: ``scan()`` as users run it (threads);
* ``2 processes``: the same tasks in a pool of two spawned processes, each batch sent back to
  this process as Arrow IPC (what a process-based scan would have to do), so the transfer is
  paid;
* ``2 processes, nothing sent back``: the same, only counting rows: an upper bound for any
  process-based scan.

And the GIL itself: a pure-Python counting loop in a second thread, alone and while one scan
worker decodes; the share of its solo rate it keeps is the share of time the decoder left the
GIL free (on a machine with a core to spare; the load average is printed).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _task_ipc(options: Any, task: Any, send: bool) -> tuple[int, Any]:
    """In a worker process: read one task; its batches as Arrow IPC bytes, or just the rows."""
    import pyarrow as pa

    from kafka_tiered_source.executor.run import run_task
    sink = pa.BufferOutputStream() if send else None
    writer = None
    rows = 0
    for batch in run_task(options, task):
        rows += batch.num_rows
        if sink is not None:
            if writer is None:
                writer = pa.ipc.new_stream(sink, batch.schema)
            writer.write_batch(batch)
    if writer is not None:
        writer.close()
    return rows, (sink.getvalue() if sink is not None else None)


def _by_processes(pool: ProcessPoolExecutor, options: Any, tasks: list, send: bool) -> int:
    import pyarrow as pa
    rows = 0
    for n, buf in pool.map(_task_ipc, [options] * len(tasks), tasks, [send] * len(tasks)):
        if buf is not None:
            rows += pa.ipc.open_stream(buf).read_all().num_rows
        else:
            rows += n
    return rows


def _by_scan(opts: dict, workers: int) -> int:
    import kafka_tiered_source as kts
    return sum(b.num_rows for b in kts.scan(opts, **{"scan.workers": str(workers)}))


def _counting(seconds: float, during: Callable[[], Any] | None = None) -> float:
    """Iterations per second of a pure-Python loop in a thread, alone or while ``during`` runs."""
    stop = threading.Event()
    count = [0]

    def loop() -> None:
        n = 0
        while not stop.is_set():
            n += 1
        count[0] = n

    t = threading.Thread(target=loop)
    t0 = time.perf_counter()
    t.start()
    if during is None:
        time.sleep(seconds)
    else:
        during()
    stop.set()
    t.join()
    return count[0] / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_600_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    from benchmarks.backfill import build_topics
    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.planning.checked import plan_checked
    from kafka_tiered_source.testing import EmbeddedCluster

    work = tempfile.mkdtemp(prefix="kts-scan-bench-")
    facts = build_topics(os.path.join(work, "broker"), f"file://{work}/remote", [1], args.records, 4, 16 << 20, 500)[1]
    print(f"data: {facts['records']:,} records, {facts['log_bytes'] / 1e6:.0f} MB tiered in {facts['segments']} "
          f"segments (zstd / lz4), file:// store", flush=True)
    cluster = EmbeddedCluster(os.path.join(work, "broker"), remote_storage=f"file://{work}/remote").start()
    pool = ProcessPoolExecutor(2, mp_context=mp.get_context("spawn"))
    try:
        opts = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": facts["topic"],
                "minPartitions": "8", "remote.storage.uri": f"file://{work}/remote"}
        options = ReadOptions.parse(opts)
        tasks, _ = plan_checked(options)
        ways = {
            "scan, 1 worker": lambda: _by_scan(opts, 1),
            "scan, 2 workers": lambda: _by_scan(opts, 2),
            "2 processes, batches sent back": lambda: _by_processes(pool, options, tasks, True),
            "2 processes, nothing sent back": lambda: _by_processes(pool, options, tasks, False),
        }
        for fn in ways.values():          # warm-up: imports, the pool's processes, page cache
            fn()
        best: dict = {}
        for _ in range(args.repeat):
            for name, fn in ways.items():
                t0 = time.perf_counter()
                rows = fn()
                wall = time.perf_counter() - t0
                if rows != facts["records"]:
                    raise RuntimeError(f"{name}: {rows} rows, want {facts['records']}")
                best[name] = min(best.get(name, wall), wall)
        alone = _counting(1.0)
        beside = _counting(0, during=lambda: _by_scan(opts, 1))
        load = os.getloadavg()[0]
    finally:
        pool.shutdown()
        cluster.stop()
    one = best["scan, 1 worker"]
    lines = [f"`python -m benchmarks.scan --records {args.records} --repeat {args.repeat}`: {facts['records']:,} "
             f"records, {facts['log_bytes'] / 1e6:.0f} MB of zstd/lz4 segments from file:// ({len(tasks)} tasks), "
             f"best of {args.repeat}, taking turns; load average {load:.2f} at the end.", "",
             "| way | wall s | M rows/s | vs 1 worker |", "|---|---:|---:|---:|"]
    for name, wall in best.items():
        lines.append(f"| {name} | {wall:.2f} | {facts['records'] / wall / 1e6:.2f} | {one / wall:.2f}x |")
    lines += ["", f"A pure-Python loop in another thread kept {beside / alone:.0%} of its solo rate while one "
              f"scan worker decoded ({alone / 1e6:.1f} M and {beside / 1e6:.1f} M iterations/s): the share of the "
              f"read during which the decoder left the GIL free."]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    os.makedirs(os.path.join(ROOT, "benchmarks", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "results", "scan.txt"), "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
