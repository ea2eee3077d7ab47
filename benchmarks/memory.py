"""Memory of one read task on large segments: peak RSS over the task's starting RSS.

    python -m benchmarks.memory                        # 512 MiB and 1 GiB segments, every codec
    python -m benchmarks.memory --segment-mib 512 --codecs zstd

Set-up: per codec one topic of one partition whose log is one ``--segment-mib`` segment (plus
the active one), producer-shaped batches of 500 records (16-byte keys, 100-1000-byte JSON-like
values, as ``benchmarks.backfill``), tiered in the Aiven layout to a ``file://`` store (the
fastest store: parts arrive faster than they are decoded, so the prefetch queue is as full as
it gets).  Each read runs in a fresh interpreter: warm up (imports, a small read), note VmRSS,
reset the high-water mark (``/proc/self/clear_refs``), run the task with ``TaskReader`` and
drop each Arrow batch as Spark does once it has it, then read VmHWM.

Two tasks per segment: the plan's largest (``partition.target.bytes`` at its default splits a
big segment into 128 MiB tasks at offset-index entries) and the whole segment as one task
(``partition.target.bytes`` = 4 GiB: what a task costs when nothing splits the segment).
The bound that should hold: ``(fetch.remote.concurrency + queue depth + 1)`` parts of
``fetch.remote.part.size.bytes`` plus the Arrow batch of the part being decoded.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
MIB = 1 << 20
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build(data_dir: str, remote: str, codecs: list[str], segment_mib: int) -> dict:
    from benchmarks.backfill import _batch, _words
    from kafka_tiered_source.testing import EmbeddedCluster
    words = _words(random.Random(1))
    out = {}
    with EmbeddedCluster(data_dir, remote_storage=remote, segment_bytes=segment_mib * MIB) as c:
        for name in codecs:
            topic = f"mem-{name}-{segment_mib}"
            c.create_topic(topic, 1)
            pool = [_batch(CODECS[name], 500, 100 * CODECS[name] + i, words)[0] for i in range(16)]
            i = 0
            while not c.remote_segments(topic, 0):
                for _ in range(64):
                    c.append(topic, 0, pool[i % len(pool)])
                    i += 1
                c.tier(topic)
            seg = c.remote_segments(topic, 0)[0]
            out[name] = {"topic": topic, "segment_bytes": seg.size_bytes, "records": seg.end_offset + 1}
            print(f"built {topic}: one {seg.size_bytes / MIB:.0f} MiB segment, {seg.end_offset + 1:,} records",
                  flush=True)
    return out


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(args) -> int:
    """One measured read, in this (fresh) process."""
    from kafka_tiered_source import planning
    from kafka_tiered_source.executor import TaskReader
    from kafka_tiered_source.options import ReadOptions
    opts = ReadOptions.parse(json.loads(args.options))
    plan = planning.plan(opts)
    task = max(plan.tasks, key=lambda t: sum(getattr(r, "byte_end", 0) - getattr(r, "byte_start", 0)
                                              for r in t.ranges))
    warm = TaskReader(opts)
    for _ in zip(range(2), warm.read(task), strict=False):     # imports, codec set-up, a first batch
        pass
    warm.close()
    del warm
    start = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                             # reset VmHWM to the current RSS
    reader = TaskReader(opts)
    t0 = time.perf_counter()
    rows = 0
    for batch in reader.read(task):
        rows += batch.num_rows
        del batch
    wall = time.perf_counter() - t0
    reader.close()
    peak = _status("VmHWM")
    print(json.dumps({"start_rss": start, "peak_rss": peak, "over_start": peak - start, "rows": rows,
                      "wall_s": round(wall, 3), "task_bytes": sum(getattr(r, "byte_end", 0) -
                                                                  getattr(r, "byte_start", 0)
                                                                  for r in task.ranges),
                      "tasks_planned": len(plan.tasks)}))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--segment-mib", default="512,1024", help="segment sizes, comma-separated")
    ap.add_argument("--codecs", default=",".join(CODECS))
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--out", default=RESULTS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--options", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)

    work = args.work_dir or tempfile.mkdtemp(prefix="kts-memory-")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    try:
        for mib in [int(x) for x in args.segment_mib.split(",")]:
            data_dir, root = os.path.join(work, f"broker-{mib}"), os.path.join(work, f"remote-{mib}")
            facts = build(data_dir, f"file://{root}", args.codecs.split(","), mib)
            for codec, f in facts.items():
                for shape, target in (("planned task", None), ("whole segment", str(4 << 30))):
                    opts = {"subscribe": f["topic"], "remote.storage.uri": f"file://{root}",
                            "includeHeaders": "true"}
                    if target:
                        opts["partition.target.bytes"] = target
                    out = subprocess.run([sys.executable, "-m", "benchmarks.memory", "--child", "--options",
                                          json.dumps(opts)], cwd=ROOT, capture_output=True, text=True)
                    if out.returncode:
                        raise RuntimeError(f"{codec} {mib} MiB {shape}: {out.stderr[-3000:]}")
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    r.update(codec=codec, segment_mib=mib, shape=shape, records=f["records"])
                    rows.append(r)
                    print(f"{mib:>5} MiB {codec:>6} {shape:>13}: task {r['task_bytes'] / MIB:7.0f} MiB, "
                          f"peak RSS {r['over_start'] / MIB:6.0f} MiB over its start "
                          f"({r['start_rss'] / MIB:.0f} MiB), {r['rows']:,} rows in {r['wall_s']} s",
                          flush=True)
            shutil.rmtree(data_dir, ignore_errors=True)
            shutil.rmtree(root, ignore_errors=True)
        with open(os.path.join(args.out, "memory.json"), "w") as fh:
            json.dump(rows, fh, indent=1)
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
