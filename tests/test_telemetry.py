"""Exported metrics: Prometheus text (parsed back with prometheus-client's own parser) and
KIP-714 pushes of a real read to the embedded broker (decoded back from OTLP protobuf)."""
from __future__ import annotations

import json
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker_fixtures import fixture_segments
from kafka_tiered_source.metrics.reader import LatencyHistogram, ReadStats, ReadTotals
from kafka_tiered_source import planning
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.planning.tasks import BrokerRange
from kafka_tiered_source.telemetry import (broker_metrics_with_clients, decode_otlp, otlp_metrics,
                                           prometheus_text, pushed_metrics_text)
from kafka_tiered_source.testing import EmbeddedCluster

TAGS_A = ("job-a", "orders", 0, "s3")
TAGS_B = ("job-a", "orders", 1, "s3")


def _totals() -> ReadTotals:
    a, b = ReadStats(), ReadStats()
    a.remote_requests, a.remote_bytes, a.records, a.broker_bytes = 7, 7_000, 300, 50
    a.remote_errors.update({"RemoteThrottled": 2})
    a.storage_throttled_s, a.quota_throttled_s = 0.25, 1.5
    for s in (0.004, 0.02, 0.02, 0.3, 0.3, 0.3, 7.0):
        a.remote_latency.observe(s)
    b.remote_requests, b.remote_bytes, b.broker_equivalent_bytes = 1, 100, 90
    b.remote_latency.observe(0.0005)
    return ReadTotals({TAGS_A: a, TAGS_B: b}, tasks=2, read_id="r1")


def test_histogram_quantiles_and_merge():
    h = LatencyHistogram()
    for s in [0.003] * 50 + [0.04] * 45 + [2.0] * 5:
        h.observe(s)
    assert h.count == 100
    assert 0.0025 < h.quantile(0.5) <= 0.005       # in the (2.5 ms, 5 ms] bucket
    assert 0.025 < h.quantile(0.95) <= 0.05
    assert 1.0 < h.quantile(0.99) <= 2.5
    other = LatencyHistogram()
    other.observe(100.0)                           # past the last bound
    merged = h.copy().merge(other)
    assert merged.count == 101 and merged.sum == pytest.approx(h.sum + 100.0)
    assert merged.quantile(1.0) == 60.0
    assert LatencyHistogram().quantile(0.5) is None


def test_totals_merge_and_round_trip_through_a_json_line():
    t = _totals()
    again = ReadTotals.from_dict(json.loads(json.dumps(t.as_dict())))
    assert again.by_tags == t.by_tags and again.tasks == 2 and again.read_id == "r1"
    doubled = ReadTotals().merge(t).merge(again)
    assert doubled.total().remote_requests == 16
    assert doubled.total().remote_errors == {"RemoteThrottled": 4}
    assert doubled.total(partition=1).remote_bytes == 200
    assert doubled.grouped("topic")[("orders",)].records == 600


def test_prometheus_text_parses_back_to_the_counters():
    t = _totals()
    families = {f.name: f for f in text_string_to_metric_families(prometheus_text(t))}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in families.values() for s in f.samples}
    lab_a = (("backend", "s3"), ("client_id", "job-a"), ("partition", "0"), ("topic", "orders"))
    assert samples[("kafka_tiered_reader_remote_requests_total", lab_a)] == 7
    assert samples[("kafka_tiered_reader_remote_bytes_total", lab_a)] == 7000
    assert samples[("kafka_tiered_reader_records_total", lab_a)] == 300
    assert samples[("kafka_tiered_reader_remote_errors_total",
                    tuple(sorted(lab_a + (("error_type", "RemoteThrottled"),))))] == 2
    assert samples[("kafka_tiered_reader_throttled_time_seconds_total",
                    tuple(sorted(lab_a + (("kind", "quota"),))))] == 1.5
    assert samples[("kafka_tiered_reader_remote_request_latency_seconds_count", lab_a)] == 7
    assert samples[("kafka_tiered_reader_remote_request_latency_seconds_bucket",
                    tuple(sorted(lab_a + (("le", "0.025"),))))] == 3
    assert samples[("kafka_tiered_reader_remote_request_latency_seconds_bucket",
                    tuple(sorted(lab_a + (("le", "+Inf"),))))] == 7
    assert families["kafka_tiered_reader_remote_requests"].type == "counter"
    assert families["kafka_tiered_reader_remote_request_latency_seconds"].type == "histogram"


def test_otlp_payload_decodes_and_honours_subscription_prefixes():
    t = _totals()
    points = decode_otlp(otlp_metrics(t, resource={"client_id": "job-a"}))
    by = {(p["name"], p["attributes"].get("partition"), p["attributes"].get("error_type")): p for p in points}
    assert by[("kafka.tiered.reader.remote.requests", 0, None)]["value"] == 7
    assert by[("kafka.tiered.reader.remote.errors", 0, "RemoteThrottled")]["value"] == 2
    hist = by[("kafka.tiered.reader.remote.request.latency", 0, None)]
    assert hist["count"] == 7 and sum(hist["bucket_counts"]) == 7
    assert points[0]["resource"] == {"client_id": "job-a"}
    only = decode_otlp(otlp_metrics(t, prefixes=["kafka.tiered.reader.remote.b"]))
    assert {p["name"] for p in only} == {"kafka.tiered.reader.remote.bytes"}
    with pytest.raises(ValueError):
        decode_otlp(b"\xff\xff\xff not protobuf")


# ---------------------------------------------------------------------------------------------
# KIP-714 against the embedded broker

def _cluster(tmp_path, name, **kw) -> EmbeddedCluster:
    remote = tmp_path / f"{name}-remote"
    c = EmbeddedCluster(str(tmp_path / f"{name}-data"), remote_storage=f"file://{remote}", **kw).start()
    c.import_log_dir("payments", 0, fixture_segments("payments", 0))
    assert c.tier()
    c.remote_root = str(remote)
    return c


def _read(c, client_id, **extra):
    options = ReadOptions.parse({
        "kafka.bootstrap.servers": c.bootstrap_servers, "assign": json.dumps({"payments": [0]}),
        "client.id": client_id, "remote.storage.fetcher": "fsspec",
        "remote.storage.fsspec.url": f"file://{c.remote_root}", **extra})
    plan = planning.plan(options)
    out = []
    for task in plan.tasks:
        reader = TaskReader(options, tasks_planned=len(plan.tasks))
        try:
            rows = sum(b.num_rows for b in reader.read(task))
            totals = reader.finish(read_id="r", task_index=task.index)
        finally:
            reader.close()
        out.append((rows, totals))
    return out


def test_a_reader_pushes_its_metrics_to_a_subscribing_broker(tmp_path):
    c = _cluster(tmp_path, "all", telemetry_metrics=("",))
    try:
        results = _read(c, "telemetry-job")
        pushes = c.telemetry("telemetry-job")
        assert len(pushes) == len(results) >= 1
        assert all(p.terminating and p.compression_type == 0 for p in pushes)
        points = [pt for p in pushes for pt in decode_otlp(p.metrics)]
        def total(name):
            return sum(pt["value"] for pt in points if pt["name"] == f"kafka.tiered.reader.{name}")
        want = ReadTotals()
        for _, t in results:
            want.merge(t)
        w = want.total()
        assert w.remote_requests > 0
        assert total("remote.requests") == w.remote_requests
        assert total("remote.bytes") == w.remote_bytes
        assert total("records") == w.records == sum(rows for rows, _ in results)
        assert {pt["attributes"]["topic"] for pt in points if "topic" in pt["attributes"]} == {"payments"}
        assert {pt["resource"]["client_id"] for pt in points} == {"telemetry-job"}
        # the broker's own KIP-1267 figures and the clients' pushed ones, side by side
        text = broker_metrics_with_clients(c)
        assert "kafka_tiered_broker_" in text
        assert 'kafka_client_kafka_tiered_reader_remote_requests{client_id="telemetry-job"' in text
        pushed = pushed_metrics_text(pushes)
        assert pushed.count("kafka_client_kafka_tiered_reader_remote_bytes{") == len(want.by_tags)
    finally:
        c.stop()


def test_pushes_follow_the_subscription_and_can_be_turned_off(tmp_path):
    c = _cluster(tmp_path, "prefix", telemetry_metrics=("kafka.tiered.reader.remote.",))
    try:
        _read(c, "subscribed")
        names = {pt["name"] for p in c.telemetry("subscribed") for pt in decode_otlp(p.metrics)}
        assert names and all(n.startswith("kafka.tiered.reader.remote.") for n in names)
        assert "kafka.tiered.reader.records" not in names
        _read(c, "silent", **{"telemetry.push.enabled": "false"})
        assert c.telemetry("silent") == []
    finally:
        c.stop()
    quiet = _cluster(tmp_path, "none")       # no subscription: nothing is pushed
    try:
        _read(quiet, "unasked")
        assert quiet.telemetry() == []
    finally:
        quiet.stop()


# KIP-714 without a connection per task

_CONNECTS: list = []          # ports of the sockets this process connects, while recording


def _audit(event, args):
    if event == "socket.connect" and _CONNECTS and isinstance(args[1], tuple):
        _CONNECTS.append(args[1][1])


sys.addaudithook(_audit)      # CPython's audit events: every socket.connect of the process


def test_a_hundred_storage_only_tasks_push_over_one_connection(tmp_path):
    """Every task of a 100-task read that reads only from storage pushes its metrics, and the
    pushes share this process's one telemetry connection (Spark runs a worker's tasks in one
    process): one broker connection for the read's pushes, not one (or two) per task."""
    c = _cluster(tmp_path, "many", telemetry_metrics=("",))
    try:
        tiered_end = max(s.end_offset for s in c.remote_segments("payments", 0)) + 1
        options = ReadOptions.parse({
            "kafka.bootstrap.servers": c.bootstrap_servers, "assign": json.dumps({"payments": [0]}),
            "endingOffsets": json.dumps({"payments": {"0": tiered_end}}), "maxRecordsPerPartition": "19",
            "client.id": "hundred", "remote.storage.fetcher": "fsspec",
            "remote.storage.fsspec.url": f"file://{c.remote_root}"})
        tasks = [t for t in planning.plan(options).tasks if t.ranges]
        assert len(tasks) >= 100
        assert all(not isinstance(r, BrokerRange) for t in tasks for r in t.ranges)
        _CONNECTS[:] = [None]                      # recording
        rows = 0
        try:
            for task in tasks:
                reader = TaskReader(options, tasks_planned=len(tasks))
                try:
                    rows += sum(b.num_rows for b in reader.read(task))
                    reader.finish(read_id="hundred", task_index=task.index)
                finally:
                    reader.close()
        finally:
            ports = _CONNECTS[1:]
            _CONNECTS[:] = []
        assert ports.count(c.port) == 1            # before: two per task (bootstrap and leader)
        pushes = c.telemetry("hundred")
        assert len(pushes) == len(tasks)           # every task pushed, as a client instance of its own
        pushed = sum(pt["value"] for p in pushes for pt in decode_otlp(p.metrics)
                     if pt["name"] == "kafka.tiered.reader.records")
        assert pushed == rows > 0
    finally:
        c.stop()
