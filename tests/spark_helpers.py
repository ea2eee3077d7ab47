"""Helpers for the end-to-end Spark read tests: loading a ``kafka-tiered`` DataFrame and turning
Spark rows into the shape of the fixtures' ``expected/*.jsonl`` so the two compare directly.

Rows are compared as dicts ``{offset, timestamp (ms), timestampType, key, value (base64 or
None), headers}``.  Spark gives ``headers`` as null for a record without headers, while the
fixture files list ``[]``; :func:`expected_rows` maps ``[]`` to ``None`` so the comparison also
checks that Spark really shows null there.
"""
from __future__ import annotations

import base64

from broker_fixtures import fixture_expected


def b64(value):
    return None if value is None else base64.b64encode(bytes(value)).decode("ascii")


def load(spark, options: dict):
    reader = spark.read.format("kafka-tiered")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def collect_rows(df) -> dict:
    """Collect ``df`` once: ``{(topic, partition): [row dict, ...]}`` in offset order.  The
    timestamp is taken as ``unix_micros`` so no session time zone takes part; every Kafka
    timestamp is whole milliseconds, so a remainder is a bug and is kept visible."""
    has_headers = "headers" in df.columns
    cols = ["topic", "partition", "offset", "unix_micros(timestamp) AS ts_us", "timestampType",
            "key", "value"] + (["headers"] if has_headers else [])
    out: dict = {}
    for r in df.selectExpr(*cols).collect():
        ts = r.ts_us // 1000 if r.ts_us is not None and r.ts_us % 1000 == 0 else ("us", r.ts_us)
        row = {"offset": r.offset, "timestamp": ts, "timestampType": r.timestampType,
               "key": b64(r.key), "value": b64(r.value)}
        if has_headers:
            row["headers"] = None if r.headers is None else [[h.key, b64(h.value)]
                                                               for h in r.headers]
        out.setdefault((r.topic, r.partition), []).append(row)
    for rows in out.values():
        rows.sort(key=lambda x: x["offset"])
    return out


def expected_rows(topic: str, partition: int, committed: bool, *, headers: bool = True) -> list:
    rows = []
    for e in fixture_expected(topic, partition, committed):
        row = {k: e[k] for k in ("offset", "timestamp", "timestampType", "key", "value")}
        if headers:
            row["headers"] = e["headers"] or None
        rows.append(row)
    return rows


def consumer_rows(rows: list) -> list:
    """Rows from broker_fixtures' consume helpers (headers as ``[]`` when none), in our shape."""
    return [{**r, "headers": r["headers"] or None} for r in rows]


def first_difference(got: list, want: list) -> str:
    """A short description of where two row lists part, for assertion messages."""
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"row {i}: got {g!r:.300} want {w!r:.300}"
    return f"lengths differ: got {len(got)} rows, want {len(want)}"


def arrow_rows(batches) -> dict:
    """``pyarrow.RecordBatch`` objects (as ``TaskReader.read`` yields them) in the same shape as
    :func:`collect_rows`."""
    import pyarrow as pa
    out: dict = {}
    for batch in batches:
        if not batch.num_rows:
            continue
        ts_us = batch.column(batch.schema.get_field_index("timestamp")).cast(pa.int64()).to_pylist()
        for r, us in zip(batch.to_pylist(), ts_us):
            row = {"offset": r["offset"], "timestamp": us // 1000 if us % 1000 == 0 else ("us", us),
                   "timestampType": r["timestampType"], "key": b64(r["key"]), "value": b64(r["value"])}
            if "headers" in r:
                row["headers"] = None if r["headers"] is None else [[h["key"], b64(h["value"])]
                                                                   for h in r["headers"]]
            out.setdefault((r["topic"], r["partition"]), []).append(row)
    for rows in out.values():
        rows.sort(key=lambda x: x["offset"])
    return out
