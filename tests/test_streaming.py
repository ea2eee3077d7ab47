"""``spark.readStream.format("kafka-tiered")``: real streaming queries (local[2], a parquet sink
with a checkpoint) over the embedded broker with tiered data."""
from __future__ import annotations

import json
import math

import pytest

from broker_fixtures import FIXTURE_PARTITIONS, file_tiered_cluster, produce_kafka_python
from spark_helpers import b64, expected_rows

import kafka_tiered_source as kts
from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.options import ReadOptions

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ALL_TOPICS = "orders,payments,compacted"


@pytest.fixture(scope="module")
def sp(spark):
    kts.register(spark)
    return spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp("stream"), segment_bytes=64 * 1024) as c:
        yield c


def stream(sp, c, **extra):
    opts = {"kafka.bootstrap.servers": c.bootstrap_servers, "startingOffsets": "earliest",
            "remote.storage.uri": f"file://{c.remote_dir}", **extra}
    return sp.readStream.format("kafka-tiered").options(**opts).load()


def run_available_now(df, out, checkpoint):
    q = (df.writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()
    return q


def sink_rows(sp, out) -> dict:
    got: dict = {}
    for r in sp.read.parquet(str(out)).select("topic", "partition", "offset", "value").collect():
        got.setdefault((r.topic, r.partition), []).append((r.offset, b64(r.value)))
    return {k: sorted(v) for k, v in got.items()}


@pytest.mark.parametrize("iso", ["read_uncommitted", "read_committed"])
def test_available_now_over_tiered_topics_gives_exactly_the_records(sp, cluster, tmp_path, iso):
    df = stream(sp, cluster, subscribe=ALL_TOPICS, **{"kafka.isolation.level": iso})
    run_available_now(df, tmp_path / "out", tmp_path / "cp")
    got = sink_rows(sp, tmp_path / "out")
    for t, p in FIXTURE_PARTITIONS:
        want = [(r["offset"], r["value"]) for r in expected_rows(t, p, iso == "read_committed")]
        assert got.get((t, p), []) == want, f"{t}-{p}"


def test_max_offsets_per_trigger_splits_the_catch_up_and_a_rerun_reads_only_new_records(sp, cluster, tmp_path):
    t, p = "orders", 0
    df = stream(sp, cluster, assign=json.dumps({t: [p]}), maxOffsetsPerTrigger="1000")
    q = run_available_now(df, tmp_path / "out", tmp_path / "cp")
    offsets = cluster.offsets(t, p)
    total = offsets.high_watermark - offsets.log_start_offset
    batches = [pr for pr in q.recentProgress if pr["numInputRows"] > 0]
    assert len(batches) >= math.ceil(total / 1000)
    assert all(pr["numInputRows"] <= 1000 for pr in q.recentProgress)
    first = sink_rows(sp, tmp_path / "out")[(t, p)]
    assert [o for o, _ in first] == [r["offset"] for r in expected_rows(t, p, False)]
    # more records arrive; the same query, from its checkpoint, reads just those, once each
    produce_kafka_python(cluster.bootstrap_servers, t,
                         [(b"k%d" % i, b"late-%d" % i, [], None) for i in range(25)], "none")
    run_available_now(stream(sp, cluster, assign=json.dumps({t: [p]}), maxOffsetsPerTrigger="1000"),
                      tmp_path / "out", tmp_path / "cp")
    second = sink_rows(sp, tmp_path / "out")[(t, p)]
    assert second[:len(first)] == first and len(second) == len(first) + 25
    assert len({o for o, _ in second}) == len(second)


def test_stream_options_are_checked_by_name():
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}
    with pytest.raises(ConfigError) as info:
        ReadOptions.parse({**base, "endingOffsets": "latest"}, streaming=True)
    assert info.value.option == "endingOffsets"
    o = ReadOptions.parse({**base, "startingOffsets": "latest", "maxOffsetsPerTrigger": "10",
                           "maxBytesPerTrigger": "1000", "maxTriggerDelay": "30s"}, streaming=True)
    assert (o.max_offsets_per_trigger, o.max_bytes_per_trigger, o.max_trigger_delay_ms) == (10, 1000, 30_000)


def test_a_corrupt_checkpoint_offset_names_the_partition():
    from kafka_tiered_source.planning.stream import from_json_offsets
    with pytest.raises(ConfigError) as info:
        from_json_offsets({"orders": {"0": "x"}}, what="the checkpointed offset")
    assert "orders-0" in str(info.value)


def test_an_offset_past_the_log_end_names_the_partition(sp, cluster, tmp_path):
    end = cluster.offsets("orders", 0).high_watermark
    df = stream(sp, cluster, startingOffsets=json.dumps({"orders": {"0": end + 1000}}),
                assign=json.dumps({"orders": [0]}))
    q = (df.writeStream.format("parquet").option("path", str(tmp_path / "o"))
         .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).start())
    from pyspark.errors import StreamingQueryException
    with pytest.raises(StreamingQueryException) as info:
        q.awaitTermination(120)
    assert "orders-0: offset" in str(info.value) and "past the log end offset" in str(info.value)


def _follow(q, topic: str, offset: int, limit_s: float) -> None:
    """Wait until a micro-batch of the running query has read ``topic``-0 up to ``offset``; fail
    after ``limit_s`` seconds (a query that does not follow the topic is the failure)."""
    import time
    deadline = time.monotonic() + limit_s
    reached = -1
    while time.monotonic() < deadline:
        if q.exception() is not None:
            raise AssertionError(f"the query failed while following {topic}: {q.exception()}")
        for progress in q.recentProgress:
            for source in progress.get("sources", []):
                end = source.get("endOffset")
                end = json.loads(end) if isinstance(end, str) else end
                if isinstance(end, dict):
                    reached = max(reached, int(end.get(topic, {}).get("0", -1)))
        if reached >= offset:
            return
        # each look at recentProgress is a py4j call and the JSON of up to 100 micro-batches;
        # the query triggers every 500 ms, so a look every 250 ms misses none of them
        time.sleep(0.25)
    raise AssertionError(f"the running query read {topic}-0 up to offset {reached} in {limit_s:.0f} s, "
                         f"not up to {offset}: it does not follow the topic")


def test_a_running_query_follows_the_topic_while_the_broker_tiers_under_it(sp, tmp_path):
    import time
    with file_tiered_cluster(tmp_path / "live", segment_bytes=16 * 1024) as c:
        c.create_topic("live", partitions=1)
        df = stream(sp, c, subscribePattern="live.*", maxOffsetsPerTrigger="400")
        q = (df.writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="500 milliseconds")
             .start())
        try:
            sent = 0
            for round_ in range(4):
                produce_kafka_python(c.bootstrap_servers, "live",
                                     [(None, b"r%d-%d" % (round_, i), [], None) for i in range(300)], "lz4")
                sent += 300
                if round_ == 1:
                    c.create_topic("live-two", partitions=1)    # a new topic matching the pattern
                    produce_kafka_python(c.bootstrap_servers, "live-two",
                                         [(None, b"two-%d" % i, [], None) for i in range(50)], "none")
                c.roll("live", 0)
                c.tier("live")
                _follow(q, "live", sent, 90)
            tiered = c.remote_segments("live", 0)
            assert tiered, "the broker tiered segments while the query ran"
            deadline = time.time() + 120
            while time.time() < deadline:
                q.processAllAvailable()
                got = sink_rows(sp, tmp_path / "out")
                if len(got.get(("live", 0), [])) >= sent and len(got.get(("live-two", 0), [])) >= 50:
                    break
        finally:
            q.stop()
        got = sink_rows(sp, tmp_path / "out")
        live = got[("live", 0)]
        assert [o for o, _ in live] == list(range(sent))                     # nothing lost or repeated
        assert [o for o, _ in got[("live-two", 0)]] == list(range(50))       # picked up from its start


def test_a_query_stopped_mid_catch_up_and_restarted_writes_every_record_once(sp, cluster, tmp_path):
    t, p = "payments", 0
    df = lambda: stream(sp, cluster, assign=json.dumps({t: [p]}), maxOffsetsPerTrigger="300")  # noqa: E731
    q = (df().writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="0 seconds").start())
    import time
    deadline = time.time() + 120
    while time.time() < deadline and sum(pr["numInputRows"] for pr in q.recentProgress) < 600:
        time.sleep(0.05)
    q.stop()                                     # mid catch-up, possibly mid-batch
    done_before = sum(pr["numInputRows"] for pr in q.recentProgress)
    assert done_before < len(expected_rows(t, p, False)), "the query was stopped before the end"
    run_available_now(df(), tmp_path / "out", tmp_path / "cp")
    got = sink_rows(sp, tmp_path / "out")[(t, p)]
    want = [(r["offset"], r["value"]) for r in expected_rows(t, p, False)]
    assert got == want


@pytest.mark.parametrize("fail", [True, False])
def test_records_deleted_before_they_were_read_follow_fail_on_data_loss(sp, tmp_path, fail):
    from pyspark.errors import StreamingQueryException
    with file_tiered_cluster(tmp_path / "c", segment_bytes=16 * 1024) as c:
        c.create_topic("gone", partitions=1)
        produce_kafka_python(c.bootstrap_servers, "gone", [(None, b"a%d" % i, [], None) for i in range(200)], "none")
        opts = {"assign": json.dumps({"gone": [0]}), "failOnDataLoss": str(fail).lower()}
        run_available_now(stream(sp, c, **opts), tmp_path / "out", tmp_path / "cp")
        produce_kafka_python(c.bootstrap_servers, "gone", [(None, b"b%d" % i, [], None) for i in range(200)], "none")
        c.roll("gone", 0)
        c.tier("gone")
        c.delete_records("gone", 0, 300)          # retention passes offsets the query never read
        q = (stream(sp, c, **opts).writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
        if fail:
            with pytest.raises(StreamingQueryException) as info:
                q.awaitTermination(120)
            assert "gone-0" in str(info.value) and "failOnDataLoss" in str(info.value)
        else:
            q.awaitTermination(120)
            offsets = [o for o, _ in sink_rows(sp, tmp_path / "out")[("gone", 0)]]
            assert offsets == list(range(200)) + list(range(300, 400))


def test_rate_limit_splits_by_lag_as_sparks_kafka_source():
    from kafka_tiered_source.planning.stream import rate_limit
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    latest = {("t", 0): 900, ("t", 1): 200, ("t", 2): 50}       # lags 900, 100, 0
    # Spark: prorate = limit * lag / total; < 1 rounds up (no starving), else down
    assert rate_limit(100, start, latest) == {("t", 0): 90, ("t", 1): 110, ("t", 2): 50}
    assert rate_limit(5, {("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}) == \
        {("t", 0): 4, ("t", 1): 1}
    assert rate_limit(10_000, start, latest) == latest           # more than the lag: all of it


def test_max_bytes_per_trigger_bounds_each_micro_batch_in_log_bytes(cluster):
    from kafka_tiered_source.planning.stream import StreamPlanner, range_options
    from kafka_tiered_source import planning
    from kafka_tiered_source.options import client_properties
    from kafka_tiered_source.protocol.client import BrokerClient
    opts = ReadOptions.parse({"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": "orders",
                              "startingOffsets": "earliest", "maxBytesPerTrigger": str(256 * 1024),
                              "remote.storage.uri": f"file://{cluster.remote_dir}"}, streaming=True)
    with BrokerClient(client_properties(opts)) as client:
        sp = StreamPlanner(opts, client)
        start, batches = sp.initial(), 0
        latest = sp.latest(list(start))
        while start != latest and batches < 100:
            end = sp.next_end(start, limited=True)
            per = sp.bytes_per_offset(start, latest)
            planned = sum((end[k] - start[k]) * per.get(k, 0) for k in end)
            # within the budget, give or take one offset per partition (a share below one
            # offset rounds up so no partition starves)
            assert planned <= 256 * 1024 + sum(per.values())
            assert end != start
            assert planning.plan(range_options(opts, start, end)).tasks
            start, batches = end, batches + 1
    assert start == latest and batches >= 2
