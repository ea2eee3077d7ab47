"""Filter pushdown (issue 16) on the shared local[2] SparkSession: the same ``where`` with
``spark.sql.python.filterPushdown.enabled`` off and on.

Each case is checked three ways: the rows with pushdown on equal the rows with it off (Spark's
own filtering), both equal the fixtures' expected records filtered here in Python, and the GETs
``last_read_stats`` counts are those of the tiered segments the filter leaves, computed from the
data (the fixtures' records and markers, the broker's list of tiered segments), not from the
planner.  The broker is today's Kafka (``kip1248=False``) tiering in Kafka's LocalTieredStorage
layout, so every segment read is exactly one GET (each is far below the 8 MiB part size) and the
segments' max timestamps are known from ``__remote_log_metadata``.
"""
from __future__ import annotations

import datetime as dt
import os

import pytest
from pyspark.errors import AnalysisException

from broker_fixtures import (FIXTURE_META, FIXTURE_PARTITIONS, expected_rows as produced_rows,
                             file_tiered_cluster, fixture_expected, produce_kafka_python)
from spark_helpers import collect_rows, first_difference, load
from timestamp_data import first_at_or_after, fixture_records

import kafka_tiered_source as kts

pytestmark = [pytest.mark.spark]

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
ALL_TOPICS = "orders,payments,compacted"
OOO = "ooo"                      # a topic whose timestamps go back in time in one segment
T0 = 1_800_000_000_000
OOO_GROUPS = [(T0, 100), (T0 + 1000, 100), (T0 - 500_000, 100), (T0 + 2000, 100), (T0 + 3000, 10)]


def _ooo_records():
    out = []
    for start, n in OOO_GROUPS:
        out.append([(f"k{start + i}".encode(), os.urandom(200), [], start + i) for i in range(n)])
    return out


@pytest.fixture(scope="module")
def sp(spark):
    kts.register(spark)
    before = spark.conf.get(PUSHDOWN, "false")
    yield spark
    spark.conf.set(PUSHDOWN, before)


@pytest.fixture(scope="module")
def today(tmp_path_factory):
    """The fixtures plus topic ``ooo`` (one segment per group of OOO_GROUPS, the last one
    local), tiered by today's Kafka in the LocalTieredStorage layout."""
    with file_tiered_cluster(tmp_path_factory.mktemp("pushdown"), kip1248=False,
                             layout="kafka-local-tiered", remote_log_metadata_partitions=3) as c:
        c.create_topic(OOO, 1)
        groups = _ooo_records()
        for i, group in enumerate(groups):
            produce_kafka_python(c.bootstrap_servers, OOO, group, "none")
            if i < len(groups) - 1:
                c.roll(OOO, 0)
        c.tier(OOO)
        c.ooo_rows = produced_rows([r for g in groups for r in g])
        yield c


def options(c, **extra) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "includeHeaders": "true",
            "remote.storage.uri": f"file://{c.remote_dir}",
            "remote.storage.layout": "kafka-local-tiered", **extra}


# ---------------------------------------------------------------------------------------------
# what the data says, independently of the planner


def all_records(c, topic: str, partition: int) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record, control records included: what ListOffsets sees."""
    if topic == OOO:
        return [(r["offset"], r["timestamp"]) for r in c.ooo_rows]
    return fixture_records(topic, partition)


def read_end(c, topic: str, partition: int, committed: bool) -> int:
    if topic == OOO:
        return c.ooo_rows[-1]["offset"] + 1
    meta = FIXTURE_META[(topic, partition)]
    return meta["lastStableOffset"] if committed else meta["highWatermark"]


# Before any task the driver checks storage with one cheap request (issue 18's preflight): in
# this layout (LocalTieredStorage, no manifests) one byte of the first planned range.
CHECK = 1


def expected_gets(c, parts, *, committed=False, offsets=(None, None), ts_ms=None) -> int:
    """One GET per tiered segment the filter leaves: the range cut to ``offsets``, its start
    moved to the first record at or after ``ts_ms``, and (read_uncommitted) no later segment
    whose max timestamp is below it; plus the storage check when anything is read directly."""
    gets = 0
    for t, p in parts:
        segs = sorted(c.remote_segments(t, p), key=lambda s: s.base_offset)
        start, end = segs[0].base_offset, read_end(c, t, p, committed)
        lo, hi = offsets
        start, end = max(start, lo if lo is not None else start), min(end, hi if hi is not None else end)
        if ts_ms is not None:
            first = first_at_or_after(all_records(c, t, p), ts_ms, start)
            start = end if first < 0 else max(start, first)
        read = [s for s in segs if s.end_offset >= start and s.base_offset < end]
        if ts_ms is not None and not committed:
            read = read[:1] + [s for s in read[1:] if s.max_timestamp >= ts_ms]
        gets += len(read)
    return gets + CHECK if gets else 0


def expected(c, parts, keep, committed=False) -> dict:
    out = {}
    for t, p in parts:
        rows = c.ooo_rows if t == OOO else fixture_expected(t, p, committed)
        mine = []
        for r in rows:
            if keep(t, p, r):
                mine.append({k: r[k] for k in ("offset", "timestamp", "timestampType", "key", "value")}
                            | {"headers": r["headers"] or None})
        if mine:
            out[(t, p)] = mine
    return out


def iso(ms: int, extra_us: int = 0) -> str:
    t = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc) + dt.timedelta(microseconds=extra_us)
    return t.strftime("%Y-%m-%d %H:%M:%S.%f") + "Z"


ORDERS = [("orders", 0), ("orders", 1)]
# orders-0's 9th tiered segment ends before this: a bound past 9 of its 14 tiered segments
PAST_9 = FIXTURE_META[("orders", 0)]["segments"][8]["maxTimestamp"] + 1
PAY_TS = FIXTURE_META[("payments", 0)]["segments"][11]["maxTimestamp"] - 300
COMPACT_TS = FIXTURE_META[("compacted", 0)]["segments"][4]["maxTimestamp"]

CASES = {
    # id: (read options, where, the rows kept, expected GETs with pushdown: kwargs of expected_gets)
    "timestamp>=": ({"subscribe": "orders"}, f"timestamp >= '{iso(PAST_9)}'",
                    lambda t, p, r: r["timestamp"] >= PAST_9, dict(ts_ms=PAST_9)),
    "partition=1": ({"subscribe": "orders"}, "partition = 1",
                    lambda t, p, r: p == 1, dict(parts=[("orders", 1)])),
    "partition IN": ({"subscribe": ALL_TOPICS}, "partition IN (1, 7)",
                     lambda t, p, r: p in (1, 7), dict(parts=[("orders", 1)])),
    "partition<>0": ({"subscribe": "orders"}, "NOT partition = 0",
                     lambda t, p, r: p != 0, dict(parts=[("orders", 1)])),
    "offset range": ({"subscribe": "orders"}, "offset >= 3000 AND offset < 4500",
                     lambda t, p, r: 3000 <= r["offset"] < 4500, dict(offsets=(3000, 4500))),
    "offset BETWEEN": ({"subscribe": ALL_TOPICS}, "offset BETWEEN 1200 AND 1500 AND offset <> 1300",
                       lambda t, p, r: 1200 <= r["offset"] <= 1500 and r["offset"] != 1300,
                       dict(parts=FIXTURE_PARTITIONS, offsets=(1200, 1501))),
    "combined": ({"subscribePattern": "orders|payments"},
                 f"topic = 'orders' AND partition = 0 AND timestamp > '{iso(PAST_9, -1)}' "
                 f"AND offset < 8100 AND offset <> 7000",
                 lambda t, p, r: (t, p) == ("orders", 0) and r["timestamp"] >= PAST_9
                 and r["offset"] < 8100 and r["offset"] != 7000,
                 dict(parts=[("orders", 0)], ts_ms=PAST_9, offsets=(None, 8100))),
    "timestamp window, microseconds": (
        {"subscribe": "compacted"},
        f"timestamp > '{iso(COMPACT_TS, 999)}' AND timestamp <= '{iso(COMPACT_TS + 5000)}' "
        f"AND timestampType = 0",
        lambda t, p, r: COMPACT_TS + 1 <= r["timestamp"] <= COMPACT_TS + 5000 and r["timestampType"] == 0,
        dict(parts=[("compacted", 0)], ts_ms=COMPACT_TS + 1)),
    "read_committed timestamp": (
        {"subscribe": "payments", "kafka.isolation.level": "read_committed"},
        f"timestamp >= '{iso(PAY_TS)}'", lambda t, p, r: r["timestamp"] >= PAY_TS,
        dict(parts=[("payments", 0)], ts_ms=PAY_TS, committed=True)),
    "segment behind in time skipped": (
        {"subscribe": OOO}, f"timestamp >= '{iso(T0 + 1050)}'",
        lambda t, p, r: r["timestamp"] >= T0 + 1050, dict(parts=[(OOO, 0)], ts_ms=T0 + 1050)),
    "read_committed keeps the segment behind in time": (
        {"subscribe": OOO, "kafka.isolation.level": "read_committed"}, f"timestamp >= '{iso(T0 + 1050)}'",
        lambda t, p, r: r["timestamp"] >= T0 + 1050,
        dict(parts=[(OOO, 0)], ts_ms=T0 + 1050, committed=True)),
}


def _subscribed(c, read_options) -> list:
    if "subscribePattern" in read_options:
        import re
        return [(t, p) for t, p in FIXTURE_PARTITIONS if re.fullmatch(read_options["subscribePattern"], t)]
    topics = read_options["subscribe"].split(",")
    return [(t, p) for t, p in FIXTURE_PARTITIONS + [(OOO, 0)] if t in topics]


@pytest.mark.parametrize("case", list(CASES))
def test_pushdown_on_and_off_give_spark_rows_and_read_less(sp, today, case):
    read_options, where, keep, gets = CASES[case]
    gets = dict(gets)
    subscribed = _subscribed(today, read_options)
    committed = read_options.get("kafka.isolation.level") == "read_committed"
    want = expected(today, subscribed, keep, committed)
    assert want, "a case must keep some rows"
    got, reads = {}, {}
    for on in ("false", "true"):
        sp.conf.set(PUSHDOWN, on)
        got[on] = collect_rows(load(sp, options(today, **read_options)).where(where))
        reads[on] = kts.last_read_stats(sp).total()
    for on in ("false", "true"):
        assert sorted(got[on]) == sorted(want), f"pushdown {on}"
        for key in want:
            assert got[on][key] == want[key], f"pushdown {on} {key}: {first_difference(got[on][key], want[key])}"
    everything = expected_gets(today, subscribed, committed=committed)
    pushed = expected_gets(today, gets.pop("parts", subscribed), **gets)
    assert reads["false"].remote_requests == everything
    assert reads["true"].remote_requests == pushed, (reads["true"].remote_requests, pushed, everything)
    assert pushed < everything
    assert reads["true"].records == sum(len(v) for v in want.values())
    assert reads["true"].fallbacks == reads["false"].fallbacks == 0


def test_the_bound_past_9_of_14_segments_reads_the_other_5(sp, today):
    segs = sorted(today.remote_segments("orders", 0), key=lambda s: s.base_offset)
    assert len(segs) == 14 and sum(s.max_timestamp < PAST_9 for s in segs) == 9
    sp.conf.set(PUSHDOWN, "true")
    df = load(sp, options(today, assign='{"orders":[0]}')).where(f"timestamp >= '{iso(PAST_9)}'")
    assert df.count() == sum(r["timestamp"] >= PAST_9 for r in fixture_expected("orders", 0, False))
    assert kts.last_read_stats(sp).total().remote_requests == 5 + CHECK     # the other 5 segments


def test_session_time_zone_and_literal_forms(sp, today):
    """A zone-less literal is in the session's time zone (Spark resolves it before pushing);
    IN on timestamps, IS NOT NULL and an IS NULL that keeps nothing."""
    stamps = [r["timestamp"] for r in fixture_expected("orders", 1, False)[:5]]
    local = dt.datetime.fromtimestamp(PAST_9 / 1000, dt.timezone(dt.timedelta(hours=-8)))
    before = sp.conf.get("spark.sql.session.timeZone")
    try:
        sp.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")   # PST in November
        for on in ("false", "true"):
            sp.conf.set(PUSHDOWN, on)
            df = load(sp, options(today, subscribe="orders"))
            n = df.where(f"timestamp >= '{local.strftime('%Y-%m-%d %H:%M:%S.%f')}' "
                         f"AND timestamp IS NOT NULL").count()
            assert n == sum(r["timestamp"] >= PAST_9 for r in fixture_expected("orders", 0, False))
            listed = ", ".join(f"timestamp_millis({s})" for s in stamps)
            rows = collect_rows(df.where(f"timestamp IN ({listed}) AND partition = 1"))
            assert [r["timestamp"] for r in rows[("orders", 1)]] == [
                r["timestamp"] for r in fixture_expected("orders", 1, False) if r["timestamp"] in stamps]
            assert df.where("offset IS NULL").count() == 0
    finally:
        sp.conf.set("spark.sql.session.timeZone", before)


def test_filters_it_cannot_apply_are_left_to_spark(sp, today):
    """Key, value and headers filters, ORs and string ordering go back to Spark, which applies
    them: the rows are still right, and what was pushed still narrows the read."""
    sp.conf.set(PUSHDOWN, "true")
    df = load(sp, options(today, subscribe="orders"))
    got = collect_rows(df.where("(partition = 1 OR offset < 10) AND key IS NOT NULL "
                                "AND topic >= 'orders' AND offset < 1100"))
    want = expected(today, ORDERS, lambda t, p, r: (p == 1 or r["offset"] < 10) and r["key"] is not None
                    and r["offset"] < 1100)
    assert got == want
    # offset < 1100 was pushed: orders-0 reads its first three segments, orders-1 its first
    assert kts.last_read_stats(sp).total().remote_requests == expected_gets(today, ORDERS, offsets=(None, 1100))


def test_no_match_reads_nothing(sp, today):
    sp.conf.set(PUSHDOWN, "true")
    df = load(sp, options(today, subscribe=ALL_TOPICS))
    assert df.where("partition = 3 OR partition = 4").count() == 0          # OR: Spark filters
    assert df.where("timestamp >= '2100-01-01T00:00:00Z'").count() == 0
    assert kts.last_read_stats(sp).total().remote_requests == 0
    assert df.where("offset < 0").count() == 0
    assert kts.last_read_stats(sp).total().remote_requests == 0


def test_estimate_and_budget_count_the_pushed_filters(sp, today):
    """estimate(where=...) counts what the pushed-down read fetches (in the session's time zone),
    and cost.budget.usd refuses the unfiltered read but lets the filtered one through."""
    opts = options(today, subscribe="orders")
    where = f"timestamp >= '{iso(PAST_9)}' AND partition = 0"
    whole, part = kts.estimate(sp, opts), kts.estimate(sp, opts, where=where)
    assert PAST_9 == 1700000050391
    assert part.where == "timestamp >= TIMESTAMP '2023-11-14T22:14:10.391Z' AND partition = 0"
    assert (whole.gets, part.gets) == (expected_gets(today, ORDERS), expected_gets(today, [("orders", 0)], ts_ms=PAST_9))
    budget = (whole.dollars + part.dollars) / 2
    limited = options(today, subscribe="orders", **{"cost.budget.usd": repr(budget)})
    sp.conf.set(PUSHDOWN, "true")
    n = load(sp, limited).where(where).count()
    assert n == sum(r["timestamp"] >= PAST_9 for r in fixture_expected("orders", 0, False))
    assert kts.last_read_stats(sp).total().remote_requests == part.gets
    sp.conf.set(PUSHDOWN, "false")
    with pytest.raises(AnalysisException, match="over the budget"):     # refused while planning
        load(sp, limited).where(where).count()
    before = sp.conf.get("spark.sql.session.timeZone")
    try:
        sp.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")       # UTC+9, no DST
        local = dt.datetime.fromtimestamp(PAST_9 / 1000, dt.timezone(dt.timedelta(hours=9)))
        tokyo = kts.estimate(sp, opts, where=f"timestamp >= '{local:%Y-%m-%d %H:%M:%S.%f}' AND partition = 0")
        assert tokyo.gets == part.gets and tokyo.where == part.where
    finally:
        sp.conf.set("spark.sql.session.timeZone", before)
