"""End-to-end Spark read throughput of the ``kafka-tiered`` source, against the engine's own
ceiling measured in the same run.

    python -m benchmarks.spark_read [--records N] [--size BYTES] [--partitions P] [--repeat R]

Data: ``--records`` records (16-byte keys, ``--size``-byte values of words from a 1,000-word
vocabulary, so they compress as real payloads do; no headers), spread over ``--partitions``
partitions, one topic per codec of ``--codecs`` (``none`` by default; ``none,lz4,zstd`` for the
compressed comparison) in the embedded broker, written as producer-shaped v2 batches
(kafka-python's ``DefaultRecordBatchBuilder``) appended straight into the log (no network),
every segment rolled and tiered to ``file://`` storage.

Each configuration is a Spark job with a noop sink (``df.write.format("noop")``) on local[2]:

* ``ceiling``: a Python data source that yields ready-made Arrow batches of the same schema and
  shape (same rows and sizes, the first codec's topic name in the topic column, same number of
  Spark partitions) — what Spark costs with no Kafka at all.  Its batches hold
  ``--ceiling-batch-rows`` rows (65,536 by default, the fastest size measured on local[2];
  ``kafka-tiered`` yields batches of about as many rows, cut where a Kafka batch ends
  (``records.Batcher``); pass 0 to give the ceiling one batch per tiered range, ~500,000 rows
  here, which costs Spark itself ~15% more);
* ``direct``: ``kafka-tiered`` reading the tiered segments from storage (the default); with
  several codecs, ``direct-<codec>`` per codec: the same rows, decompressed on the way;
* ``broker``: ``kafka-tiered`` with ``fetch.remote.enabled=false`` — every record through the
  embedded broker's Fetch, which reads remote storage itself (the first codec's topic).

Figures are the best of ``--repeat`` runs after a warm-up; ratios are against the ceiling.
MB/s counts Kafka log bytes (the tiered segments' size) for every configuration.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPIC = "bench"
KEY_BYTES = 16


# ---------------------------------------------------------------------------------------------
# the ceiling: ready-made Arrow batches of Spark's Kafka schema

def _binary_column(data: bytes, width: int, n: int):
    """``n`` values of ``width`` bytes each, as a plain ``binary`` Arrow array (no copy)."""
    import numpy as np
    import pyarrow as pa
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _fill(pattern: bytes, size: int) -> bytes:
    return (pattern * (size // len(pattern) + 1))[:size]


def _ceiling_source():
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class CeilingReader(DataSourceReader):
        def __init__(self, options):
            self.rows = int(options["rows"])
            self.tasks = int(options["tasks"])
            self.batch_rows = int(options["batchrows"])
            self.value_bytes = int(options["valuebytes"])
            # the topic column's name as the read's: "bench-none" with several codecs, so
            # every row carries as many bytes through the IPC and the JVM as the read's
            self.topic = options.get("topic", TOPIC)

        def partitions(self):
            return [InputPartition(i) for i in range(self.tasks)]

        def read(self, partition):
            import numpy as np
            import pyarrow as pa

            from kafka_tiered_source.spark.schema import arrow_schema
            share = self.rows // self.tasks + (partition.value < self.rows % self.tasks)
            n = min(self.batch_rows, share)
            # every column built with vectorised copies (tens of ms), once, before the first row
            noise = random.Random(partition.value).randbytes(1 << 16)
            keys = _binary_column(_fill(noise, n * KEY_BYTES), KEY_BYTES, n)
            values = _binary_column(_fill(noise[::-1], n * self.value_bytes), self.value_bytes, n)
            name = self.topic.encode()
            topic = _binary_column(name * n, len(name), n).view(pa.string())
            ts = pa.array(np.full(n, 1_700_000_000_000_000, np.int64)).view(pa.timestamp("us", tz="UTC"))
            batch = pa.RecordBatch.from_arrays(
                [keys, values, topic, pa.array(np.full(n, partition.value, np.int32)),
                 pa.array(np.arange(n, dtype=np.int64)), ts, pa.array(np.zeros(n, np.int32))],
                schema=arrow_schema(False))
            done = 0
            while done < share:
                m = min(n, share - done)
                yield batch if m == n else batch.slice(0, m)
                done += m

    class Ceiling(DataSource):
        @classmethod
        def name(cls):
            return "bench-arrow-ceiling"

        def schema(self):
            from kafka_tiered_source.spark.schema import ddl
            return ddl(False)

        def reader(self, schema):
            return CeilingReader(self.options)

    return Ceiling


# ---------------------------------------------------------------------------------------------
# data

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _words(rnd: random.Random) -> list[bytes]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [("".join(rnd.choice(letters) for _ in range(rnd.randint(3, 10)))).encode() + b" "
            for _ in range(1000)]


def _batch(n: int, value_bytes: int, seed: int, codec: str = "none") -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder
    rnd = random.Random(seed)
    words = _words(random.Random(7))
    b = DefaultRecordBatchBuilder(magic=2, compression_type=CODECS[codec], is_transactional=0,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    now = 1_700_000_000_000
    for i in range(n):
        value = bytearray()
        while len(value) < value_bytes:
            value += rnd.choice(words)
        b.append(i, now + i, rnd.randbytes(KEY_BYTES), bytes(value[:value_bytes]), [])
    return bytes(b.build())


def build_topic(cluster, records: int, partitions: int, value_bytes: int, batch_records: int,
                topic: str = TOPIC, codec: str = "none") -> int:
    """Fill the topic and tier it all; returns the tiered log bytes."""
    cluster.create_topic(topic, partitions=partitions)
    # a few distinct batches, appended round-robin: the broker assigns the offsets
    batches = [_batch(batch_records, value_bytes, seed, codec) for seed in range(8)]
    per_part = records // partitions
    for p in range(partitions):
        left, i = per_part + (p < records % partitions), 0
        while left > 0:
            data = batches[i % len(batches)] if left >= batch_records else _batch(left, value_bytes, 99, codec)
            cluster.append(topic, p, data)
            left -= min(left, batch_records)
            i += 1
        cluster.roll(topic, p)
    cluster.tier(topic)
    total = 0
    for p in range(partitions):
        segs = cluster.remote_segments(topic, p)
        assert segs, f"nothing tiered for {topic}-{p}"
        total += sum(s.size_bytes for s in segs)
    return total


# ---------------------------------------------------------------------------------------------
# running

def _session():
    from pyspark.sql import SparkSession
    paths = [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                      PYTHONPATH=os.pathsep.join(paths))
    return (SparkSession.builder.master("local[2]").appName("kafka-tiered-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false")
            .getOrCreate())


def _tree() -> dict:
    """CPU seconds and minor page faults of this process's descendants (the JVM, the Python
    workers and their daemon), by kind: ``jvm``, ``python``; each with what its reaped children
    took (so a worker that exits between two looks still counts, in its parent)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats, parent = {}, {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        comm, rest = raw[raw.index("(") + 1:raw.rindex(")")], raw[raw.rindex(")") + 2:].split()
        parent[int(pid)] = int(rest[1])
        # utime stime cutime cstime (fields 14-17), minflt cminflt (10, 11)
        stats[int(pid)] = (comm, (int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14])) / tick,
                           int(rest[7]) + int(rest[8]))
    me, out = os.getpid(), {"jvm": [0.0, 0], "python": [0.0, 0]}
    for pid, (comm, cpu, flt) in stats.items():
        p = parent.get(pid)
        while p not in (None, 0, 1, me):
            p = parent.get(p)
        if p == me:
            kind = out["jvm" if comm == "java" else "python"]
            kind[0] += cpu
            kind[1] += flt
    return out


def _timed(configs: dict, repeat: int, cpu: dict | None = None) -> dict:
    """Best wall time per configuration; the configurations take turns, so a slow spell of a
    shared machine hits them alike.  ``cpu``: filled with each configuration's CPU seconds and
    minor page faults per run, JVM and Python workers (the mean over the timed runs)."""
    for make in configs.values():             # warm-up: Python workers, imports, page cache
        make().write.format("noop").mode("overwrite").save()
    best = dict.fromkeys(configs, float("inf"))
    for _ in range(repeat):
        for name, make in configs.items():
            before = _tree() if cpu is not None else None
            t0 = time.perf_counter()
            make().write.format("noop").mode("overwrite").save()
            best[name] = min(best[name], time.perf_counter() - t0)
            if cpu is not None and before is not None:
                after = _tree()
                acc = cpu.setdefault(name, [0.0, 0.0, 0.0, 0.0])
                for i, (kind, j) in enumerate((("jvm", 0), ("python", 0), ("jvm", 1), ("python", 1))):
                    acc[i] += (after[kind][j] - before[kind][j]) / repeat
    return best


def _count(df) -> int:
    return df.count()


def machine() -> str:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    import pyspark
    return (f"{os.cpu_count()} CPUs ({model or platform.processor()}), Python {platform.python_version()}, "
            f"pyspark {pyspark.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--size", type=int, default=100, help="value bytes (keys are 16 bytes)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--batch-records", type=int, default=4096, help="records per Kafka batch")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--target-bytes", type=int, default=None,
                    help="partition.target.bytes for kafka-tiered (default: the source's 128 MiB)")
    ap.add_argument("--ceiling-batch-rows", type=int, default=65536,
                    help="rows per Arrow batch of the ceiling (65536: the fastest size measured here; 0: "
                         "rows per tiered range, the batch size kafka-tiered yields)")
    ap.add_argument("--skip-broker", action="store_true", help="leave out the broker-mediated run")
    ap.add_argument("--cpu", action="store_true",
                    help="also print each configuration's CPU seconds and minor page faults per run "
                         "(JVM, Python workers), read from /proc")
    ap.add_argument("--codecs", default="none",
                    help="one topic per codec, comma-separated (none, gzip, snappy, lz4, zstd)")
    args = ap.parse_args(argv)
    codecs = args.codecs.split(",")
    unknown = [c for c in codecs if c not in CODECS]
    if unknown:
        ap.error(f"unknown codec(s) {unknown}; known: {', '.join(CODECS)}")

    import kafka_tiered_source.spark as kts
    from kafka_tiered_source import planning
    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.testing import EmbeddedCluster

    print(machine())
    print(f"load average (1 min) at the start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="kts-spark-bench-") as d, \
            EmbeddedCluster(os.path.join(d, "data"), remote_storage=f"file://{d}/remote",
                            segment_bytes=64 << 20) as cluster:
        t0 = time.perf_counter()
        topics = {c: TOPIC if len(codecs) == 1 else f"{TOPIC}-{c}" for c in codecs}
        log_bytes = {c: build_topic(cluster, args.records, args.partitions, args.size, args.batch_records,
                                    topics[c], c) for c in codecs}
        print(f"data: {args.records:,} records, {args.partitions} partitions, "
              + ", ".join(f"{c} {b / 1e6:.1f} MB" for c, b in log_bytes.items())
              + f" tiered (built in {time.perf_counter() - t0:.1f} s)")
        base = {"kafka.bootstrap.servers": cluster.bootstrap_servers,
                "remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{d}/remote"}
        if args.target_bytes:
            base["partition.target.bytes"] = str(args.target_bytes)
        options = {c: {**base, "subscribe": topics[c]} for c in codecs}
        plan = planning.plan(ReadOptions.parse(options[codecs[0]]))
        tasks = len(plan.tasks)
        ranges = sum(len(t.ranges) for t in plan.tasks)
        batch_rows = args.ceiling_batch_rows or -(-args.records // ranges)
        assert not plan.broker_ranges, "the benchmark topic should be fully tiered"
        for c in codecs[1:]:     # the ceiling has the first codec's task count: keep them alike
            other = planning.plan(ReadOptions.parse(options[c]))
            if len(other.tasks) != tasks:
                print(f"note: {c} plans {len(other.tasks)} Spark tasks, the ceiling {tasks}")

        spark = _session()
        spark.sparkContext.setLogLevel("ERROR")
        kts.register(spark)
        spark.dataSource.register(_ceiling_source())

        def reader(fmt, opts):
            r = spark.read.format(fmt)
            for k, v in opts.items():
                r = r.option(k, v)
            return r.load()

        configs = {
            "ceiling": lambda: reader("bench-arrow-ceiling", {
                "rows": str(args.records), "tasks": str(tasks), "batchrows": str(batch_rows),
                "valuebytes": str(args.size), "topic": topics[codecs[0]]}),
        }
        for c in codecs:
            name = "direct" if len(codecs) == 1 else f"direct-{c}"
            configs[name] = lambda o=options[c]: reader("kafka-tiered", o)
        if not args.skip_broker:
            first = options[codecs[0]]
            configs["broker"] = lambda: reader("kafka-tiered", {**first, "fetch.remote.enabled": "false"})
        for name, make in configs.items():       # correctness first: every config sees every row
            n = _count(make())
            assert n == args.records, f"{name}: {n} rows, want {args.records}"
        cpu: dict | None = {} if args.cpu else None
        results = _timed(configs, args.repeat, cpu)
        spark.stop()

    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")
    ceiling = results["ceiling"]
    print(f"\n{tasks} Spark tasks ({ranges} tiered ranges), ceiling batches of {batch_rows:,} rows, "
          f"local[2], noop sink, best of {args.repeat}")
    print(f"{'config':<14}{'seconds':>8}{'M rows/s':>11}{'log MB/s':>10}{'vs ceiling':>12}")
    for name, secs in results.items():
        codec = name.split("-", 1)[1] if name.startswith("direct-") else codecs[0]
        print(f"{name:<14}{secs:>8.2f}{args.records / secs / 1e6:>11.2f}"
              f"{log_bytes[codec] / secs / 1e6:>10.0f}{ceiling / secs:>12.2f}")
    if cpu:
        print(f"\nper run, mean of {args.repeat}: CPU seconds and minor page faults (thousands), from /proc")
        print(f"{'config':<14}{'JVM CPU':>8}{'Py CPU':>8}{'total':>8}{'JVM flt':>9}{'Py flt':>9}")
        for name, (jvm, py, jflt, pflt) in cpu.items():
            print(f"{name:<14}{jvm:>8.2f}{py:>8.2f}{jvm + py:>8.2f}{jflt / 1e3:>9.1f}{pflt / 1e3:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
