"""Run every benchmark and record the results in BENCHMARKS.md.

    python -m benchmarks.run_all                       # what `make bench` runs
    python -m benchmarks.run_all --only backfill       # one or more of: decode,fetch,spark_read,backfill,scan
    python -m benchmarks.run_all --backfill-args "--scale 2.5"     # the full few-GB headline

Each benchmark runs in its own process (a fresh JVM and interpreter), in short mode where it has
one: ``benchmarks.decode --quick``, ``benchmarks.fetch --size 32 --repeat 1``,
``benchmarks.spark_read --records 1000000 --repeat 1`` (when that module exists), the
headline ``benchmarks.backfill`` and ``benchmarks.scan --records 800000 --repeat 2``.  Outputs go to ``benchmarks/results/<name>.txt``, the
headline's JSON and plot to ``benchmarks/results/backfill.{json,png}``.

BENCHMARKS.md: only the text between ``<!-- run_all:begin -->`` and ``<!-- run_all:end -->``
is replaced (appended at the end the first time); the other sections are left as they are.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
DOC = os.path.join(ROOT, "BENCHMARKS.md")
BEGIN, END = "<!-- run_all:begin -->", "<!-- run_all:end -->"

BENCHMARKS = {   # name -> (module, arguments of the short mode)
    "decode": ("benchmarks.decode", ["--quick"]),
    "fetch": ("benchmarks.fetch", ["--size", "32", "--repeat", "1"]),
    "spark_read": ("benchmarks.spark_read", ["--records", "1000000", "--repeat", "1"]),
    "backfill": ("benchmarks.backfill", []),
    "scan": ("benchmarks.scan", ["--records", "800000", "--repeat", "2"]),
}


def machine() -> dict:
    model, mem = "", ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
        with open("/proc/meminfo") as f:
            kb = int(next(line.split()[1] for line in f if line.startswith("MemTotal")))
            mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    try:
        import pyspark
        spark = pyspark.__version__
    except ImportError:
        spark = "not installed"
    return {"nproc": os.cpu_count(), "cpu": model or platform.processor() or platform.machine(), "memory": mem,
            "python": platform.python_version(), "spark": spark, "os": platform.platform(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load": " / ".join(f"{x:.1f}" for x in os.getloadavg())}


def run(name: str, extra: list[str]) -> dict:
    module, args = BENCHMARKS[name]
    argv = [sys.executable, "-m", module, *args, *extra]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    print(f"== {name}: {' '.join(argv[1:])}", flush=True)
    t0 = time.perf_counter()
    out = os.path.join(RESULTS, f"{name}.txt")
    with open(out, "w") as fh:
        p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in p.stdout:
            # Spark's and librdkafka's log noise stays in the file, not on the console
            fh.write(line)
            if not any(s in line for s in (" WARN ", "%6|", "%4|", "setLogLevel")):
                sys.stdout.write(line)
        code = p.wait()
    secs = time.perf_counter() - t0
    print(f"== {name}: exit {code} after {secs:.0f} s (output in {os.path.relpath(out, ROOT)})", flush=True)
    return {"name": name, "command": "python -m " + " ".join([module, *args, *extra]), "exit": code,
            "seconds": secs, "output": os.path.relpath(out, ROOT)}


def _tail(path: str, lines: int = 40) -> str:
    with open(os.path.join(ROOT, path), errors="replace") as f:
        keep = [line.rstrip("\n") for line in f
                if not any(s in line for s in (" WARN ", "%6|", "%4|", "setLogLevel", "NativeCodeLoader"))]
    return "\n".join(keep[-lines:])


def section(m: dict, runs: list[dict]) -> str:
    from benchmarks.backfill import render_markdown
    parts = [BEGIN, "",
             f"Last `python -m benchmarks.run_all`: {m['date']}.  Machine: nproc {m['nproc']}, CPU \"{m['cpu']}\", "
             f"{m['memory']} memory, Python {m['python']}, Spark (pyspark) {m['spark']}, {m['os']}; load average "
             f"{m['load']} (1/5/15 min) when the run started — the machine is shared.", ""]
    bf = os.path.join(RESULTS, "backfill.json")
    ran = {r["name"]: r for r in runs}
    if "backfill" in ran and ran["backfill"]["exit"] in (0, 1) and os.path.exists(bf):
        with open(bf) as f:
            result = json.load(f)
        parts += [render_markdown(result), "![wall time against data size](benchmarks/results/backfill.png)", ""]
    parts += ["Summary of this run (each benchmark in its own process; full outputs in `benchmarks/results/`):", "",
              "| benchmark | command | seconds | exit | output |", "|---|---|---:|---:|---|"]
    for r in runs:
        parts.append(f"| {r['name']} | `{r['command']}` | {r['seconds']:.0f} | {r['exit']} | `{r['output']}` |")
    for r in runs:
        if r["name"] == "backfill":
            continue
        parts += ["", f"<details><summary>{r['name']} (last lines)</summary>", "", "```", _tail(r["output"]), "```",
                  "", "</details>"]
    parts += ["", END]
    return "\n".join(parts)


def write_doc(text: str) -> None:
    with open(DOC) as f:
        doc = f.read()
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        doc = head + text + tail
    else:
        doc = doc.rstrip("\n") + "\n\n## Headline: direct vs broker-mediated\n\n" + text + "\n"
    with open(DOC, "w") as f:
        f.write(doc)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated subset of " + ",".join(BENCHMARKS))
    ap.add_argument("--backfill-args", default="", help="extra arguments for benchmarks.backfill")
    ap.add_argument("--no-doc", action="store_true", help="do not touch BENCHMARKS.md")
    ap.add_argument("--doc-only", action="store_true",
                    help="run nothing: rewrite the BENCHMARKS.md section from benchmarks/results/run_all.json")
    args = ap.parse_args(argv)
    if args.doc_only:
        with open(os.path.join(RESULTS, "run_all.json")) as f:
            saved = json.load(f)
        write_doc(section(saved["machine"], saved["runs"]))
        print(f"BENCHMARKS.md updated from {os.path.join(RESULTS, 'run_all.json')}")
        return 0
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    for n in names:
        if n not in BENCHMARKS:
            ap.error(f"unknown benchmark {n!r} (known: {', '.join(BENCHMARKS)})")
    os.makedirs(RESULTS, exist_ok=True)
    m = machine()
    print(f"machine: {m}", flush=True)
    runs = []
    for n in names:
        module = BENCHMARKS[n][0]
        if not os.path.exists(os.path.join(ROOT, *module.split(".")) + ".py"):
            print(f"== {n}: {module} is not there, left out", flush=True)
            continue
        extra = shlex.split(args.backfill_args) if n == "backfill" else []
        runs.append(run(n, extra))
    with open(os.path.join(RESULTS, "run_all.json"), "w") as f:
        json.dump({"machine": m, "runs": runs}, f, indent=1)
    if not args.no_doc:
        write_doc(section(m, runs))
        print(f"BENCHMARKS.md updated ({BEGIN} ... {END})")
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
