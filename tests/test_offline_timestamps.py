"""Time ranges without a broker (issue 16): ``startingTimestamp``, ``endingTimestamp`` and the
per-partition timestamp options resolved offline from the tiered segments' time indexes and
max timestamps, exactly as ListOffsets resolves them.

The Kafka 3.9.1 fixtures are tiered by a running embedded broker (Aiven layout with chunk
compression, and Kafka's LocalTieredStorage layout, whose segments carry no max timestamp); the
broker stays up so every answer is compared three ways on the same data: the offline
resolution, the broker's ListOffsets, and the first record (control records included, as Kafka
searches them) at or after the timestamp according to the fixtures' own records and markers.
The timestamps asked are every entry of the fixtures' ``.timeindex`` files and every segment's
max timestamp, each also one millisecond either side.
"""
from __future__ import annotations

import os
import struct

import pytest

from broker_fixtures import FIXTURE_META, FIXTURE_PARTITIONS, file_tiered_cluster, fixture_segments
from spark_helpers import arrow_rows, expected_rows, first_difference, read_tasks
from timestamp_data import first_at_or_after, fixture_records

from kafka_tiered_source import planning
from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.options import ReadOptions
from kafka_tiered_source.planning.offline import OfflinePlanner, plan_offline
from kafka_tiered_source.planning.where import parse_where
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source.storage.registry import create_fetcher

pytestmark = pytest.mark.decoder

LAYOUTS = {"aiven": dict(layout="aiven", chunk_compression=True, chunk_size=64 * 1024),
           "kafka-local-tiered": dict(layout="kafka-local-tiered")}


@pytest.fixture(scope="module", params=list(LAYOUTS))
def cluster(request, tmp_path_factory):
    with file_tiered_cluster(tmp_path_factory.mktemp(request.param), **LAYOUTS[request.param]) as c:
        c.layout = request.param
        c.client = BrokerClient({"bootstrap.servers": c.bootstrap_servers})
        try:
            yield c
        finally:
            c.client.close()


def offline_options(c, **extra) -> ReadOptions:
    return ReadOptions.parse({"remote.storage.uri": f"file://{c.remote_dir}", "remote.storage.layout": c.layout,
                              "includeHeaders": "true", **extra})


def online_options(c, **extra) -> ReadOptions:
    return ReadOptions.parse({"kafka.bootstrap.servers": c.bootstrap_servers, "includeHeaders": "true",
                              "remote.storage.uri": f"file://{c.remote_dir}",
                              "remote.storage.layout": c.layout, **extra})


def time_index_stamps(topic: str, partition: int) -> list[int]:
    stamps = set()
    folder = fixture_segments(topic, partition)
    for seg in FIXTURE_META[(topic, partition)]["segments"]:
        stamps.add(seg["maxTimestamp"])
        raw = open(os.path.join(folder, seg["file"][:-4] + ".timeindex"), "rb").read()
        stamps.update(ts for ts, _ in struct.iter_unpack(">qi", raw[:len(raw) - len(raw) % 12]))
    return sorted({s + d for s in stamps for d in (-1, 0, 1)})


def tiered_end(c, topic, partition) -> int:
    return max(s.end_offset for s in c.remote_segments(topic, partition)) + 1


def from_fixtures(c, topic, partition, ts) -> int:
    return first_at_or_after(fixture_records(topic, partition), ts)


def test_offsets_for_times_equal_list_offsets_and_the_fixtures(cluster):
    opts = offline_options(cluster, subscribe="orders,payments,compacted")
    fetcher = create_fetcher(opts.storage)
    try:
        planner = OfflinePlanner(opts, fetcher)
        planner.plan()
        compared = beyond = 0
        for t, p in FIXTURE_PARTITIONS:
            end = tiered_end(cluster, t, p)
            stamps = time_index_stamps(t, p)
            for ts in stamps:
                mine = planner.offsets_for_times({(t, p): ts})[(t, p)]
                broker = cluster.client.list_offsets(t, {p: ts})[p].offset
                data = from_fixtures(cluster, t, p, ts)
                assert broker == data, (t, p, ts)
                if 0 <= data < end:
                    assert mine == data, f"{t}-{p} timestamp {ts}: offline {mine}, ListOffsets {broker}"
                    compared += 1
                else:
                    # past the tiered records: the broker answers from its local log, offline
                    # there is no record at or after the timestamp
                    assert mine == -1, (t, p, ts, mine)
                    beyond += 1
        assert compared > 300 and beyond > 10
    finally:
        fetcher.close()


ORDERS0 = FIXTURE_META[("orders", 0)]["segments"]
OPTION_CASES = [
    dict(assign='{"orders":[0]}', startingTimestamp=str(ORDERS0[3]["maxTimestamp"]),
         endingTimestamp=str(ORDERS0[9]["maxTimestamp"] + 1)),
    dict(assign='{"orders":[1],"compacted":[0]}',
         startingOffsetsByTimestamp='{"orders":{"1":1700000014000},"compacted":{"0":1700000020000}}',
         endingOffsetsByTimestamp='{"orders":{"1":1700000018000},"compacted":{"0":1700000060000}}'),
    dict(assign='{"payments":[0]}', startingTimestamp="1700000009000", endingTimestamp="1700000012345"),
    dict(assign='{"orders":[0]}', startingTimestamp=str(ORDERS0[0]["maxTimestamp"] - 1)),
]


@pytest.mark.parametrize("iso", ["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("case", range(len(OPTION_CASES)))
def test_timestamp_options_plan_the_ranges_the_broker_plans(cluster, iso, case):
    extra = {**OPTION_CASES[case], "kafka.isolation.level": iso}
    offline = plan_offline(offline_options(cluster, **extra))
    online = planning.plan(online_options(cluster, **extra))
    got = [(r.topic, r.partition, r.start, r.end) for r in offline.partitions]
    want = [(r.topic, r.partition, r.start, r.end) for r in online.partitions]
    if "endingTimestamp" not in extra and "endingOffsetsByTimestamp" not in extra:
        # ending at latest: the broker's is its high watermark, offline's the tiered end
        want = [(t, p, s, tiered_end(cluster, t, p)) for t, p, s, _ in want]
    assert got == want
    assert all(s < e for _, _, s, e in got)
    # and the rows read are the fixtures' records of those ranges
    batches, totals = read_tasks(offline_options(cluster, **extra), offline.tasks)
    rows = arrow_rows(batches)
    for t, p, s, e in got:
        want_rows = [r for r in expected_rows(t, p, iso == "read_committed") if s <= r["offset"] < e]
        assert rows.get((t, p), []) == want_rows, f"{t}-{p}: {first_difference(rows.get((t, p), []), want_rows)}"


def test_a_timestamp_past_the_tiered_records(cluster):
    last = max(s["maxTimestamp"] for s in FIXTURE_META[("orders", 1)]["segments"])
    past = str(last + 1)
    with pytest.raises(ConfigError, match="orders-1 has no record with a timestamp >= ") as err:
        plan_offline(offline_options(cluster, assign='{"orders":[1]}', startingTimestamp=past))
    assert err.value.option == "startingTimestamp"
    plan = plan_offline(offline_options(cluster, assign='{"orders":[1]}', startingTimestamp=past,
                                        startingOffsetsByTimestampStrategy="latest"))
    (r,) = plan.partitions
    assert r.start == r.end == tiered_end(cluster, "orders", 1) and not plan.tasks
    # an ending timestamp past them ends with the tiered range: every tiered record is before it
    plan = plan_offline(offline_options(cluster, assign='{"orders":[1]}', endingTimestamp=past))
    (r,) = plan.partitions
    assert (r.start, r.end) == (1000, tiered_end(cluster, "orders", 1))


def test_offline_pushdown_reads_from_the_first_matching_record(cluster):
    """Offline pushdown of ``timestamp >=``: the range starts where offline ListOffsets says, the
    rows are exactly those with later timestamps, and the segments before are never read."""
    ts = FIXTURE_META[("orders", 0)]["segments"][8]["maxTimestamp"] + 1
    flt = parse_where([("timestamp", ">=", _utc(ts))])
    opts = offline_options(cluster, subscribe="orders")
    plan = plan_offline(opts, flt)
    start = from_fixtures(cluster, "orders", 0, ts)
    assert [(r.partition, r.start) for r in plan.partitions] == [(0, start), (1, tiered_end(cluster, "orders", 1))]
    assert {r.segment.base_offset for r in plan.remote_ranges} == {
        s.base_offset for s in cluster.remote_segments("orders", 0) if s.end_offset >= start}
    from kafka_tiered_source.executor import TaskReader
    batches, totals = read_tasks(opts, plan.tasks, TaskReader(opts, row_filter=flt))
    got = arrow_rows(batches)
    want = [r for r in expected_rows("orders", 0, False) if r["timestamp"] >= ts
            and r["offset"] < tiered_end(cluster, "orders", 0)]
    assert got[("orders", 0)] == want
    assert totals.records == len(want)


def _utc(ms: int):
    import datetime as dt
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
