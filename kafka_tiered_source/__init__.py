"""kafka-tiered: read Apache Kafka topics straight out of tiered storage.

The data path, in package order: ``protocol`` (Kafka wire messages and a broker client) →
``planning`` (where each offset range lives) → ``storage`` (RemoteStorageFetcher plugins and
object layouts) → ``records`` (v2 RecordBatch decoding into Arrow) → ``spark`` (the
``kafka-tiered`` data source).  ``testing`` holds the embedded reference broker.
"""
from __future__ import annotations

from .errors import (
    BrokerError,
    ConfigError,
    CorruptRecordError,
    DataLossError,
    DecompressionLimitError,
    KafkaTieredError,
    ProtocolError,
    RemoteStorageError,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "BrokerError", "ConfigError", "CorruptRecordError", "DataLossError",
    "DecompressionLimitError", "KafkaTieredError", "ProtocolError", "RemoteStorageError",
    "decode", "decoder_backend", "register",
]


def decode(data, **kwargs):
    """Decode consecutive v2 record batches into a ``pyarrow.Table`` (see :mod:`.records`)."""
    from .records import decode as _decode
    return _decode(data, **kwargs)


def decoder_backend() -> str:
    """``"native"`` or ``"python"``: which decoder ``decode`` uses in this process."""
    from .records import decoder_backend as _backend
    return _backend()


def register(spark) -> None:
    """Register the ``kafka-tiered`` format with a ``SparkSession`` (Spark also registers it by
    itself when the package is installed, through the top-level ``pyspark_kafka_tiered``)."""
    from .spark import register as _register
    _register(spark)
