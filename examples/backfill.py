"""The main job: a backfill read straight out of tiered storage, checked against broker fetch.

It starts the embedded reference broker, produces a realistic topic with a real client
(confluent-kafka / librdkafka): several partitions, every codec, headers, committed and
aborted transactions.  Then it tiers the topic to object storage (a local directory, or a moto
S3 server with ``--s3``) and runs the same Spark backfill twice:

1. ``kafka-tiered`` direct: executors read the tiered segments from storage themselves;
2. ``fetch.remote.enabled=false``: every byte comes through the broker (which reads remote
   storage the way Kafka's RemoteLogManager does).

Both must give the same rows.  It prints counts, times and what each read cost.

    python examples/backfill.py                 # local directory as the object store
    python examples/backfill.py --s3            # moto S3 server on 127.0.0.1
    python examples/backfill.py --records 200000 --partitions 4
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TOPIC = "orders"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def produce(bootstrap: str, partitions: int, records: int, seed: int = 7) -> dict:
    """Produce ``records`` records over ``partitions`` partitions with a mix of codecs, headers,
    committed and aborted transactions.  Returns what a read_committed reader must see."""
    from confluent_kafka import Producer

    rng = random.Random(seed)
    committed = aborted = 0
    per_codec = records // (len(CODECS) + 2)
    common = {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 2000,
              "enable.idempotence": True}

    def payload(i):
        key = f"customer-{rng.randrange(50_000):06d}".encode()
        value = (f'{{"order":{i},"amount":{rng.randrange(1, 10_000)},"note":"'
                 + "x" * rng.randrange(20, 200) + '"}').encode()
        headers = [("source", b"backfill-demo"), ("codec-idx", str(i % 5).encode())] if i % 3 else None
        return key, value, headers

    n = 0
    for codec in CODECS:   # plain idempotent producers, one per codec
        p = Producer({**common, "compression.type": codec})
        for _ in range(per_codec):
            k, v, h = payload(n)
            p.produce(TOPIC, key=k, value=v, headers=h, partition=n % partitions)
            n += 1
            if n % 10_000 == 0:
                p.poll(0)
        if p.flush(60):
            raise RuntimeError("producer did not flush")
        committed += per_codec
    # transactions: alternate commit and abort, zstd
    tp = Producer({**common, "compression.type": "zstd", "transactional.id": "backfill-demo-txn"})
    tp.init_transactions(30)
    remaining = records - n
    txn_size = max(1, remaining // 10)
    t = 0
    while n < records:
        tp.begin_transaction()
        size = min(txn_size, records - n)
        for _ in range(size):
            k, v, h = payload(n)
            tp.produce(TOPIC, key=k, value=v, headers=h, partition=n % partitions)
            n += 1
        if t % 3 == 2:
            tp.abort_transaction(30)
            aborted += size
        else:
            tp.commit_transaction(30)
            committed += size
        t += 1
    return {"records": n, "committed": committed, "aborted": aborted}


def run_backfill(spark, bootstrap: str, storage_options: dict, *, direct: bool, isolation: str,
                 min_partitions: int):
    """Read the topic and reduce every row to (count, order-independent digest): comparing two
    reads that way is exact up to hash collisions, and it needs no collect() of every row."""
    reader = (spark.read.format("kafka-tiered")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", TOPIC)
              .option("startingOffsets", "earliest")
              .option("endingOffsets", "latest")
              .option("includeHeaders", "true")
              .option("minPartitions", str(min_partitions))
              .option("kafka.isolation.level", isolation)
              .option("fetch.remote.enabled", str(direct).lower()))
    for k, v in storage_options.items():
        reader = reader.option(k, v)
    df = reader.load()
    t0 = time.perf_counter()
    row = df.selectExpr(
        "count(*) AS n",
        "sum(xxhash64(topic, partition, offset, key, value, timestamp, timestampType, "
        "to_json(headers)) % 1000000007) AS digest",
        "count(DISTINCT partition, offset) AS distinct_offsets").first()
    return row["n"], row["digest"], row["distinct_offsets"], time.perf_counter() - t0, df.rdd.getNumPartitions()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--segment-bytes", type=int, default=256 << 10)
    ap.add_argument("--s3", action="store_true", help="tier to a moto S3 server instead of a directory")
    ap.add_argument("--min-partitions", type=int, default=4)
    ap.add_argument("--isolation", default="read_committed", choices=("read_committed", "read_uncommitted"))
    args = ap.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession

    import kafka_tiered_source
    from kafka_tiered_source import planning
    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.testing import EmbeddedCluster

    work = tempfile.mkdtemp(prefix="kafka-tiered-backfill-")
    moto = None
    if args.s3:
        import boto3
        from moto.server import ThreadedMotoServer
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
        moto.start()
        endpoint = f"http://127.0.0.1:{moto._server.server_port}"
        creds = {"aws_access_key_id": "demo", "aws_secret_access_key": "demo-secret"}
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **creds).create_bucket(Bucket="tiered")
        cluster_kw = dict(remote_storage="s3://tiered/kafka/", s3_endpoint_url=endpoint, s3_region="us-east-1",
                          s3_access_key_id="demo", s3_secret_access_key="demo-secret")
        storage = {"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "tiered",
                   "remote.storage.prefix": "kafka/", "remote.storage.s3.endpoint": endpoint,
                   "remote.storage.s3.region": "us-east-1", "remote.storage.s3.access.key.id": "demo",
                   "remote.storage.s3.secret.access.key": "demo-secret"}
        where = f"moto S3 at {endpoint}, bucket tiered"
    else:
        remote = os.path.join(work, "remote")
        cluster_kw = dict(remote_storage=f"file://{remote}")
        storage = {"remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{remote}"}
        where = remote

    try:
        with EmbeddedCluster(data_dir=os.path.join(work, "broker"), segment_bytes=args.segment_bytes,
                             **cluster_kw) as cluster:
            cluster.create_topic(TOPIC, args.partitions)
            t0 = time.perf_counter()
            produced = produce(cluster.bootstrap_servers, args.partitions, args.records)
            print(f"produced {produced['records']:,} records into {TOPIC} ({args.partitions} partitions, "
                  f"codecs {', '.join(CODECS)}; {produced['aborted']:,} in aborted transactions) "
                  f"in {time.perf_counter() - t0:.1f}s")
            tiered = cluster.tier()
            print(f"tiered {len(tiered)} segments to {where}")

            options = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": TOPIC,
                       "kafka.isolation.level": args.isolation, **storage}
            plan = planning.plan(ReadOptions.parse(options))
            remote_bytes = sum(r.byte_end - r.byte_start for r in plan.remote_ranges)
            print(f"plan: {len(plan.tasks)} Spark partitions, {len(plan.remote_ranges)} remote ranges "
                  f"({remote_bytes / 1e6:.1f} MB from storage), {len(plan.broker_ranges)} broker ranges")

            spark = (SparkSession.builder.master("local[2]").appName("kafka-tiered-backfill")
                     .config("spark.ui.enabled", "false")
                     .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                     .getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            kafka_tiered_source.register(spark)
            try:
                # An untimed first read starts Spark's Python workers and the data source's
                # planner process, so neither timed read pays for them.
                run_backfill(spark, cluster.bootstrap_servers, storage, direct=False,
                             isolation=args.isolation, min_partitions=args.min_partitions)
                d_n, d_digest, d_distinct, t_direct, parts = run_backfill(
                    spark, cluster.bootstrap_servers, storage, direct=True, isolation=args.isolation,
                    min_partitions=args.min_partitions)
                direct_stats = kafka_tiered_source.last_read_stats(spark)
                broker_before = _broker_remote_bytes(cluster)
                b_n, b_digest, _, t_broker, _ = run_backfill(
                    spark, cluster.bootstrap_servers, storage, direct=False, isolation=args.isolation,
                    min_partitions=args.min_partitions)
                broker_after = _broker_remote_bytes(cluster)
            finally:
                spark.stop()

            expected = produced["committed"] if args.isolation == "read_committed" else produced["records"]
            same = (d_n, d_digest) == (b_n, b_digest)
            print(f"direct read:      {d_n:>9,} rows in {t_direct:6.2f}s  ({parts} Spark partitions; "
                  f"{remote_bytes / 1e6:.1f} MB planned from storage, 0 record bytes through the broker "
                  f"for tiered offsets)")
            print(f"broker-mediated:  {b_n:>9,} rows in {t_broker:6.2f}s  (the broker read "
                  f"{(broker_after - broker_before) / 1e6:.1f} MB from remote storage to serve it)")
            print(f"expected ({args.isolation}): {expected:,} rows; distinct offsets {d_distinct:,}; "
                  f"identical results (count and digest): {same}")
            if direct_stats is not None:
                total = direct_stats.total()
                print(f"direct read: {total.remote_requests} GETs, {total.remote_bytes / 1e6:.1f} MB from "
                      f"storage, {total.fallbacks} fallbacks, {total.broker_bytes / 1e6:.1f} MB through "
                      f"brokers (the untiered tail)")
                print("cost of the direct read (kafka_tiered_source.cost_report):")
                print(kafka_tiered_source.cost_report(direct_stats))
            if not same or d_n != expected or d_distinct != d_n:
                print("MISMATCH: the two reads disagree, miss rows or repeat offsets", file=sys.stderr)
                return 1
    finally:
        if moto is not None:
            moto.stop()
    return 0


def _broker_remote_bytes(cluster) -> float:
    """Bytes the broker read from remote storage (its KIP-1267 counters)."""
    total = 0.0
    for line in cluster.metrics_text().splitlines():
        if line.startswith("kafka_tiered_broker_remote_fetch_bytes_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


if __name__ == "__main__":
    sys.exit(main())
