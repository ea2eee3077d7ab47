"""A backfill over Spark Connect: the client holds no SparkContext and no accumulator, as on
Databricks serverless and shared clusters.

It starts the embedded broker as today's Kafka (tiered segments found in
``__remote_log_metadata``), produces a topic and tiers most of it, then, from a Spark Connect
session (pyspark's local Connect server by default, or any ``sc://`` URL):

1. ``kafka_tiered_source.register(spark)`` — works on Connect; each task's totals go to the
   session's metrics directory (``--metrics-dir``: a location every executor can write; by
   default each machine's temp directory, which serves a local server);
2. ``estimate()`` before reading, then ``spark.read.format("kafka-tiered")``;
3. ``last_read_stats(spark)`` and ``cost_report`` — read back by a one-task Spark job on the
   cluster, so the client needs no access to the metrics directory;
4. the same read with ``kafka_tiered_source.read(spark, ...)`` (the function that also runs on
   Spark 3.4/3.5), which must give the same rows.

    python examples/connect.py
    python examples/connect.py --remote sc://spark-connect.example:15002 --metrics-dir s3://bucket/kt-metrics
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TOPIC = "orders"


def produce(bootstrap: str, count: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 5, "log_level": 0})
    for i in range(count):
        p.produce(TOPIC, key=b"customer-%d" % (i % 101), value=b'{"order": %d, "total": %d}' % (i, i % 977),
                  partition=i % 3)
        if i % 10_000 == 0:
            p.poll(0)
    p.flush()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--remote", default=os.environ.get("SPARK_REMOTE", "local[2]"),
                    help="Spark Connect URL (default: pyspark's local Connect server, local[2])")
    ap.add_argument("--metrics-dir", default=None, help="where tasks write their metrics (default: temp dir)")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafka_tiered_source as kts
    from kafka_tiered_source.testing import EmbeddedCluster

    work = tempfile.mkdtemp(prefix="kts-connect-")
    remote = os.path.join(work, "remote")
    with EmbeddedCluster(os.path.join(work, "broker"), remote_storage=f"file://{remote}",
                         segment_bytes=64 * 1024, kip1248=False) as cluster:
        cluster.create_topic(TOPIC, partitions=3)
        produce(cluster.bootstrap_servers, args.records)
        tiered = cluster.tier()
        print(f"produced {args.records:,} records; {len(tiered)} segments tiered to {remote}")

        spark = SparkSession.builder.remote(args.remote).appName("kafka-tiered-connect-example").getOrCreate()
        try:
            kts.register(spark, metrics_dir=args.metrics_dir)
            options = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": TOPIC,
                       "startingOffsets": "earliest", "remote.storage.uri": f"file://{remote}",
                       "kafka.isolation.level": "read_committed"}
            print("estimate:", kts.estimate(spark, options))

            df = spark.read.format("kafka-tiered").options(**options).load()
            counts = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
            stats = kts.last_read_stats(spark)
            total = stats.total()
            print(f"read {sum(counts.values()):,} records by partition {dict(sorted(counts.items()))}: "
                  f"{total.remote_requests} GETs, {total.remote_bytes:,} bytes straight from storage, "
                  f"{total.broker_bytes:,} through the broker, {stats.tasks} tasks")
            print(kts.cost_report(stats))

            again = kts.read(spark, options).groupBy("partition").count().collect()
            same = {r["partition"]: r["count"] for r in again} == counts
            print("kafka_tiered_source.read gives the same rows:", same)
            ok = sum(counts.values()) == args.records and total.records == args.records and same \
                and total.remote_bytes > 0
        finally:
            spark.stop()
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
