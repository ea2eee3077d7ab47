"""Options, parsed once: one declarative table (:mod:`.table`), one validator, one boolean rule
and one secret rule for the Spark source's options, the storage layer's and the Kafka client's.

- :class:`ReadOptions` (``ReadOptions.parse(dict)``): everything a read needs, frozen.
- :class:`FetcherConfig`: the ``remote.storage.*`` / ``fetch.remote.*`` part.
- :class:`ClientConfig`: the Kafka client's properties; :func:`client_properties` builds them
  from a ``ReadOptions``.
- :func:`markdown_table`: the option reference in docs/options.md, generated from the table.

Example::

    >>> from kafka_tiered_source.options import ReadOptions
    >>> o = ReadOptions.parse({"kafka.bootstrap.servers": "b:9092", "subscribe": "orders"})
    >>> o.strategy, o.partition_target_bytes
    (Subscribe(topics=('orders',)), 134217728)
"""
from __future__ import annotations

from .client import ClientConfig
from .fetchers import available_fetchers, register_fetcher
from .pricing import EGRESS_CLASSES, PRESETS, CostModel
from .quotas import QuotaConfig
from .read import OptionMap, ReadOptions, client_properties, include_headers
from .storage import FetcherConfig
from .table import OPTIONS, KAFKA_OPTIONS, Option, markdown_table

__all__ = ["ClientConfig", "CostModel", "EGRESS_CLASSES", "FetcherConfig", "KAFKA_OPTIONS", "OPTIONS",
           "Option", "OptionMap", "PRESETS", "QuotaConfig", "ReadOptions", "available_fetchers",
           "client_properties", "include_headers", "markdown_table", "register_fetcher"]

