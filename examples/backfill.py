"""The main job: a backfill read straight out of tiered storage, written to Parquet and checked
against broker fetch.

It starts the embedded reference broker, produces a realistic topic with a real client
(confluent-kafka / librdkafka): 700,000 JSON orders of about 1 KB over 4 partitions, every
codec, headers, committed and aborted transactions, about 330 MB of log.  Then it tiers the
topic to object storage in 16 MiB segments (the benchmark's size) and reads it three ways,
after small untimed warm-up reads each way (so no timed read pays Spark's start-up: its Python
workers, the data source's planner process, the s3 client), each timed twice, taking turns;
the better of each way's two times is the one compared:

1. with ``kafka-tiered`` directly from storage (``spark.read.format("kafka-tiered")``);
2. with ``fetch.remote.enabled=false``: every byte through the broker, which reads remote
   storage the way Kafka's RemoteLogManager does, 1 MiB per partition per Fetch;
3. with ``kafka_tiered_source.scan()``: the same direct read without Spark, into a pyarrow Table.

Spark's two reads do the same work: a count and an order-independent digest of every column of
every row, in one pass.  The sizes are what make the comparison say something: with the old
defaults (200,000 values of ~150 bytes, 9.6 MB of log in 256 KiB segments) the broker served
the whole topic in about 35 GETs, Spark's fixed cost per read was most of both times, and direct
came out 1.1x (BENCHMARKS.md, "The demo, sized to show the benchmark's difference").  After the
demo's own figure it prints the benchmark's recorded one (``benchmarks/results/backfill.json``,
which ``make bench`` rewrites) and one line on why the two differ.

Last, a typed topic: Avro values written by confluent-kafka's AvroSerializer in two schema
versions, through the Schema Registry the embedded broker serves, read as columns
(``value.format=avro``) and checked against its AvroDeserializer.

The object store is an S3 server (moto) behind a proxy that adds what a real object store costs
(``benchmarks.latency_proxy``: 30 ms before the first byte of every request, 90 MB/s per
connection), for the broker and the reader alike: on a local directory there is no latency to
hide and the comparison says little.  ``--store s3`` (or ``--s3``) uses moto without the proxy,
``--store local`` a local directory.  Then it writes the direct read to Parquet, partitioned by
topic and partition (``--output``, default a new directory), reads the files back and checks
that they hold exactly the broker's rows, no offset twice.  ``--encrypt`` encrypts the segments
as Aiven's plugin does.

Each Spark job carries a description (``kafka-tiered: orders, ...``) for Spark's UI.  The output
ends with where the files are and what the read cost.  About two and a half minutes on this
project's 2-core machine; ``--records``, ``--value-bytes`` and ``--rounds 1`` make it shorter.

    python examples/backfill.py                 # moto S3 behind the latency proxy
    python examples/backfill.py --s3 --encrypt  # moto S3 server on 127.0.0.1, encrypted segments
    python examples/backfill.py --records 200000 --partitions 4 --output /tmp/orders-parquet
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TOPIC = "orders"
MIB = 1 << 20
# The defaults: sized so the broker's 1 MiB remote reads, not Spark's fixed cost per read, set the
# broker-mediated time, as in the benchmark (BENCHMARKS.md, "The demo, sized to show the
# benchmark's difference"), and the whole demo stays within three minutes on 2 cores
RECORDS, VALUE_BYTES, SEGMENT_BYTES, ROUNDS = 700_000, 1000, 16 * MIB, 2
WARM_UP_OFFSETS = 2000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# librdkafka's own log lines (KIP-714 telemetry, connection notices) go to Python logging, where
# only warnings and errors show; moto's server is started quiet.
LIBRDKAFKA_LOG = logging.getLogger("librdkafka")


def corpus(rng: random.Random, size: int = 4 << 20) -> bytes:
    """``size`` bytes of text: words of a 1,000-word vocabulary (as the benchmark's values are
    made), so the notes cut from it compress as real payloads do, about 3:1 with zstd."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(1000)]
    return " ".join(rng.choices(words, k=size // 5)).encode()[:size]


def produce(bootstrap: str, partitions: int, records: int, value_bytes: int = 1000, seed: int = 7) -> dict:
    """Produce ``records`` records over ``partitions`` partitions with a mix of codecs, headers,
    committed and aborted transactions: JSON orders of ``value_bytes`` on average (a note cut
    from a text of words).  Returns what a read_committed reader must see.

    One producer per codec, all sending at once and flushed at the end, so librdkafka's
    compression (its own threads; gzip's alone is the most CPU of the lot) runs beside this
    loop instead of after it; then the transactions."""
    from confluent_kafka import Producer

    rng = random.Random(seed)
    text = corpus(rng)
    low, high = value_bytes // 5, value_bytes * 9 // 5      # the note's length; the JSON around it is ~40 bytes
    last = len(text) - high
    committed = aborted = 0
    per_codec = records // (len(CODECS) + 2)
    common = {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 2000,
              "enable.idempotence": True, "logger": LIBRDKAFKA_LOG}

    def payload(i):
        key = b"customer-%06d" % rng.randrange(50_000)
        start = rng.randrange(last)
        value = b'{"order":%d,"amount":%d,"note":"%s"}' % (i, rng.randrange(1, 10_000),
                                                           text[start:start + rng.randrange(low, high)])
        headers = [("source", b"backfill-demo"), ("codec-idx", str(i % 5).encode())] if i % 3 else None
        return key, value, headers

    def send(p, i):
        k, v, h = payload(i)
        while True:
            try:
                p.produce(TOPIC, key=k, value=v, headers=h, partition=i % partitions)
                break
            except BufferError:          # librdkafka's queue is full: let it drain
                p.poll(0.05)
        if i % 5_000 == 0:
            p.poll(0)

    n = 0
    producers = []
    for codec in CODECS:   # plain idempotent producers, one per codec
        p = Producer({**common, "compression.type": codec})
        producers.append(p)
        for _ in range(per_codec):
            send(p, n)
            n += 1
        committed += per_codec
    for p in producers:
        if p.flush(120):
            raise RuntimeError("producer did not flush")
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
            send(tp, n)
            n += 1
        if t % 3 == 2:
            tp.abort_transaction(60)
            aborted += size
        else:
            tp.commit_transaction(60)
            committed += size
        t += 1
    return {"records": n, "committed": committed, "aborted": aborted}


DIGEST = ("count(*) AS n",
          "sum(xxhash64(topic, partition, offset, key, value, timestamp, timestampType, "
          "to_json(headers)) % 1000000007) AS digest")
DISTINCT = "count(DISTINCT partition, offset) AS distinct_offsets"


def digest(df, distinct: bool = False):
    """(count, order-independent digest[, distinct offsets]) of a read: comparing two reads that
    way is exact up to hash collisions, and it needs no collect() of every row.  Without
    ``distinct`` it is one pass over every column of every row and a sum per task, so a timed
    read costs about what the benchmark's noop sink does; the distinct count shuffles every
    (partition, offset), and only the Parquet files are checked that way."""
    row = df.selectExpr(*DIGEST, *([DISTINCT] if distinct else [])).first()
    return (row["n"], row["digest"]) + ((row["distinct_offsets"],) if distinct else ())


def read_options(bootstrap: str, storage_options: dict, *, direct: bool, isolation: str,
                 min_partitions: int) -> dict:
    """The read's options: the same dict is planned on the driver and handed to Spark."""
    return {"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC, "startingOffsets": "earliest",
            "endingOffsets": "latest", "includeHeaders": "true", "minPartitions": str(min_partitions),
            "kafka.isolation.level": isolation, "fetch.remote.enabled": str(direct).lower(),
            **storage_options}


def load(spark, options: dict):
    reader = spark.read.format("kafka-tiered")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=RECORDS)
    ap.add_argument("--value-bytes", type=int, default=VALUE_BYTES, help="the values' mean size")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--segment-bytes", type=int, default=SEGMENT_BYTES)
    ap.add_argument("--store", choices=("latency", "s3", "local"), default="latency",
                    help="latency (default): moto S3 behind the latency proxy; s3: moto alone; local: a directory")
    ap.add_argument("--s3", dest="store", action="store_const", const="s3", help="the same as --store s3")
    ap.add_argument("--latency-ms", type=float, default=30.0, help="--store latency: wait before each first byte")
    ap.add_argument("--mbps", type=float, default=90.0, help="--store latency: MB/s per connection")
    ap.add_argument("--encrypt", action="store_true",
                    help="encrypt the tiered segments as Aiven's plugin does (a new RSA key pair)")
    ap.add_argument("--min-partitions", type=int, default=4)
    ap.add_argument("--isolation", default="read_committed", choices=("read_committed", "read_uncommitted"))
    ap.add_argument("--output", default=None, help="where the Parquet files go (default: a new directory)")
    ap.add_argument("--rounds", type=int, default=ROUNDS, choices=range(1, 10), metavar="N",
                    help="how many times each way is timed, taking turns (the best counts); 1 for a quick check")
    ap.add_argument("--ui", action="store_true", help="keep Spark's web UI on (its address is printed)")
    args = ap.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import kafka_tiered_source
    from kafka_tiered_source import planning
    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.spark.jobs import describe
    from kafka_tiered_source.testing import EmbeddedCluster, aiven_writer

    work = tempfile.mkdtemp(prefix="kafka-tiered-backfill-")
    # the broker's log, the store and the keys live in ``work``, removed at the end; the Parquet
    # files are the job's result and stay (a directory of their own unless --output names one)
    output = os.path.abspath(args.output or tempfile.mkdtemp(prefix="kafka-tiered-parquet-"))
    moto = proxied = None
    cluster_kw: dict = {}
    storage: dict = {}
    if args.encrypt:
        key_file = aiven_writer.generate_key_pair(os.path.join(work, "demo-key-pair.pem"))
        cluster_kw.update(encryption_key_pair_id="demo-2026", encryption_key_pairs={"demo-2026": key_file})
        storage["remote.storage.aiven.encryption.key.pairs"] = f"demo-2026=file:{key_file}"
    if args.store in ("s3", "latency"):
        import boto3
        creds = {"aws_access_key_id": "demo", "aws_secret_access_key": "demo-secret"}
        if args.store == "latency":
            # moto and the proxy in processes of their own (benchmarks/backfill.py's set-up), so
            # their CPU does not compete with the reads for this interpreter
            from benchmarks.backfill import ObjectStore
            proxied = ObjectStore("moto", work, args.latency_ms, args.mbps)
            upstream, endpoint = proxied.upstream, proxied.endpoint
        else:
            from moto.server import ThreadedMotoServer
            logging.getLogger("werkzeug").setLevel(logging.ERROR)   # no access-log line per GET
            moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            moto.start()
            upstream = endpoint = f"http://127.0.0.1:{moto._server.server_port}"
        boto3.client("s3", endpoint_url=upstream, region_name="us-east-1", **creds).create_bucket(Bucket="tiered")
        cluster_kw.update(remote_storage="s3://tiered/kafka/", s3_endpoint_url=endpoint, s3_region="us-east-1",
                          s3_access_key_id="demo", s3_secret_access_key="demo-secret")
        storage.update({"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "tiered",
                        "remote.storage.prefix": "kafka/", "remote.storage.s3.endpoint": endpoint,
                        "remote.storage.s3.region": "us-east-1", "remote.storage.s3.access.key.id": "demo",
                        "remote.storage.s3.secret.access.key": "demo-secret"})
        where = (f"moto S3 behind a latency proxy at {endpoint} ({args.latency_ms:g} ms to the first byte of "
                 f"each request, {args.mbps:g} MB/s per connection; the broker reads through it too), bucket tiered"
                 if proxied else f"moto S3 at {endpoint} (no added latency), bucket tiered")
    else:
        remote = os.path.join(work, "remote")
        cluster_kw.update(remote_storage=f"file://{remote}")
        storage.update({"remote.storage.fetcher": "fsspec", "remote.storage.fsspec.url": f"file://{remote}"})
        where = f"{remote} (a local directory: no latency for direct reads to hide)"

    try:
        with EmbeddedCluster(data_dir=os.path.join(work, "broker"), segment_bytes=args.segment_bytes,
                             schema_registry_port=0, **cluster_kw) as cluster:
            cluster.create_topic(TOPIC, args.partitions)
            t0 = time.perf_counter()
            produced = produce(cluster.bootstrap_servers, args.partitions, args.records, args.value_bytes)
            print(f"produced {produced['records']:,} records of ~{args.value_bytes:,} bytes into {TOPIC} "
                  f"({args.partitions} partitions, codecs {', '.join(CODECS)}; {produced['aborted']:,} in aborted "
                  f"transactions) in {time.perf_counter() - t0:.1f}s")
            t0 = time.perf_counter()
            tiered = cluster.tier()
            print(f"tiered {len(tiered)} segments of {args.segment_bytes / MIB:g} MiB in {time.perf_counter() - t0:.1f}s "
                  f"to {where}"
                  + (" (encrypted: AES-256-GCM chunks, RSA-wrapped data keys)" if args.encrypt else ""))

            bootstrap = cluster.bootstrap_servers
            direct = read_options(bootstrap, storage, direct=True, isolation=args.isolation,
                                  min_partitions=args.min_partitions)
            through_broker = {**direct, "fetch.remote.enabled": "false"}
            plan = planning.plan(ReadOptions.parse(direct))
            remote_bytes = sum(r.byte_end - r.byte_start for r in plan.remote_ranges)
            print(f"plan: {len(plan.tasks)} Spark partitions (tasks), {len(plan.remote_ranges)} tiered ranges "
                  f"({remote_bytes / 1e6:.1f} MB from storage), {len(plan.broker_ranges)} broker ranges "
                  f"(the untiered tail)")

            builder = (SparkSession.builder.master("local[2]").appName("kafka-tiered-backfill")
                       .config("spark.ui.enabled", str(args.ui).lower())
                       .config("spark.ui.showConsoleProgress", "false")
                       .config("spark.driver.extraJavaOptions", "-Dlog4j2.configurationFile=file:"
                               + os.path.join(ROOT, "examples", "log4j2.properties"))
                       .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1"))
            spark = builder.getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            if args.ui:
                print(f"Spark UI: {spark.sparkContext.uiWebUrl}")
            kafka_tiered_source.register(spark)
            sc = spark.sparkContext
            try:
                # Untimed first reads, small ones, each way: they start Spark's Python workers,
                # the data source's planner process, and what each way loads on first use (the
                # s3 client, the broker connections); then each way runs ``--rounds`` times, taking
                # turns, and the best time counts, so no way is timed cold.
                head = json.dumps({TOPIC: {str(p.partition): min(p.end, p.start + WARM_UP_OFFSETS)
                                           for p in plan.partitions}})
                print(f"warm-up (not timed): the first {WARM_UP_OFFSETS:,} offsets of each partition, read each way, "
                      "so no timed read pays for starting Spark's Python workers, the planner or the s3 client")
                for name, options in (("directly", direct), ("through the broker", through_broker)):
                    sc.setJobDescription(f"kafka-tiered: warm-up read {name}")
                    digest(load(spark, {**options, "endingOffsets": head}))
                scan_rows(kafka_tiered_source, {**direct, "endingOffsets": head})

                # The same read each way, taking turns (a slow spell of the machine hits them
                # alike); Spark's reads do the same work (count and digest of every row)
                times: dict = {"direct": [], "broker": [], "scan": []}
                broker_read = 0.0
                for _ in range(args.rounds):
                    sc.setJobDescription(describe(plan))
                    t0 = time.perf_counter()
                    df = load(spark, direct)
                    d_n, d_digest = digest(df)
                    times["direct"].append(time.perf_counter() - t0)
                    parts = df.rdd.getNumPartitions()
                    sc.setJobDescription(describe(plan).replace("kafka-tiered:", "kafka-tiered (through the broker):",
                                                                1))
                    broker_before = _broker_remote_bytes(cluster)
                    t0 = time.perf_counter()
                    b_n, b_digest = digest(load(spark, through_broker))
                    times["broker"].append(time.perf_counter() - t0)
                    broker_read = _broker_remote_bytes(cluster) - broker_before
                    t0 = time.perf_counter()
                    table = scan_rows(kafka_tiered_source, direct)
                    times["scan"].append(time.perf_counter() - t0)
                s_n, s_distinct = table.num_rows, len(set(zip(table.column("partition").to_pylist(),
                                                              table.column("offset").to_pylist(), strict=True)))

                # ... then the backfill itself: straight from storage into Parquet
                sc.setJobDescription(describe(plan) + f" -> Parquet at {output}")
                t0 = time.perf_counter()
                load(spark, direct).write.mode("overwrite").partitionBy("topic", "partition").parquet(output)
                t_write = time.perf_counter() - t0
                direct_stats = kafka_tiered_source.last_read_stats(spark)

                sc.setJobDescription(f"check: the Parquet files at {output}")
                p_n, p_digest, p_distinct = digest(spark.read.parquet(output), distinct=True)
                files = sum(1 for _, _, names in os.walk(output) for n in names if n.endswith(".parquet"))

                sc.setJobDescription(f"kafka-tiered: {TYPED_TOPIC} as typed columns (value.format=avro)")
                typed_ok = typed_read(spark, cluster, storage)
            finally:
                sc.setJobDescription(None)
                spark.stop()

            expected = produced["committed"] if args.isolation == "read_committed" else produced["records"]
            same = (p_n, p_digest) == (b_n, b_digest) == (d_n, d_digest)
            agree = ("as planned" if parts == len(plan.tasks) else
                     f"the plan above said {len(plan.tasks)}: the log moved on between the two plannings")
            if args.rounds > 1:
                print(f"timed {args.rounds} times each, taking turns, after the warm-up reads: the best time, then "
                      "the others")
            else:
                print("timed once each, after the warm-up reads (--rounds 1)")
            print(f"direct read:      {d_n:>9,} rows in {shown(times['direct'])}  ({parts} Spark partitions, {agree}; "
                  f"{remote_bytes / 1e6:.1f} MB planned from storage, no record bytes of tiered offsets "
                  f"through the broker)")
            print(f"broker-mediated:  {b_n:>9,} rows in {shown(times['broker'])}  (the broker read "
                  f"{broker_read / 1e6:.1f} MB from remote storage to serve it)")
            print(f"scan(), no Spark: {s_n:>9,} rows in {shown(times['scan'])}  (kafka_tiered_source.scan, "
                  f"{SCAN_WORKERS} workers, the same direct read into a pyarrow Table)")
            print(f"direct -> Parquet: {p_n:>8,} rows in {t_write:6.2f}s  (read again from storage and written; then read back to check)")
            print(f"direct is {min(times['broker']) / min(times['direct']):.1f}x as fast as broker-mediated through "
                  f"Spark; scan() without Spark {min(times['broker']) / min(times['scan']):.1f}x")
            bench = recorded_benchmark()
            if bench is not None:
                print(f"the benchmark: direct {bench['ratio']:.1f}x as fast as broker-mediated through Spark, local[2], "
                      f"{bench['records']:,} records, {bench['log_mb']:.0f} MB of log in {bench['segment_mib']} MiB "
                      f"segments ({BENCH_RESULTS}, {bench['date']})")
                print(f"why they differ: this run read {remote_bytes / 1e6:.0f} MB into a digest of every row, "
                      f"{STORE_NOTES[args.store]}, the broker in this process, load average {os.getloadavg()[0]:.1f}; "
                      "the benchmark read into a noop sink, from its range store behind the same proxy")
            print(f"expected ({args.isolation}): {expected:,} rows; distinct offsets in Parquet {p_distinct:,}, in the "
                  f"scan {s_distinct:,}; direct read, broker read and Parquet files identical (count and digest): {same}")
            if not same or p_n != expected or p_distinct != p_n or s_n != expected or s_distinct != s_n:
                print("MISMATCH: the Parquet files, the scan and the broker read disagree, miss rows or repeat offsets",
                      file=sys.stderr)
                return 1
            if direct_stats is not None:
                report = kafka_tiered_source.cost_report(direct_stats)
                print("cost of the direct read (kafka_tiered_source.cost_report):")
                print(report)
            if not typed_ok:
                return 1
            print(f"Parquet: {output}  ({files} files, partitioned by topic and partition)")
            if direct_stats is not None:
                total = direct_stats.total()
                print(f"the read cost: ${report.dollars:.6f} for {total.remote_requests} GETs and "
                      f"{total.remote_bytes / 1e6:.1f} MB from storage, {total.broker_bytes / 1e6:.1f} MB through "
                      f"the brokers (the untiered tail), {total.fallbacks} fallbacks")
    finally:
        if moto is not None:
            moto.stop()
        if proxied is not None:
            proxied.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


SCAN_WORKERS = 2
TYPED_TOPIC = "payments"
PAYMENT_V1 = {"type": "record", "name": "Payment", "namespace": "demo", "fields": [
    {"name": "id", "type": "long"}, {"name": "cents", "type": "int"}]}
PAYMENT_V2 = {**PAYMENT_V1, "fields": [
    {"name": "id", "type": "long"}, {"name": "cents", "type": "long"},           # int -> long
    {"name": "currency", "type": "string", "default": "EUR"},                     # added, with a default
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0}]}


def typed_read(spark, cluster, storage: dict, records: int = 2000) -> bool:
    """A typed topic: Avro values written by confluent-kafka's AvroSerializer in two schema versions
    (through the Schema Registry the embedded broker serves), tiered, then read as columns
    (``value.format=avro``) and checked against confluent-kafka's AvroDeserializer."""
    import datetime as dt

    import confluent_kafka as ck
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    cluster.create_topic(TYPED_TOPIC, 2)
    registry = SchemaRegistryClient({"url": cluster.schema_registry_url})
    ctx = SerializationContext(TYPED_TOPIC, MessageField.VALUE)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "logger": LIBRDKAFKA_LOG})
    # one serializer per schema version, as a producer keeps it: each one asks the registry for
    # its subject once and caches the answer (a serializer per record asks every time)
    v1, v2 = (AvroSerializer(registry, json.dumps(schema)) for schema in (PAYMENT_V1, PAYMENT_V2))
    values = []
    for i in range(records):
        if i < records // 2:
            value = v1({"id": i, "cents": 100 + i}, ctx)
        else:
            value = v2({"id": i, "cents": (1 << 33) + i, "currency": "USD",
                        "at": dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i)}, ctx)
        values.append(value)
        producer.produce(TYPED_TOPIC, value=value, partition=i % 2)
    producer.flush(30)
    cluster.tier(TYPED_TOPIC)
    reader = AvroDeserializer(registry, json.dumps(PAYMENT_V2))
    expected = {}
    for v in values:
        row = reader(v, ctx)
        if isinstance(row["at"], int):     # fastavro leaves a default in its underlying form
            row["at"] = dt.datetime.fromtimestamp(row["at"] / 1000, dt.timezone.utc)
        expected[row["id"]] = row
    t = time.perf_counter()
    df = (spark.read.format("kafka-tiered").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
          .option("subscribe", TYPED_TOPIC).options(**storage)
          .option("value.format", "avro").option("schema.registry.url", cluster.schema_registry_url).load())
    rows = df.select("value", "valueSchemaId").collect()
    got = {r.value.id: {**r.value.asDict(), "at": r.value.at.astimezone(dt.timezone.utc)} for r in rows}
    same = got == expected
    print(f"typed read: {len(rows):,} Avro values of {TYPED_TOPIC} ({len({r.valueSchemaId for r in rows})} schema "
          f"versions) as columns {df.schema['value'].dataType.simpleString()} in {time.perf_counter() - t:.2f}s; "
          f"equal to confluent-kafka's AvroDeserializer: {same}")
    if not same:
        print("MISMATCH: the typed read and confluent-kafka's deserializer disagree", file=sys.stderr)
    return same


BENCH_RESULTS = "benchmarks/results/backfill.json"
STORE_NOTES = {"latency": "from moto behind the latency proxy (moto loads a whole segment for each of the broker's "
                          "1 MiB GETs)",
               "s3": "from moto with no added latency", "local": "from a local directory with no latency"}


def recorded_benchmark(path: str = os.path.join(ROOT, BENCH_RESULTS)) -> dict | None:
    """The benchmark's recorded direct-versus-broker figure (``python -m benchmarks.backfill``,
    which ``make bench`` reruns): the broker-mediated Spark read's wall time over the direct
    one's at local[2] and the largest size it ran.  None where the results are not there (an
    installed copy of this script)."""
    try:
        with open(path, encoding="utf-8") as fh:
            result = json.load(fh)
    except FileNotFoundError:
        return None
    size = max(result["config"]["sizes"])
    wall = {r["way"]: r["wall_s"] for r in result["rows"] if r["size"] == size and r["cores"] == 2
            and r["way"] in ("direct", "broker")}
    data = result["data"][str(size)]
    return {"ratio": wall["broker"] / wall["direct"], "records": data["records"], "log_mb": data["log_bytes"] / 1e6,
            "segment_mib": result["config"]["segment_mib"], "date": result["date"]}


def scan_rows(kts, options: dict):
    """The direct read through ``kafka_tiered_source.scan()``, without Spark: a pyarrow Table."""
    return kts.scan(options, **{"scan.workers": SCAN_WORKERS}).read_all()


def shown(times: list) -> str:
    best, *others = sorted(times)
    return f"{best:6.2f}s" + (f" (and {', '.join(f'{t:.2f}s' for t in others)})" if others else "")


def _broker_remote_bytes(cluster) -> float:
    """Bytes the broker read from remote storage (its KIP-1267 counters)."""
    total = 0.0
    for line in cluster.metrics_text().splitlines():
        if line.startswith("kafka_tiered_broker_remote_fetch_bytes_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


if __name__ == "__main__":
    sys.exit(main())
