"""What tests/test_pushdown_versions.py runs on each pyspark: one filtered read per setting of
``spark.sql.python.filterPushdown.enabled`` and ``pushFilters``, reporting the rows Spark
returned and the records the tasks read (``last_read_stats``: the pushed filter leaves one
partition unread).  Imported by the test for the suite's own pyspark (its shared session), and
run as a script under another pyspark's interpreter, which also reports whether the
SparkContext is freed once stopped (``kafka_tiered_source`` keeps it only by weak reference).

    python tests/pushdown_check.py '<options JSON>'      # prints one JSON line
"""
from __future__ import annotations

import gc
import json
import sys
import weakref

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
WHERE = "partition = 1"
#: (Spark setting, pushFilters option or None for the default)
CASES = (("true", None), ("false", None), ("true", "true"), ("true", "false"), ("false", "true"))


def run_cases(spark, options: dict) -> list[dict]:
    import kafka_tiered_source as kts
    kts.register(spark)
    before = spark.conf.get(PUSHDOWN, "false")
    out = []
    try:
        for conf, push in CASES:
            spark.conf.set(PUSHDOWN, conf)
            opts = dict(options) if push is None else {**options, "pushFilters": push}
            case = {"conf": conf, "pushFilters": push}
            try:
                rows = spark.read.format("kafka-tiered").options(**opts).load().where(WHERE).count()
            except Exception as exc:   # Spark's refusal of a pushdown reader, reported by name
                text = str(exc)
                case["error"] = "DATA_SOURCE_PUSHDOWN_DISABLED" if "DATA_SOURCE_PUSHDOWN_DISABLED" in text \
                    else text[:500]
            else:
                case["rows"] = rows
                case["records_read"] = kts.last_read_stats(spark).total().records
            out.append(case)
    finally:
        spark.conf.set(PUSHDOWN, before)
    return out


def main(options: dict) -> dict:
    from pyspark.sql import SparkSession
    import pyspark
    spark = (SparkSession.builder.master("local[1]").appName("pushdown-versions")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    cases = run_cases(spark, options)
    context = weakref.ref(spark.sparkContext)
    spark.stop()
    del spark
    gc.collect()
    return {"pyspark": pyspark.__version__, "cases": cases, "context_freed": context() is None}


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(json.loads(sys.argv[1]))))
