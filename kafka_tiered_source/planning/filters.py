"""Pushed-down filters: a frozen description of the predicates a read applies itself.

A :class:`RowFilter` is a conjunction of :class:`Predicate` objects on the columns whose values
the planner knows before reading (``topic``, ``partition``, ``offset``, ``timestamp``,
``timestampType``).  It is built from Spark's pushed filters (:meth:`RowFilter.of_spark`, see
:mod:`kafka_tiered_source.spark.pushdown`), from ``estimate(where=...)`` or the CLI
(:mod:`.where`), and used twice:

* by the planners, to read less (:func:`restrict_partitions`, :func:`narrow_ranges`,
  :func:`skip_segments`): topics and partitions that cannot match are not planned, offset
  comparisons narrow each partition's range, and a lower bound on ``timestamp`` moves each
  range's start to the first offset whose record may match (ListOffsets' answer with a broker,
  the same computed from the remote time indexes without one) and drops later tiered segments
  whose max timestamp is below it;
* by the executor, to return exactly the rows Spark's own filtering would
  (:meth:`RowFilter.apply`, on every Arrow batch): Kafka timestamps are not monotonic, so
  planning only narrows and every predicate is still applied row by row.

Semantics are SQL's on Spark's types: ``timestamp`` compares in microseconds (Kafka's
milliseconds times 1000), literals are instants (time zones already applied by Spark), and the
five columns are never null, so ``NOT p`` is the complement of ``p``; a literal that is null makes
a filter that is left to Spark.

>>> f = RowFilter((Predicate("partition", "in", (0, 2)), Predicate("offset", ">=", 100)))
>>> f.keeps_partition(1), f.offset_bounds()
(False, (100, None))
"""
from __future__ import annotations

import operator
from functools import reduce
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, Union

from ..dataclass import dataclass
from ..logs import get_logger

if TYPE_CHECKING:
    import datetime as _dt

log = get_logger(__name__)

#: The columns a predicate may name, with the kind of their values.
COLUMNS = {"topic": "string", "partition": "int", "offset": "int", "timestamp": "timestamp",
           "timestampType": "int"}
_BY_LOWER = {c.lower(): c for c in COLUMNS}
_INT64 = (-(1 << 63), (1 << 63) - 1)

# Operators: comparisons, set membership, string matches, and the two constants a null test
# becomes on a column that is never null.
_COMPARE = ("=", "<", "<=", ">", ">=")
_STRING = ("startswith", "endswith", "contains")
OPS = _COMPARE + ("in",) + _STRING + ("true", "false")
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "true": "false", "false": "true"}
_SQL = {"in": "IN", "startswith": "LIKE", "endswith": "LIKE", "contains": "LIKE"}
# a comparison applies to the values of one column, all ints or all strs
_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}

#: A predicate's literal: an int (``timestamp``: microseconds), a str (``topic``), a tuple of
#: them for ``in``, None for ``true``/``false``.
Scalar = Union[int, str]
Value = Union[Scalar, tuple[Scalar, ...], None]


@dataclass(frozen=True)
class Predicate:
    """``column op value``, or its negation.  ``value``: an int (``timestamp``: microseconds
    since the epoch), a str (``topic``), a tuple of them for ``in``, None for ``true``/``false``."""
    column: str
    op: str
    value: Value = None
    negated: bool = False

    def __post_init__(self):
        if self.column not in COLUMNS:
            raise ValueError(f"no pushdown on column {self.column!r} (only {', '.join(COLUMNS)})")
        if self.op not in OPS:
            raise ValueError(f"unknown predicate operator {self.op!r}")

    def normal(self) -> "Predicate":
        """The same predicate without ``negated`` where an operator says it (NOT a < b is
        a >= b on values that are never null)."""
        if self.negated and self.op in _NEGATE:
            return Predicate(self.column, _NEGATE[self.op], self.value)
        return self

    def values(self) -> tuple[Scalar, ...]:
        """The literals: those of ``in``, else the one value (none for ``true``/``false``)."""
        x = self.value
        if isinstance(x, tuple):
            return x
        return () if x is None else (x,)

    def ints(self) -> tuple[int, ...]:
        """:meth:`values` of a predicate on an integer column."""
        out = tuple(x for x in self.values() if isinstance(x, int))
        if len(out) != len(self.values()):
            raise TypeError(f"{self}: {self.column} takes integer literals")
        return out

    def test(self, v: Scalar) -> bool:
        """The predicate on one value (a topic name, a partition number)."""
        op, x = self.op, self.value
        if op in ("true", "false"):
            hit = op == "true"
        elif op == "in":
            hit = v in self.values()
        elif op in _COMPARISONS:
            hit = _COMPARISONS[op](v, x)
        else:
            if not isinstance(v, str) or not isinstance(x, str):
                raise TypeError(f"{self}: {op} applies to strings")
            hit = {"startswith": v.startswith, "endswith": v.endswith, "contains": v.__contains__}[op](x)
        return hit != self.negated

    def mask(self, column):
        """The predicate over an Arrow array (a boolean array)."""
        import pyarrow as pa
        import pyarrow.compute as pc
        op, x = self.op, self.value
        if COLUMNS[self.column] != "string":
            # timestamps as microseconds, like the literal; int32 columns widened, so a literal
            # outside their range compares instead of failing
            column = column.cast(pa.int64())
        if op in ("true", "false"):
            m = pa.array([op == "true"] * len(column), pa.bool_())
        elif op == "in":
            m = pc.is_in(column, value_set=pa.array(list(self.values()), column.type))
        elif op in _COMPARE:
            fn = {"=": pc.equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
                  ">=": pc.greater_equal}[op]
            m = fn(column, pa.scalar(x, column.type))
        elif op == "startswith":
            m = pc.starts_with(column, x)
        elif op == "endswith":
            m = pc.ends_with(column, x)
        else:
            m = pc.match_substring(column, x)
        return pc.invert(m) if self.negated else m

    def __str__(self) -> str:
        op, x = self.op, self.value
        if op in ("true", "false"):
            text = f"{self.column} IS {'NOT ' if op == 'true' else ''}NULL"
            return f"NOT ({text})" if self.negated else text
        if op == "in":
            text = f"{self.column} IN ({', '.join(_literal(self.column, v) for v in self.values())})"
        elif op in _STRING:
            pattern = {"startswith": "{}%", "endswith": "%{}", "contains": "%{}%"}[op].format(x)
            text = f"{self.column} LIKE {_literal('topic', pattern)}"
        else:
            text = f"{self.column} {op} {_literal(self.column, x)}"
        return f"NOT ({text})" if self.negated else text


def _literal(column: str, v) -> str:
    if COLUMNS[column] == "timestamp":
        return f"TIMESTAMP '{format_micros(v)}'"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return str(v)


def format_micros(us: int) -> str:
    """Microseconds since the epoch as an ISO 8601 UTC string, to the millisecond unless the
    microseconds say more."""
    import datetime as _dt   # datetime only where a time is shown or compared, not in every plan
    try:
        t = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(microseconds=us)
    except OverflowError:     # past datetime's years 1-9999 (Spark's range is wider)
        return f"{us} microseconds since the epoch"
    spec = "milliseconds" if us % 1000 == 0 else "microseconds"
    return t.isoformat(timespec=spec).replace("+00:00", "Z")


def micros(t: _dt.datetime) -> int:
    """A time-zone-aware datetime as exact microseconds since the epoch."""
    import datetime as _dt
    return (t - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)) // _dt.timedelta(microseconds=1)


@dataclass(frozen=True)
class RowFilter:
    """The AND of ``predicates``; empty means every row.  Frozen and picklable: it travels with
    the Spark reader to the planner process and the executors."""
    predicates: tuple[Predicate, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.predicates)

    def __str__(self) -> str:
        return " AND ".join(str(p) for p in self.predicates) or "TRUE"

    def on(self, column: str) -> list[Predicate]:
        return [p.normal() for p in self.predicates if p.column == column]

    def and_(self, other: "RowFilter") -> "RowFilter":
        return RowFilter(self.predicates + tuple(p for p in other.predicates
                                                 if p not in self.predicates))

    # -- what planning can use ------------------------------------------------------------------
    def keeps_topic(self, topic: str) -> bool:
        return all(p.test(topic) for p in self.on("topic"))

    def keeps_partition(self, partition: int) -> bool:
        return all(p.test(partition) for p in self.on("partition"))

    @property
    def impossible(self) -> bool:
        """True when no row can match, whatever is read."""
        if any(p.op == "false" and not p.negated for p in (q.normal() for q in self.predicates)):
            return True
        for column in ("offset", "timestamp", "partition", "timestampType"):
            lo, hi = self.bounds(column)
            if lo is not None and hi is not None and lo >= hi:
                return True
        return False

    def bounds(self, column: str) -> tuple[int | None, int | None]:
        """``[lo, hi)`` every matching row's ``column`` (an integer column) lies in; None where
        unbounded.  Negated ``=`` and ``IN`` bound nothing (they are applied row by row)."""
        lo = hi = None
        for p in self.on(column):
            if p.negated or p.op not in _COMPARE + ("in",):
                continue
            xs = p.ints()
            a: int | None
            b: int | None
            if p.op == "in":
                if not xs:
                    return 0, 0
                a, b = min(xs), max(xs) + 1
            elif p.op == "=":
                a, b = xs[0], xs[0] + 1
            elif p.op == ">=":
                a, b = xs[0], None
            elif p.op == ">":
                a, b = xs[0] + 1, None
            elif p.op == "<":
                a, b = None, xs[0]
            else:
                a, b = None, xs[0] + 1          # <=
            if a is not None:
                lo = a if lo is None else max(lo, a)
            if b is not None:
                hi = b if hi is None else min(hi, b)
        return lo, hi

    def offset_bounds(self) -> tuple[int | None, int | None]:
        return self.bounds("offset")

    def timestamp_from_ms(self) -> int | None:
        """The smallest Kafka timestamp (ms) a matching row can have, or None.  A row shows
        ``ms * 1000`` microseconds, so a bound of ``us`` means ``ms >= ceil(us / 1000)``."""
        lo, _ = self.bounds("timestamp")
        return None if lo is None else -(-lo // 1000)

    # -- what the executor applies --------------------------------------------------------------
    def apply(self, batch):
        """The rows of an Arrow ``batch`` (Spark's Kafka schema) that match, in order."""
        if not self.predicates or batch.num_rows == 0:
            return batch
        import pyarrow.compute as pc
        mask = reduce(pc.and_kleene, [p.mask(batch.column(batch.schema.get_field_index(p.column)))
                                      for p in self.predicates])
        if mask.false_count == 0 and mask.null_count == 0:
            return batch
        return batch.filter(mask)

    # -- from Spark -----------------------------------------------------------------------------
    @classmethod
    def of_spark(cls, filters: Sequence) -> tuple["RowFilter", list]:
        """Spark's pushed filters (``pyspark.sql.datasource`` objects, recognised by class name
        so planning needs no pyspark) -> (the filter of those applied exactly, the others, as
        the same objects, for Spark to apply)."""
        accepted, rejected = [], []
        for f in filters:
            p = predicate_of_spark(f)
            if p is None:
                rejected.append(f)
            else:
                accepted.append(p)
        return cls(tuple(dict.fromkeys(accepted))), rejected


def _column(attribute) -> str | None:
    if isinstance(attribute, (tuple, list)) and len(attribute) == 1 and isinstance(attribute[0], str):
        return _BY_LOWER.get(attribute[0].lower())
    return None


def value_of(column: str, v):
    """A literal as the predicate holds it, or None when it is not one this column compares
    exactly (a null, a naive datetime, a float, a bool, ...)."""
    kind = COLUMNS[column]
    if kind == "timestamp":
        import datetime as _dt
        if isinstance(v, _dt.datetime) and v.tzinfo is not None and v.utcoffset() is not None:
            us = micros(v)
            return us if _INT64[0] <= us <= _INT64[1] else None
        return None
    if kind == "int":
        return v if isinstance(v, int) and not isinstance(v, bool) and _INT64[0] <= v <= _INT64[1] else None
    return v if isinstance(v, str) else None


def predicate_of_spark(f, negated: bool = False) -> Predicate | None:
    """One Spark filter as a :class:`Predicate`, or None when it cannot be applied exactly."""
    kind = type(f).__name__
    if kind == "Not":
        inner = predicate_of_spark(getattr(f, "child", None), not negated)
        return inner
    column = _column(getattr(f, "attribute", None))
    if column is None:
        return None
    if kind in ("IsNull", "IsNotNull"):          # never null: a constant
        return Predicate(column, "false" if kind == "IsNull" else "true", None, negated)
    value = getattr(f, "value", None)
    if kind == "EqualNullSafe" and value is None:   # col <=> NULL: false on a non-null column
        return Predicate(column, "false", None, negated)
    if kind == "In":
        if not isinstance(value, (list, tuple)):
            return None
        values = [value_of(column, v) for v in value]
        if any(v is None for v in values):
            return None
        return Predicate(column, "in", tuple(sorted(set(values))), negated)
    op = {"EqualTo": "=", "EqualNullSafe": "=", "GreaterThan": ">", "GreaterThanOrEqual": ">=",
          "LessThan": "<", "LessThanOrEqual": "<=", "StringStartsWith": "startswith",
          "StringEndsWith": "endswith", "StringContains": "contains"}.get(kind)
    if op is None:
        return None
    if op in _STRING and column != "topic":
        return None
    if column == "topic" and op not in ("=", "in") + _STRING:
        return None   # string ordering is collation business: Spark's
    v = value_of(column, value)
    if v is None:
        return None
    return Predicate(column, op, v, negated)


# ---------------------------------------------------------------------------------------------
# Planning with a filter: the planners (online and offline) call these three.
# ---------------------------------------------------------------------------------------------
def restrict_partitions(tps: Iterable[tuple], row_filter: RowFilter | None) -> list:
    """``(topic, partition, ...)`` tuples whose topic and partition can match."""
    tps = list(tps)
    if not row_filter:
        return tps
    if row_filter.impossible:
        return []
    return [t for t in tps if row_filter.keeps_topic(t[0]) and row_filter.keeps_partition(t[1])]


def narrow_ranges(ranges: list, row_filter: RowFilter | None, offsets_for_times=None) -> list:
    """Each :class:`~.plan.PartitionRange` cut to the offsets that can match: offset bounds,
    and a lower bound on ``timestamp`` through ``offsets_for_times`` (``{(topic, partition):
    ms} -> {(topic, partition): offset}``, ListOffsets' contract: the first offset whose record
    has a timestamp >= ms, every record before it has an earlier one; < 0 when there is none)."""
    from ..dataclass import replace
    if not row_filter:
        return ranges
    lo, hi = row_filter.offset_bounds()
    ts_ms = row_filter.timestamp_from_ms()
    out = []
    for pr in ranges:
        start, end = pr.start, pr.end
        if row_filter.impossible:
            start = end
        if lo is not None:
            start = max(start, lo)
        if hi is not None:
            end = min(end, hi)
        start = min(start, pr.end)
        end = max(end, start)
        out.append(replace(pr, start=start, end=end))
    if ts_ms is not None and offsets_for_times is not None:
        wanted = {(pr.topic, pr.partition): ts_ms for pr in out if pr.start < pr.end}
        found = offsets_for_times(wanted) if wanted else {}
        for i, pr in enumerate(out):
            off = found.get((pr.topic, pr.partition))
            if off is None:
                continue
            start = pr.end if off < 0 else min(max(pr.start, off), pr.end)
            if start != pr.start:
                log.info("%s-%d: timestamp >= %d ms starts the read at offset %d instead of %d",
                         pr.topic, pr.partition, ts_ms, start, pr.start)
                out[i] = replace(pr, start=start)
    return out


def skip_segments(pieces: list, row_filter: RowFilter | None, *,
                  read_committed: bool) -> tuple[list, list[tuple[Any, str]]]:
    """A partition's located pieces without the tiered slices whose segment's max timestamp is
    known and below the filter's lower bound on ``timestamp`` (none of their records can match),
    and the slices left out with why.  read_committed drops only leading ones (the range then
    starts later, which is safe): its reader must see every transaction marker between its
    first offset and its last, so its ranges cannot have holes."""
    from .packing import SegmentSlice
    ts_ms = row_filter.timestamp_from_ms() if row_filter else None
    if ts_ms is None or not pieces:
        return pieces, []
    out: list = []
    skipped: list[tuple[Any, str]] = []
    for p in pieces:
        top = getattr(p.segment, "max_timestamp", None) if isinstance(p, SegmentSlice) else None
        if top is not None and -1 <= top < ts_ms and not (read_committed and out):
            # Kafka's segments say -1 (RecordBatch.NO_TIMESTAMP) when they hold no record
            why = (f"pushed-down filter timestamp >= {ts_ms}: segment {p.segment.segment_id} holds no "
                   f"record with a timestamp (max timestamp -1)" if top < 0 else
                   f"pushed-down filter timestamp >= {ts_ms}: every record of segment "
                   f"{p.segment.segment_id} is older (max timestamp {top})")
            log.info("%s-%d: segment %s [%d, %d] skipped (%s)", p.segment.topic, p.segment.partition,
                     p.segment.segment_id, p.segment.base_offset, p.segment.end_offset, why)
            skipped.append((p, why))
            continue
        out.append(p)
    return out, skipped
