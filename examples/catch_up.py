"""Catch up from tiered storage, then keep going: a Structured Streaming job with
``spark.readStream.format("kafka-tiered")``.

It starts the embedded broker as today's Kafka (no KIP-1248 answers: the reader finds the tiered
segments in ``__remote_log_metadata``), produces a topic and tiers most of it, then:

1. runs an ``availableNow`` query with ``maxOffsetsPerTrigger`` into Parquet: the history comes
   straight from the object store in rate-limited micro-batches, the untiered tail through the
   broker, and the query stops at the offsets that existed when it started;
2. starts a ``processingTime`` query on the same checkpoint while more records arrive and the
   broker tiers under it, and stops it once they are all in.

Every record ends up in the Parquet table exactly once, which the script checks.

    python examples/catch_up.py
    python examples/catch_up.py --records 200000 --max-offsets 20000
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TOPIC = "events"


def produce(bootstrap: str, start: int, count: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5, "log_level": 0})
    for i in range(start, start + count):
        p.produce(TOPIC, key=b"k%d" % (i % 97), value=b'{"event": %d}' % i, partition=i % 2)
        if i % 10_000 == 0:
            p.poll(0)
    p.flush()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=60_000)
    ap.add_argument("--max-offsets", type=int, default=10_000, help="maxOffsetsPerTrigger")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafka_tiered_source as kts
    from kafka_tiered_source.testing import EmbeddedCluster

    work = tempfile.mkdtemp(prefix="kts-catch-up-")
    remote, out, checkpoint = (os.path.join(work, d) for d in ("remote", "table", "checkpoint"))
    with EmbeddedCluster(os.path.join(work, "broker"), remote_storage=f"file://{remote}",
                         segment_bytes=64 * 1024, kip1248=False) as cluster:
        cluster.create_topic(TOPIC, partitions=2)
        produce(cluster.bootstrap_servers, 0, args.records)
        tiered = cluster.tier()
        print(f"produced {args.records:,} records; {len(tiered)} segments tiered to {remote}")
        spark = (SparkSession.builder.master("local[2]").appName("kafka-tiered-catch-up")
                 .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        kts.register(spark)

        def stream():
            return (spark.readStream.format("kafka-tiered")
                    .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                    .option("subscribe", TOPIC).option("startingOffsets", "earliest")
                    .option("remote.storage.uri", f"file://{remote}")
                    .option("maxOffsetsPerTrigger", str(args.max_offsets)).load())

        t0 = time.perf_counter()
        q = (stream().writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        q.awaitTermination()
        batches = [p for p in q.recentProgress if p["numInputRows"]]
        print(f"catch-up: {sum(p['numInputRows'] for p in batches):,} records in {len(batches)} "
              f"micro-batches, {time.perf_counter() - t0:.1f} s")

        q = (stream().writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", checkpoint).trigger(processingTime="1 second").start())
        more = args.records // 4
        produce(cluster.bootstrap_servers, args.records, more)
        cluster.tier()                       # the broker tiers under the running query
        total = args.records + more
        deadline = time.time() + 120
        while time.time() < deadline and spark.read.parquet(out).count() < total:
            q.processAllAvailable()
        q.stop()
        df = spark.read.parquet(out)
        rows, distinct = df.count(), df.select("partition", "offset").distinct().count()
        print(f"live: {rows - sum(p['numInputRows'] for p in batches):,} more records; the table holds "
              f"{rows:,} rows, {distinct:,} distinct offsets")
        spark.stop()
        if rows != total or distinct != total:
            print(f"MISMATCH: want {total:,} records exactly once")
            return 1
    print(f"every record exactly once; Parquet table at {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
