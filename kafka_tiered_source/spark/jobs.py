"""What Spark's UI calls a job: ``kafka-tiered: orders, 32 tiered ranges, 9.5 MB, 8 tasks``.

A Python data source cannot name the jobs that read it: ``partitions()`` runs in a planner
process of its own, with no SparkContext, and nothing of the source runs in the driver's Python
when an action starts (tested in a real session: a description set there never reaches the
job).  Spark takes a job's description from the local property ``spark.job.description`` of the
driver thread that submits it, so it is set there: :func:`describe_read` plans the read on the
driver (as :func:`kafka_tiered_source.estimate` does) and sets the description of the jobs the
calling thread submits next; :func:`describe` turns a plan into the text.

    text = kafka_tiered_source.describe_read(spark, options)   # before the action
    df.write.parquet(path)                                      # the UI shows the text
    spark.sparkContext.setJobDescription(None)                  # back to Spark's own
"""
from __future__ import annotations


def describe(plan, *, max_topics: int = 3) -> str:
    """``kafka-tiered: <topics>, <n> tiered ranges, <MB>, <k> tasks`` for a
    :class:`~kafka_tiered_source.planning.Plan` (MB: the tiered bytes read from storage; the
    untiered tail through the brokers is named when there is one)."""
    topics = sorted({p.topic for p in plan.partitions})
    shown = ", ".join(topics[:max_topics]) + (f" +{len(topics) - max_topics} more" if len(topics) > max_topics else "")
    remote = plan.remote_ranges
    mb = sum(r.byte_end - r.byte_start for r in remote) / 1e6
    tail = len(plan.broker_ranges)
    gets = sum(c.index_gets for c in plan.marker_costs.values())
    fetches = sum(c.broker_fetches for c in plan.marker_costs.values())
    markers = ", ".join(x for x in (f"{gets} GETs" if gets else "", f"{fetches} broker fetches" if fetches else "") if x)
    return (f"kafka-tiered: {shown or 'no topic'}, {len(remote)} tiered ranges, {mb:,.1f} MB"
            + (f" + {tail} broker ranges" if tail else "") + f", {len(plan.tasks)} tasks"
            + (f" (markers past the end: {markers})" if markers else ""))


def describe_read(spark, options: dict) -> str:
    """Plan the read of ``options`` (as for ``spark.read.format("kafka-tiered")``) on the
    driver, set it as the description of the jobs this thread submits next, and return it."""
    from ..options import ReadOptions
    from ..options.read import with_default_client_id
    from ..planning import plan
    from .session import app_name
    text = describe(plan(ReadOptions.parse(with_default_client_id(options, app_name(spark)))))
    spark.sparkContext.setJobDescription(text)
    return text
