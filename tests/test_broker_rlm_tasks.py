"""The embedded broker tiers on its own: RemoteLogManager's copy and expiration tasks on an
interval (``kafka-tiered broker`` and ``EmbeddedCluster``), local retention after copying, and
segment rolls by ``segment.ms``.  Every expectation comes from what the test produced: batch
sizes and counts decide where segments roll, their timestamps decide what retention keeps."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT
from kafka_tiered_source.cli import main
from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.protocol import messages as m
from kafka_tiered_source.records.header import iter_headers
from kafka_tiered_source.testing import EmbeddedCluster
from kafka_tiered_source.testing.log import StorageError
from kafka_tiered_source.testing.storage import BrokerStorage

from test_broker_log import make_batch
from test_broker_server import Raw

R = 4                                    # records per batch
NOW = int(time.time() * 1000)


def batch(i: int, ts: int = 1_700_000_000_000) -> bytes:
    """Batch number ``i``: R records of equal size, so every batch has the same byte size."""
    return make_batch([b"value-%06d" % (i * R + j) for j in range(R)], timestamp=ts)


B = len(batch(0))                        # bytes per batch
K = 5                                    # batches per segment: segment_bytes = K * B


def expected_segments(n_batches: int) -> list[tuple[int, int]]:
    """(base, end offset) of the closed segments n single-batch appends leave: a segment rolls
    when the next batch would take it past K * B bytes, so each holds exactly K batches."""
    closed = (n_batches - 1) // K
    return [(i * K * R, (i + 1) * K * R - 1) for i in range(closed)]


def produce(s, topic: str, n: int, *, start: int = 0, ts=lambda i: 1_700_000_000_000) -> None:
    for i in range(start, start + n):
        s.append(topic, 0, batch(i, ts(i)))


def remote(s, topic):
    return [(c.base_offset, c.end_offset) for c in s.remote_segments(topic, 0)]


def local_start(s, topic) -> int:
    return s.list_offsets(topic, 0, -4)[0]           # ListOffsets EARLIEST_LOCAL


# ------------------------------------------------------------------------------ the command line

def test_cli_broker_tiers_within_its_task_interval(tmp_path, capsys):
    """``kafka-tiered broker`` with a 1 s task interval, produced to one batch per request:
    ``kafka-tiered segments`` lists every closed segment as tiered, with no call to tier()."""
    n = 4 * K + 2
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from kafka_tiered_source.cli import main; sys.exit(main(sys.argv[1:]))",
         "broker", "--data-dir", str(tmp_path / "d"), "--port", "0", "--remote-storage", f"file://{tmp_path}/remote",
         "--topic", "orders:1", "--segment-bytes", str(K * B), "--remote-log-manager-task-interval-ms", "1000",
         "--remote-log-metadata-partitions", "1",
         "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert line.startswith("bootstrap servers: "), (line, proc.stderr.read() if proc.poll() else "")
        servers = line.split(": ", 1)[1].strip()
        r = Raw(int(servers.rsplit(":", 1)[1]))
        P = m.ProduceRequest
        for i in range(n):
            resp = r.call(P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
                name="orders", partition_data=[P.PartitionProduceData(index=0, records=batch(i))])]), 9)
            assert resp.responses[0].partition_responses[0].error_code == 0
        r.close()
        want = expected_segments(n)
        argv = ["segments", "--bootstrap-servers", servers, "--topic", "orders",
                "--remote-storage-uri", f"file://{tmp_path}/remote", "--json"]
        deadline = time.monotonic() + 30          # the task runs every second; a loaded machine is slow
        rows: list = []
        while time.monotonic() < deadline:
            assert main(argv) == 0
            rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
            if [(x["base_offset"], x["end_offset"]) for x in rows if x["tiered"]] == want:
                break
            time.sleep(0.5)
        assert [(x["base_offset"], x["end_offset"]) for x in rows if x["tiered"]] == want
        assert {x["located_by"] for x in rows} == {"kip1248", "broker"}
        # the local copies went once tiered: the brokers serve only the active segment's offsets
        assert [(x["base_offset"], x["end_offset"]) for x in rows if not x["tiered"]] == [(len(want) * K * R, n * R - 1)]
        proc.terminate()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_broker_refuses_unknown_topic_configs(tmp_path):
    with pytest.raises(ConfigError, match="segment.ms") as ei:
        main(["broker", "--data-dir", str(tmp_path / "d"), "--port", "0", "--topic", "t",
              "--topic-config", "segment.msec=10"])
    assert ei.value.option == "--topic-config"
    with pytest.raises(StorageError, match="INVALID_CONFIG.*local.retention.ms=-1"):
        main(["broker", "--data-dir", str(tmp_path / "d"), "--port", "0", "--topic", "t",
              "--topic-config", "retention.ms=1000", "--topic-config", "local.retention.ms=-1"])


# ------------------------------------------------------------------------------ local retention

def test_local_retention_bytes_keeps_the_newest_copied_segments(tmp_path):
    s = BrokerStorage(str(tmp_path / "d"), remote_storage=f"file://{tmp_path}/r", segment_bytes=K * B,
                      remote_log_metadata_partitions=1)
    s.create_topic("t", local_retention_bytes=2 * K * B + 1)
    n = 6 * K + 3                       # 6 closed segments of K * B bytes, 3 batches in the active one
    produce(s, "t", n)
    assert remote(s, "t") == [] and [c.base_offset for c in s.tier()] == [i * K * R for i in range(6)]
    # UnifiedLog's size rule: local bytes 6*K*B + 3*B, over the limit by 4*K*B + 3*B - 1: the four
    # oldest segments go (a fifth would leave less than the limit)
    assert local_start(s, "t") == 4 * K * R
    assert s.list_offsets("t", 0, -2)[0] == 0                 # the log start offset stays
    fr = s.read("t", 0, 0, 1 << 20)
    assert fr.from_remote and [h.base_offset for h in iter_headers(fr.records)][0] == 0
    assert not s.read("t", 0, 4 * K * R, 1 << 20).from_remote


def test_local_retention_ms_deletes_leading_copied_segments_by_record_time(tmp_path):
    """Batches from ten days ago, then a segment of batches from now, then old ones again;
    local.retention.ms = -2 (Kafka's default) takes the topic's retention.ms of one day: the
    leading old segments go, and nothing after the first young one (UnifiedLog stops there)."""
    day = 24 * 3600 * 1000
    s = BrokerStorage(str(tmp_path / "d"), remote_storage=f"file://{tmp_path}/r", segment_bytes=K * B,
                      remote_log_metadata_partitions=1)
    s.create_topic("t", retention_ms=day, local_retention_ms=-2)
    old = NOW - 10 * day
    produce(s, "t", 5 * K + 2, ts=lambda i: NOW if 2 * K <= i < 3 * K else old)
    assert len(s.tier()) == 5
    assert local_start(s, "t") == 2 * K * R
    assert s.partition("t", 0).log.segments[-1].base_offset == 5 * K * R     # the active one stays


def test_local_retention_never_drops_what_is_not_copied_and_rolls_a_breaching_active_segment(tmp_path):
    s = BrokerStorage(str(tmp_path / "d"), remote_storage=f"file://{tmp_path}/r", segment_bytes=K * B,
                      remote_log_metadata_partitions=1)
    s.create_topic("t", local_retention_ms=24 * 3600 * 1000)        # records from 2023: all breach it
    # an open transaction at offset 0 (a batch of the same size) pins the last stable offset
    s.append("t", 0, make_batch([b"value-%06d" % j for j in range(R)], producer_id=9, epoch=0, seq=0,
                                transactional=True))
    produce(s, "t", 2 * K, start=1)
    assert s.tier() == [] and local_start(s, "t") == 0
    s.write_txn_marker("t", 0, 9, 0, commit=False, coordinator_epoch=0)     # stamped now: young
    assert [(c.base_offset, c.end_offset) for c in s.tier()] == [(0, K * R - 1), (K * R, 2 * K * R - 1)]
    assert local_start(s, "t") == 2 * K * R
    # the active segment (batch 2K and the marker) is young: it stays, and is not rolled
    assert [seg.base_offset for seg in s.partition("t", 0).log.segments] == [2 * K * R]
    assert s.offsets("t", 0).log_end_offset == (2 * K + 1) * R + 1

    # a topic whose every record is old: the active segment breaches too, so it is rolled, copied
    # by the next task and dropped locally; then all of the log is remote
    s.create_topic("u", local_retention_ms=24 * 3600 * 1000)
    produce(s, "u", 2 * K + 2)
    assert remote(s, "u") == [] and [c.base_offset for c in s.tier()] == [0, K * R]
    assert local_start(s, "u") == 2 * K * R
    assert [(c.base_offset, c.end_offset) for c in s.tier()] == [(2 * K * R, (2 * K + 2) * R - 1)]
    assert local_start(s, "u") == (2 * K + 2) * R == s.offsets("u", 0).log_end_offset
    got = []
    offset = 0
    while offset < (2 * K + 2) * R:
        fr = s.read("u", 0, offset, 1 << 20)
        assert fr.from_remote and fr.error_name is None
        hs = list(iter_headers(fr.records))
        got += [h.base_offset for h in hs]
        offset = hs[-1].last_offset + 1
    assert got == [i * R for i in range(2 * K + 2)]


def test_topic_configs_are_checked_as_kafka_checks_them(tmp_path):
    s = BrokerStorage(str(tmp_path / "d"), remote_storage=f"file://{tmp_path}/r")
    for bad, why in ((dict(retention_ms=1000, local_retention_ms=-1), "must not be -1"),
                     (dict(retention_ms=1000, local_retention_ms=2000), "must not be more than retention.ms"),
                     (dict(retention_bytes=10, local_retention_bytes=11), "must not be more than retention.bytes"),
                     (dict(local_retention_ms=-3), ">= -2"), (dict(segment_ms=0), ">= 1"),
                     (dict(segment_jitter_ms=-1), ">= 0")):
        with pytest.raises(StorageError, match=why) as ei:
            s.create_topic("t", **bad)
        assert ei.value.error_name == "INVALID_CONFIG"
    assert "t" not in s.topics
    s.create_topic("t", retention_ms=1000, local_retention_ms=-2, local_retention_bytes=-1)   # retention.bytes -1
    with pytest.raises(ConfigError, match="segment_ms"):
        BrokerStorage(str(tmp_path / "e"), segment_ms=0)
    with pytest.raises(ConfigError, match="remote_log_manager_task_interval_ms"):
        EmbeddedCluster(str(tmp_path / "f"), remote_log_manager_task_interval_ms=0)


# ------------------------------------------------------------------------------ segment.ms

def test_segments_roll_by_record_time_as_kafka_appends_do(tmp_path):
    """LogSegment.shouldRoll: a segment rolls when an append's max timestamp is more than
    segment.ms past its first batch's, whatever its size."""
    s = BrokerStorage(str(tmp_path / "d"), segment_ms=1000)
    s.create_topic("t")
    t0 = 1_700_000_000_000
    # one record per batch, at these times (ms after t0); the rolls the rule makes, by hand:
    #   first 0:    500, 1000 stay (1000 is not more than segment.ms); 1001 rolls
    #   first 1001: 1500, 2001 stay; 2100 rolls;   first 2100: 9000 rolls;   first 9000: 9001 stays
    times = [0, 500, 1000, 1001, 1500, 2001, 2100, 9000, 9001]
    for i, dt in enumerate(times):
        s.append("t", 0, make_batch([b"r%d" % i], timestamp=t0 + dt))
    assert [seg.base_offset for seg in s.partition("t", 0).log.segments] == [0, 3, 6, 7]
    # a topic's own segment.ms wins over the broker's; size rolls still apply
    s.create_topic("u", segment_ms=100_000)
    for i, dt in enumerate(times):
        s.append("u", 0, make_batch([b"r%d" % i], timestamp=t0 + dt))
    assert [seg.base_offset for seg in s.partition("u", 0).log.segments] == [0]
    sized = BrokerStorage(str(tmp_path / "e"), segment_ms=1000, segment_bytes=2 * len(make_batch([b"r0"])))
    sized.create_topic("t")
    for i, dt in enumerate(times):
        sized.append("t", 0, make_batch([b"r%d" % i], timestamp=t0 + dt))
    # two batches fill a segment: [0 500] full, [1000 1001] full, [1500 2001] full, [2100] then
    # 9000 is too late, [9000 9001]
    assert [seg.base_offset for seg in sized.partition("t", 0).log.segments] == [0, 2, 4, 6, 7]


def test_segment_jitter_rolls_sooner_never_later(tmp_path):
    s = BrokerStorage(str(tmp_path / "d"))
    s.create_topic("t", segment_ms=1000, segment_jitter_ms=1000)
    t0 = 1_700_000_000_000
    for i in range(300):                              # a batch every 100 ms for 30 s
        s.append("t", 0, make_batch([b"x"], timestamp=t0 + 100 * i))
    segs = s.partition("t", 0).log.segments
    spans = []
    for seg in segs[:-1]:
        stamps = [h.max_timestamp for h in seg.headers_from(0)]
        spans.append(stamps[-1] - stamps[0])
    assert max(spans) <= 1000                         # never later than segment.ms
    # each roll comes a random 0-999 ms sooner: of ~30 segments, some (all but with odds of
    # 1 in 10**25) come more than 100 ms sooner
    assert min(spans) < 900


# ------------------------------------------------------------------------------ the scheduler

def test_background_tasks_and_test_hooks_copy_each_segment_once(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="kafka_tiered_source.testing.rlm_tasks")
    day = 24 * 3600 * 1000
    with EmbeddedCluster(str(tmp_path / "d"), remote_storage=f"file://{tmp_path}/r", segment_bytes=K * B,
                         remote_log_metadata_partitions=1, remote_log_manager_task_interval_ms=20) as c:
        tasks = c.remote_log_manager
        assert tasks is not None
        c.create_topic("t", retention_ms=day)          # records from 2023: the expiration task drops copies
        c.create_topic("keep", local_retention_ms=-1)
        hooked: list = []
        stop = threading.Event()

        def hooks():                                   # a test stepping by hand meanwhile
            while not stop.is_set():
                hooked.extend(c.tier())
        th = threading.Thread(target=hooks)
        th.start()
        try:
            produce(c, "keep", 8 * K + 1)
            produce(c, "t", 8 * K + 1, ts=lambda i: NOW)
        finally:
            stop.set()
            th.join()
        done = tasks.rounds["copy"]
        assert tasks.wait_rounds("copy", done + 2, 60)
        want = expected_segments(8 * K + 1)
        for topic in ("keep", "t"):
            assert remote(c, topic) == want, topic      # each copied exactly once, hook or task
        by_hand = [(h.base_offset, h.end_offset) for h in hooked if h.topic == "keep"]
        assert len(set(by_hand)) == len(by_hand) and set(by_hand) <= set(want)
        assert local_start(c, "keep") == 0 and local_start(c, "t") == 8 * K * R
        # old records in a topic with one day of retention: the expiration task deletes the copies
        c.create_topic("old", retention_ms=day)
        produce(c, "old", 2 * K + 1)
        assert tasks.wait_rounds("copy", tasks.rounds["copy"] + 2, 60)
        assert tasks.wait_rounds("expiration", tasks.rounds["expiration"] + 2, 60)
        assert remote(c, "old") == [] and c.list_offsets("old", 0, -2)[0] == 2 * K * R
        threads = [t for t in threading.enumerate() if t.name.startswith("kafka-tiered-rlm-")]
        assert len(threads) == 2
    assert not any(t.is_alive() for t in threads)
    assert not [r for r in caplog.records if r.name.endswith("rlm_tasks")]
