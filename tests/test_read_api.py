"""``kafka_tiered_source.read(spark, ...)`` on the suite's classic Spark 4 session: the same
DataFrame as ``spark.read.format("kafka-tiered")`` (schema, rows), one Spark partition per
planned task, and its tasks' totals in the session's accumulator next to the format's reads.
(Spark 3.5 and Spark Connect run it in tests/test_spark35.py and tests/test_spark_connect.py.)"""
from __future__ import annotations

import pytest

from broker_fixtures import FIXTURE_PARTITIONS
from spark_helpers import collect_rows, expected_rows, first_difference, load

import kafka_tiered_source as kts
from kafka_tiered_source.planning import plan
from kafka_tiered_source.options import ReadOptions

pytestmark = [pytest.mark.spark]     # decoding itself is the format tests' (run in both decoder modes)


def options(c, **extra) -> dict:
    return {"kafka.bootstrap.servers": c.bootstrap_servers, "subscribe": "orders,payments,compacted",
            "includeHeaders": "true", "kafka.isolation.level": "read_committed",
            "remote.storage.uri": f"file://{c.remote_dir}", "partition.target.bytes": str(2_000_000), **extra}


def test_read_is_the_format_s_dataframe_one_partition_per_task(spark, fixture_cluster):
    kts.register(spark)
    opts = options(fixture_cluster)
    tasks = plan(ReadOptions.parse(opts)).tasks
    df = kts.read(spark, opts)
    assert df.schema == load(spark, opts).schema
    assert df.rdd.getNumPartitions() == len(tasks) > 1
    got = collect_rows(df)
    assert sorted(got) == sorted(FIXTURE_PARTITIONS)
    for t, p in FIXTURE_PARTITIONS:
        want = expected_rows(t, p, committed=True)
        assert got[(t, p)] == want, f"{t}-{p}: {first_difference(got[(t, p)], want)}"
    stats = kts.last_read_stats(spark)
    assert stats.tasks == len(tasks)
    assert stats.total().records == sum(len(r) for r in got.values())
    assert stats.total().remote_bytes > 0 and stats.total().fallbacks == 0
    assert {tags[0] for tags in stats.by_tags} == {spark.sparkContext.appName}

    # a second action over the same DataFrame is a read of its own, with the same plan
    assert df.count() == stats.total().records
    again = kts.last_read_stats(spark)
    assert again.read_id != stats.read_id and again.read_id.split("-")[0] == stats.read_id.split("-")[0]
    assert again.total().records == stats.total().records


def test_read_takes_keywords_and_refuses_what_the_format_refuses(spark, fixture_cluster):
    opts = options(fixture_cluster)
    del opts["subscribe"]
    df = kts.read(spark, opts, assign='{"payments":[0]}', includeHeaders=False)
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert df.count() == len(expected_rows("payments", 0, committed=True))
    with pytest.raises(kts.ConfigError, match="Did you mean 'startingOffsets'"):
        kts.read(spark, opts, assign='{"payments":[0]}', startingOfsets="earliest")
    with pytest.raises(kts.BudgetExceededError, match="'cost.budget.usd'"):
        kts.read(spark, opts, assign='{"payments":[0]}', **{"cost.budget.usd": 1e-9})
