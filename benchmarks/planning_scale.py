"""Planning at a large cluster's scale: up to 10k partitions x 100 tiered segments (1M), found
through ``__remote_log_metadata`` whose records are synthesized as the broker writes them.

    python -m benchmarks.planning --synthetic                       # 10k -> 100k -> 1M segments
    python -m benchmarks.planning --synthetic --scale 10000 --repeat 1
    python -m benchmarks.planning --synthetic --synthetic-locators kip1248 --baseline DIR   # same run

Tiering a million real segments is out of reach here (the ``benchmarks.planning`` curve builds
real ones and stops at 100k: ~1.8 M files), and planning reads no segment byte, so each point
is synthesized as a broker that tiered it would leave it:

* a topic of ``scale / --segments`` partitions, each holding ``--segments`` records (offsets
  0..S-1, one producer batch, leader epoch 0) in its local log;
* ``__remote_log_metadata`` (50 partitions, Kafka's partitioner) holding, per partition, one
  copy per offset: a COPY_SEGMENT_STARTED record then a COPY_SEGMENT_FINISHED update, version 0,
  null keys, one record per batch, written by the embedded broker's own
  ``RemoteLogMetadataWriter`` (TopicBasedRemoteLogMetadataManager's format); each copy
  ``--segment-bytes`` long (no object behind it: the plan is made with ``check=False``, and a
  copy smaller than ``partition.target.bytes`` is never split, so no index is read).

The data is built in a worker, served by ``kafka-tiered broker`` in a subprocess, and planned in
a fresh planner process per point (``remote.segment.locator=metadata-topic``):

* ``first``: the plan of a new process (the catalog reads the metadata partitions: the topic's
  2 x scale records, among nothing else's, and writes its snapshots, as by default, here under
  the work directory);
* ``later``: the next plans in that process (the catalog is current; best of ``--repeat``);
* ``snapshot``: the plan of another new process, which finds the snapshots the first wrote
  (a later driver: it reads them, then only what the metadata partitions gained since).

Per plan: wall and CPU seconds, the planner's peak RSS (VmHWM), the tasks and the pickled size
of each task as Spark ships it (the :class:`TaskPartition`; largest, mean, total).  Targets: a
plan <= 30 s and <= 2 GiB RSS at 1M; tasks bounded in size.  Results go to
``benchmarks/results/planning_scale.json``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPIC = "big"
METADATA_PARTITIONS = 50

# The planner: one process per point; each line in is a plan to make, each line out its figures.
WORKER = r"""
import json, os, pickle, sys, time
from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.planning import metadata_topic, online  # noqa: F401  (imports before timing)
from kafka_tiered_source.spark.datasource import TaskPartition

def hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0

for line in sys.stdin:
    opts = json.loads(line)
    c0, t0 = time.process_time(), time.perf_counter()
    plan = planning.plan(ReadOptions.parse(opts))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    sizes = [len(pickle.dumps(TaskPartition(t, "0" * 32, len(plan.tasks)))) for t in plan.tasks]
    ranges = [len(t.ranges) for t in plan.tasks]
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "rss_peak": hwm(), "tasks": len(plan.tasks),
                      "segments": plan.remote_segments, "remote_ranges": sum(ranges),
                      "max_ranges_per_task": max(ranges, default=0),
                      "task_bytes_max": max(sizes, default=0), "task_bytes_mean": sum(sizes) / max(1, len(sizes)),
                      "task_bytes_total": sum(sizes)}), flush=True)
    del plan
"""


def build(data_dir: str, remote: str, partitions: int, segments: int, segment_bytes: int) -> float:
    """The topic and its copies' metadata, as a broker that tiered them writes it."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from kafka_tiered_source.ids import uuid_to_str
    from kafka_tiered_source.protocol import remote_log_metadata as rlm
    from kafka_tiered_source.testing import EmbeddedCluster
    from kafka_tiered_source.testing.rlmm import RemoteLogMetadataWriter
    t0 = time.perf_counter()
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i in range(segments):
        b.append(i, 1_760_000_000_000 + i, None, b"v%d" % i, [])
    batch = bytes(b.build())
    with EmbeddedCluster(data_dir, remote_storage=remote, segment_bytes=1 << 30) as cluster:
        cluster.create_topic(rlm.TOPIC, METADATA_PARTITIONS)
        topic_id = cluster.create_topic(TOPIC, partitions).topic_id
        bufs: dict[int, list[bytes]] = {}
        writer = RemoteLogMetadataWriter(lambda mp, data: bufs.setdefault(mp, []).append(data),
                                         METADATA_PARTITIONS)
        seq = 0
        for p in range(partitions):
            cluster.append(TOPIC, p, batch)
            for i in range(segments):
                seq += 1
                meta = types.SimpleNamespace(
                    topic=TOPIC, topic_id=topic_id, partition=p, segment_id=uuid_to_str(seq.to_bytes(16, "big")),
                    base_offset=i, end_offset=i, max_timestamp=1_760_000_000_000 + i, leader_epochs={0: i},
                    size_bytes=segment_bytes, txn_index_empty=True, copy_epoch=0, custom_metadata_bytes=None)
                writer.copy_started(meta, 0)
                writer.copy_finished(meta, 0)
            if sum(len(v) for v in bufs.values()) >= 20000:
                _flush(cluster, rlm.TOPIC, bufs)
        _flush(cluster, rlm.TOPIC, bufs)
    return time.perf_counter() - t0


def _flush(cluster, topic: str, bufs: dict) -> None:
    for mp, batches in bufs.items():
        if batches:
            cluster.append(topic, mp, b"".join(batches))
    bufs.clear()


def run_point(scale: int, segments: int, segment_bytes: int, repeat: int, work_dir: str | None) -> dict:
    from benchmarks.planning import Tree
    partitions = scale // segments
    work = tempfile.mkdtemp(prefix="kts-plan-scale-", dir=work_dir)
    tree = Tree(ROOT)
    try:
        data_dir, remote = os.path.join(work, "broker"), f"file://{work}/remote"
        os.makedirs(os.path.join(work, "remote"), exist_ok=True)
        code = (f"from benchmarks.planning_scale import build; import json; "
                f"print(json.dumps(build({data_dir!r}, {remote!r}, {partitions}, {segments}, {segment_bytes})))")
        built = float(subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=tree.env, check=True,
                                     capture_output=True, text=True).stdout.strip().splitlines()[-1])
        print(f"built {partitions:,} partitions x {segments} segments = {partitions * segments:,} copies "
              f"in {built:.0f} s", flush=True)
        bootstrap, _ = tree.broker(data_dir, remote)
        worker = subprocess.Popen([sys.executable, "-c", WORKER], cwd=ROOT, env=tree.env, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        tree.procs.append(worker)
        # the catalog's snapshots (written by the first plan, as by default) go with the work dir
        opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC, "remote.storage.uri": remote,
                "remote.segment.locator": "metadata-topic",
                "remote.log.metadata.cache.dir": os.path.join(work, "catalog")}
        load = os.getloadavg()[0]
        first = Tree.plan(worker, opts)
        later = [Tree.plan(worker, opts) for _ in range(repeat)]
        best = min(later, key=lambda r: r["wall_s"]) if later else None
        # a new process that finds the snapshots the first one wrote (tomorrow's driver)
        again = subprocess.Popen([sys.executable, "-c", WORKER], cwd=ROOT, env=tree.env, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        tree.procs.append(again)
        snapshot = Tree.plan(again, opts)
        row = {"segments": partitions * segments, "partitions": partitions, "segments_per_partition": segments,
               "segment_bytes": segment_bytes, "build_s": round(built, 1), "load_1min": round(load, 2),
               "first": first, "later": best, "snapshot": snapshot}
        assert first["segments"] == partitions * segments, f"planned {first['segments']} copies"
        return row
    finally:
        tree.close()
        shutil.rmtree(work, ignore_errors=True)


# The KIP-1248 curve's broker: partitions synthesized as tiered (testing/synthetic_tiers.py), in
# a process of its own; it prints its address, then serves until its stdin closes.
KIP1248_BROKER = r"""
import gc, sys, time
from kafka_tiered_source.testing import EmbeddedCluster
from kafka_tiered_source.testing.synthetic_tiers import SyntheticTiers, synthesize
data_dir, remote, topic, partitions, segments, segment_bytes = sys.argv[1:7]
t0 = time.perf_counter()
with EmbeddedCluster(data_dir, remote_storage=remote) as cluster:
    cluster.create_topic(topic, int(partitions))
    synthesize(cluster.storage, topic, SyntheticTiers(int(segments), batch_bytes=int(segment_bytes)))
    # What the build made (10k partitions' logs, locks, held copies: ~millions of objects) lives
    # as long as the broker: out of the collector's generations, as a server's start-up state
    # (a JVM broker's old generation is not walked by its young collections).  Each full
    # collection the answers' allocations triggered walked all of it: 1M answers, broker
    # 13.9 -> 10.0 CPU-s.
    gc.freeze()
    print(f"built {time.perf_counter() - t0:.1f} s; bootstrap servers: {cluster.bootstrap_servers}", flush=True)
    sys.stdin.read()
"""


def run_kip1248_point(scale: int, segments: int, segment_bytes: int, repeat: int, work_dir: str | None,
                      tree_root: str = ROOT) -> dict:
    """The KIP-1248 walk at ``scale`` copies: ``scale / segments`` partitions of ``segments``
    one-record copies, synthesized by the broker (testing/synthetic_tiers.py: metadata, batch
    tables and indexes as a tiering broker keeps them, no segment bytes), planned with
    ``remote.segment.locator=kip1248`` in a new planner process: ``first`` (its first plan),
    ``later`` (best of ``repeat`` more).  Each plan also says what the broker's process spent
    meanwhile (``broker_cpu_s``: a real broker answers in Java, and on this 2-core machine the
    embedded one's Python competes with the planner for the cores).  ``tree_root``: the checkout
    whose broker and planner run (``--baseline``: another one's, in the same run)."""
    from benchmarks.backfill import cpu_seconds
    from benchmarks.planning import Tree
    partitions = scale // segments
    work = tempfile.mkdtemp(prefix="kts-plan-kip1248-", dir=work_dir)
    tree = Tree(tree_root)
    try:
        data_dir, remote = os.path.join(work, "broker"), f"file://{work}/remote"
        broker = subprocess.Popen([sys.executable, "-c", KIP1248_BROKER, data_dir, remote, TOPIC, str(partitions),
                                   str(segments), str(segment_bytes)], cwd=tree.tree, env=tree.env, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        tree.procs.append(broker)
        assert broker.stdout is not None     # piped
        line = broker.stdout.readline()
        if "bootstrap servers: " not in line:
            raise RuntimeError(f"the synthesized broker did not start ({broker.wait()})")
        built, bootstrap = float(line.split()[1]), line.split("bootstrap servers: ")[1].strip()
        print(f"synthesized {partitions:,} partitions x {segments} segments = {partitions * segments:,} copies "
              f"in {built:.0f} s", flush=True)
        worker = subprocess.Popen([sys.executable, "-c", WORKER], cwd=tree.tree, env=tree.env, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        tree.procs.append(worker)
        opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC, "remote.storage.uri": remote,
                "remote.segment.locator": "kip1248"}

        def planned() -> dict:
            c0 = cpu_seconds(broker.pid)
            r = Tree.plan(worker, opts)
            r["broker_cpu_s"] = round(cpu_seconds(broker.pid) - c0, 2)
            r["broker_rss_peak"] = _vm_hwm(broker.pid)      # its held copies count too
            return r
        load = os.getloadavg()[0]
        first = planned()
        print(f"first plan: {json.dumps(first)}", flush=True)
        later = [planned() for _ in range(repeat)]
        best = min(later, key=lambda r: r["wall_s"]) if later else None
        row = {"locator": "kip1248", "tree": "baseline" if tree_root != ROOT else "this", "segments": partitions * segments, "partitions": partitions,
               "segments_per_partition": segments, "segment_bytes": segment_bytes, "build_s": round(built, 1),
               "load_1min": round(load, 2), "first": first, "later": best}
        assert first["segments"] == partitions * segments, f"planned {first['segments']} copies"
        return row
    finally:
        tree.close()
        shutil.rmtree(work, ignore_errors=True)


def _vm_hwm(pid: int) -> int:
    """A process's peak RSS (VmHWM), in bytes; 0 where /proc does not say."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _print(row: dict, kinds) -> None:
    for kind in kinds:
        r = row.get(kind)
        if r is None:
            continue
        broker = f", broker CPU {r['broker_cpu_s']:.2f} s" if "broker_cpu_s" in r else ""
        if r.get("broker_rss_peak"):
            broker += f" (peak RSS {r['broker_rss_peak'] / 2**20:,.0f} MiB)"
        tree = f" [{row['tree']}]" if row.get("tree") == "baseline" else ""
        print(f"{row.get('locator', 'metadata-topic'):>14}{tree} {row['segments']:>9,} copies ({row['partitions']:,} "
              f"partitions), {kind:>8} plan: wall {r['wall_s']:7.2f} s ({r['wall_s'] / 30:.2f} of 30 s; "
              f"{1000 * r['wall_s'] / row['segments']:.3f} ms per copy), planner CPU {r['cpu_s']:.2f} s{broker}, peak RSS "
              f"{r['rss_peak'] / 2**20:,.0f} MiB ({r['rss_peak'] / 2**31:.2f} of 2 GiB); {r['tasks']:,} tasks, "
              f"<= {r['max_ranges_per_task']} ranges, pickled <= {r['task_bytes_max']:,} B (mean "
              f"{r['task_bytes_mean']:,.0f}, total {r['task_bytes_total'] / 2**20:,.1f} MiB); load {row['load_1min']}",
              flush=True)


def main(args) -> int:
    counts = [int(s) for s in (args.scale or "10000,100000,1000000").split(",")]
    base = args.work_dir or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
    if base:
        os.makedirs(base, exist_ok=True)    # --work-dir names a directory to make, as --out does
    locators = (getattr(args, "synthetic_locators", None) or "metadata-topic,kip1248").split(",")
    kip1248_rows = []
    if "kip1248" in locators:
        baseline = getattr(args, "baseline", None)
        for n in counts:
            # with --baseline, that checkout's broker and planner first, then this one's: the same run
            for root in ([os.path.abspath(baseline)] if baseline else []) + [ROOT]:
                kip1248_rows.append(run_kip1248_point(n, args.segments_per_partition, args.segment_bytes,
                                                      args.repeat, base, root))
                _print(kip1248_rows[-1], ("first", "later"))
            if baseline:
                before, after = kip1248_rows[-2]["first"], kip1248_rows[-1]["first"]
                print(f"{'kip1248':>14} {n:>9,} copies, first plan after / before: wall "
                      f"{after['wall_s'] / before['wall_s']:.2f}, planner CPU {after['cpu_s'] / before['cpu_s']:.2f}, "
                      f"broker CPU {after['broker_cpu_s'] / max(before['broker_cpu_s'], 1e-9):.2f}", flush=True)
    rows = []
    for n in (counts if "metadata-topic" in locators else ()):
        row = run_point(n, args.segments_per_partition, args.segment_bytes, args.repeat, base)
        rows.append(row)
        for kind in ("first", "later", "snapshot"):
            r = row[kind]
            if r is None:
                continue
            print(f"{row['segments']:>9,} copies ({row['partitions']:,} partitions), {kind:>8} plan: "
                  f"{r['wall_s']:7.2f} s ({r['wall_s'] / 30:.2f} of 30 s; {1000 * r['wall_s'] / row['segments']:.3f} ms "
                  f"per copy), CPU {r['cpu_s']:.2f} s, peak RSS {r['rss_peak'] / 2**20:,.0f} MiB "
                  f"({r['rss_peak'] / 2**31:.2f} of 2 GiB); {r['tasks']:,} tasks, <= {r['max_ranges_per_task']} ranges, "
                  f"pickled <= {r['task_bytes_max']:,} B (mean {r['task_bytes_mean']:,.0f}, total "
                  f"{r['task_bytes_total'] / 2**20:,.1f} MiB); load {row['load_1min']}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "planning_scale.json"), "w") as fh:
        json.dump({"rows": rows, "kip1248": kip1248_rows}, fh, indent=1)
    return 0
