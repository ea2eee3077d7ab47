"""What a new process pays before its first plan: imports and connections (the fixed cost).

    python -m benchmarks.cold_start [--repeat N] [--baseline DIR]

Set-up: a small topic (4 partitions x 3 tiered segments, Aiven layout, ``file://`` store) served
by ``kafka-tiered broker`` in a subprocess, as Kafka 4.1 with ``__remote_log_metadata`` and as a
KIP-1248 broker at once (the embedded broker is both).  Planning such a topic takes a few
milliseconds once a process is warm, so what a new process pays more is its fixed cost.

Every child runs as an installed package runs: with its bytecode cached (``PYTHONPYCACHEPREFIX``
in a temporary directory, written by a warm-up run first; this repository's own
``PYTHONDONTWRITEBYTECODE`` is dropped for them), best and median of ``--repeat`` fresh processes:

* ``interpreter``: ``python -c pass``, the floor no library can go below;
* ``cli``: ``kafka-tiered estimate`` (storage checked) as a new process, wall clock; its fixed
  cost is that wall less one warm ``estimate`` run through ``cli.main`` in a process that has
  run it before (``cli_warm``);
* ``first plan``: in a new process, ``import kafka_tiered_source`` and its first
  ``estimate(None, options)``, timed from the interpreter's start (``time.perf_counter`` at the
  top of the script, after the interpreter's own start-up); its fixed cost is that less the
  same plan repeated in the same process (``warm plan``), per locator (``kip1248``,
  ``metadata-topic``).

Also printed: the heavy packages a first plan imported (pyarrow, numpy, pyspark, boto3, fsspec,
ssl, ...) and the broker connections it opened (CPython's ``socket.connect`` audit events)
against the brokers it talked to, and each new process's CPU seconds (user + system, best and
median; they move less with the machine's load than walls).  Target: fixed cost <= 0.15 s (the
ratio is printed).
``--baseline DIR``: another checkout (e.g. ``git worktree add DIR main``, native extension built)
measured the same way in the same run, the two taking turns process by process (so a change of
the machine's load falls on both); the ratios after / before are printed.  Results go to
``benchmarks/results/cold_start.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
TARGET_S = 0.15
TOPIC = "cold"
HEAVY = ("pyarrow", "numpy", "pyspark", "boto3", "botocore", "fsspec", "ssl", "asyncio", "cryptography",
         "zstandard", "lz4", "cramjam", "google", "azure", "pandas")

# A child that imports the library, plans once (timed from its own start), then plans again warm.
CHILD = r"""
import time
T0 = time.perf_counter()
import json, sys
connects = []
sys.addaudithook(lambda ev, args: connects.append("%s:%s" % args[1][:2]) if ev == "socket.connect" else None)
import kafka_tiered_source
opts = json.loads(sys.argv[1])
kafka_tiered_source.estimate(None, opts)
first = time.perf_counter() - T0
first_connects = list(connects)
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[2])))
warm = []
for _ in range(5):
    t = time.perf_counter()
    kafka_tiered_source.estimate(None, opts)
    warm.append(time.perf_counter() - t)
print(json.dumps({"first_s": first, "warm_s": min(warm), "connects": first_connects, "heavy": heavy,
                  "modules": len(sys.modules)}))
"""

# The CLI's warm run: cli.main in a process that has run it once already.
CLI_WARM = r"""
import contextlib, io, json, sys, time
from kafka_tiered_source.cli import main
argv = json.loads(sys.argv[1])
out = []
for _ in range(6):
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        main(argv)
    out.append(time.perf_counter() - t)
print(json.dumps({"warm_s": min(out[1:])}))
"""


def build(work: str) -> None:
    from benchmarks.backfill import _batch, _words
    from kafka_tiered_source.testing import EmbeddedCluster
    batch, _ = _batch(100, 100, 1, _words(random.Random(1)))
    with EmbeddedCluster(os.path.join(work, "data"), remote_storage=f"file://{work}/remote",
                         segment_bytes=1 << 30) as cluster:
        cluster.create_topic(TOPIC, 4)
        for p in range(4):
            for _ in range(3):
                cluster.append(TOPIC, p, batch)
                cluster.roll(TOPIC, p)
        cluster.tier(TOPIC)


def child_env(pycache: str, tree: str = ROOT) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # the catalog's snapshots beside the bytecode, removed with the work directory
    env.update(PYTHONPYCACHEPREFIX=pycache, PYTHONPATH=tree,
               KAFKA_TIERED_CACHE_DIR=os.path.join(os.path.dirname(pycache), "catalog"))
    return env


CPU: list[float] = []   # the CPU seconds (user + system) of each child run, in order


def run(cmd: list[str], env: dict) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, *cmd], env=env, cwd=env["PYTHONPATH"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if done.returncode:
        raise RuntimeError(f"{cmd[:3]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, done.stdout


def summary(values: list[float]) -> dict:
    return {"best_s": round(min(values), 4), "median_s": round(statistics.median(values), 4)}


LOCATORS = ("kip1248", "metadata-topic")


def sample(env: dict, bootstrap: str, remote: str) -> dict:
    """One new process of each kind for one checkout (``env`` names it): wall and CPU seconds."""
    cli = cli_args(bootstrap, remote)
    out: dict = {"interpreter": (run(["-c", "pass"], env)[0], CPU[-1]), "cli": (run(cli, env)[0], CPU[-1])}
    for locator in LOCATORS:
        opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC, "remote.storage.uri": remote,
                "remote.segment.locator": locator}
        got = json.loads(run(["-c", CHILD, json.dumps(opts), json.dumps(HEAVY)], env)[1])
        out[locator] = (got, CPU[-1])   # CPU: the whole child, its first plan and its five warm ones
    return out


def cli_args(bootstrap: str, remote: str) -> list[str]:
    return ["-m", "kafka_tiered_source.cli", "estimate", "--bootstrap-servers", bootstrap, "--topic", TOPIC,
            "--remote-storage-uri", remote]


def figures(env: dict, samples: list[dict], bootstrap: str, remote: str) -> dict:
    """One checkout's figures from its samples: the interpreter, the CLI, the first plans."""
    cli = cli_args(bootstrap, remote)
    cli_warm = json.loads(run(["-c", CLI_WARM, json.dumps(cli[2:])], env)[1])["warm_s"]
    interp = [x["interpreter"] for x in samples]
    cli_runs = [x["cli"] for x in samples]
    cli_walls = [w for w, _ in cli_runs]
    rows: dict = {"interpreter": {**summary([w for w, _ in interp]), "cpu": summary([c for _, c in interp])}}
    rows["cli"] = {**summary(cli_walls), "cpu": summary([c for _, c in cli_runs]), "warm_s": round(cli_warm, 4),
                   "fixed_s": round(min(cli_walls) - cli_warm, 4),
                   "fixed_median_s": round(statistics.median(cli_walls) - cli_warm, 4)}
    rows["plans"] = {}
    for locator in LOCATORS:
        got = [x[locator][0] for x in samples]
        fixed = [g["first_s"] - g["warm_s"] for g in got]
        rows["plans"][locator] = {
            "first_s": summary([g["first_s"] for g in got]), "warm_s": round(min(g["warm_s"] for g in got), 4),
            "cpu": summary([x[locator][1] for x in samples]),
            "fixed_s": round(min(fixed), 4), "fixed_median_s": round(statistics.median(fixed), 4),
            "heavy_imports": got[-1]["heavy"], "modules": got[-1]["modules"],
            "connections": got[-1]["connects"], "brokers": sorted(set(got[-1]["connects"]))}
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", default=RESULTS)
    ap.add_argument("--baseline", default=None,
                    help="another checkout (importable, native extension built) measured the same way in the "
                         "same run, against this one's broker")
    args = ap.parse_args(argv)
    from benchmarks.planning import Tree

    load = os.getloadavg()[0]
    work = tempfile.mkdtemp(prefix="kts-cold-")
    tree = Tree(ROOT)
    rows: dict = {"load_1min": round(load, 2), "target_s": TARGET_S}
    try:
        build(work)
        remote = f"file://{work}/remote"
        bootstrap, _ = tree.broker(os.path.join(work, "data"), remote)
        trees = [("after", ROOT)] + ([("before", os.path.abspath(args.baseline))] if args.baseline else [])
        envs = {side: child_env(os.path.join(work, "pycache"), path) for side, path in trees}
        for side in envs:
            run(cli_args(bootstrap, remote), envs[side])   # writes the bytecode cache
        # The checkouts take turns, one new process of each kind at a time, so a change in the
        # machine's load during the run falls on both sides alike.
        samples: dict = {side: [] for side in envs}
        for _ in range(args.repeat):
            for side, env in envs.items():
                samples[side].append(sample(env, bootstrap, remote))
        for side, env in envs.items():
            rows[side] = figures(env, samples[side], bootstrap, remote)
    finally:
        tree.close()
        shutil.rmtree(work, ignore_errors=True)

    print(f"load average (1 min) at the start: {load:.2f}; best / median of {args.repeat} new processes")
    for name in [n for n in ("after", "before") if n in rows]:
        side = rows[name]
        print(f"-- {name} ({'this checkout' if name == 'after' else args.baseline})")
        i = side["interpreter"]
        print(f"{'interpreter (python -c pass)':<34}{i['best_s']:8.3f} s {i['median_s']:8.3f} s   CPU "
              f"{i['cpu']['best_s']:.3f} s (median {i['cpu']['median_s']:.3f})")
        c = side["cli"]
        print(f"{'kafka-tiered estimate, new process':<34}{c['best_s']:8.3f} s {c['median_s']:8.3f} s   warm run "
              f"{c['warm_s']:.3f} s -> fixed cost {c['fixed_s']:.3f} s (median {c['fixed_median_s']:.3f}), "
              f"{c['fixed_s'] / TARGET_S:.2f} of the {TARGET_S} s target; CPU {c['cpu']['best_s']:.3f} s "
              f"(median {c['cpu']['median_s']:.3f})")
        for locator, r in side["plans"].items():
            print(f"{'first plan, ' + locator:<34}{r['first_s']['best_s']:8.3f} s {r['first_s']['median_s']:8.3f} s"
                  f"   warm plan {r['warm_s']:.3f} s -> fixed cost {r['fixed_s']:.3f} s (median "
                  f"{r['fixed_median_s']:.3f}), {r['fixed_s'] / TARGET_S:.2f} of the target; CPU of the "
                  f"process (first plan + 5 warm) {r['cpu']['best_s']:.3f} s (median {r['cpu']['median_s']:.3f})")
            print(f"{'':<34}imported: {', '.join(r['heavy_imports']) or 'none of ' + '/'.join(HEAVY[:4])}; "
                  f"{r['modules']} modules; {len(r['connections'])} connection(s) to {len(r['brokers'])} broker(s)")
    if "before" in rows:
        a, b = rows["after"], rows["before"]
        print(f"after / before, fixed cost: cli {a['cli']['fixed_s'] / b['cli']['fixed_s']:.2f}, "
              + ", ".join(f"first plan {k} {a['plans'][k]['fixed_s'] / b['plans'][k]['fixed_s']:.2f}" for k in a["plans"]))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "cold_start.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
