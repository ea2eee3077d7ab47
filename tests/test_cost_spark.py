"""Cost attribution end to end: a real local[2] Spark read of real Kafka segments tiered to a
moto S3 server, with GETs and bytes counted on the *server* side by the proxy in front of moto
(storage_servers.FaultProxy) — the reader's accumulated totals, its JSON lines, the estimate
made before reading and the budget refusal are all checked against what the server actually
served."""
from __future__ import annotations

import json

import pytest
from pyspark.errors import AnalysisException

from broker_fixtures import s3_tiered_cluster
from storage_servers import S3_KEY_ID, S3_SECRET

import kafka_tiered_source

pytestmark = [pytest.mark.spark]

PARTITIONS = [("orders", 1), ("payments", 0)]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    # The broker tiers straight to moto; only the readers go through the counting proxy.
    # The broker subscribes to every client metric (KIP-714), so Spark's tasks push theirs to it.
    with s3_tiered_cluster(tmp_path_factory.mktemp("cost-s3"), "cost", PARTITIONS,
                           telemetry_metrics=("",)) as c:
        yield c


def assign_options(c, **extra) -> dict:
    """Read exactly the imported partitions (orders has only partition 1 in this cluster)."""
    return {"kafka.bootstrap.servers": c.bootstrap_servers,
            "assign": json.dumps({t: [p] for t, p in PARTITIONS}), "kafka.isolation.level": "read_committed",
            "remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "cost",
            "remote.storage.prefix": "kt/", "remote.storage.s3.endpoint": c.proxy.endpoint,
            "remote.storage.s3.region": "us-east-1", "remote.storage.s3.access.key.id": S3_KEY_ID,
            "remote.storage.s3.secret.access.key": S3_SECRET, **extra}


def load(spark, opts):
    reader = spark.read.format("kafka-tiered")
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


@pytest.fixture(scope="module")
def sp(spark):
    kafka_tiered_source.register(spark)
    return spark


def _expected_rows() -> int:
    from broker_fixtures import fixture_expected
    return sum(len(fixture_expected(t, p, True)) for t, p in PARTITIONS)


def test_read_totals_equal_what_the_server_served(sp, s3, tmp_path):
    jsonl = tmp_path / "tasks.jsonl"
    opts = assign_options(s3, **{"client.id": "backfill-cost", "cost.egress": "internet",
                                 "metrics.jsonl.path": str(jsonl)})
    s3.proxy.reset()
    est = kafka_tiered_source.estimate(sp, opts)
    # estimating reads no record data: its one request is the storage check the read makes too
    # (with the Aiven layout, one segment's manifest: the read hands it to the task that reads
    # the segment, so the estimate counts it among the manifests, not as a GET of its own)
    assert est.storage_check == "checked" and est.check_gets == 0
    assert [e[1].rsplit(".", 1)[-1] for e in s3.proxy.gets()] == ["rsm-manifest"]
    s3.proxy.reset()

    rows = load(sp, opts).count()
    assert rows == _expected_rows()
    stats = kafka_tiered_source.last_read_stats(sp)
    total = stats.total()

    # every GET the server saw (failed or not) is a request; bytes are the object bytes served
    served = s3.proxy.gets()
    assert total.remote_requests == len(served) > 0
    assert total.remote_bytes == s3.proxy.served_bytes()
    assert total.remote_failed == 0
    assert total.remote_latency.count == total.remote_requests
    assert total.records == rows
    # per tag: the client id given, each topic-partition read, the s3 backend
    assert {tags for tags in stats.by_tags} == {("backfill-cost", t, p, "s3") for t, p in PARTITIONS}
    for t, p in PARTITIONS:
        prefix = f"/cost/kt/{t}-"
        s = stats.total(topic=t, partition=p)
        assert s.remote_requests == len(s3.proxy.gets(prefix)) > 0
        assert s.remote_bytes == s3.proxy.served_bytes(prefix)

    # the estimate, made before reading, counted the same GETs and .log bytes
    assert est.log_gets == len(s3.proxy.gets(".log"))
    assert est.manifest_gets == len(s3.proxy.gets(".rsm-manifest"))
    assert est.gets == len(served)
    assert est.bytes == s3.proxy.served_bytes(".log")
    assert est.partitions == stats.tasks

    # cost: GETs × $0.0004/1000 + GiB × $0.09 (aws-s3-standard, internet egress)
    report = kafka_tiered_source.cost_report(stats)
    by_topic = {r.topic: r for r in report.rows}
    assert set(by_topic) == {"orders", "payments"}
    for t, _p in PARTITIONS:
        r = by_topic[t]
        n, b = len(s3.proxy.gets(f"/cost/kt/{t}-")), s3.proxy.served_bytes(f"/cost/kt/{t}-")
        assert r.client_id == "backfill-cost"
        assert r.remote_requests == n and r.remote_bytes == b
        assert r.dollars == pytest.approx(n * 0.0004 / 1000 + b / 2**30 * 0.09)
        assert r.bytes_per_get == pytest.approx(b / n)
        assert r.error_rate == 0.0
        # what brokers would have sent: the record batches of the offsets read — whole tiered
        # segments here (the .log objects, byte for byte) plus what the untiered tail already
        # took through the brokers
        log_bytes = sum(e[3] for e in s3.proxy.gets(f"/cost/kt/{t}-") if e[1].endswith(".log"))
        assert r.broker_equivalent_bytes == log_bytes + r.broker_bytes
        assert r.broker_path_dollars == pytest.approx((log_bytes + r.broker_bytes) / 2**30 * 0.02)
    text = str(report)
    assert "backfill-cost" in text and "orders" in text

    # one JSON line per task, adding up to the same totals
    from kafka_tiered_source.executor.finish import read_jsonl
    lines = read_jsonl(str(jsonl))
    assert len(lines) == stats.tasks
    assert sum(x.total().remote_requests for x in lines) == total.remote_requests
    assert sum(x.total().remote_bytes for x in lines) == total.remote_bytes
    assert {x.read_id for x in lines} == {stats.read_id}

    # each task pushed its metrics to the broker at its end (KIP-714, OTLP protobuf)
    from kafka_tiered_source.telemetry import decode_otlp
    pushes = s3.telemetry("backfill-cost")
    assert len(pushes) == stats.tasks
    points = [pt for p in pushes for pt in decode_otlp(p.metrics)]
    pushed = sum(pt["value"] for pt in points if pt["name"] == "kafka.tiered.reader.remote.requests")
    assert pushed == total.remote_requests
    assert sum(pt["value"] for pt in points if pt["name"] == "kafka.tiered.reader.remote.bytes") == \
        total.remote_bytes
    assert {pt["resource"].get("spark.app.id") for pt in points} == {sp.sparkContext.applicationId}


def test_default_client_id_is_the_spark_application_name(sp, s3):
    load(sp, assign_options(s3)).count()
    stats = kafka_tiered_source.last_read_stats(sp)
    assert {tags[0] for tags in stats.by_tags} == {sp.sparkContext.appName}


def test_failed_gets_count_as_requests_not_bytes(sp, s3):
    s3.proxy.reset()
    s3.proxy.fail(".log", 2)     # two 503 SlowDown answers, then the store recovers
    opts = assign_options(s3, **{"client.id": "flaky", "fetch.remote.retry.backoff.ms": "20"})
    assert load(sp, opts).count() == _expected_rows()
    stats = kafka_tiered_source.last_read_stats(sp)
    total = stats.total()
    served = s3.proxy.gets()
    failed = [e for e in served if e[2] == 503]
    assert len(failed) == 2
    assert total.remote_requests == len(served)
    assert total.remote_errors == {"RemoteThrottled": 2}
    assert total.remote_bytes == s3.proxy.served_bytes()
    assert total.storage_throttled_s > 0
    report = kafka_tiered_source.cost_report(stats)
    assert sum(r.remote_failed for r in report.rows) == 2
    assert sum(r.remote_requests for r in report.rows) == len(served)


def test_a_read_over_budget_is_refused_before_any_get(sp, s3):
    opts = assign_options(s3, **{"cost.budget.usd": "0.000001"})
    est = kafka_tiered_source.estimate(sp, opts)
    assert est.dollars > 0.000001      # 0.0004/1000 per GET: a few GETs are over it
    s3.proxy.reset()
    df = load(sp, opts)
    with pytest.raises(AnalysisException) as info:        # refused while planning
        df.count()
    msg = str(info.value)
    assert "cost.budget.usd" in msg and "BudgetExceededError" in msg
    assert f"{est.gets:,} GETs" in msg
    assert s3.proxy.log == [], "nothing may be read from storage"


def test_budget_and_cost_options_are_checked_at_load(sp, s3):
    from kafka_tiered_source.errors import ConfigError
    from kafka_tiered_source.options import ReadOptions
    for bad, option in (({"cost.budget.usd": "cheap"}, "cost.budget.usd"),
                        ({"cost.preset": "aws-glacier"}, "cost.preset"),
                        ({"cost.egress": "moon"}, "cost.egress"),
                        ({"quota.remote.bytes.per.second": "0"}, "quota.remote.bytes.per.second")):
        with pytest.raises(ConfigError) as info:
            ReadOptions.parse(assign_options(s3, **bad))
        assert info.value.option == option
    with pytest.raises(AnalysisException) as info:        # the options are parsed for the schema
        load(sp, assign_options(s3, **{"cost.egress": "moon"}))
    assert "cost.egress" in str(info.value)


@pytest.mark.decoder
def test_estimate_counts_part_gets_of_split_ranges(s3):
    """Segments split over several tasks (minPartitions) and ranges cut into several GETs
    (a small fetch.remote.part.size.bytes): the plan's estimate against the server's count."""
    from kafka_tiered_source.planning.estimate import estimate_plan
    from kafka_tiered_source.planning.tasks import RemoteRange
    from kafka_tiered_source import planning
    from kafka_tiered_source.options import ReadOptions
    from kafka_tiered_source.executor import TaskReader
    opts = ReadOptions.parse(assign_options(s3, **{"minPartitions": "5", "telemetry.push.enabled": "false",
                                                   "fetch.remote.part.size.bytes": "40000"}))
    plan = planning.plan(opts)        # reads offset indexes to split: not counted below
    est = estimate_plan(plan, opts)
    ranges = len(plan.remote_ranges)
    assert len(plan.tasks) >= 5 and est.log_gets > ranges     # several GETs per range
    s3.proxy.reset()
    rows = 0
    for task in plan.tasks:
        reader = TaskReader(opts, tasks_planned=len(plan.tasks))
        try:
            rows += sum(b.num_rows for b in reader.read(task))
            assert reader.metrics.total().fallbacks == 0
        finally:
            reader.close()
    assert rows == _expected_rows()
    log_gets = s3.proxy.gets(".log")
    assert len(log_gets) == est.log_gets
    assert sum(e[3] for e in log_gets) == est.bytes
    assert len(s3.proxy.gets(".rsm-manifest")) == est.manifest_gets
    assert est.remote_ranges == ranges and all(isinstance(r, RemoteRange) for r in plan.remote_ranges)


def test_the_planner_hands_the_manifests_it_read_to_the_tasks(s3):
    """Segments bigger than a task are split at their offset index, which the planner reads
    through the Aiven manifest; the tasks get what they need of that manifest and GET none.
    Before, each task that read a piece of a segment GOT that segment's manifest again."""
    from dataclasses import replace

    from spark_helpers import expected_rows, read_as_executors, without_manifest_info

    from kafka_tiered_source.planning.estimate import estimate_plan
    from kafka_tiered_source.planning.tasks import RemoteRange
    from kafka_tiered_source import planning
    from kafka_tiered_source.options import ReadOptions
    opts = ReadOptions.parse(assign_options(s3, **{"partition.target.bytes": "30000",
                                                   "telemetry.push.enabled": "false"}))
    s3.proxy.reset()
    plan = planning.plan(opts)
    segments = {r.segment.segment_id for r in plan.remote_ranges}
    # the planner: one manifest GET per segment (plus its offset index), for splitting
    assert len(s3.proxy.gets(".rsm-manifest")) == len(segments) > 1
    readers = {s: sum(s in {r.segment.segment_id for r in t.ranges if isinstance(r, RemoteRange)}
                      for t in plan.tasks) for s in segments}
    assert max(readers.values()) > 1                  # segments split over several tasks
    assert all(r.segment.manifest_info is not None for r in plan.remote_ranges)
    est = estimate_plan(plan, opts)
    assert est.manifest_gets == 0

    s3.proxy.reset()
    rows = read_as_executors(opts, plan.tasks)
    assert len(s3.proxy.gets(".rsm-manifest")) == 0   # executors: no manifest GET at all
    assert len(s3.proxy.gets()) == len(s3.proxy.gets(".log")) == est.gets
    assert rows == {(t, p): expected_rows(t, p, True, headers=False) for t, p in PARTITIONS}

    # the old path (nothing carried): one manifest GET per segment per task, same rows
    bare = without_manifest_info(plan.tasks)
    old = estimate_plan(replace(plan, tasks=bare), opts)
    assert old.manifest_gets == sum(readers.values()) > len(segments)
    s3.proxy.reset()
    assert read_as_executors(opts, bare) == rows
    assert len(s3.proxy.gets(".rsm-manifest")) == old.manifest_gets


def test_spark_read_gets_each_manifest_once(sp, s3):
    """The same through Spark: the planner's one manifest GET per segment is the only one."""
    from kafka_tiered_source import planning
    from kafka_tiered_source.options import ReadOptions
    opts = assign_options(s3, **{"partition.target.bytes": "30000", "telemetry.push.enabled": "false"})
    segments = {r.segment.segment_id for r in planning.plan(ReadOptions.parse(opts)).remote_ranges}
    s3.proxy.reset()
    assert load(sp, opts).count() == _expected_rows()
    manifests = s3.proxy.gets(".rsm-manifest")
    assert len(manifests) == len(segments) == len({e[1] for e in manifests})
    stats = kafka_tiered_source.last_read_stats(sp)
    assert stats.total().remote_requests == len(s3.proxy.gets(".log"))   # executors: .log only
