"""Where the suite's CPU goes: wall and CPU seconds per test file, children included.

Opt-in: set ``KAFKA_TIERED_CPU_REPORT=<dir>`` (tests/conftest.py then loads this plugin); each pytest process
(each xdist worker) appends one JSON line per test file to ``<dir>/<pid>.jsonl``, and
``python tests/cpu_report.py <dir>`` prints the files by CPU.  CPU is the whole process tree's:
this process, its children that were reaped (``os.times``' children fields) and the ones still
running (the shared SparkSession's JVM, servers, Spark daemons: ``/proc/<pid>/stat``), taken as
a difference between the start of one test and the start of the next, so a module fixture's
teardown counts for the file that made it.  On a loaded machine compare CPU, not wall.
"""
from __future__ import annotations

import json
import os
import sys
import time

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid: int):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = data[data.rindex(")") + 2:].split()
    # after the name: state ppid ... utime(14) stime(15) cutime(16) cstime(17), 1-based from pid
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / _TICK


def tree_cpu() -> float:
    """CPU seconds of this process and all its descendants, reaped or running."""
    me = os.getpid()
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    children: dict = {}
    stats: dict = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _proc_stat(int(name))
            if st is not None:
                stats[int(name)] = st[1]
                children.setdefault(st[0], []).append(int(name))
    todo = list(children.get(me, ()))
    while todo:
        pid = todo.pop()
        total += stats.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total


class _Recorder:
    def __init__(self, out_dir: str) -> None:
        os.makedirs(out_dir, exist_ok=True)
        self.path = os.path.join(out_dir, f"{os.getpid()}.jsonl")
        self.file = None
        self.tests = 0
        self.wall = time.monotonic()
        self.cpu = tree_cpu()

    def switch(self, file) -> None:
        wall, cpu = time.monotonic(), tree_cpu()
        if self.file is not None and file != self.file:
            with open(self.path, "a") as f:
                f.write(json.dumps({"file": self.file, "tests": self.tests, "wall": round(wall - self.wall, 2),
                                    "cpu": round(cpu - self.cpu, 2)}) + "\n")
        if file != self.file:
            self.file, self.tests, self.wall, self.cpu = file, 0, wall, cpu
        self.tests += 1


_recorder = None


def pytest_configure(config):
    global _recorder
    out = os.environ.get("KAFKA_TIERED_CPU_REPORT")
    # under xdist only the workers record: the controller's tree holds every worker, and the
    # tests it hears of come from all of them at once
    controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if out and not controller:
        _recorder = _Recorder(out)


def pytest_runtest_logstart(nodeid, location):
    if _recorder is not None:
        _recorder.switch(nodeid.split("::")[0])


def pytest_sessionfinish(session):
    if _recorder is not None:
        _recorder.switch(None)


def main(out_dir: str) -> None:
    rows: dict = {}
    for name in os.listdir(out_dir):
        with open(os.path.join(out_dir, name)) as f:
            for line in f:
                r = json.loads(line)
                acc = rows.setdefault(r["file"], {"tests": 0, "wall": 0.0, "cpu": 0.0})
                for k in ("tests", "wall", "cpu"):
                    acc[k] += r[k]
    total_cpu = sum(r["cpu"] for r in rows.values())
    print(f"{'file':45} {'tests':>5} {'wall':>7} {'cpu':>7}")
    for name, r in sorted(rows.items(), key=lambda kv: -kv[1]["cpu"]):
        print(f"{name:45} {r['tests']:5d} {r['wall']:7.1f} {r['cpu']:7.1f}")
    print(f"{'total':45} {sum(r['tests'] for r in rows.values()):5d} "
          f"{sum(r['wall'] for r in rows.values()):7.1f} {total_cpu:7.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
