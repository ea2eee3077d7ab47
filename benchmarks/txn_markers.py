"""What read_committed pays to find the markers of transactions open at a read's end (issue 33).

    python -m benchmarks.txn_markers                     # 4 partitions x ~40 tiered segments
    python -m benchmarks.txn_markers --txns 400 --out benchmarks/results/txn_markers.json

Set-up: one transactional topic per broker kind (``--partitions`` partitions), written by two
producers whose transactions overlap (``--batches`` batches of 10 records each, ~1.3 KB a batch)
with non-transactional batches between, one transaction in ``--abort-every`` aborted;
``--segment-kib`` segments, all tiered (Aiven layout, ``file://``), then a local tail with one
transaction left open.  Built with the embedded broker's append API, as Kafka's log would hold it.

Measured per locator (``metadata-topic`` and ``listing`` on today's Kafka, ``kip1248`` and
``listing`` on a KIP-1248 broker), for three kinds of read_committed read over every partition:

* ``latest``: to the LSO (the default ``endingOffsets``);
* ``inside``: ``endingOffsets`` at random tiered offsets (``--reads`` reads);
* ``micro-batch``: a stream's catch-up from earliest with ``maxOffsetsPerTrigger`` (per batch).

Per read: the GETs and bytes of later transaction indexes and the broker fetches (and their
bytes) the planner spent finding markers past the ends, as the plan reports them
(``Plan.marker_costs``, what ``estimate`` shows) and as the store saw them (a counting observer
on the planner's fetcher during the search); the read's own GETs (its estimate) for scale.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
TOPIC = "txn-bench"


def _batch(values: list[bytes], pid: int, seq: int, transactional: bool) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(2, 0, transactional, pid, 0 if pid >= 0 else -1, seq, 1 << 20)
    for i, v in enumerate(values):
        b.append(i, 1_760_000_000_000 + i, None, v, [])
    return bytes(b.build())


def build(c, partitions: int, txns: int, batches: int, abort_every: int, seed: int = 7) -> dict:
    """Every partition: ``txns`` transactions per producer, two producers overlapping."""
    rng = random.Random(seed)
    value = b"x" * 120
    aborted = 0
    c.create_topic(TOPIC, partitions)
    for p in range(partitions):
        seq = {1: 0, 2: 0}
        for _ in range(txns):
            fate = {pid: rng.randrange(abort_every) != 0 for pid in (1, 2)}
            for i in range(batches):
                for pid in (1, 2):
                    c.append(TOPIC, p, _batch([value] * 10, pid, seq[pid], True))
                    seq[pid] += 10
                if i % 2:
                    c.append(TOPIC, p, _batch([value] * 10, -1, -1, False))
            for pid in (1, 2):                   # one ends, the other already started the next
                c.write_txn_marker(TOPIC, p, pid, 0, fate[pid])
                aborted += not fate[pid]
    tiered = c.tier(TOPIC)
    for p in range(partitions):                  # the local tail: one transaction left open
        c.append(TOPIC, p, _batch([value] * 10, 3, 0, True))
        c.append(TOPIC, p, _batch([value] * 10, -1, -1, False))
    return {"tiered_segments": len(tiered), "aborted_txns": aborted,
            "offsets": {p: c.offsets(TOPIC, p).last_stable_offset for p in range(partitions)},
            "tiered_end": {p: c.offsets(TOPIC, p).highest_tiered_offset for p in range(partitions)}}


class Watch:
    """Counts the store's GETs during each past-end search (the planner's fetcher observed)."""

    def __init__(self):
        from kafka_tiered_source.planning import txn_ends
        from kafka_tiered_source.storage.observer import CountingObserver
        self.gets = self.bytes = 0
        original = txn_ends.PastEnd._search
        watch = self

        def search(pe):
            f = pe.indexes.fetcher
            seen, before = CountingObserver(), getattr(f, "observer", None)
            f.observer = seen
            try:
                return original(pe)
            finally:
                f.observer = before
                watch.gets += seen.requests
                watch.bytes += seen.bytes
        txn_ends.PastEnd._search = search


def measure(c, remote: str, locator: str, facts: dict, reads: int, max_offsets: int, watch: Watch) -> dict:
    from kafka_tiered_source import planning
    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.planning.estimate import estimate_plan
    from kafka_tiered_source.planning.stream import StreamPlanner, range_options
    from kafka_tiered_source.planning.txn_ends import MarkerCost
    from kafka_tiered_source.protocol.client import BrokerClient
    base = {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": TOPIC,
            "kafka.isolation.level": "read_committed", "remote.storage.uri": f"file://{remote}",
            "remote.segment.locator": locator}
    rng = random.Random(11)
    out = {}

    def one(opts) -> tuple[MarkerCost, int, float, float]:
        from dataclasses import replace
        o = opts if isinstance(opts, ReadOptions) else ReadOptions.parse(opts)
        t0 = time.perf_counter()
        plan = planning.plan(o)
        t1 = time.perf_counter()
        planning.plan(replace(o, isolation_level="read_uncommitted"))      # the same read, uncommitted
        t2 = time.perf_counter()
        spent = MarkerCost()
        for cost in plan.marker_costs.values():
            spent += cost
        return spent, estimate_plan(plan, o).gets, t1 - t0, t2 - t1

    def run(kind: str, all_opts: list) -> None:
        watch.gets = watch.bytes = 0
        total = MarkerCost()
        read_gets = 0
        rc = ru = 0.0
        for opts in all_opts:
            spent, gets, t_rc, t_ru = one(opts)
            total += spent
            read_gets += gets
            rc, ru = rc + t_rc, ru + t_ru
        n = len(all_opts)
        out[kind] = {"reads": n, "index_gets": total.index_gets / n, "index_bytes": total.index_bytes / n,
                     "broker_fetches": total.broker_fetches / n, "broker_bytes": total.broker_bytes / n,
                     "store_gets_seen": watch.gets / n, "store_bytes_seen": watch.bytes / n,
                     "read_gets": read_gets / n, "plan_s_committed": rc / n, "plan_s_uncommitted": ru / n}

    planning.plan(ReadOptions.parse(base))       # warm: the metadata catalog, connections
    run("latest", [base])
    ends = []
    for _ in range(reads):
        ends.append({**base, "endingOffsets": json.dumps({TOPIC: {str(p): rng.randrange(1, e + 1)
                                                                 for p, e in facts["tiered_end"].items()}})})
    run("inside", ends)
    o = ReadOptions.parse({**base, "startingOffsets": "earliest", "maxOffsetsPerTrigger": str(max_offsets)},
                          streaming=True)
    batches = []
    with BrokerClient.for_read(o) as client:
        sp = StreamPlanner(o, client)
        start = sp.initial()
        while True:
            end = sp.next_end(start, limited=True)
            if end == start:
                break
            batches.append(range_options(o, start, end))
            start = end
    run("micro-batch", batches)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--txns", type=int, default=200, help="transactions per producer per partition")
    ap.add_argument("--batches", type=int, default=4, help="batches per transaction")
    ap.add_argument("--abort-every", type=int, default=8)
    ap.add_argument("--segment-kib", type=int, default=64)
    ap.add_argument("--reads", type=int, default=20)
    ap.add_argument("--max-offsets", type=int, default=2_000, help="the stream's maxOffsetsPerTrigger")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from kafka_tiered_source.testing import EmbeddedCluster
    watch = Watch()
    work = tempfile.mkdtemp(prefix="kts-txn-markers-")
    result: dict = {"args": vars(args), "runs": {}}
    for kip, locators in ((False, ("metadata-topic", "listing")), (True, ("kip1248", "listing"))):
        remote = os.path.join(work, f"remote-{kip}")
        with EmbeddedCluster(os.path.join(work, f"broker-{kip}"), remote_storage=f"file://{remote}", kip1248=kip,
                             segment_bytes=args.segment_kib << 10, remote_log_metadata_partitions=3) as c:
            t0 = time.perf_counter()
            facts = build(c, args.partitions, args.txns, args.batches, args.abort_every)
            broker = "KIP-1248 broker" if kip else "today's Kafka"
            print(f"{broker}: {facts['tiered_segments']} tiered segments, "
                  f"{facts['aborted_txns']} aborted transactions, LSOs {facts['offsets']} "
                  f"(built in {time.perf_counter() - t0:.1f} s)", flush=True)
            result["facts" + ("-kip1248" if kip else "-today")] = facts
            for loc in locators:
                got = measure(c, remote, loc, facts, args.reads, args.max_offsets, watch)
                result["runs"][f"{'kip1248-broker' if kip else 'todays-kafka'}/{loc}"] = got
                for kind, r in got.items():
                    print(f"  {loc:15s} {kind:12s} x{r['reads']:<3d} per read: {r['index_gets']:.2f} index GETs "
                          f"({r['index_bytes']:.0f} B; store saw {r['store_gets_seen']:.2f} GETs, "
                          f"{r['store_bytes_seen']:.0f} B), {r['broker_fetches']:.2f} broker fetches "
                          f"({r['broker_bytes']:.0f} B); the read's own GETs {r['read_gets']:.1f}; plan "
                          f"{r['plan_s_committed'] * 1000:.0f} ms committed vs "
                          f"{r['plan_s_uncommitted'] * 1000:.0f} ms uncommitted", flush=True)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
