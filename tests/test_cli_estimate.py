"""``kafka-tiered estimate`` and ``kafka-tiered segments`` against the embedded broker holding
the Kafka 3.9.1 fixtures: today's Kafka (segments found through ``__remote_log_metadata``) and a
KIP-1248 broker, both tiering in the Aiven layout.

The figures are checked against the data and against what reading the same plan really costs:
offsets from the fixtures, segments from the broker's own list of what it tiered, and GETs from
running every planned task (one TaskReader per task, as Spark's executors do).
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest

from broker_fixtures import FIXTURE_META, file_tiered_cluster, fixture_segments
from timestamp_data import first_at_or_after, fixture_records

from kafka_tiered_source.cli import main
from kafka_tiered_source.executor import TaskReader
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.planning import plan
from kafka_tiered_source.planning.where import parse_where


ORDERS0 = FIXTURE_META[("orders", 0)]["segments"]
SINCE_MS = ORDERS0[8]["maxTimestamp"] + 1          # past 9 of orders-0's 14 tiered segments
SINCE = "2023-11-14T22:14:10.391Z"
assert SINCE_MS == 1700000050391


@pytest.fixture(scope="module")
def today(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("cli-today"), kip1248=False,
                             remote_log_metadata_partitions=3) as c:
        yield c


@pytest.fixture(scope="module")
def kip1248(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("cli-kip1248")) as c:
        yield c


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def common(c, *extra) -> list[str]:
    return ["--bootstrap-servers", c.bootstrap_servers, "--topic", "orders",
            "--remote-storage-uri", f"file://{c.remote_dir}", *extra]


def actual_gets(options: dict, where=None) -> tuple[int, int]:
    """(GETs, bytes) of really reading the plan, one TaskReader per task."""
    opts = ReadOptions.parse(options)
    flt = parse_where(where)
    gets = nbytes = 0
    for task in plan(opts, flt).tasks:
        reader = TaskReader(opts, row_filter=flt)
        try:
            for _ in reader.read(task):
                pass
            total = reader.metrics.total()
            gets, nbytes = gets + total.remote_requests, nbytes + total.remote_bytes
            assert total.fallbacks == 0
        finally:
            reader.close()
    return gets, nbytes


def tiered(c, topic, partition):
    return sorted(c.remote_segments(topic, partition), key=lambda s: s.base_offset)


def test_estimate_json_is_what_the_read_costs(capsys, today):
    code, out, _ = run(capsys, "estimate", *common(today, "--json"))
    assert code == 0
    r = json.loads(out)
    parts = r["partitions"]
    for p in (0, 1):
        meta = FIXTURE_META[("orders", p)]
        mine = parts[f"orders-{p}"]
        assert (mine["start"], mine["end"]) == (meta["logStartOffset"], meta["highWatermark"])
        assert mine["segments"] == len(tiered(today, "orders", p))
        assert mine["located_by"] == "metadata-topic"
    options = {"kafka.bootstrap.servers": today.bootstrap_servers, "subscribe": "orders",
               "remote.storage.uri": f"file://{today.remote_dir}"}
    gets, nbytes = actual_gets(options)
    assert r["gets"] == gets
    # .log bytes: every tiered segment whole; what was read adds the manifests (~1 KiB each)
    assert r["bytes"] == sum(s.size_bytes for p in (0, 1) for s in tiered(today, "orders", p))
    assert 0 < nbytes - r["bytes"] < r["manifest_gets"] * 4096
    assert r["gets"] == sum(p["gets"] for p in parts.values())
    assert r["dollars"] == pytest.approx(gets * 0.0004 / 1000)
    assert r["read"] == f"subscribe orders, through {today.bootstrap_servers}"


def test_since_and_partition_read_less(capsys, today):
    code, out, _ = run(capsys, "estimate", *common(today, "--since", SINCE, "--partition", "0", "--json"))
    assert code == 0
    r = json.loads(out)
    assert list(r["partitions"]) == ["orders-0"] and r["where"] == "partition IN (0)"
    mine = r["partitions"]["orders-0"]
    start = first_at_or_after(fixture_records("orders", 0), SINCE_MS)
    assert (mine["start"], mine["end"]) == (start, FIXTURE_META[("orders", 0)]["highWatermark"])
    assert mine["segments"] == 5 == sum(s.end_offset >= start for s in tiered(today, "orders", 0))
    options = {"kafka.bootstrap.servers": today.bootstrap_servers, "subscribe": "orders",
               "remote.storage.uri": f"file://{today.remote_dir}", "startingTimestamp": str(SINCE_MS)}
    gets, nbytes = actual_gets(options, "partition = 0")
    assert r["gets"] == gets and 0 < nbytes - r["bytes"] < r["manifest_gets"] * 4096
    assert r["window"] == {"since_ms": SINCE_MS}


def test_text_report(capsys, today):
    code, out, _ = run(capsys, "estimate", *common(today, "--since", SINCE, "--where", "offset < 8000"))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"kafka-tiered estimate: subscribe orders, through {today.bootstrap_servers}"
    assert lines[1] == f"window: {SINCE} .. latest"
    assert lines[2] == "where: offset < 8000"
    assert lines[3].split() == ["partition", "offsets", "~records", "segments", "GETs", "bytes", "from",
                                "storage", "~bytes", "via", "brokers", "located", "by"]
    row0 = lines[4].split()
    start = first_at_or_after(fixture_records("orders", 0), SINCE_MS)
    assert row0[:5] == ["orders-0", f"[{start},", "8000)", f"{8000 - start:,}", "5"]
    assert row0[-1] == "metadata-topic"
    assert lines[-3].startswith("total: ") and "bytes from storage, $" in lines[-3]
    assert lines[-2].startswith("prices: aws-s3-standard")
    assert lines[-1] == "storage: checked (it answered the read's options)"


def test_offline_estimate_with_a_window_equals_the_brokers(capsys, today):
    until = str(ORDERS0[11]["maxTimestamp"])
    args = ["--topic", "orders", "--partition", "0", "--since", SINCE, "--until", until, "--json"]
    _, online, _ = run(capsys, "estimate", *common(today, *args[2:]))
    code, offline, _ = run(capsys, "estimate", "--remote-storage-uri", f"file://{today.remote_dir}",
                           "--layout", "aiven", *args)
    assert code == 0
    on, off = json.loads(online)["partitions"]["orders-0"], json.loads(offline)["partitions"]["orders-0"]
    assert (off["start"], off["end"]) == (on["start"], on["end"])
    assert off["end"] == first_at_or_after(fixture_records("orders", 0), int(until))
    assert off["segments"] == on["segments"] and off["located_by"] == "listing"
    assert json.loads(offline)["read"] == "subscribe orders, offline, listing the store"


def test_segments_lists_what_the_broker_tiered(capsys, today):
    code, out, _ = run(capsys, "segments", *common(today, "--json"))
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    for p in (0, 1):
        mine = [r for r in rows if r["partition"] == p]
        segs = tiered(today, "orders", p)
        assert [(r["base_offset"], r["end_offset"], r["size_bytes"], r["max_timestamp"], r["segment_id"])
                for r in mine if r["tiered"]] == [(s.base_offset, s.end_offset, s.size_bytes, s.max_timestamp,
                                                   s.segment_id) for s in segs]
        assert {r["located_by"] for r in mine if r["tiered"]} == {"metadata-topic"}
        assert {r["storage_check"] for r in mine} == {"checked"}
        # max timestamps are the fixtures' own
        assert [r["max_timestamp"] for r in mine if r["tiered"]] == [
            s["maxTimestamp"] for s in FIXTURE_META[("orders", p)]["segments"][:len(segs)]]
        (tail,) = [r for r in mine if not r["tiered"]]
        assert (tail["base_offset"], tail["end_offset"]) == (segs[-1].end_offset + 1,
                                                           FIXTURE_META[("orders", p)]["highWatermark"] - 1)
    code, text, _ = run(capsys, "segments", *common(today, "--partition", "1"))
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["partition", "base", "offset", "end"]
    assert lines[1].split()[:4] == ["orders-1", "1000", "1195", "2023-11-14T22:13:31.958Z"]
    assert "(not tiered: read through the brokers)" in lines[-3]
    assert lines[-2] == f"6 tiered segments, {sum(s.size_bytes for s in tiered(today, 'orders', 1)):,} bytes"
    assert lines[-1] == "storage: checked (it answered the read's options)"


def test_segments_on_a_kip1248_broker_show_the_time_index_bound(capsys, kip1248):
    code, out, _ = run(capsys, "segments", *common(kip1248, "--partition", "1", "--json"))
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines() if json.loads(line)["tiered"]]
    assert {r["located_by"] for r in rows} == {"kip1248"}
    folder = fixture_segments("orders", 1)
    for r in rows:
        assert r["max_timestamp"] is None
        raw = open(os.path.join(folder, f"{r['base_offset']:020d}.timeindex"), "rb").read()
        entries = list(struct.iter_unpack(">qi", raw))
        assert r["max_timestamp_at_least"] == (entries[-1][0] if entries else None)
    code, out, _ = run(capsys, "segments", *common(kip1248, "--partition", "1", "--no-time-index", "--json"))
    assert all("max_timestamp_at_least" not in json.loads(line) for line in out.splitlines())


def test_errors_name_the_argument(capsys, today):
    code, _, err = run(capsys, "estimate", *common(today, "--since", "yesterday"))
    assert code == 2 and "--since" in err and "'yesterday' is not a time" in err
    code, _, err = run(capsys, "estimate", *common(today, "--pattern", "o.*"))
    assert code == 2 and "give --topic or --pattern, not both" in err
    code, _, err = run(capsys, "estimate", *common(today, "--where", "timestamp >= 5 OR partition = 1"))
    assert code == 2 and "timestamp compares with a quoted time" in err
    code, _, err = run(capsys, "estimate", *common(today, "--where", "partition = 1 OR partition = 2"))
    assert code == 2 and "OR is never pushed down" in err
    code, _, err = run(capsys, "segments", "--topic", "orders")
    assert code == 2 and "kafka.bootstrap.servers" in err


def test_help_has_examples_and_the_console_script_runs(today):
    for sub in ("estimate", "segments"):
        res = subprocess.run([sys.executable, "-m", "kafka_tiered_source.cli", sub, "--help"],
                             capture_output=True, text=True, check=True)
        assert "examples:" in res.stdout and f"kafka-tiered {sub} --bootstrap-servers" in res.stdout
    script = os.path.join(os.path.dirname(sys.executable), "kafka-tiered")
    res = subprocess.run([script, "estimate", *common(today, "--json")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["partitions"]["orders-0"]["segments"] == 14


def test_options_from_a_file_and_offline_listing(capsys, today, tmp_path):
    path = tmp_path / "opts.json"
    path.write_text(json.dumps({"cost.preset": "gcs-standard", "remote.storage.layout": "aiven"}))
    code, out, _ = run(capsys, "estimate", "--topic", "orders", "--remote-storage-uri", f"file://{today.remote_dir}",
                       "-o", f"@{path}", "-o", "kafka.isolation.level=read_committed", "--json")
    assert code == 0
    r = json.loads(out)
    assert r["price_model"].startswith("gcs-standard")
    assert r["locators"] == {"listing": 2}
    assert r["partitions"]["orders-1"]["end"] == tiered(today, "orders", 1)[-1].end_offset + 1
    code, _, err = run(capsys, "estimate", "--topic", "orders", "-o", "novalue")
    assert code == 2 and "expected KEY=VALUE" in err
