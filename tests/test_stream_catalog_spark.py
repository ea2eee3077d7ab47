"""A Spark stream on today's Kafka (no KIP-1248 answers): ``readStream`` with the metadata-topic
locator finds the tiered segments through ``__remote_log_metadata``, keeps its catalog in the
snapshot directory it is given, and a restarted query reads exactly the records tiered since,
once each.  tests/test_metadata_catalog.py shows the same catalog reading on from where it was
without Spark; this is the path a user's query takes (Spark's planner process, its executors)."""
from __future__ import annotations

import glob
import json

import pytest

from test_metadata_catalog import Topic, new_cluster

import kafka_tiered_source as kts
from kafka_tiered_source.planning.catalog_snapshots import parse

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _query(spark, c, topic: str, cache, out, checkpoint):
    df = (spark.readStream.format("kafka-tiered")
          .option("kafka.bootstrap.servers", c.bootstrap_servers).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("remote.storage.uri", f"file://{c.remote_dir}")
          .option("remote.segment.locator", "metadata-topic")
          # a copy planned that is not in storage fails the query instead of passing through the broker
          .option("fetch.remote.fallback", "never")
          .option("remote.log.metadata.cache.dir", str(cache)).load())
    q = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()
    return q


def _rows(spark, out) -> list[tuple[int, bytes]]:
    return sorted((r.offset, bytes(r.value)) for r in spark.read.parquet(str(out)).select("offset", "value").collect())


def test_a_stream_on_todays_kafka_reads_through_the_metadata_topic_and_a_restart_reads_on(spark, tmp_path):
    kts.register(spark)
    cache, out, checkpoint = tmp_path / "catalog", tmp_path / "out", tmp_path / "checkpoint"
    with new_cluster(tmp_path / "cluster", partitions=1) as c:
        t = Topic(c, "streamed-today")
        t.tier(3)
        q = _query(spark, c, t.name, cache, out, checkpoint)
        assert _rows(spark, out) == t.rows() and len(t.rows()) == 12
        read = sum(p["numInputRows"] for p in q.recentProgress)
        assert read == 12
        # the planner process kept the catalog where it was told
        (snapshot,) = glob.glob(str(cache / "remote-log-metadata" / "*" / "*" / "0.json"))
        with open(snapshot, "rb") as f:
            doc = parse(f.read())
        # a whole, sealed document (parse checks its digest) that followed this topic and holds
        # its three copies
        assert t.topic_id in doc["follow"]["topics"]
        state = json.dumps(doc["state"])
        assert len(t.tiered()) == 3 and all(segment_id in state for segment_id in t.tiered())

        t.tier(2)                         # history grows while the query is stopped
        q = _query(spark, c, t.name, cache, out, checkpoint)
        assert sum(p["numInputRows"] for p in q.recentProgress) == 8     # only what was tiered since
        assert _rows(spark, out) == t.rows() and len(t.rows()) == 20     # every offset once
