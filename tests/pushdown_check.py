"""What tests/test_pushdown_versions.py runs on each pyspark: one filtered read per setting of
``spark.sql.python.filterPushdown.enabled`` and ``pushFilters``, reporting the rows Spark
returned and the records the tasks read (``last_read_stats``: the pushed filter leaves one
partition unread).  Imported by the test for the suite's own pyspark (its shared session), and
run as a script under another pyspark's interpreter, which also reports whether
``kafka_tiered_source`` still holds the SparkContext once it is stopped (its accumulators are
kept by weak reference; pyspark itself keeps a stopped context, so that is what is checked).

    python tests/pushdown_check.py '<options JSON>'      # prints one JSON line
"""
from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import tempfile
import weakref

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
WHERE = "partition = 1"
#: (Spark setting, pushFilters option or None for the default): auto's agreement, then the
#: option saying it outright
AUTO = (("true", None), ("false", None))
CASES = AUTO + (("true", "true"), ("true", "false"), ("false", "true"))


def run_cases(spark, options: dict, cases=CASES) -> list[dict]:
    """The records the tasks read come from ``metrics.jsonl.path`` (every task appends its
    totals), which works whatever the registration (Spark 4.0 keeps the automatically
    registered source: no accumulator)."""
    import kafka_tiered_source as kts
    from kafka_tiered_source.executor.finish import read_jsonl
    kts.register(spark)
    before = spark.conf.get(PUSHDOWN, "false")
    out = []
    tmp = tempfile.mkdtemp(prefix="kts-pushdown-")
    try:
        for n, (conf, push) in enumerate(cases):
            spark.conf.set(PUSHDOWN, conf)
            jsonl = os.path.join(tmp, f"case-{n}.jsonl")
            opts = {**options, "metrics.jsonl.path": jsonl, **({} if push is None else {"pushFilters": push})}
            case = {"conf": conf, "pushFilters": push}
            try:
                rows = spark.read.format("kafka-tiered").options(**opts).load().where(WHERE).count()
            except Exception as exc:   # Spark's refusal of a pushdown reader, reported by name
                text = str(exc)
                case["error"] = "DATA_SOURCE_PUSHDOWN_DISABLED" if "DATA_SOURCE_PUSHDOWN_DISABLED" in text \
                    else text[:500]
            else:
                case["rows"] = rows
                case["records_read"] = sum(t.total().records for t in read_jsonl(jsonl))
            out.append(case)
    finally:
        spark.conf.set(PUSHDOWN, before)
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(options: dict) -> dict:
    from pyspark.sql import SparkSession
    import pyspark
    spark = (SparkSession.builder.master("local[1]").appName("pushdown-versions")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    cases = run_cases(spark, options, AUTO)
    sc = spark.sparkContext
    spark.stop()
    del spark
    gc.collect()
    return {"pyspark": pyspark.__version__, "cases": cases, "context_held": held_by_package(sc)}


def held_by_package(obj, depth: int = 4) -> bool:
    """Whether ``obj`` can be reached from a ``kafka_tiered_source`` module's globals through
    containers (dicts, lists, tuples, sets; weak references are not followed)."""
    seen: set = set()
    level = [vars(m) for name, m in list(sys.modules.items())
             if name.startswith("kafka_tiered_source") and m is not None]
    for _ in range(depth):
        nxt = []
        for c in level:
            if id(c) in seen:
                continue
            seen.add(id(c))
            items = list(c.keys()) + list(c.values()) if isinstance(c, dict) else list(c)
            for x in items:
                if x is obj:
                    return True
                if isinstance(x, (dict, list, tuple, set, frozenset)) and not isinstance(x, weakref.ref):
                    nxt.append(x)
        level = nxt
    return False


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(json.loads(sys.argv[1]))))
