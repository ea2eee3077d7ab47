"""Executor side: what runs inside a Spark task.  :class:`TaskReader` reads one planned
:class:`~kafka_tiered_source.planning.tasks.ReadTask` (direct reads through the fetcher, the
rest and any fallback through the brokers) into Arrow batches; :mod:`.prefetch` fetches the
next parts while the current one decodes; :mod:`.finish` reports the task's metrics.  Nothing
here imports Spark."""
from .reader import TaskReader

__all__ = ["TaskReader"]
