"""``spark.readStream.format("kafka-tiered")``: Structured Streaming from tiered storage into
the live log.

Each micro-batch is planned like a batch read of its offset range (:mod:`..planning.stream`):
months of tiered history are read straight from the object store, then the stream moves into
the brokers' live data without a gap or a duplicate, because offsets, not locations, define a
micro-batch.  Offsets are Spark's Kafka JSON (``{"topic": {"0": 42}}``), so a checkpoint records
exactly where each partition stands and a restarted query carries on from it.

Rate limits: ``maxOffsetsPerTrigger`` (Spark's), ``maxBytesPerTrigger`` (log bytes; this
source's own), ``minOffsetsPerTrigger`` with ``maxTriggerDelay``.  ``Trigger.AvailableNow`` reads
up to the offsets that existed when the query started, within the rate limits.

Example (a catch-up into Parquet, then stop)::

    (spark.readStream.format("kafka-tiered")
        .option("kafka.bootstrap.servers", "broker:9092").option("subscribe", "orders")
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "1000000")
        .load()
        .writeStream.format("parquet").option("path", "/data/orders")
        .option("checkpointLocation", "/data/orders/_checkpoint")
        .trigger(availableNow=True).start().awaitTermination())
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxBytes, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)

from ..options import ReadOptions
from .partitions import plan_partitions, read_partition

if TYPE_CHECKING:
    from ..planning.stream import StreamPlanner

log = logging.getLogger(__name__)


class KafkaTieredStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions, accumulator=None, app_id=None):
        self.options = options
        self.accumulator = accumulator
        self.app_id = app_id
        self._planner: StreamPlanner | None = None

    @property
    def planner(self) -> StreamPlanner:
        # built lazily: the reader is pickled to the driver's Python process first
        if self._planner is None:
            from ..planning.stream import StreamPlanner
            from ..protocol.client import BrokerClient
            self._planner = StreamPlanner(self.options, BrokerClient.for_read(self.options))
        return self._planner

    def initialOffset(self) -> dict:
        from ..planning.stream import to_json_offsets
        return to_json_offsets(self.planner.initial())

    def getDefaultReadLimit(self):
        o = self.options
        if o.max_offsets_per_trigger:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.max_bytes_per_trigger:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        if o.min_offsets_per_trigger:
            return ReadMinRows(o.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        from ..planning.stream import from_json_offsets, to_json_offsets
        begin = from_json_offsets(start, what="the checkpointed offset")
        end = self.planner.next_end(begin, limited=not isinstance(limit, ReadAllAvailable))
        return to_json_offsets(end)

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.prepare_available_now()

    def partitions(self, start: dict, end: dict):
        from ..planning.stream import from_json_offsets, range_options
        begin = from_json_offsets(start, what="the micro-batch's start offset")
        stop = from_json_offsets(end, what="the micro-batch's end offset")
        keys = [k for k in stop if stop[k] > begin.get(k, -1) and not (k in begin and stop[k] == begin[k])]
        if not keys:
            return []
        return plan_partitions(range_options(self.options, begin, stop, keys))

    def read(self, partition):
        return read_partition(self.options, partition, self.accumulator, self.app_id)

    def commit(self, end: dict) -> None:
        """Nothing to acknowledge: the checkpoint holds the offsets, and no consumer group is
        joined."""

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.client.close()
            self._planner = None
