"""One day of a tiered topic, read into DuckDB without Spark.

It starts the embedded reference broker, produces three days of orders with a real client
(confluent-kafka / librdkafka; each record carries its own CreateTime), tiers the topic to
object storage (a local directory, or a moto S3 server with ``--s3``), and then, as a notebook
would:

1. estimates what the middle day costs to read (``kafka_tiered_source.estimate`` with the
   same ``where``: only the segments that can hold that day are counted);
2. reads that day with ``kafka_tiered_source.scan()`` — a ``pyarrow.RecordBatchReader`` — and
   queries it in DuckDB as it is read (``FROM reader``): orders per hour and the busiest
   customers;
3. prints what the read cost (``kafka_tiered_source.last_read_stats()``, no Spark session).

    python examples/duckdb_window.py
    python examples/duckdb_window.py --s3 --records 300000
"""
from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TOPIC = "orders"
DAY0 = dt.datetime(2026, 9, 30, tzinfo=dt.timezone.utc)


def produce(bootstrap: str, partitions: int, records: int, days: int) -> None:
    """``records`` orders spread evenly over ``days`` days from DAY0, keyed by customer."""
    from confluent_kafka import Producer
    rng = random.Random(11)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 64 << 10, "compression.type": "zstd",
                  "enable.idempotence": True, "logger": logging.getLogger("librdkafka")})
    start_ms = int(DAY0.timestamp() * 1000)
    step = days * 86_400_000 / records
    for i in range(records):
        customer = f"customer-{int(rng.paretovariate(1.2)) % 5000:05d}"
        value = f'{{"order":{i},"amount":{rng.randrange(1, 50_000) / 100:.2f}}}'.encode()
        while True:
            try:
                p.produce(TOPIC, key=customer.encode(), value=value, partition=i % partitions,
                          timestamp=start_ms + int(i * step))
                break
            except BufferError:      # librdkafka's queue is full: let it send
                p.poll(0.1)
        if i % 10_000 == 0:
            p.poll(0)
    if p.flush(60):
        raise RuntimeError("the producer did not flush")


def rows(duckdb: Any, sql: str) -> list:
    """A query's rows (``duckdb.sql`` returns None only for statements without a result)."""
    relation = duckdb.sql(sql)
    assert relation is not None, sql
    return relation.fetchall()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=150_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--segment-bytes", type=int, default=128 << 10, help="the broker rolls segments at this size")
    ap.add_argument("--s3", action="store_true", help="tier to a moto S3 server instead of a directory")
    args = ap.parse_args(argv)

    import duckdb

    import kafka_tiered_source as kts
    from kafka_tiered_source.testing import EmbeddedCluster

    work = tempfile.mkdtemp(prefix="kafka-tiered-duckdb-")
    moto = None
    cluster_kw: dict = {}
    if args.s3:
        import boto3
        from moto.server import ThreadedMotoServer
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        assert moto._server is not None
        endpoint = f"http://127.0.0.1:{moto._server.server_port}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="demo",
                     aws_secret_access_key="demo-secret").create_bucket(Bucket="tiered")
        cluster_kw.update(remote_storage="s3://tiered/kafka/", s3_endpoint_url=endpoint, s3_region="us-east-1",
                          s3_access_key_id="demo", s3_secret_access_key="demo-secret")
        storage = {"remote.storage.uri": "s3://tiered/kafka/", "remote.storage.s3.endpoint": endpoint,
                   "remote.storage.s3.region": "us-east-1", "remote.storage.s3.access.key.id": "demo",
                   "remote.storage.s3.secret.access.key": "demo-secret"}
    else:
        remote = os.path.join(work, "remote")
        cluster_kw.update(remote_storage=f"file://{remote}")
        storage = {"remote.storage.uri": f"file://{remote}"}
    try:
        with EmbeddedCluster(data_dir=os.path.join(work, "broker"), segment_bytes=args.segment_bytes,
                             **cluster_kw) as cluster:
            cluster.create_topic(TOPIC, args.partitions)
            t0 = time.perf_counter()
            produce(cluster.bootstrap_servers, args.partitions, args.records, args.days)
            tiered = cluster.tier()
            print(f"produced {args.records:,} orders over {args.days} days from {DAY0:%Y-%m-%d} and tiered "
                  f"{len(tiered)} segments in {time.perf_counter() - t0:.1f} s")

            options = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": TOPIC, **storage}
            day = DAY0 + dt.timedelta(days=args.days // 2)
            where = f"timestamp >= '{day:%Y-%m-%d}' AND timestamp < '{day + dt.timedelta(days=1):%Y-%m-%d}'"
            whole = kts.estimate(None, options)
            est = kts.estimate(None, options, where=where)
            print(f"the day {day:%Y-%m-%d}: {est.gets} GETs, {est.bytes:,} bytes from storage, "
                  f"${est.dollars:.6f} (the whole topic: {whole.gets} GETs, {whole.bytes:,} bytes); {est.storage_note}")

            t0 = time.perf_counter()
            reader = kts.scan(options, where=where)   # noqa: F841  (planned here; DuckDB finds it by name)
            duckdb.sql("CREATE TABLE day AS SELECT * FROM reader")
            took = time.perf_counter() - t0
            n, first, last = rows(duckdb, "SELECT count(*), min(timezone('UTC', timestamp)), "
                                          "max(timezone('UTC', timestamp)) FROM day")[0]
            print(f"read {n:,} orders of {day:%Y-%m-%d} into DuckDB in {took:.2f} s "
                  f"({first:%H:%M:%S} .. {last:%H:%M:%S} UTC)")
            print("orders per hour (first six):")
            for hour, count, amount in rows(
                    duckdb, "SELECT date_trunc('hour', timezone('UTC', timestamp)) AS hour, count(*), "
                    "round(sum(CAST(json_extract(decode(value), '$.amount') AS DOUBLE)), 2) "
                    "FROM day GROUP BY 1 ORDER BY 1 LIMIT 6"):
                print(f"  {hour:%Y-%m-%d %H:00}  {count:>6,} orders  {amount:>12,.2f}")
            print("busiest customers:")
            for key, count in rows(duckdb, "SELECT decode(key), count(*) FROM day GROUP BY 1 "
                                           "ORDER BY 2 DESC, 1 LIMIT 3"):
                print(f"  {key}  {count:,} orders")

            stats = kts.last_read_stats()
            total = stats.total()
            print(f"the read cost: ${kts.cost_report(stats).dollars:.6f} for {total.remote_requests} GETs and "
                  f"{total.remote_bytes / 1e6:.1f} MB from storage, {total.broker_bytes / 1e6:.1f} MB through the "
                  f"brokers (the untiered tail), {total.fallbacks} fallbacks")
            expected = sum(1 for i in range(args.records)
                           if day.timestamp() * 1000 <= int(DAY0.timestamp() * 1000) + int(i * args.days * 86_400_000
                                                                                           / args.records)
                           < (day + dt.timedelta(days=1)).timestamp() * 1000)
            if n != expected:
                print(f"MISMATCH: {n:,} orders read, {expected:,} produced in that day", file=sys.stderr)
                return 1
    finally:
        if moto is not None:
            moto.stop()
        shutil.rmtree(work, ignore_errors=True)   # the broker's log and the store: nothing kept
    return 0


if __name__ == "__main__":
    sys.exit(main())
