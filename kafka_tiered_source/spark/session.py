"""What kind of Spark session the caller holds, asked without assuming one: classic (a
SparkContext in this process) or Spark Connect (a client; the driver is elsewhere), its Spark
version, application name and id, and, inside a task, which attempt this is.

Supported Spark versions (the ``spark`` extra of pyproject.toml says the same; a test keeps
them in step):

* ``kafka_tiered_source.read(spark, ...)``: Spark 3.4 and later, below 5 — it needs only
  ``mapInArrow``;
* ``spark.read.format("kafka-tiered")`` / ``readStream``: Spark 4.0 and later, below 5 — the
  Python data source API.

Nothing here imports pyspark at module level: the helpers take the session they are given.
"""
from __future__ import annotations

import re

from ..errors import UnsupportedSparkError

#: [lowest, first unsupported) Spark version of ``kafka_tiered_source.read``.
READ_API_VERSIONS = ((3, 4), (5, 0))
#: [lowest, first unsupported) Spark version of the ``kafka-tiered`` format.
FORMAT_VERSIONS = ((4, 0), (5, 0))
#: The requirement in pyproject.toml's ``spark`` extra.
PYSPARK_REQUIREMENT = "pyspark>=3.4,<5"


def is_connect(spark) -> bool:
    """True for a Spark Connect session (``SparkSession.builder.remote(...)``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def spark_version(spark) -> tuple[int, ...]:
    """The Spark version of the session (the server's, on Connect) as numbers."""
    return parse_version(spark.version)


def parse_version(text: str) -> tuple[int, ...]:
    m = re.match(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if not m:
        raise UnsupportedSparkError(f"cannot tell the Spark version from {text!r}")
    return tuple(int(g) for g in m.groups() if g is not None)


def _check(spark, versions, what: str, hint: str = "") -> tuple[int, ...]:
    version = spark_version(spark)
    low, high = versions
    if not low <= version[:2] < high:
        raise UnsupportedSparkError(
            f"{what} needs Spark {low[0]}.{low[1]} or later, before {high[0]}.0; this session runs "
            f"Spark {spark.version}.{hint}")
    return version


def check_read_api(spark) -> tuple[int, ...]:
    """Refuse a Spark on which ``kafka_tiered_source.read`` cannot run."""
    return _check(spark, READ_API_VERSIONS, "kafka_tiered_source.read (mapInArrow)")


def check_format(spark) -> tuple[int, ...]:
    """Refuse a Spark without the Python data source API (``register``, the format)."""
    hint = ""
    if (3, 4) <= spark_version(spark)[:2] < (4, 0):
        hint = (" Spark 3.x has no Python data source API: use kafka_tiered_source.read(spark, **options), "
                "which takes the same options and returns the same DataFrame.")
    return _check(spark, FORMAT_VERSIONS, 'The "kafka-tiered" format', hint)


def app_name(spark) -> str:
    """The application name (the default ``client.id``), classic or Connect."""
    if not is_connect(spark):
        return spark.sparkContext.appName
    return spark.conf.get("spark.app.name")


def app_id(spark) -> str | None:
    if not is_connect(spark):
        return spark.sparkContext.applicationId
    try:
        return spark.conf.get("spark.app.id")
    except Exception:    # a server that does not expose it
        return None


def session_id(spark) -> str:
    """A stable id of this session: Connect's session id, else the application id."""
    if is_connect(spark):
        return spark.session_id
    return spark.sparkContext.applicationId


def task_attempt() -> str | None:
    """Inside a Spark task: ``<stage>-<attempt>-<task attempt id>`` (the last is unique within the
    application); None outside a task."""
    try:
        from pyspark import TaskContext
        tc = TaskContext.get()
    except Exception:
        return None
    if tc is None:
        return None
    return f"{tc.stageId()}-{tc.attemptNumber()}-{tc.taskAttemptId()}"


def task_stage() -> int | None:
    """Inside a Spark task: its stage id (one per scan of each action); None outside one."""
    try:
        from pyspark import TaskContext
        tc = TaskContext.get()
    except Exception:
        return None
    return tc.stageId() if tc is not None else None
