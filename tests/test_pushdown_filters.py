"""The pushed-down filter itself, without Spark or a broker: which of Spark's filter objects are
taken, that what is taken is applied exactly (checked against a plain Python evaluation of the
same SQL semantics on random batches), what planning derives from it, and the ``where=`` forms.
"""
from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pytest
from pyspark.sql import datasource as sds

from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.planning.filters import Predicate, RowFilter, narrow_ranges, restrict_partitions
from kafka_tiered_source.planning.plan import PartitionRange
from kafka_tiered_source.planning.where import parse_time, parse_where
from kafka_tiered_source.records.schema import kafka_schema

UTC = dt.timezone.utc
T = dt.datetime(2026, 10, 1, tzinfo=UTC)
T_US = 1790812800_000_000


def test_spark_filters_taken_and_left():
    ts = sds.GreaterThanOrEqual(("timestamp",), T)
    taken = [ts, sds.EqualTo(("partition",), 1), sds.In(("partition",), [1, 2]),
             sds.LessThan(("offset",), 10), sds.Not(sds.EqualTo(("offset",), 5)),
             sds.IsNotNull(("timestamp",)), sds.EqualTo(("topic",), "orders"),
             sds.StringStartsWith(("topic",), "ord"), sds.EqualNullSafe(("timestampType",), 0),
             sds.In(("TOPIC",), ["orders", "b"]), sds.Not(sds.IsNull(("offset",)))]
    left = [sds.EqualTo(("key",), b"k"), sds.IsNotNull(("value",)), sds.In(("partition",), [1, None]),
            sds.EqualTo(("timestamp",), dt.datetime(2026, 10, 1)),          # no zone: ambiguous
            sds.GreaterThan(("topic",), "m"), sds.StringContains(("value",), "x"),
            sds.EqualTo(("partition",), 1.5), sds.EqualTo(("partition",), True),
            sds.EqualTo(("headers", "key"), "h"), sds.EqualTo(("offset",), None)]
    flt, rejected = RowFilter.of_spark(taken + left)
    assert rejected == left and all(a is b for a, b in zip(rejected, left, strict=True))
    assert len(flt.predicates) == len(taken)
    assert str(flt).startswith("timestamp >= TIMESTAMP '2026-10-01T00:00:00.000Z' AND partition = 1")
    assert flt.timestamp_from_ms() == T_US // 1000
    assert flt.keeps_partition(1) and not flt.keeps_partition(0)
    assert flt.offset_bounds() == (None, 10)


def test_null_semantics_on_columns_that_are_never_null():
    flt, rejected = RowFilter.of_spark([sds.IsNull(("offset",))])
    assert not rejected and flt.impossible
    flt, _ = RowFilter.of_spark([sds.EqualNullSafe(("partition",), None)])
    assert flt.impossible
    flt, _ = RowFilter.of_spark([sds.Not(sds.EqualNullSafe(("partition",), None))])
    assert not flt.impossible and flt.keeps_partition(3)


def _batch(rows):
    cols = list(zip(*rows, strict=True)) if rows else [[]] * 5
    topic, part, off, us, tstype = cols
    n = len(rows)
    return pa.RecordBatch.from_arrays(
        [pa.array([None] * n, pa.binary()), pa.array([b"v"] * n, pa.binary()), pa.array(topic, pa.string()),
         pa.array(part, pa.int32()), pa.array(off, pa.int64()), pa.array(us, pa.timestamp("us", tz="UTC")),
         pa.array(tstype, pa.int32())], schema=kafka_schema(False))


def _python(p: Predicate, row) -> bool:
    col = {"topic": 0, "partition": 1, "offset": 2, "timestamp": 3, "timestampType": 4}[p.column]
    return p.test(row[col])


def test_apply_matches_row_by_row_evaluation():
    rnd = random.Random(16)
    ops = ["=", "<", "<=", ">", ">=", "in"]
    for _ in range(200):
        rows = [(rnd.choice(["orders", "pay"]), rnd.randrange(4), rnd.randrange(100),
                 T_US + rnd.randrange(-3, 4) * 999 + rnd.randrange(3) * 1000, rnd.randrange(2))
                for _ in range(rnd.randrange(0, 40))]
        preds = []
        for _ in range(rnd.randrange(1, 4)):
            column = rnd.choice(["partition", "offset", "timestamp", "timestampType", "topic"])
            if column == "topic":
                op = rnd.choice(["=", "in", "startswith"])
                value = ("orders", "x") if op == "in" else rnd.choice(["orders", "pa", "o"])
            else:
                op = rnd.choice(ops)
                pick = {"partition": lambda: rnd.randrange(5), "offset": lambda: rnd.randrange(100),
                        "timestampType": lambda: rnd.randrange(2),
                        "timestamp": lambda: T_US + rnd.randrange(-4000, 4000)}[column]
                value = tuple(sorted({pick() for _ in range(3)})) if op == "in" else pick()
            preds.append(Predicate(column, op, value, rnd.random() < 0.3))
        flt = RowFilter(tuple(preds))
        got = flt.apply(_batch(rows))
        want = [r for r in rows if all(_python(p, r) for p in preds)]
        assert got.schema == kafka_schema(False)
        assert list(zip(got.column(2).to_pylist(), got.column(3).to_pylist(), got.column(4).to_pylist(),
                        strict=True)) == \
            [(r[0], r[1], r[2]) for r in want], str(flt)


def test_planning_derivations():
    flt = parse_where("partition IN (0, 2) AND offset >= 10 AND offset < 50 AND timestamp > '2026-10-01T00:00:00.0005Z'")
    assert restrict_partitions([("t", 0, "id"), ("t", 1, "id"), ("u", 2, "id")], flt) == [("t", 0, "id"), ("u", 2, "id")]
    assert flt.timestamp_from_ms() == T_US // 1000 + 1       # > x.0005 ms: the next whole ms
    ranges = [PartitionRange("t", 0, "id", 0, 100, 0, 100), PartitionRange("t", 2, "id", 60, 90, 0, 100)]
    asked = {}

    def offsets_for_times(stamps):
        asked.update(stamps)
        return {k: 30 for k in stamps}
    out = narrow_ranges(ranges, flt, offsets_for_times)
    assert [(r.start, r.end) for r in out] == [(30, 50), (60, 60)]
    assert asked == {("t", 0): T_US // 1000 + 1}             # empty ranges are not asked
    none = narrow_ranges(ranges, flt, lambda stamps: {k: -1 for k in stamps})
    assert [(r.start, r.end) for r in none] == [(50, 50), (60, 60)]
    assert parse_where("offset > 5 AND offset < 3").impossible
    assert not parse_where("offset <> 5").impossible


def test_where_forms():
    assert str(parse_where("`partition` = 1 and not offset in (1, 2) AND topic LIKE 'ord%'")) == \
        "partition = 1 AND NOT (offset IN (1, 2)) AND topic LIKE 'ord%'"
    assert str(parse_where("offset BETWEEN 3 AND 9")) == "offset >= 3 AND offset <= 9"
    assert str(parse_where("topic <> 'a''b'")) == "NOT (topic = 'a''b')"
    assert str(parse_where("timestamp IS NOT NULL AND offset != 4")) == \
        "timestamp IS NOT NULL AND NOT (offset = 4)"
    paris = parse_where("timestamp >= '2026-10-01 02:00'", time_zone="Europe/Paris")
    assert paris.timestamp_from_ms() == T_US // 1000          # 02:00 CEST is midnight UTC
    assert parse_where("timestamp >= TIMESTAMP '2026-10-01T00:00:00Z'") == \
        parse_where([("timestamp", ">=", T)]) == parse_where([("timestamp", ">=", "2026-10-01")]) == \
        parse_where([sds.GreaterThanOrEqual(("timestamp",), T)])
    assert parse_where("") == RowFilter() and parse_where(None) == RowFilter()
    assert parse_time("2026-10-01", "UTC+02:00") == dt.datetime(2026, 9, 30, 22, tzinfo=UTC)


@pytest.mark.parametrize("where, message", [
    ("key = 'x'", "no pushdown on column 'key'"),
    ("partition = 1 OR partition = 2", "OR is never pushed down"),
    ("NOT (partition = 1 AND offset = 2)", "is an OR"),
    ("offset NOT BETWEEN 1 AND 2", "NOT BETWEEN is an OR"),
    ("timestamp >= 17000", "timestamp compares with a quoted time"),
    ("partition = 'x'", "partition compares with an integer"),
    ("timestamp >= 'soon'", "'soon' is not a time"),
    ("topic LIKE 'a_b%'", "only 'abc%'"),
    ("topic > 'a'", "topic compares with =, <>, IN or LIKE only"),
    ("offset >", "expected a literal"),
    ("offset = 1 partition = 2", "expected AND"),
    ([("offset", "!!", 1)], "is not one of"),
    ([sds.EqualTo(("value",), b"x")], "cannot be pushed down"),
])
def test_where_errors(where, message):
    with pytest.raises(ConfigError, match=message) as err:
        parse_where(where, time_zone="UTC")
    assert err.value.option == "where"


def test_segments_the_timestamp_bound_leaves_out_say_why():
    from kafka_tiered_source.planning.filters import skip_segments
    from kafka_tiered_source.planning.packing import SegmentSlice
    from kafka_tiered_source.storage.segment import RemoteSegment
    flt, _ = RowFilter.of_spark([sds.GreaterThanOrEqual(("timestamp",), T)])
    bound = int(T.timestamp() * 1000)

    def piece(i: int, top: int) -> SegmentSlice:
        seg = RemoteSegment("t", "AAAAAAAAAAAAAAAAAAAAAA", 0, f"s{i}", 10 * i, 10 * i + 9, 100, max_timestamp=top)
        return SegmentSlice(seg, 10 * i, 10 * i + 10)
    pieces = [piece(0, bound - 1), piece(1, -1), piece(2, bound), piece(3, bound - 5)]
    kept, skipped = skip_segments(pieces, flt, read_committed=False)
    assert kept == [pieces[2]] and [p for p, _ in skipped] == [pieces[0], pieces[1], pieces[3]]
    older, empty, later = (why for _, why in skipped)
    assert f"every record of segment s0 is older (max timestamp {bound - 1})" in older
    assert "segment s1 holds no record with a timestamp" in empty and "older" not in empty
    assert f"max timestamp {bound - 5}" in later
    # read_committed cannot leave holes: only the leading ones go
    kept, skipped = skip_segments(pieces, flt, read_committed=True)
    assert kept == pieces[2:] and [p for p, _ in skipped] == pieces[:2]
