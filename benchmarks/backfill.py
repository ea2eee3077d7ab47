"""The headline benchmark: a backfill read straight from tiered storage against the same read
through a broker, both paying object-store latency.

    python -m benchmarks.backfill                 # default: a few minutes on 2 cores
    python -m benchmarks.backfill --scale 2.5     # the full run: 16x = 4 M records, ~2.3 GB of keys+values
    python -m benchmarks.backfill --sizes 1 --cores 2 --skip-clients     # a smoke run

Set-up (every server a separate process on 127.0.0.1, so each one's CPU is its own):

* data: one topic per size (1x, 4x, 16x of ``--base-records``), ``--partitions`` partitions,
  16-byte keys and 100-1000-byte JSON-like values (words from a 1,000-word vocabulary, so
  they compress like real payloads), a header on every fourth record; producer-shaped v2
  batches (kafka-python's ``DefaultRecordBatchBuilder``) of ``--batch-records`` records,
  zstd on even partitions and lz4 on odd ones, appended straight into the embedded broker's log
  (no network), ``--segment-mib`` segments, every segment rolled and tiered (Aiven layout),
  local copies deleted: nothing is left for the broker to serve from local disk.
* object store: the tiered objects served by a range-capable S3-compatible store
  (``benchmarks.latency_proxy store``; ``--store moto`` uses a moto server instead), behind
  ``benchmarks.latency_proxy proxy``: ``--latency-ms`` (30) before the first byte of every
  request and ``--mbps`` (90 MB/s) per connection.  The proxy counts the GETs.
* broker: ``kafka-tiered broker`` (the embedded broker's CLI) in a subprocess, its remote
  storage = the same bucket through the same proxy: broker-mediated reads pay the same latency
  and bandwidth, as Kafka's RemoteLogManager does.  Its CPU seconds come from /proc.

Ways (each reads every record of the topic):

* ``direct``: ``spark.read.format("kafka-tiered")``, the s3 fetcher through the proxy;
* ``broker``: the same reader with ``fetch.remote.enabled=false``;
* ``direct-file`` (reference, ``--store range`` only): the direct reader on the same objects
  as ``file://`` through the fsspec fetcher — no object-store latency or bandwidth cap at all,
  so it shows what the engine (Spark + decoding) costs by itself on this machine;
* ``kafka-python`` and ``confluent-kafka``: one consumer each in this process, ``assign()``
  every partition, from the beginning to the end, through the broker;
* ``scan``: ``kafka_tiered_source.scan()`` in this process, no Spark: the same plan and task
  reader as ``direct``, ``scan.workers`` = the cores of the Spark ways it is measured with,
  every batch taken (counted) and dropped, as the noop sink does.

Spark ways run at local[1] and local[2] (``--cores``) with a noop sink; ``scan`` with as many
workers, taking turns with them (``--ways`` measures fewer ways: ``direct,scan`` is the
scan-versus-Spark comparison alone).  Results go to
``benchmarks/results/backfill.json`` and ``backfill.png``; :func:`render_markdown` makes the
BENCHMARKS.md section from the JSON (``benchmarks.run_all`` calls it).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
BUCKET = "tiered"
ACCESS_KEY, SECRET_KEY = "bench-access-key", "bench-secret-key"
MIB = 1 << 20
TIB = 1 << 40
PART_SIZE = 16 * MIB         # the reader's default fetch.remote.part.size.bytes
GET_TARGET = 8 * MIB         # the target: at least this much read per GET, counting every GET
KEY_BYTES = 16
CODECS = {0: ("zstd", 4), 1: ("lz4", 3)}   # partition parity -> (name, kafka-python codec id)
WAYS = ("direct", "broker", "direct-file", "direct-encrypted", "direct-file-encrypted", "direct-today",
        "broker-today", "kafka-python", "confluent-kafka",
        "transport-direct",
        "transport-broker", "scan")
SPARK_WAYS = ("direct", "broker", "direct-file", "direct-encrypted", "direct-file-encrypted", "direct-today",
              "broker-today")
TRANSPORT_WAYS = ("transport-direct", "transport-broker")
SCAN_WAYS = ("scan",)


# ---------------------------------------------------------------------------------------------
# data

def _words(rng: random.Random, n: int = 1000) -> list[bytes]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [("".join(rng.choice(letters) for _ in range(rng.randint(3, 10)))).encode() for _ in range(n)]


def _value(rng: random.Random, words: list[bytes], i: int) -> bytes:
    size = rng.randint(100, 1000)
    head = b'{"id":%d,"customer":"c-%06d","amount":%d,"note":"' % (i, rng.randrange(10**6), rng.randrange(10**5))
    out = bytearray(head)
    while len(out) < size - 2:
        out += rng.choice(words)
        out += b" "
    return bytes(out[:size - 2]) + b'"}'


def _batch(codec: int, records: int, seed: int, words) -> tuple[bytes, int]:
    """One producer-shaped v2 batch; returns (bytes, uncompressed key+value bytes)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    rng = random.Random(seed)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    now = 1_760_000_000_000 + seed
    payload = 0
    for i in range(records):
        k, v = rng.randbytes(KEY_BYTES), _value(rng, words, i)
        payload += len(k) + len(v)
        b.append(i, now + i, k, v, [("src", b"orders-svc")] if i % 4 == 0 else [])
    return bytes(b.build()), payload


def build_topics(data_dir: str, remote: str, sizes, base_records: int, partitions: int, segment_bytes: int,
                 batch_records: int, s3: dict | None = None, encrypt: tuple | None = None) -> dict:
    """Fill one topic per size and tier all of it.  Returns {size: facts} (records, log bytes,
    payload bytes, segments).  ``encrypt`` = (key pair id, private key file): the largest size
    once more, as ``backfill-<size>x-encrypted``, tiered encrypted as Aiven's plugin does
    (facts under ``"<size>-encrypted"``)."""
    from kafka_tiered_source.testing import EmbeddedCluster
    words = _words(random.Random(1))
    distinct = 32                      # distinct batches per codec, appended round-robin
    pool = {codec: [_batch(codec, batch_records, 1000 * codec + i, words) for i in range(distinct)]
            for _, codec in CODECS.values()}
    cluster = EmbeddedCluster(data_dir, remote_storage=remote, segment_bytes=segment_bytes, **(s3 or {}))
    out = {}
    jobs = [(size, f"backfill-{size}x") for size in sizes]
    if encrypt:
        jobs.append((max(sizes), f"backfill-{max(sizes)}x-encrypted"))
    for size, topic in jobs:
        if topic.endswith("-encrypted"):   # the tiering of topics created from here on encrypts
            from dataclasses import replace
            cluster.storage.tiering = replace(cluster.storage.tiering, encryption_key_pair_id=encrypt[0],
                                              encryption_key_pairs=((encrypt[0], encrypt[1]),))
        cluster.create_topic(topic, partitions)
        records = base_records * size
        payload = 0
        for p in range(partitions):
            codec = CODECS[p % 2][1]
            left = records // partitions + (p < records % partitions)
            i = 0
            while left > 0:
                data, pl = pool[codec][i % distinct] if left >= batch_records else \
                    _batch(codec, left, 7 + p, words)
                cluster.append(topic, p, data)
                payload += pl
                left -= min(left, batch_records)
                i += 1
            cluster.roll(topic, p)
        cluster.tier(topic)
        log_bytes = segments = 0
        for p in range(partitions):
            segs = cluster.remote_segments(topic, p)
            o = cluster.offsets(topic, p)
            if o.local_log_start_offset != o.log_end_offset:
                raise RuntimeError(f"{topic}-{p}: offsets [{o.local_log_start_offset}, {o.log_end_offset}) "
                                   "are still local after roll + tier")
            log_bytes += sum(s.size_bytes for s in segs)
            segments += len(segs)
        out[f"{size}-encrypted" if topic.endswith("-encrypted") else size] = {
            "topic": topic, "records": records, "log_bytes": log_bytes, "payload_bytes": payload,
            "segments": segments}
    return out


# ---------------------------------------------------------------------------------------------
# processes

def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    return env


def _spawn(args, *, env=None, expect: str, timeout: float = 60.0) -> tuple[subprocess.Popen, list[str]]:
    """Start a Python module in a subprocess; wait for a stdout line matching ``expect``."""
    p = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, cwd=ROOT, env=env or _env())
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"{' '.join(args[:3])} exited ({p.wait()}): {''.join(lines)[-2000:]}")
        lines.append(line)
        if re.search(expect, line):
            # keep reading what it prints, so a full pipe never blocks it (the last lines are kept)
            def drain(out=p.stdout, tail=lines):
                for more in out:
                    tail.append(more)
                    del tail[:-200]
            threading.Thread(target=drain, daemon=True).start()
            return p, lines
    p.kill()
    raise RuntimeError(f"{' '.join(args[:3])} did not start in {timeout}s: {''.join(lines)[-2000:]}")


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Broker:
    """``kafka-tiered broker`` in a subprocess, remote storage through the proxy."""

    def __init__(self, data_dir: str, endpoint: str, segment_bytes: int, *, kip1248: bool = True):
        env = _env()
        env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        self.proc, lines = _spawn(
            ["-m", "kafka_tiered_source.cli", "broker", "--data-dir", data_dir, "--port", "0",
             "--remote-storage", f"s3://{BUCKET}", "--s3-endpoint-url", endpoint, "--s3-region", "us-east-1",
             "--segment-bytes", str(segment_bytes), "--metrics-port", "0", "--log-level", "WARNING"]
            + ([] if kip1248 else ["--no-kip1248"]),
            env=env, expect=r"^metrics: ")
        text = "".join(lines)
        self.bootstrap = re.search(r"bootstrap servers: (\S+)", text).group(1)
        self.metrics_url = re.search(r"metrics: (\S+)", text).group(1)

    def counters(self) -> dict:
        """Broker counters summed over client ids and topics, plus its CPU seconds."""
        with urllib.request.urlopen(self.metrics_url, timeout=10) as r:
            text = r.read().decode()
        out = {"cpu_s": cpu_seconds(self.proc.pid)}
        for line in text.splitlines():
            m = re.match(r"kafka_tiered_broker_(\w+_total)(?:\{[^}]*\})? (\S+)$", line)
            if m:
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
        return out

    def stop(self):
        _stop(self.proc)


class ObjectStore:
    """The store (range store over the tiered directory, or moto) and the latency proxy."""

    def __init__(self, kind: str, root: str, latency_ms: float, mbps: float):
        self.kind = kind
        self.procs = []
        if kind == "range":
            store, lines = _spawn(["-m", "benchmarks.latency_proxy", "store", "--root", root, "--bucket", BUCKET],
                                  expect=r"^store: ")
            upstream = re.search(r"http://(\S+)", "".join(lines)).group(1)
        else:
            port = _free_port()
            store, _ = _spawn(["-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              expect=r"Running on|Serving|Press CTRL", timeout=120)
            upstream = f"127.0.0.1:{port}"
        self.procs.append(store)
        self.upstream = f"http://{upstream}"
        proxy, lines = _spawn(["-m", "benchmarks.latency_proxy", "proxy", "--upstream", upstream,
                               "--latency-ms", str(latency_ms), "--mbps", str(mbps)], expect=r"^proxy: ")
        self.procs.append(proxy)
        text = "".join(lines)
        self.endpoint = "http://" + re.search(r"proxy: (\S+)", text).group(1)
        from benchmarks.latency_proxy import ProxyControl
        self.control = ProxyControl(int(re.search(r"control 127\.0\.0\.1:(\d+)", text).group(1)))
        self.proxy_pid = proxy.pid

    def stop(self):
        for p in reversed(self.procs):
            _stop(p)


# ---------------------------------------------------------------------------------------------
# the ways

def _storage_options(endpoint: str) -> dict:
    return {"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": BUCKET,
            "remote.storage.s3.endpoint": endpoint, "remote.storage.s3.region": "us-east-1",
            "remote.storage.s3.access.key.id": ACCESS_KEY, "remote.storage.s3.secret.access.key": SECRET_KEY}


def _session(cores: int):
    from pyspark.sql import SparkSession
    os.environ.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    os.environ["PYTHONPATH"] = _env()["PYTHONPATH"]
    spark = (SparkSession.builder.master(f"local[{cores}]").appName(f"kafka-tiered-backfill-{cores}")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import kafka_tiered_source
    kafka_tiered_source.register(spark)
    return spark


def spark_read(spark, options: dict) -> tuple[float, object]:
    """One read of every row to a noop sink: (wall seconds, the reader's ReadStats)."""
    import kafka_tiered_source
    r = spark.read.format("kafka-tiered")
    for k, v in options.items():
        r = r.option(k, v)
    t0 = time.perf_counter()
    r.load().write.format("noop").mode("overwrite").save()
    wall = time.perf_counter() - t0
    return wall, kafka_tiered_source.last_read_stats(spark).total()


def scan_read(options: dict, workers: int) -> tuple[float, int, object]:
    """Every row through ``kafka_tiered_source.scan()`` with ``workers`` workers, planning
    included (as the Spark ways' timings include theirs): (wall seconds, rows, ReadStats)."""
    import kafka_tiered_source
    t0 = time.perf_counter()
    rows = 0
    for batch in kafka_tiered_source.scan(options, **{"scan.workers": str(workers)}):
        rows += batch.num_rows
    wall = time.perf_counter() - t0
    return wall, rows, kafka_tiered_source.last_read_stats().total()


def read_kafka_python(bootstrap: str, topic: str, partitions: int, expected: int) -> tuple[int, int]:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", client_id="bench-kafka-python")
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        n = nbytes = 0
        deadline = time.monotonic() + 900   # a stuck read ends as an incomplete row
        while n < expected and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=1000, max_records=50_000).values():
                for rec in recs:
                    n += 1
                    nbytes += len(rec.key) + len(rec.value)
        return n, nbytes
    finally:
        c.close()


def read_confluent(bootstrap: str, topic: str, partitions: int, expected: int) -> tuple[int, int]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-confluent", "enable.auto.commit": False,
                  "client.id": "bench-confluent-kafka", "enable.partition.eof": False})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        n = nbytes = 0
        deadline = time.monotonic() + 900   # a stuck read ends as an incomplete row
        while n < expected and time.monotonic() < deadline:
            for msg in c.consume(num_messages=10_000, timeout=1.0):
                if msg.error():
                    raise RuntimeError(f"confluent-kafka: {msg.error()}")
                n += 1
                nbytes += len(msg.key()) + len(msg.value())
        return n, nbytes
    finally:
        c.close()


def transport_only(options: dict, bootstrap: str, threads: int, direct: bool) -> tuple[float, int, int]:
    """The storage path alone, no decoding and no Spark: every planned remote range read by the
    s3 fetcher (``direct``), or every partition fetched through the broker with this project's
    client (1 MiB per partition per Fetch, as Kafka consumers do), one partition per thread at a
    time, ``threads`` threads.  Returns (seconds, record bytes, fetch calls)."""
    from concurrent.futures import ThreadPoolExecutor

    from kafka_tiered_source.protocol.client import BrokerClient
    from kafka_tiered_source.records.header import iter_headers
    from kafka_tiered_source import planning
    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.storage.registry import create_fetcher
    plan = planning.plan(ReadOptions.parse(options))
    by_partition: dict = {}
    for r in plan.remote_ranges:
        by_partition.setdefault((r.topic, r.partition), []).append(r)

    def direct_one(ranges):
        fetcher = create_fetcher(options)
        n = calls = 0
        try:
            for r in sorted(ranges, key=lambda r: r.offset_start):
                n += len(fetcher.fetch_log_segment(r.segment, r.byte_start, r.byte_end))
                calls += 1
        finally:
            fetcher.close()
        return n, calls

    def broker_one(ranges):
        topic, partition = ranges[0].topic, ranges[0].partition
        offset, end = min(r.offset_start for r in ranges), max(r.offset_end for r in ranges)
        n = calls = 0
        with BrokerClient({"bootstrap.servers": bootstrap, "client.id": "bench-transport"}) as client:
            while offset < end:
                res = client.fetch(topic, partition, offset)
                calls += 1
                if res.partition.error_code:
                    from kafka_tiered_source.protocol.errors import lookup
                    raise RuntimeError(f"{topic}-{partition} offset {offset}: broker answered "
                                       f"{lookup(res.partition.error_code).name}")
                data = res.records
                last = None
                for h in iter_headers(data):
                    last = h
                if last is None:
                    raise RuntimeError(f"{topic}-{partition}: no batch at offset {offset}")
                n += last.end
                offset = last.last_offset + 1
        return n, calls

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        done = list(pool.map(direct_one if direct else broker_one, by_partition.values()))
    return time.perf_counter() - t0, sum(d[0] for d in done), sum(d[1] for d in done)


# ---------------------------------------------------------------------------------------------
# accounting

def _prices():
    """(GET $ per 1,000, S3 same-region egress $/GiB, broker inter-AZ $/GiB, where from)."""
    try:
        from kafka_tiered_source.cost import PRESETS
        p = PRESETS["aws-s3-standard"]
        return p.get_per_1000, p.egress_per_gb["same-region"], p.broker_inter_az_per_gb, \
            "kafka_tiered_source.cost preset aws-s3-standard"
    except (ImportError, KeyError, AttributeError):
        # S3 Standard list prices (us-east-1): GET $0.0004/1,000; same-region transfer free;
        # EC2 cross-AZ $0.01/GB each way
        return 0.0004, 0.0, 0.02, "S3 Standard list prices (us-east-1)"


def measure(name, cores, size, facts, run, broker: Broker, store: ObjectStore) -> dict:
    """Run ``run()`` -> (wall seconds, rows read, reader ReadStats or None) between two readings
    of the broker's counters and CPU and the proxy's request counts; one result row."""
    before = broker.counters()
    store.control.reset()
    t_cpu_proxy = cpu_seconds(store.proxy_pid)
    wall, rows, reader = run()
    after, proxy = broker.counters(), store.control.stats()
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    get_price, egress, inter_az, _ = _prices()
    log_bytes = facts["log_bytes"]
    row = {
        "way": name, "cores": cores, "size": size, "records": facts["records"], "rows": rows,
        "log_bytes": log_bytes, "payload_bytes": facts["payload_bytes"], "wall_s": wall,
        "rows_per_s": rows / wall, "mb_per_s": log_bytes / wall / 1e6,
        "broker_remote_fetch_bytes": int(delta.get("remote_fetch_bytes_total", 0)),
        "broker_remote_fetches": int(delta.get("remote_fetch_requests_total", 0)),
        "location_grants": int(delta.get("location_grants_total", 0)),
        "location_granted_bytes": int(delta.get("location_granted_bytes_total", 0)),
        "broker_cpu_s": delta["cpu_s"], "proxy_cpu_s": cpu_seconds(store.proxy_pid) - t_cpu_proxy,
        "gets": proxy["gets"], "requests": proxy["requests"], "by_kind": proxy["by_kind"],
        "log_gets": proxy["by_kind"].get("GET .log", 0), "get_response_bytes": proxy["response_bytes"],
    }
    if reader is not None:
        row.update(reader_remote_requests=reader.remote_requests, reader_remote_bytes=reader.remote_bytes,
                   reader_broker_bytes=reader.broker_bytes, reader_fallbacks=reader.fallbacks,
                   reader_get_seconds=reader.remote_latency.sum,
                   # summed over tasks: how long decoding waited for the store (not hidden)
                   reader_wait_s=reader.remote_wait_s)
    # dollars per TiB of log read: the GETs (whoever makes them) + S3 egress (same region), and
    # the broker-to-consumer bytes priced as cross-AZ traffic (most consumers of a multi-AZ
    # cluster sit in another zone than the partition leader)
    per_tib = TIB / log_bytes
    through_broker = row["broker_remote_fetch_bytes"]
    row["usd_per_tib_storage"] = (row["gets"] * get_price / 1000 + row["get_response_bytes"] / 2**30 * egress) * per_tib
    row["usd_per_tib_with_cross_az"] = row["usd_per_tib_storage"] + through_broker / 2**30 * inter_az * per_tib
    ok = rows == facts["records"]
    row["complete"] = ok
    print(f"  {name:<16} local[{cores}] {size:>3}x  {wall:7.2f} s  {rows / wall / 1e6:6.3f} M rows/s  "
          f"{row['mb_per_s']:7.1f} MB/s  GETs {row['gets']:>6}  broker remote bytes "
          f"{through_broker / 1e6:8.1f} MB  broker CPU {row['broker_cpu_s']:6.2f} s"
          + (f"  tasks waited {reader.remote_wait_s:5.2f} s" if reader is not None else "")
          + ("" if ok else f"  ROWS {rows} != {facts['records']}"), flush=True)
    return row


def _spark_run(spark, options: dict):
    wall, st = spark_read(spark, options)
    return wall, st.records, st


def best_of(repeat: int, ways: list, measure_way) -> list[dict]:
    """Each way measured ``repeat`` times, the ways taking turns (a slow spell of a shared
    machine hits them alike); the fastest row of each way, in the ways' order."""
    best: dict = {}
    for _ in range(max(1, repeat)):
        for way, o in ways:
            row = measure_way(way, o)
            if way not in best or row["wall_s"] < best[way]["wall_s"]:
                best[way] = row
    return [best[way] for way, _ in ways]


def get_bound(options: dict) -> int:
    """The fewest GETs that can read the plan's remote ranges in parts of the reader's size,
    with the smaller leading parts where a task starts on a partition
    (:func:`kafka_tiered_source.executor.prefetch.ramp_sizes`)."""
    from kafka_tiered_source import planning
    from kafka_tiered_source.executor.prefetch import ramp_sizes
    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.planning.tasks import RemoteRange
    plan = planning.plan(ReadOptions.parse(options))
    bound = 0
    for task in plan.tasks:
        seen = set()
        for r in task.ranges:
            if not isinstance(r, RemoteRange):
                continue
            key = (r.topic, r.partition)
            sizes = list(ramp_sizes(PART_SIZE, empty=not seen) if key not in seen else ())
            seen.add(key)
            left = r.byte_end - r.byte_start
            while left > 0:
                left -= sizes.pop(0) if sizes else PART_SIZE
                bound += 1
    return bound, len(plan.broker_ranges), len(plan.tasks)


# ---------------------------------------------------------------------------------------------
# report

def evaluate(result: dict) -> list[dict]:
    """The targets, checked at the largest size for each core count."""
    rows = result["rows"]
    targets = []
    big = max(r["size"] for r in rows)
    for cores in sorted({r["cores"] for r in rows if r["way"] == "direct"}):
        d = next((r for r in rows if r["way"] == "direct" and r["cores"] == cores and r["size"] == big), None)
        b = next((r for r in rows if r["way"] == "broker" and r["cores"] == cores and r["size"] == big), None)
        f = next((r for r in rows if r["way"] == "direct-file" and r["cores"] == cores and r["size"] == big), None)
        if d and b:
            speedup = b["wall_s"] / d["wall_s"]
            targets.append({"target": f"direct >= 5x broker-mediated, local[{cores}], {big}x",
                            "measured": f"{d['wall_s']:.2f} s vs {b['wall_s']:.2f} s = {speedup:.2f}x",
                            "met": speedup >= 5})
        if d and f:
            share = f["wall_s"] / d["wall_s"]
            targets.append({"target": f"latency hidden: direct through the store >= 0.8 of the same read from "
                                      f"file://, local[{cores}], {big}x",
                            "measured": f"{f['wall_s']:.2f} s from file://, {d['wall_s']:.2f} s through the "
                                        f"store = {share:.2f}",
                            "met": share >= 0.8})
    for cores in sorted({r["cores"] for r in rows if r["way"] == "scan"}):
        sc = next((r for r in rows if r["way"] == "scan" and r["cores"] == cores and r["size"] == big), None)
        d = next((r for r in rows if r["way"] == "direct" and r["cores"] == cores and r["size"] == big), None)
        if sc and d:
            ratio = d["wall_s"] / sc["wall_s"]
            targets.append({"target": f"scan() without Spark, {cores} worker{'s' if cores > 1 else ''}, at least as "
                                      f"fast as the Spark read (direct, local[{cores}]), {big}x",
                            "measured": f"{sc['wall_s']:.2f} s vs {d['wall_s']:.2f} s: scan is {ratio:.2f}x as fast",
                            "met": sc["wall_s"] <= d["wall_s"]})
    for cores in sorted({r["cores"] for r in rows if r["way"] == "transport-direct"}):
        d = next(r for r in rows if r["way"] == "transport-direct" and r["cores"] == cores)
        b = next((r for r in rows if r["way"] == "transport-broker" and r["cores"] == cores), None)
        if b:
            ratio = d["wall_s"] / b["wall_s"]
            targets.append({"target": f"(the storage path alone, no Spark, no decoding) direct <= 1/2 of broker, "
                                      f"{cores} thread{'s' if cores > 1 else ''}, {d['size']}x",
                            "measured": f"{d['wall_s']:.2f} s vs {b['wall_s']:.2f} s = {ratio:.2f}x "
                                        f"({d['mb_per_s']:.0f} vs {b['mb_per_s']:.0f} MB/s)",
                            "met": ratio <= 0.5})
    from benchmarks.encryption import evaluate_encryption
    targets += evaluate_encryption(result)
    direct = [r for r in rows if r["way"] == "direct"]
    if direct:
        through = sum(r["broker_remote_fetch_bytes"] + r.get("reader_broker_bytes", 0) for r in direct)
        targets.append({"target": "zero record bytes through the broker on the direct path (all data tiered)",
                        "measured": f"{through} bytes (broker remote_fetch_bytes_total + reader broker_bytes, "
                                    f"{len(direct)} direct runs)",
                        "met": through == 0})
        gets = sum(r["gets"] for r in direct)
        log_gets = sum(r["log_gets"] for r in direct)
        read = sum(r["get_response_bytes"] for r in direct)
        bound = sum(r["get_bound"] for r in direct)
        log_bytes = sum(r["log_bytes"] for r in direct)
        targets.append({"target": "no more GETs of segment data than parts of the planned ranges",
                        "measured": f"{log_gets} GETs of .log objects for {log_bytes / MIB:.0f} MiB of segments = "
                                    f"{log_bytes / max(log_gets, 1) / MIB:.2f} MiB/GET; the fewest that can "
                                    f"cover the planned ranges in {PART_SIZE // MIB} MiB parts (smaller ones first "
                                    f"where a task starts on a partition): {bound}",
                        "met": log_gets <= bound})
        other = {}
        for r in direct:
            for k, v in r["by_kind"].items():
                if k != "GET .log":
                    other[k] = other.get(k, 0) + v
        targets.append({"target": f">= {GET_TARGET // MIB} MiB per GET (direct), counting every GET",
                        "measured": f"{gets} GETs for {read / MIB:.0f} MiB = {read / max(gets, 1) / MIB:.2f} MiB/GET "
                                    f"(besides the .log GETs: {', '.join(f'{v} {k}' for k, v in sorted(other.items()))})",
                        "met": read / max(gets, 1) >= GET_TARGET})
    return targets


def plot(result: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = result["rows"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    series = sorted({(r["way"], r["cores"]) for r in rows if r["way"] not in TRANSPORT_WAYS},
                    key=lambda k: (WAYS.index(k[0]), k[1]))
    for way, cores in series:
        pts = sorted((r["log_bytes"] / 1e6, r["wall_s"]) for r in rows if (r["way"], r["cores"]) == (way, cores))
        label = (f"{way} local[{cores}]" if way in SPARK_WAYS else f"{way} ({cores} workers)" if way in SCAN_WAYS
                 else f"{way} (1 consumer)")
        style = {"direct": "-o", "broker": "--s", "direct-file": "-.x"}.get(way, ":^")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tiered log size (MB)")
    ax.set_ylabel("wall time (s)")
    ax.set_title(f"Backfill through a {result['config']['latency_ms']:g} ms / {result['config']['mbps']:g} MB/s "
                 "object-store link")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render_markdown(result: dict) -> str:
    cfg = result["config"]
    lines = [
        f"`python -m benchmarks.backfill` ({cfg['command']}).  Object store: "
        f"{'the range store (`benchmarks.latency_proxy store`)' if cfg['store'] == 'range' else 'moto'} behind "
        f"the latency proxy ({cfg['latency_ms']:g} ms first byte, {cfg['mbps']:g} MB/s per connection), "
        f"for the reader and the broker alike.  {cfg['partitions']} partitions, {cfg['segment_mib']} MiB segments, "
        f"batches of {cfg['batch_records']} records (zstd / lz4), all tiered, nothing local.  "
        f"Prices: {result['prices']}.",
        "",
        "| way | cores | size | records | log MB | wall s | M rows/s | MB/s | vs broker | GETs | MiB/GET "
        "| broker record bytes (MB) | broker CPU s | $/TiB S3 | $/TiB + cross-AZ |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = result["rows"]
    for r in sorted(rows, key=lambda r: (r["size"], WAYS.index(r["way"]), r["cores"])):
        ref = ("transport-broker" if r["way"] in TRANSPORT_WAYS else
               "broker-today" if r["way"] in ("direct-today", "broker-today") else "broker")
        base = next((b for b in rows if b["way"] == ref and b["size"] == r["size"]
                     and b["cores"] == (r["cores"] if r["way"] in SPARK_WAYS + TRANSPORT_WAYS + SCAN_WAYS else 1)),
                    None)
        vs = f"{base['wall_s'] / r['wall_s']:.2f}x" if base else ""
        cores = (r["cores"] if r["way"] in SPARK_WAYS else
                 f"{r['cores']} thread{'s' if r['cores'] > 1 else ''}" if r["way"] in TRANSPORT_WAYS else
                 f"{r['cores']} worker{'s' if r['cores'] > 1 else ''}" if r["way"] in SCAN_WAYS else "1 consumer")
        mib_get = f"{r['get_response_bytes'] / max(r['gets'], 1) / MIB:.2f}" if r["gets"] else "-"
        lines.append(
            f"| {r['way']} | {cores} | {r['size']}x | {r['records']:,} | {r['log_bytes'] / 1e6:.0f} "
            f"| {r['wall_s']:.2f} | {r['rows_per_s'] / 1e6:.3f} | {r['mb_per_s']:.1f} | {vs} | {r['gets']:,} "
            f"| {mib_get} | {r['broker_remote_fetch_bytes'] / 1e6:.1f} | {r['broker_cpu_s']:.2f} "
            f"| {r['usd_per_tib_storage']:.3f} | {r['usd_per_tib_with_cross_az']:.2f} |"
            + ("" if r["complete"] else " **incomplete** |"))
    lines += ["", "\"vs broker\": the broker-mediated Spark read's wall time at the same size and cores divided "
              "by this row's (the clients are compared with broker local[1]; the transport-only rows with "
              "transport-broker at the same thread count; `scan`, which runs without Spark, with the Spark broker "
              "read at as many cores as it has workers).  \"broker record bytes\": the broker's "
              "`remote_fetch_bytes_total` counter (every byte of this topic is tiered, so it is every record "
              "byte the broker served).  The `-today` rows run against the same data behind a broker "
              "that behaves as Apache Kafka 4.1 (`--no-kip1248`: no location answers): `direct-today` "
              "finds the segments through `__remote_log_metadata` and is compared with `broker-today`, "
              "the same broker serving the read.", "",
              "| target | measured | |", "|---|---|---|"]
    for t in evaluate(result):
        lines.append(f"| {t['target']} | {t['measured']} | {'met' if t['met'] else '**missed**'} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-records", type=int, default=100_000, help="records at 1x (before --scale)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every size (2.5: the full few-GB run)")
    ap.add_argument("--sizes", default="1,4,16", help="multiples of the base, comma-separated")
    ap.add_argument("--cores", default="1,2", help="Spark local[N] values, comma-separated")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--segment-mib", type=int, default=16)
    ap.add_argument("--batch-records", type=int, default=500)
    ap.add_argument("--latency-ms", type=float, default=30.0)
    ap.add_argument("--mbps", type=float, default=90.0, help="per-connection cap, MB/s")
    ap.add_argument("--store", choices=("range", "moto"), default="range")
    ap.add_argument("--skip-clients", action="store_true", help="leave out kafka-python and confluent-kafka")
    ap.add_argument("--encrypted", action="store_true",
                    help="also read the largest size tiered encrypted (Aiven's plugin encryption, a new key pair): "
                         "ways direct-encrypted (and direct-file-encrypted with --store range) in the same run, "
                         "and the time AES-GCM decryption takes of the read")
    ap.add_argument("--work-dir", default=None, help="where data goes (default: a temporary directory)")
    ap.add_argument("--out", default=RESULTS, help="results directory (JSON, PNG)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="measure each Spark way this many times, taking turns; keep the fastest")
    ap.add_argument("--ways", default=None,
                    help=f"only these ways, comma-separated (default: all of {', '.join(WAYS)})")
    args = ap.parse_args(argv)
    chosen = set(WAYS if args.ways is None else [w.strip() for w in args.ways.split(",") if w.strip()])
    if chosen - set(WAYS):
        ap.error(f"--ways: unknown {', '.join(sorted(chosen - set(WAYS)))}; ways are {', '.join(WAYS)}")

    def wanted(way: str) -> bool:
        return way in chosen

    sizes = [int(s) for s in args.sizes.split(",")]
    cores_list = [int(c) for c in args.cores.split(",")]
    base = int(args.base_records * args.scale)
    segment_bytes = args.segment_mib * MIB
    work = args.work_dir or tempfile.mkdtemp(prefix="kts-backfill-")
    data_dir, root = os.path.join(work, "broker"), os.path.join(work, "remote")
    os.makedirs(root, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    encrypt = None
    if args.encrypted:
        from kafka_tiered_source.testing.aiven_writer import generate_key_pair
        encrypt = ("bench-2026", generate_key_pair(os.path.join(work, "bench-key-pair.pem")))
    procs = []
    try:
        if args.store == "range":
            remote = f"file://{root}"
            t0 = time.perf_counter()
            facts = build_topics(data_dir, remote, sizes, base, args.partitions, segment_bytes, args.batch_records,
                                 encrypt=encrypt)
            store = ObjectStore("range", root, args.latency_ms, args.mbps)
            procs.append(store)
        else:
            store = ObjectStore("moto", root, args.latency_ms, args.mbps)
            procs.append(store)
            import boto3
            boto3.client("s3", endpoint_url=store.upstream, region_name="us-east-1", aws_access_key_id=ACCESS_KEY,
                         aws_secret_access_key=SECRET_KEY).create_bucket(Bucket=BUCKET)
            t0 = time.perf_counter()
            # tiering uploads straight to moto, not through the proxy: only the reads are measured
            facts = build_topics(data_dir, f"s3://{BUCKET}", sizes, base, args.partitions, segment_bytes,
                                 args.batch_records,
                                 s3=dict(s3_endpoint_url=store.upstream, s3_region="us-east-1",
                                         s3_access_key_id=ACCESS_KEY, s3_secret_access_key=SECRET_KEY),
                                 encrypt=encrypt)
        for s, f in facts.items():
            print(f"data {f'{s}x' if isinstance(s, int) else str(s).replace('-', 'x '):>4}: {f['records']:,} records, {f['payload_bytes'] / 1e6:.0f} MB of keys+values, "
                  f"{f['log_bytes'] / 1e6:.0f} MB tiered in {f['segments']} segments", flush=True)
        print(f"built and tiered in {time.perf_counter() - t0:.1f} s", flush=True)
        broker = Broker(data_dir, store.endpoint, segment_bytes)
        procs.append(broker)
        storage = _storage_options(store.endpoint)
        rows = []

        for cores in cores_list:
            spark = _session(cores)
            try:
                common = {"kafka.bootstrap.servers": broker.bootstrap, "minPartitions": str(args.partitions),
                          **storage}
                warm = {**common, "subscribe": facts[sizes[0]]["topic"]}
                spark_read(spark, warm)                         # Python workers, imports, planner
                spark_read(spark, {**warm, "fetch.remote.enabled": "false"})
                if wanted("scan"):
                    scan_read(warm, cores)                      # imports, the s3 client, connections
                for size in sizes:
                    f = facts[size]
                    opts = {**common, "subscribe": f["topic"]}
                    bound, broker_ranges, tasks = get_bound(opts)
                    ways = [("direct", opts), ("broker", {**opts, "fetch.remote.enabled": "false"}),
                            ("scan", opts)]
                    if args.store == "range":
                        ways.append(("direct-file", {**opts, "remote.storage.fetcher": "fsspec",
                                                     "remote.storage.fsspec.url": f"file://{root}"}))
                    if encrypt and size == max(sizes):
                        from benchmarks.encryption import encrypted_ways
                        ways += encrypted_ways(opts, facts[f"{size}-encrypted"]["topic"], encrypt,
                                               root if args.store == "range" else None)
                    ways = [(w, o) for w, o in ways if wanted(w)]
                    for row in best_of(args.repeat, ways,
                                       lambda way, o, cores=cores, size=size, f=f, spark=spark: measure(
                            way, cores, size, facts[f"{size}-encrypted"] if way.endswith("-encrypted") else f,
                            (lambda: scan_read(o, cores)) if way == "scan" else (lambda: _spark_run(spark, o)),
                            broker, store)):
                        row.update(get_bound=bound, planned_broker_ranges=broker_ranges, spark_tasks=tasks)
                        rows.append(row)
            finally:
                spark.stop()

        # Today's Kafka: the same data behind a broker that ignores the KIP-1248 tags; the reader
        # finds the tiered segments through __remote_log_metadata (its "auto" locator), against
        # the same broker serving the read itself.  Largest size, most cores.
        if wanted("direct-today") or wanted("broker-today"):
            broker.stop()
            procs.remove(broker)
            broker = Broker(data_dir, store.endpoint, segment_bytes, kip1248=False)
            procs.append(broker)
            f, cores = facts[sizes[-1]], max(cores_list)
            spark = _session(cores)
            try:
                opts = {"kafka.bootstrap.servers": broker.bootstrap, "minPartitions": str(args.partitions),
                        "subscribe": f["topic"], **storage}
                spark_read(spark, opts)                             # warm up against this broker
                ways = [(w, o) for w, o in (("direct-today", opts),
                                            ("broker-today", {**opts, "fetch.remote.enabled": "false"})) if wanted(w)]
                rows += best_of(args.repeat, ways, lambda way, o: measure(
                    way, cores, sizes[-1], f, lambda: _spark_run(spark, o), broker, store))
            finally:
                spark.stop()

        # the storage paths alone (no Spark, no decoding), at the largest size
        f = facts[sizes[-1]]
        opts = {"kafka.bootstrap.servers": broker.bootstrap, "minPartitions": str(args.partitions),
                "subscribe": f["topic"], **storage}
        for threads in cores_list:
            for way, direct in (("transport-direct", True), ("transport-broker", False)):
                if not wanted(way):
                    continue

                def run(threads=threads, direct=direct, way=way):
                    wall, n, calls = transport_only(opts, broker.bootstrap, threads, direct)
                    if n < f["log_bytes"] * 0.99:
                        print(f"  {way}: {n} bytes, want {f['log_bytes']}", flush=True)
                    return wall, f["records"] if n >= f["log_bytes"] * 0.99 else 0, None
                rows.append(measure(way, threads, sizes[-1], f, run, broker, store))

        if not args.skip_clients:
            for size in sizes:
                f = facts[size]
                for way, fn in (("kafka-python", read_kafka_python), ("confluent-kafka", read_confluent)):
                    if not wanted(way):
                        continue

                    def run(fn=fn, f=f):
                        t0 = time.perf_counter()
                        n, _ = fn(broker.bootstrap, f["topic"], args.partitions, f["records"])
                        return time.perf_counter() - t0, n, None
                    rows.append(measure(way, 1, size, f, run, broker, store))

        if encrypt and args.store == "range":
            from benchmarks.encryption import decrypt_seconds
            f = facts[f"{sizes[-1]}-encrypted"]
            f["decrypt_s"], f["decrypted_bytes"] = decrypt_seconds(root, f["topic"], encrypt)
            print(f"decrypting every chunk of {f['topic']} on one core: {f['decrypt_s']:.2f} s for "
                  f"{f['decrypted_bytes'] / 1e6:.0f} MB", flush=True)
        cmd = "python -m benchmarks.backfill" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
        result = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "config": {"command": cmd.strip(), "store": args.store, "latency_ms": args.latency_ms, "mbps": args.mbps,
                       "partitions": args.partitions, "segment_mib": args.segment_mib,
                       "batch_records": args.batch_records, "base_records": base, "sizes": sizes,
                       "cores": cores_list},
            "prices": _prices()[3], "data": {str(k): v for k, v in facts.items()}, "rows": rows,
        }
        with open(os.path.join(args.out, "backfill.json"), "w") as fh:
            json.dump(result, fh, indent=1)
        plot(result, os.path.join(args.out, "backfill.png"))
        print()
        print(render_markdown(result))
        print(f"results: {os.path.join(args.out, 'backfill.json')}, plot: {os.path.join(args.out, 'backfill.png')}")
        return 0 if all(r["complete"] for r in rows) else 1
    finally:
        for p in reversed(procs):
            p.stop()
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
