"""Planning through ``__remote_log_metadata`` when the topic read shares its metadata partition
with the tiering history of the rest of the cluster: the metadata catalog (planning/catalog.py)
against rescanning it on every plan.

    python -m benchmarks.catalog                                  # 160k other records: the plans
    python -m benchmarks.catalog --baseline /tmp/kts-main         # and the same plans before
    python -m benchmarks.catalog --stream 0,20000,80000,320000    # micro-batch planning vs history

Set-up per point: the embedded broker (this process, as Apache Kafka 4.1: ``--no-kip1248``) with
``__remote_log_metadata`` at one partition, a topic ``orders`` of 10 tiered segments, and the
events of ``--others`` segments of other topics (copy started + copy finished: two records
each, version 0, null keys, one record per batch, as TopicBasedRemoteLogMetadataManager's
producer sends them) in the same metadata partition, around the topic's own.  The planners run
in worker processes (a fresh one per "new process"), imports done before any timing.

Plans (``estimate(None, options)`` with ``remote.segment.locator=metadata-topic``; each
``--repeat`` times, best and median):

* ``first``: a new process, an empty cache directory: the catalog scans the metadata partition;
* ``same process``: the next plan in that process (nothing new was written);
* ``new process``: a new process on the same cache directory (the snapshot).

``skip``: microseconds per record passed over, selecting the topic's records out of the whole
metadata partition's bytes (``protocol.metadata_select``, native), against decoding every record
to Arrow and reading each value's topic id in Python (what planning did before).

``--stream``: one stream per history size (others' segments), planned in one worker as Spark's
streaming runner plans it (``StreamPlanner.next_end`` then the plan of the micro-batch's range);
between micro-batches the topic tiers one more segment and the rest of the cluster 200 more
segments.  The time per micro-batch should not grow with the history.

``--baseline DIR``: the same plans with another checkout's planner (an importable tree with its
native extension built, e.g. ``git worktree add DIR <commit>`` then ``python setup.py build_ext
--inplace`` in it), alternating with this one's; ratios after / before.  Results go to
``benchmarks/results/catalog.json``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
TOPIC = "orders"
OWN_SEGMENTS = 10
PER_BATCH_GROWTH = 200          # other segments tiered between two micro-batches

WORKER = r"""
import json, sys, time
import kafka_tiered_source
from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.planning import estimate, online, metadata_topic  # noqa: F401  (imports before timing)
from kafka_tiered_source.planning.stream import StreamPlanner, range_options
from kafka_tiered_source.protocol.client import BrokerClient
import kafka_tiered_source.storage.registry, kafka_tiered_source.storage.fsspec_fetcher, fsspec  # noqa: F401
try:
    from kafka_tiered_source.planning.catalog import CATALOGS
except ImportError:
    CATALOGS = None
stream = None

def replays():
    if CATALOGS is None:
        return None
    return [[r.start, r.next_offset, r.applied, r.passed] for cat in CATALOGS._by_key.values()
            for r in cat.last.values()]

for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["op"] == "plan":
        t0 = time.perf_counter()
        est = kafka_tiered_source.estimate(None, cmd["opts"])
        out = {"wall_s": time.perf_counter() - t0, "remote_ranges": est.remote_ranges}
    else:
        if stream is None:
            opts = ReadOptions.parse(cmd["opts"], streaming=True)
            client = BrokerClient.for_read(opts)
            stream = [opts, StreamPlanner(opts, client), None]
            stream[2] = stream[1].initial()
        opts, planner, position = stream
        t0 = time.perf_counter()
        end = planner.next_end(position, limited=False)
        plan = planning.plan(range_options(opts, position, end))
        out = {"wall_s": time.perf_counter() - t0, "offsets": sum(end[k] - position.get(k, 0) for k in end),
               "remote_ranges": len(plan.remote_ranges)}
        stream[2] = end
    out["replays"] = replays()
    print(json.dumps(out), flush=True)
"""


class Worker:
    """A planner process of one checkout (``tree``)."""

    def __init__(self, tree: str):
        env = {**os.environ, "PYTHONPATH": tree}
        self.p = subprocess.Popen([sys.executable, "-c", WORKER], cwd=tree, env=env, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, cmd: dict) -> dict:
        stdin, stdout = self.p.stdin, self.p.stdout
        assert stdin is not None and stdout is not None    # both piped
        stdin.write(json.dumps(cmd) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"the planner worker exited ({self.p.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.p.stdin:
            self.p.stdin.close()
        self.p.wait(60)


class History:
    """Other topics' segment events, appended straight into the metadata partition."""

    def __init__(self, cluster):
        from kafka_tiered_source.ids import uuid_to_str
        from kafka_tiered_source.protocol import remote_log_metadata as rlm
        from kafka_tiered_source.testing.rlmm import RemoteLogMetadataWriter
        self.cluster, self.rlm = cluster, rlm
        self.rng = random.Random(25)
        self.topics = [(f"other-{i}", uuid_to_str(self.rng.randbytes(16))) for i in range(64)]
        self.buf: list[bytes] = []
        self.writer = RemoteLogMetadataWriter(lambda mp, batch: self.buf.append(batch), 1)
        self.n = 0

    def add(self, segments: int) -> None:
        from kafka_tiered_source.ids import uuid_to_str
        for _ in range(segments):
            name, tid = self.topics[self.n % len(self.topics)]
            i = self.n
            meta = types.SimpleNamespace(topic=name, topic_id=tid, partition=i % 24,
                                         segment_id=uuid_to_str(self.rng.randbytes(16)), base_offset=i * 1000,
                                         end_offset=i * 1000 + 999, max_timestamp=1_760_000_000_000 + i,
                                         leader_epochs={0: i * 1000}, size_bytes=1 << 30, txn_index_empty=True,
                                         copy_epoch=0, custom_metadata_bytes=None)
            self.writer.copy_started(meta, 0)
            self.writer.copy_finished(meta, 0)
            self.n += 1
            if len(self.buf) >= 4000:
                self.flush()
        self.flush()

    def flush(self) -> None:
        if self.buf:
            self.cluster.append(self.rlm.TOPIC, 0, b"".join(self.buf))
            self.buf = []


def own_segment(cluster, n: int) -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(100):
        b.append(i, 1_760_000_000_000 + n * 100 + i, None, b"order-%d-%d" % (n, i), [])
    cluster.append(TOPIC, 0, bytes(b.build()))
    cluster.roll(TOPIC, 0)
    cluster.tier(TOPIC)


def build(cluster, others: int) -> History:
    from kafka_tiered_source.protocol import remote_log_metadata as rlm
    cluster.create_topic(rlm.TOPIC, 1)
    cluster.create_topic(TOPIC, 1)
    history = History(cluster)
    history.add(others // 2)
    for n in range(OWN_SEGMENTS):
        own_segment(cluster, n)
    history.add(others - others // 2)
    return history


def options(cluster, remote: str, cache: str | None) -> dict:
    """The read's options (``cache``: the catalog's directory; None for a checkout without one,
    which refuses the option by name)."""
    opts = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": TOPIC, "remote.storage.uri": remote,
            "remote.segment.locator": "metadata-topic"}
    if cache is not None:
        opts["remote.log.metadata.cache.dir"] = cache
    return opts


def skip_cost(cluster, topic_id: str) -> dict:
    """Microseconds per record passed over: the selector against decode + topic id per value."""
    from kafka_tiered_source.ids import uuid_from_str
    from kafka_tiered_source.protocol import remote_log_metadata as rlm
    from kafka_tiered_source.protocol.client import BrokerClient
    from kafka_tiered_source.protocol.metadata_select import select_records
    from kafka_tiered_source.records import decode
    chunks, offset = [], 0
    with BrokerClient({"bootstrap.servers": cluster.bootstrap_servers}) as client:
        end = cluster.offsets(rlm.TOPIC, 0).high_watermark
        while offset < end:
            res = client.fetch(rlm.TOPIC, 0, offset, max_bytes=8 << 20, partition_max_bytes=8 << 20,
                               max_wait_ms=0, min_bytes=0, isolation_level=0)
            data = bytes(res.records)
            got = select_records(data, [])
            chunks.append(data)
            offset = got.next_offset
    wanted = [uuid_from_str(topic_id)]
    records = sum(select_records(c, None).passed + len(select_records(c, None).hits) for c in chunks)

    def selector() -> None:
        for c in chunks:
            select_records(c, wanted)

    def before() -> None:
        for c in chunks:
            values = decode(c, include_headers=False).column("value").to_pylist()
            for v in values:
                if v is not None and rlm.topic_id_of(v) not in wanted:
                    continue
    out = {"records": records, "bytes": sum(map(len, chunks))}
    for name, fn in (("selector", selector), ("decode_and_topic_id", before)):
        best = min(_timed(fn) for _ in range(3))
        out[f"{name}_us_per_record"] = round(best / records * 1e6, 3)
    out["speedup"] = round(out["decode_and_topic_id_us_per_record"] / out["selector_us_per_record"], 1)
    return out


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@contextlib.contextmanager
def history_cluster(work_dir: str | None, prefix: str, others: int):
    """``(work, remote, cluster, history, build seconds)``: today's Kafka with one metadata
    partition holding ``others`` other segments' events around this benchmark's topic, in a
    work directory removed afterwards."""
    from kafka_tiered_source.testing import EmbeddedCluster
    work = tempfile.mkdtemp(prefix=prefix, dir=work_dir)
    remote = f"file://{work}/remote"
    try:
        with EmbeddedCluster(os.path.join(work, "broker"), remote_storage=remote, kip1248=False,
                             remote_log_metadata_partitions=1) as cluster:
            t0 = time.perf_counter()
            history = build(cluster, others)
            yield work, remote, cluster, history, time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def plans(args, trees: dict[str, str]) -> dict:
    with history_cluster(args.work_dir, "kts-catalog-", args.others) as (work, remote, cluster, _, built_s):
        from kafka_tiered_source.protocol import remote_log_metadata as rlm
        records = cluster.offsets(rlm.TOPIC, 0).high_watermark
        print(f"built: {records:,} records in the metadata partition ({args.others:,} other segments, "
              f"{OWN_SEGMENTS} of {TOPIC}) in {built_s:.1f} s", flush=True)
        got: dict = {name: {"first": [], "same process": [], "new process": []} for name in trees}
        replays: dict = {}
        for rep in range(args.repeat):      # alternating: the machine's noise hits both sides
            for name, tree in trees.items():
                cache = os.path.join(work, f"cache-{name}-{rep}") if name == "after" else None
                opts = options(cluster, remote, cache)
                w = Worker(tree)
                try:
                    first = w.ask({"op": "plan", "opts": opts})
                    same = w.ask({"op": "plan", "opts": opts})
                finally:
                    w.close()
                w = Worker(tree)
                try:
                    new = w.ask({"op": "plan", "opts": opts})
                finally:
                    w.close()
                assert first["remote_ranges"] == same["remote_ranges"] == new["remote_ranges"] >= OWN_SEGMENTS
                for kind, r in (("first", first), ("same process", same), ("new process", new)):
                    got[name][kind].append(r["wall_s"])
                    replays.setdefault(name, {})[kind] = r["replays"]
        skip = skip_cost(cluster, cluster.topic(TOPIC).topic_id)
    rows = {name: {kind: {"best_s": round(min(v), 4), "median_s": round(statistics.median(v), 4)}
                   for kind, v in kinds.items()} for name, kinds in got.items()}
    if "before" in rows:
        for kind in rows["after"]:
            rows["after"][kind]["after_over_before"] = round(
                rows["after"][kind]["median_s"] / rows["before"][kind]["median_s"], 4)
    for name, kinds in rows.items():
        for kind, r in kinds.items():
            print(f"{name:>6} {kind:>13}: best {r['best_s']:.3f} s, median {r['median_s']:.3f} s"
                  + (f", after/before {r['after_over_before']:.3f}" if "after_over_before" in r else ""), flush=True)
    print(f"skip: {skip['selector_us_per_record']} us per record passed over (selector) vs "
          f"{skip['decode_and_topic_id_us_per_record']} us (decode + topic id per value): {skip['speedup']}x", flush=True)
    return {"metadata_records": records, "others": args.others, "plans": rows, "skip": skip, "replays": replays}


def streams(args, trees: dict[str, str]) -> dict:
    out = []
    for others in [int(s) for s in args.stream.split(",")]:
        with history_cluster(args.work_dir, "kts-catalog-stream-", others) as (work, remote, cluster, history,
                                                                               built_s):
            print(f"built {others:,} other segments in {built_s:.1f} s", flush=True)
            workers = {name: Worker(tree) for name, tree in trees.items()}
            walls: dict = {name: [] for name in trees}
            try:
                for batch in range(args.batches):
                    for name, w in workers.items():
                        cache = os.path.join(work, "cache") if name == "after" else None
                        r = w.ask({"op": "batch", "opts": {**options(cluster, remote, cache),
                                                           "startingOffsets": "earliest"}})
                        assert r["offsets"] > 0 and r["remote_ranges"] >= 1
                        if batch:           # the first micro-batch scans the history once
                            walls[name].append(r["wall_s"])
                    own_segment(cluster, OWN_SEGMENTS + batch)
                    history.add(PER_BATCH_GROWTH)
            finally:
                for w in workers.values():
                    w.close()
        row = {"others": others, **{f"{name}_median_s": round(statistics.median(v), 4) for name, v in walls.items()},
               **{f"{name}_max_s": round(max(v), 4) for name, v in walls.items()}}
        out.append(row)
        print(f"stream, {others:>7,} other segments: " + ", ".join(
            f"{name} {row[name + '_median_s'] * 1000:.1f} ms per micro-batch (max {row[name + '_max_s'] * 1000:.1f})"
            for name in trees), flush=True)
    return {"stream": out, "batches": args.batches, "growth_per_batch": PER_BATCH_GROWTH}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--others", type=int, default=80_000, help="other segments (2 metadata records each)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--stream", default=None, help="other segments per point, comma-separated: the stream mode")
    ap.add_argument("--batches", type=int, default=8, help="micro-batches per stream point")
    ap.add_argument("--baseline", default=None, help="a checkout to compare with, before / after alternating")
    ap.add_argument("--work-dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ap.add_argument("--out", default=RESULTS)
    args = ap.parse_args(argv)
    trees = {"after": ROOT, **({"before": os.path.abspath(args.baseline)} if args.baseline else {})}
    result = streams(args, trees) if args.stream else plans(args, trees)
    os.makedirs(args.out, exist_ok=True)
    name = "catalog-stream.json" if args.stream else "catalog.json"
    with open(os.path.join(args.out, name), "w") as fh:
        json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
