"""Spark's automatic registration hook: Spark imports every top-level ``pyspark_*`` module it
finds and registers the module's ``DefaultSource``, so ``spark.read.format("kafka-tiered")``
works without an explicit ``kafka_tiered_source.register(spark)``."""
from kafka_tiered_source.spark.datasource import KafkaTieredDataSource as DefaultSource

__all__ = ["DefaultSource"]
