"""The kafka-tiered data source in a real local[2] SparkSession: registration, schema, and
option errors surfacing when the DataFrame is created."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

import kafka_tiered_source.spark as kts
from kafka_tiered_source.spark.datasource import KafkaTieredDataSource
from kafka_tiered_source.spark.schema import arrow_schema

pytestmark = pytest.mark.spark

# Spark's Kafka source schema, written out from its documentation.
KAFKA_FIELDS = [
    StructField("key", BinaryType()), StructField("value", BinaryType()),
    StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("offset", LongType()), StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]
HEADERS = StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                       StructField("value", BinaryType())])))
OPTS = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}


@pytest.fixture(scope="module")
def registered(spark):
    kts.register(spark)
    return spark


def load(spark, **options):
    reader = spark.read.format("kafka-tiered")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_schema_is_sparks_kafka_schema(registered):
    assert load(registered, **OPTS).schema == StructType(KAFKA_FIELDS)
    with_headers = load(registered, includeHeaders="true", **OPTS)
    assert with_headers.schema == StructType(KAFKA_FIELDS + [HEADERS])


@pytest.mark.parametrize("options, fragments", [
    ({"subscribe": "t"}, ["kafka.bootstrap.servers"]),
    ({**OPTS, "startingOfsets": "earliest"}, ["startingofsets", "Did you mean 'startingOffsets'"]),
    ({**OPTS, "startingOffsets": "latest"}, ["starting offset can't be latest"]),
    ({**OPTS, "kafka.auto.offset.reset": "earliest"}, ["'auto.offset.reset' is not supported"]),
    ({**OPTS, "minPartitions": "0"}, ["minPartitions", "positive"]),
    ({**OPTS, "includeHeaders": "maybe"}, ["includeHeaders"]),
])
def test_option_errors_surface_at_load(registered, options, fragments):
    with pytest.raises(PySparkException) as info:
        load(registered, **options)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_secrets_stay_out_of_load_errors(registered):
    with pytest.raises(PySparkException) as info:
        load(registered, **{"subscribe": "t", "kafka.sasl.jaas.config": "password=hunter2"})
    assert "kafka.bootstrap.servers" in str(info.value)
    assert "hunter2" not in str(info.value)


class _OneRow(DataSourceReader):
    def __init__(self, include_headers):
        self.include_headers = include_headers

    def partitions(self):
        return [InputPartition(0)]

    def read(self, partition):
        columns = {
            "key": [b"k"], "value": [None], "topic": ["orders"], "partition": [3],
            "offset": [42], "timestamp": [dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)],
            "timestampType": [0],
        }
        if self.include_headers:
            columns["headers"] = [[{"key": "h", "value": b"v"}, {"key": "n", "value": None}]]
        yield pa.RecordBatch.from_pydict(columns, schema=arrow_schema(self.include_headers))


class _ArrowProbe(KafkaTieredDataSource):
    """Test-only: yields one Arrow batch built with the decoder's schema, to prove Spark
    accepts it under the DDL schema this source declares."""

    @classmethod
    def name(cls):
        return "kafka-tiered-arrow-probe"

    def reader(self, schema):
        return _OneRow(self.read_options.include_headers)


@pytest.mark.parametrize("include_headers", [False, True])
def test_decoder_arrow_schema_is_accepted_by_spark(spark, include_headers):
    spark.dataSource.register(_ArrowProbe)
    df = (spark.read.format("kafka-tiered-arrow-probe").options(**OPTS)
          .option("includeHeaders", str(include_headers).lower()).load())
    (row,) = df.collect()
    assert (row.key, row.value, row.topic, row.partition, row.offset, row.timestampType) == \
        (b"k", None, "orders", 3, 42, 0)
    assert row.timestamp.astimezone(dt.timezone.utc) == \
        dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
    if include_headers:
        assert [(h.key, h.value) for h in row.headers] == [("h", b"v"), ("n", None)]
