"""Planning time against the number of tiered segments: how long the driver takes to find where
every offset of a topic lives before the first task can run.

    python -m benchmarks.planning                                   # 32 partitions x 200 segments
    python -m benchmarks.planning --scale 1000,10000,100000         # the curve up to 100k segments

Set-up: per point, one synthetic topic in a cluster of its own, ``--partitions`` partitions of
equal segment counts, each segment one small zstd batch (planning never reads segment bytes, so
their size does not matter), tiered in the Aiven layout to a ``file://`` store and deleted
locally.  The data is built in this process, then served by ``kafka-tiered broker`` in a
subprocess (its own CPU, as a real broker is), under ``--work-dir`` (default /dev/shm: tiering
100k segments writes ~1.8 M small files).

Measured: ``kafka_tiered_source.estimate(None, options)`` (the whole plan: Metadata, ListOffsets,
the locator, packing, the estimate) with ``remote.segment.locator`` = ``kip1248`` (the Fetch walk
with KIP-1248 tags) and ``metadata-topic`` (``__remote_log_metadata``), best of ``--repeat``,
in milliseconds per tiered segment.  ``--profile`` adds a cProfile of one plan per locator,
grouped by where the time goes.  Results go to ``benchmarks/results/planning.json`` (and
``planning.png`` with ``--scale``).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
LOCATORS = ("kip1248", "metadata-topic")


def build(data_dir: str, remote: str, points: dict[str, int], partitions: int) -> dict:
    """One topic per point, ``segments`` tiered segments spread over ``partitions``."""
    from benchmarks.backfill import _batch, _words
    from kafka_tiered_source.testing import EmbeddedCluster
    batch, _ = _batch(4, 5, 1, _words(random.Random(1)))
    out = {}
    with EmbeddedCluster(data_dir, remote_storage=remote, segment_bytes=1 << 30) as cluster:
        for topic, segments in points.items():
            t0 = time.perf_counter()
            cluster.create_topic(topic, partitions)
            for p in range(partitions):
                for _ in range(segments // partitions + (p < segments % partitions)):
                    cluster.append(topic, p, batch)
                    cluster.roll(topic, p)
            cluster.tier(topic)
            tiered = sum(len(cluster.remote_segments(topic, p)) for p in range(partitions))
            out[topic] = {"segments": tiered, "build_s": round(time.perf_counter() - t0, 1)}
            print(f"built {topic}: {tiered:,} tiered segments in {out[topic]['build_s']} s", flush=True)
    return out


def options(bootstrap: str, topic: str, remote: str, locator: str) -> dict:
    return {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "remote.storage.uri": remote,
            "remote.segment.locator": locator}


def plan_once(opts: dict) -> tuple[float, object]:
    import kafka_tiered_source
    t0 = time.perf_counter()
    est = kafka_tiered_source.estimate(None, opts)
    return time.perf_counter() - t0, est


def plan_costs(opts: dict, broker_pid: int) -> dict:
    """One plan's wall time, this process's CPU and the broker's CPU (seconds)."""
    from benchmarks.backfill import cpu_seconds
    b0, c0 = cpu_seconds(broker_pid), time.process_time()
    wall, _ = plan_once(opts)
    return {"wall_s": round(wall, 4), "client_cpu_s": round(time.process_time() - c0, 4),
            "broker_cpu_s": round(cpu_seconds(broker_pid) - b0, 4)}


# Where the time goes: cProfile's own time per function, summed by the part of the stack it is in.
BUCKETS = (
    ("waiting for the broker (socket)", ("socket", "select", "recv", "sendall", "_ssl")),
    ("protocol codec (encode/decode)", ("protocol/codec.py", "protocol/schema.py", "protocol/primitives.py")),
    ("protocol client", ("protocol/client.py", "protocol/connection.py")),
    ("locators", ("planning/kip1248.py", "planning/metadata_topic.py", "planning/tiered.py",
                  "planning/lineage.py", "protocol/remote_log_metadata.py")),
    ("packing, txn, estimate", ("planning/",)),
    ("options, storage objects", ("options/", "storage/", "ids.py", "model.py")),
)


def profile(opts: dict) -> dict:
    prof = cProfile.Profile()
    prof.enable()
    plan_once(opts)
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    total = sum(row[2] for row in stats.stats.values())
    out = dict.fromkeys([name for name, _ in BUCKETS] + ["other"], 0.0)
    for (filename, _, func), row in stats.stats.items():
        where = f"{filename}:{func}"
        for name, needles in BUCKETS:
            if any(n in where for n in needles):
                out[name] += row[2]
                break
        else:
            out["other"] += row[2]
    return {k: round(v / total, 3) for k, v in out.items() if v}


def plot(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for locator in LOCATORS:
        pts = sorted((r["segments"], r["wall_s"]) for r in rows if r["locator"] == locator)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=locator)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tiered segments")
    ax.set_ylabel("planning wall time, s")
    ax.set_title("kafka-tiered: estimate(None, options), broker in its own process")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=32)
    ap.add_argument("--segments", type=int, default=200, help="segments per partition (without --scale)")
    ap.add_argument("--scale", default=None, help="total segment counts, comma-separated (a curve)")
    ap.add_argument("--locators", default=",".join(LOCATORS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="where the time goes, per locator")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--out", default=RESULTS)
    args = ap.parse_args(argv)

    from benchmarks.backfill import _spawn, _stop
    import re
    counts = ([int(s) for s in args.scale.split(",")] if args.scale
              else [args.partitions * args.segments])
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    os.makedirs(args.out, exist_ok=True)
    rows, profiles, facts = [], {}, {}
    # the profile is taken at the shape (32 x 200 = 6,400 segments) when it is measured
    profiled = 6400 if 6400 in counts else counts[0]
    for n in counts:
        # one cluster per point: each topic has __remote_log_metadata to itself, so the curve is
        # the topic's own (other topics' records in the same metadata partitions cost a fetch and
        # a 16-byte comparison each: remote_log_metadata.topic_id_of)
        topic = f"plan-{n}"
        work = tempfile.mkdtemp(prefix="kts-planning-", dir=args.work_dir or base)
        data_dir, root = os.path.join(work, "broker"), os.path.join(work, "remote")
        remote = f"file://{root}"
        proc = None
        try:
            facts.update(build(data_dir, remote, {topic: n}, args.partitions))
            proc, lines = _spawn(["-m", "kafka_tiered_source.cli", "broker", "--data-dir", data_dir, "--port",
                                  "0", "--remote-storage", remote, "--log-level", "WARNING"],
                                 expect=r"bootstrap servers: ")
            bootstrap = re.search(r"bootstrap servers: (\S+)", "".join(lines)).group(1)
            f = facts[topic]
            for locator in args.locators.split(","):
                opts = options(bootstrap, topic, remote, locator)
                plan_once(opts)                                       # warm: imports, caches
                walls = []
                for _ in range(args.repeat):
                    wall, est = plan_once(opts)
                    walls.append(wall)
                located = sum(k for name, k in est.locators.items() if name == locator)
                costs = plan_costs(opts, proc.pid)
                row = {"locator": locator, "topic": topic, "partitions": args.partitions,
                       "segments": f["segments"], "wall_s": round(min(walls), 4),
                       "ms_per_segment": round(1000 * min(walls) / f["segments"], 4),
                       "remote_ranges": est.remote_ranges, "partitions_located": located,
                       "client_cpu_s": costs["client_cpu_s"], "broker_cpu_s": costs["broker_cpu_s"]}
                rows.append(row)
                print(f"{locator:>15} {f['segments']:>7,} segments: {row['wall_s']:8.3f} s, "
                      f"{row['ms_per_segment']:.3f} ms per segment ({est.remote_ranges} remote ranges); "
                      f"CPU: planner {costs['client_cpu_s']:.2f} s, broker {costs['broker_cpu_s']:.2f} s",
                      flush=True)
                if args.profile and n == profiled:
                    profiles[locator] = profile(opts)
                    print(f"{locator:>15} where the time goes: "
                          + ", ".join(f"{k} {v:.0%}" for k, v in profiles[locator].items()), flush=True)
        finally:
            if proc is not None:
                _stop(proc)
            shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(args.out, "planning.json"), "w") as fh:
        json.dump({"rows": rows, "profiles": profiles, "facts": facts}, fh, indent=1)
    if args.scale:
        plot(rows, os.path.join(args.out, "planning.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
