"""Catch-up throughput: a rate-limited ``Trigger.AvailableNow`` stream against the batch read of
the same tiered data, in the same run.

    python -m benchmarks.catch_up                      # 4x (400,000 records), 4 partitions
    python -m benchmarks.catch_up --size 16 --max-offsets 200000

Data as the backfill benchmark builds it (producer-shaped zstd / lz4 batches, every segment
tiered), behind the embedded broker in this process with the objects on ``file://`` (no store
latency: the comparison is of the two query paths, not of the store).  Ways, local[2], noop sink:

* ``batch``: ``spark.read.format("kafka-tiered")`` of the whole topic;
* ``stream``: ``spark.readStream`` from ``earliest`` with ``maxOffsetsPerTrigger`` and
  ``availableNow``, as a catch-up job runs (one plan and one Spark job per micro-batch).

Prints the wall times, records per second, micro-batches and the stream/batch throughput ratio;
``--out`` writes them as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from .backfill import _session, build_topics, spark_read


def stream_read(spark, options: dict, checkpoint: str) -> tuple[float, int, int]:
    r = spark.readStream.format("kafka-tiered")
    for k, v in options.items():
        r = r.option(k, v)
    t0 = time.perf_counter()
    q = (r.load().writeStream.format("noop").option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    wall = time.perf_counter() - t0
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    return wall, sum(p["numInputRows"] for p in batches), len(batches)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=4, help="multiple of 100,000 records")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--max-offsets", type=int, default=100_000, help="maxOffsetsPerTrigger")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--out", default=None, help="write the result as JSON here")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="kts-catch-up-bench-")
    remote = os.path.join(work, "remote")
    facts = build_topics(os.path.join(work, "broker"), f"file://{remote}", [args.size], 100_000,
                         args.partitions, 16 << 20, 500)[args.size]
    from kafka_tiered_source.testing import EmbeddedCluster
    with EmbeddedCluster(os.path.join(work, "broker"), remote_storage=f"file://{remote}") as cluster:
        spark = _session(args.cores)
        try:
            opts = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": facts["topic"],
                    "remote.storage.uri": f"file://{remote}", "minPartitions": str(args.partitions)}
            spark_read(spark, opts)                                  # warm up
            batch_wall, stats = spark_read(spark, opts)
            stream_opts = {**opts, "startingOffsets": "earliest", "maxOffsetsPerTrigger": str(args.max_offsets)}
            stream_wall, rows, batches = stream_read(spark, stream_opts, os.path.join(work, "cp"))
        finally:
            spark.stop()
    n = facts["records"]
    result = {
        "records": n, "log_bytes": facts["log_bytes"], "max_offsets_per_trigger": args.max_offsets,
        "cores": args.cores, "batch_wall_s": batch_wall, "batch_rows": stats.records,
        "stream_wall_s": stream_wall, "stream_rows": rows, "micro_batches": batches,
        "stream_vs_batch_throughput": (rows / stream_wall) / (stats.records / batch_wall),
    }
    print(f"{n:,} records, {facts['log_bytes'] / 1e6:.0f} MB tiered, local[{args.cores}]")
    print(f"  batch   {batch_wall:6.2f} s  {stats.records / batch_wall / 1e6:.3f} M rows/s")
    print(f"  stream  {stream_wall:6.2f} s  {rows / stream_wall / 1e6:.3f} M rows/s  "
          f"({batches} micro-batches of <= {args.max_offsets:,} offsets)")
    print(f"  stream / batch throughput: {result['stream_vs_batch_throughput']:.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if rows == n and stats.records == n else 1


if __name__ == "__main__":
    sys.exit(main())
