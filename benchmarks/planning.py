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

``--synthetic``: up to 10k partitions x 100 segments (1M), their ``__remote_log_metadata``
synthesized as the broker writes it (:mod:`benchmarks.planning_scale`).

Measured: ``kafka_tiered_source.estimate(None, options)`` (the whole plan: Metadata, ListOffsets,
the locator, packing, the estimate) with ``remote.segment.locator`` = ``kip1248`` (the Fetch walk
with KIP-1248 tags) and ``metadata-topic`` (``__remote_log_metadata``), best of ``--repeat``,
in milliseconds per tiered segment; and what the coverage check costs of it (``coverage_s``:
the lineage's OffsetForLeaderEpoch requests, the served spans, the invariant on every plan).
``--profile`` adds a cProfile of one plan per locator, grouped by where the time goes.

``--baseline DIR`` compares with the code of another checkout (an importable tree, e.g. ``git
worktree add DIR <commit>`` with the native extension built or copied in): the same topic is
built and served by each tree's own broker, and the plans alternate, before / after, each timed
``--repeat`` times; the ratio after / before is printed.  Results go to
``benchmarks/results/planning.json`` (and ``planning.png`` with ``--scale``).
"""
from __future__ import annotations

import argparse
import cProfile
import contextlib
import io
import json
import os
import pstats
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
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


# Where the time goes: cProfile's own time per function, summed by the part of the stack it is in.
BUCKETS = (
    ("waiting for the broker (socket)", ("socket", "select", "recv", "sendall", "_ssl")),
    ("protocol codec (encode/decode)", ("protocol/codec.py", "protocol/bodies.py", "protocol/structs.py", "protocol/schema.py",
                                        "protocol/primitives.py")),
    ("protocol client", ("protocol/client.py", "protocol/connection.py")),
    ("coverage check", ("planning/coverage.py", "planning/works.py", "planning/lineage.py")),
    ("locators", ("planning/kip1248.py", "planning/metadata_topic.py", "planning/tiered.py",
                  "planning/remote_log_state.py", "protocol/remote_log_metadata.py")),
    ("packing, txn, estimate", ("planning/",)),
    ("options, storage objects", ("options/", "storage/", "ids.py", "model.py")),
)


@contextlib.contextmanager
def coverage_timer():
    """Seconds spent in the coverage check while the block runs: the lineage's
    OffsetForLeaderEpoch requests, the served spans, the invariant (by patching the functions
    where the planner calls them)."""
    from kafka_tiered_source.planning import listing, metadata_topic, works
    spent = {"lineage": 0.0, "serving": 0.0, "invariant": 0.0}
    patched = [(mod, name, kind) for mod in (metadata_topic, listing)
               for name, kind in (("ask_lineages", "lineage"), ("serving", "serving"))]
    patched.append((works, "check_cover", "invariant"))
    originals = [(mod, name, getattr(mod, name)) for mod, name, _ in patched]

    def timed(fn, kind):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[kind] += time.perf_counter() - t0
        return wrapper
    for (mod, name, kind), (_, _, fn) in zip(patched, originals, strict=True):
        setattr(mod, name, timed(fn, kind))
    try:
        yield spent
    finally:
        for mod, name, fn in originals:
            setattr(mod, name, fn)


class Tree:
    """One checkout's code: its broker serves the data it built, its planner runs in a worker
    process that plans on request (a fresh process each side: the builder's memory would slow
    the garbage collector of whichever side shared it)."""

    WORKER = ("import json, sys, time\n"
              "import kafka_tiered_source\n"
              "try:\n"
              "    from benchmarks.planning import coverage_timer\n"
              "except ImportError:\n"
              "    coverage_timer = None\n"
              "for line in sys.stdin:\n"
              "    opts = json.loads(line)\n"
              "    spent = {}\n"
              "    c0 = time.process_time()\n"
              "    t0 = time.perf_counter()\n"
              "    if coverage_timer is not None:\n"
              "        with coverage_timer() as spent:\n"
              "            est = kafka_tiered_source.estimate(None, opts)\n"
              "    else:\n"
              "        est = kafka_tiered_source.estimate(None, opts)\n"
              "    print(json.dumps({'wall_s': time.perf_counter() - t0, 'cpu_s': time.process_time() - c0,\n"
              "                      'remote_ranges': est.remote_ranges, 'coverage': dict(spent),\n"
              "                      'locators': est.locators}), flush=True)\n")

    def __init__(self, tree: str):
        self.tree = os.path.abspath(tree)
        self.env = {**os.environ, "PYTHONPATH": self.tree}
        self.procs: list[subprocess.Popen] = []

    def build(self, data_dir: str, remote: str, points: dict, partitions: int) -> None:
        code = (f"from benchmarks.planning import build; build({data_dir!r}, {remote!r}, {points!r}, "
                f"{partitions})")
        subprocess.run([sys.executable, "-c", code], cwd=self.tree, env=self.env, check=True,
                       stdout=subprocess.DEVNULL)

    def broker(self, data_dir: str, remote: str) -> tuple[str, int]:
        p = subprocess.Popen([sys.executable, "-m", "kafka_tiered_source.cli", "broker", "--data-dir", data_dir,
                              "--port", "0", "--remote-storage", remote, "--log-level", "WARNING"],
                             cwd=self.tree, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        out = p.stdout
        assert out is not None   # piped
        for line in out:
            m = re.search(r"bootstrap servers: (\S+)", line)
            if m:   # keep reading what it prints, so a full pipe never blocks it
                threading.Thread(target=lambda: [None for _ in out], daemon=True).start()
                return m.group(1), p.pid
        raise RuntimeError(f"the baseline broker exited ({p.wait()})")

    def planner(self) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", self.WORKER], cwd=self.tree, env=self.env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.procs.append(p)
        return p

    @staticmethod
    def plan(worker: subprocess.Popen, opts: dict) -> dict:
        stdin, stdout = worker.stdin, worker.stdout
        assert stdin is not None and stdout is not None   # both piped
        stdin.write(json.dumps(opts) + "\n")
        stdin.flush()
        return json.loads(stdout.readline())

    def close(self) -> None:
        from benchmarks.backfill import _stop
        for p in self.procs:
            if p.stdin:
                p.stdin.close()
            _stop(p)
        self.procs = []


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
    ap.add_argument("--baseline", default=None, help="a checkout to compare with, before / after alternating")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--out", default=RESULTS)
    ap.add_argument("--synthetic", action="store_true",
                    help="the metadata-topic plan at 10k -> 100k -> 1M copies, synthesized as the broker writes "
                         "them (benchmarks/planning_scale.py); --scale, --repeat, --work-dir apply")
    ap.add_argument("--synthetic-locators", default="metadata-topic,kip1248",
                    help="with --synthetic: the curves to run (metadata-topic, kip1248: its broker synthesizes the "
                         "copies, testing/synthetic_tiers.py)")
    ap.add_argument("--segments-per-partition", type=int, default=100, help="with --synthetic")
    ap.add_argument("--segment-bytes", type=int, default=1 << 20, help="with --synthetic: each copy's size")
    args = ap.parse_args(argv)
    if args.synthetic:
        from benchmarks import planning_scale
        return planning_scale.main(args)

    from benchmarks.backfill import cpu_seconds
    counts = ([int(s) for s in args.scale.split(",")] if args.scale
              else [args.partitions * args.segments])
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    os.makedirs(args.out, exist_ok=True)
    rows, profiles, facts = [], {}, {}
    after = Tree(ROOT)
    before = Tree(args.baseline) if args.baseline else None
    # the profile is taken at the shape (32 x 200 = 6,400 segments) when it is measured
    profiled = 6400 if 6400 in counts else counts[0]
    for n in counts:
        # one cluster per point: each topic has __remote_log_metadata to itself, so the curve is
        # the topic's own (other topics' records in the same metadata partitions, and the catalog
        # that reads them once: benchmarks/catalog.py).  The warm-up plan fills the worker's
        # catalog, so the timed metadata-topic plans are later plans in the same process.
        topic = f"plan-{n}"
        work = tempfile.mkdtemp(prefix="kts-planning-", dir=args.work_dir or base)
        try:
            sides = {}
            for name, tree in (("after", after), ("before", before)):
                if tree is None:
                    continue
                data_dir, remote = os.path.join(work, f"{name}-broker"), f"file://{work}/{name}-remote"
                t0 = time.perf_counter()
                tree.build(data_dir, remote, {topic: n}, args.partitions)
                if name == "after":
                    facts[topic] = {"segments": n, "build_s": round(time.perf_counter() - t0, 1)}
                    print(f"built {topic}: {n:,} tiered segments in {facts[topic]['build_s']} s", flush=True)
                bootstrap, pid = tree.broker(data_dir, remote)
                sides[name] = (tree, tree.planner(), bootstrap, remote, pid)
            f = facts[topic]
            for locator in args.locators.split(","):
                got: dict = {name: [] for name in sides}
                opts = {name: options(b, topic, r, locator) for name, (_, _, b, r, _) in sides.items()}
                for name, (tree, worker, *_rest) in sides.items():
                    tree.plan(worker, opts[name])                      # warm: imports, caches
                broker_cpu = cpu_seconds(sides["after"][4])
                for _ in range(args.repeat):          # alternating: the machine's noise hits both
                    for name in ("before", "after"):
                        if name in sides:
                            tree, worker, *_rest = sides[name]
                            got[name].append(tree.plan(worker, opts[name]))
                broker_cpu = (cpu_seconds(sides["after"][4]) - broker_cpu) / args.repeat
                runs = got["after"]
                wall = min(r["wall_s"] for r in runs)
                mean = sum(r["wall_s"] for r in runs) / len(runs)
                coverage = {k: round(sum(r["coverage"].get(k, 0.0) for r in runs) / len(runs), 4)
                            for k in ("lineage", "serving", "invariant")}
                coverage_s = sum(coverage.values())
                located = runs[-1]["locators"].get(locator, 0)
                row = {"locator": locator, "topic": topic, "partitions": args.partitions,
                       "segments": f["segments"], "wall_s": round(wall, 4),
                       "ms_per_segment": round(1000 * wall / f["segments"], 4),
                       "remote_ranges": runs[-1]["remote_ranges"], "partitions_located": located,
                       "client_cpu_s": round(min(r["cpu_s"] for r in runs), 4),
                       "broker_cpu_s": round(broker_cpu, 4),
                       "coverage_s": round(coverage_s, 4), "coverage": coverage,
                       "coverage_share": round(coverage_s / mean, 4)}
                if "before" in got:
                    row["before_wall_s"] = round(min(r["wall_s"] for r in got["before"]), 4)
                    row["after_over_before"] = round(wall / row["before_wall_s"], 3)
                rows.append(row)
                print(f"{locator:>15} {f['segments']:>7,} segments: {row['wall_s']:8.3f} s, "
                      f"{row['ms_per_segment']:.3f} ms per segment ({row['remote_ranges']} remote ranges); "
                      f"CPU: planner {row['client_cpu_s']:.2f} s, broker {row['broker_cpu_s']:.2f} s; "
                      f"coverage check {coverage_s * 1000:.1f} ms = {row['coverage_share']:.1%} of a plan "
                      f"({', '.join(f'{k} {v * 1000:.1f} ms' for k, v in coverage.items())})"
                      + (f"; before {row['before_wall_s']:.3f} s, after/before {row['after_over_before']:.3f}"
                         if "before" in got else ""), flush=True)
                if args.profile and n == profiled:
                    profiles[locator] = profile(options(sides["after"][2], topic, sides["after"][3], locator))
                    print(f"{locator:>15} where the time goes: "
                          + ", ".join(f"{k} {v:.0%}" for k, v in profiles[locator].items()), flush=True)
        finally:
            after.close()
            if before is not None:
                before.close()
            shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(args.out, "planning.json"), "w") as fh:
        json.dump({"rows": rows, "profiles": profiles, "facts": facts}, fh, indent=1)
    if args.scale:
        plot(rows, os.path.join(args.out, "planning.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
