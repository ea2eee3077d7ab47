"""Reader metrics: what each task did and cost (``reader``), the end-of-task reporting
(``task``: accumulator, JSON lines, KIP-714 push) and the driver-side accumulator (``spark``,
needs pyspark).  Exporters live in :mod:`kafka_tiered_source.telemetry`, prices in
:mod:`kafka_tiered_source.cost`."""
from .reader import LatencyHistogram, ReaderMetrics, ReadHistory, ReadStats, ReadTotals

__all__ = ["LatencyHistogram", "ReaderMetrics", "ReadHistory", "ReadStats", "ReadTotals"]
