"""Registering the ``kafka-tiered`` source with a session: :func:`install`, which
``kafka_tiered_source.register(spark)`` calls.  It creates the session's metrics channel on the
driver (:mod:`.metrics`: an accumulator, or a metrics directory on Spark Connect) and registers
the data source with it (:func:`.datasource.for_session`)."""
from __future__ import annotations

import logging

from .metrics import SessionContext, accumulator, set_connect_dir
from .session import app_id, app_name, check_format, is_connect, session_id

log = logging.getLogger(__name__)


def install(spark, metrics_dir: str | None = None) -> None:
    """Register the ``kafka-tiered`` source with ``spark`` so that its tasks' metrics reach
    :func:`~.metrics.read_history` here, and its default ``client.id`` is the application name.
    ``metrics_dir``: the base of the session's metrics directory (Connect; optional on classic,
    where the accumulator is the channel and the files are an extra copy)."""
    check_format(spark)       # before importing the data source: Spark 3.x has no pyspark.sql.datasource
    from .datasource import for_session
    base = metrics_dir.rstrip("/") if metrics_dir else None
    if is_connect(spark):
        sid = session_id(spark)
        directory = f"{base}/{sid}" if base else None
        set_connect_dir(sid, directory)
        context = SessionContext(app_name=app_name(spark), app_id=app_id(spark), metrics_dir=directory,
                                 session=sid)
    else:
        context = SessionContext(accumulator(spark), app_name(spark), app_id(spark),
                                 f"{base}/{session_id(spark)}" if base else None)
    try:
        spark.dataSource.register(for_session(context))
    except Exception as exc:
        # Spark 4.0 refuses to replace a statically registered source (pyspark_kafka_tiered,
        # when this package is installed); 4.1+ replace it with a warning
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
        log.warning("kafka-tiered: Spark %s keeps the automatically registered kafka-tiered source, so "
                    "this session's reads report no totals to last_read_stats(spark) and their client.id "
                    "defaults to 'kafka-tiered'; give reads metrics.dir (and last_read_stats the same "
                    "metrics_dir), or use kafka_tiered_source.read(spark, ...)", spark.version)
