"""``where=`` for :func:`kafka_tiered_source.estimate` and the CLI: the filters a read would push
down, given without Spark.

Accepted forms (:func:`parse_where`):

* a SQL condition over the pushable columns, the clauses joined by ``AND`` (what a Spark
  ``.where()`` with those clauses pushes)::

      "timestamp >= '2026-10-01' AND partition IN (0, 1) AND offset < 500000"

  Clauses: ``col = | <> | != | < | <= | > | >= literal``, ``col [NOT] IN (...)``,
  ``col [NOT] BETWEEN a AND b``, ``col IS [NOT] NULL``, ``topic [NOT] LIKE 'abc%'`` (prefix,
  suffix or substring patterns), and ``NOT`` before any of them.  Columns: ``topic``,
  ``partition``, ``offset``, ``timestamp``, ``timestampType``.  ``timestamp`` literals are
  quoted ISO 8601 times (``'2026-10-01'``, ``'2026-10-01 12:30:00.250'``,
  ``'2026-10-01T12:30:00+02:00'``, optionally prefixed ``TIMESTAMP``); one without a zone is
  in ``time_zone`` (Spark's ``spark.sql.session.timeZone`` when ``estimate`` is given a
  session, else UTC).  ``OR`` is not accepted: Spark never pushes it either.
* a :class:`~.filters.RowFilter`, or a list of Spark filter objects
  (``pyspark.sql.datasource.GreaterThanOrEqual(("timestamp",), datetime(...))``, ...), or of
  ``(column, op, value)`` tuples (op one of ``= < <= > >= in``, ``timestamp`` values as
  time-zone-aware datetimes or strings as above).

Anything else is a :class:`ConfigError` naming the clause, so an estimate never silently
ignores part of its condition.
"""
from __future__ import annotations

import datetime as _dt
import re

from ..errors import ConfigError
from .filters import COLUMNS, Predicate, RowFilter, micros, predicate_of_spark, value_of

_TOKEN = re.compile(r"""\s*(?:
    (?P<str>'(?:[^']|'')*')
  | (?P<num>[+-]?\d+)
  | (?P<id>`[^`]+`|[A-Za-z_][A-Za-z_0-9]*)
  | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,)
)""", re.VERBOSE)
_OPS = {"=": "=", "==": "=", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "<>": "<>", "!=": "<>"}
_LOWER = {c.lower(): c for c in COLUMNS}


def parse_time(text: str, time_zone: str = "UTC") -> _dt.datetime:
    """An ISO 8601 date or time as an aware datetime; without a zone, in ``time_zone``."""
    raw = text.strip()
    try:
        t = _dt.datetime.fromisoformat(raw)
    except ValueError:
        raise ConfigError(f"{text!r} is not a time: give ISO 8601, e.g. '2026-10-01', "
                          f"'2026-10-01 12:30:00' or '2026-10-01T12:30:00Z'", option="where") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_zone(time_zone))
    return t


def _zone(name: str):
    if name.upper() in ("UTC", "Z", "GMT"):
        return _dt.timezone.utc
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        m = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?", name)
        if m:
            delta = _dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0))
            return _dt.timezone(delta if m.group(1) == "+" else -delta)
        raise ConfigError(f"unknown time zone {name!r}", option="where") from None


class _Tokens:
    def __init__(self, text: str):
        self.text = text
        self.items = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ConfigError(f"where: cannot read {text[pos:pos + 20].strip()!r} at "
                                  f"character {pos}", option="where")
            kind = m.lastgroup
            if kind is None:     # every alternative of _TOKEN is a named group
                raise ConfigError(f"where: cannot read character {pos}", option="where")
            self.items.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0

    def peek(self, n: int = 0):
        j = self.i + n
        return self.items[j] if j < len(self.items) else (None, None, len(self.text))

    def next(self):
        t = self.peek()
        self.i += 1
        return t

    def word(self, *words) -> bool:
        kind, value, _ = self.peek()
        if kind == "id" and value.upper() in words:
            self.i += 1
            return True
        return False

    def expect(self, value: str):
        kind, got, pos = self.next()
        if got is None or got.upper() != value.upper():
            raise ConfigError(f"where: expected {value!r} at character {pos}, got "
                              f"{got if got is not None else 'the end'!r}", option="where")


def parse_where(where, *, time_zone: str = "UTC") -> RowFilter:
    """``where`` in any accepted form (module docstring) -> a :class:`RowFilter`."""
    if where is None:
        return RowFilter()
    if isinstance(where, RowFilter):
        return where
    if isinstance(where, str):
        return _parse_sql(where, time_zone)
    out = []
    for item in where:
        if isinstance(item, Predicate):
            out.append(item)
        elif isinstance(item, (tuple, list)) and len(item) == 3:
            out.append(_tuple(item, time_zone))
        else:
            p = predicate_of_spark(item)
            if p is None:
                raise ConfigError(f"where: {item!r} cannot be pushed down (only the columns "
                                  f"{', '.join(COLUMNS)}, non-null literals)", option="where")
            out.append(p)
    return RowFilter(tuple(dict.fromkeys(out)))


def _tuple(item, time_zone: str) -> Predicate:
    column, op, value = item
    col = _LOWER.get(str(column).lower())
    if col is None:
        raise ConfigError(f"where: no pushdown on column {column!r} (only {', '.join(COLUMNS)})",
                          option="where")
    op = {"==": "=", "IN": "in"}.get(str(op).upper(), str(op).lower())
    if op not in ("=", "<", "<=", ">", ">=", "in"):
        raise ConfigError(f"where: operator {item[1]!r} of {item!r} is not one of = < <= > >= in",
                          option="where")
    values = value if op == "in" else [value]
    if op == "in" and not isinstance(value, (list, tuple, set, frozenset)):
        raise ConfigError(f"where: {item!r}: 'in' takes a list of values", option="where")
    got = [_value(col, v, time_zone, str(item)) for v in values]
    return Predicate(col, op, tuple(sorted(set(got))) if op == "in" else got[0])


def _value(column: str, v, time_zone: str, where: str):
    if COLUMNS[column] == "timestamp" and isinstance(v, str):
        v = parse_time(v, time_zone)
    elif COLUMNS[column] == "timestamp" and isinstance(v, _dt.datetime) and v.tzinfo is None:
        v = v.replace(tzinfo=_zone(time_zone))
    got = value_of(column, v)
    if got is None:
        kind = {"timestamp": "a time", "int": "an integer", "string": "a string"}[COLUMNS[column]]
        raise ConfigError(f"where: {where}: {column} compares with {kind}, got {v!r}", option="where")
    return got


def _parse_sql(text: str, time_zone: str) -> RowFilter:
    toks = _Tokens(text)
    out = []
    if toks.peek()[0] is None:
        return RowFilter()
    while True:
        out.extend(_clause(toks, time_zone))
        if toks.peek()[0] is None:
            break
        if not toks.word("AND"):
            kind, value, pos = toks.peek()
            hint = " (OR is never pushed down: estimate each side on its own)" \
                if kind == "id" and value.upper() == "OR" else ""
            raise ConfigError(f"where: expected AND at character {pos}, got {value!r}{hint}",
                              option="where")
    return RowFilter(tuple(dict.fromkeys(out)))


def _literal(toks: _Tokens, column: str, time_zone: str, clause: str):
    kind, value, pos = toks.next()
    if kind == "id" and value.upper() == "TIMESTAMP" and toks.peek()[0] == "str":
        kind, value, pos = toks.next()
    if kind == "str":
        s = value[1:-1].replace("''", "'")
        if COLUMNS[column] == "timestamp":
            return micros(parse_time(s, time_zone))
        if COLUMNS[column] == "string":
            return s
        raise ConfigError(f"where: {clause}: {column} compares with an integer, got {value}",
                          option="where")
    if kind == "num":
        if COLUMNS[column] == "int":
            return int(value)
        raise ConfigError(f"where: {clause}: {column} compares with "
                          f"{'a quoted time' if column == 'timestamp' else 'a quoted string'}, "
                          f"got {value}", option="where")
    raise ConfigError(f"where: {clause}: expected a literal at character {pos}, got "
                      f"{value if value is not None else 'the end'!r}", option="where")


def _clause(toks: _Tokens, time_zone: str) -> list[Predicate]:
    negated = False
    while toks.word("NOT"):
        negated = not negated
    if toks.peek()[1] == "(":
        # a parenthesised conjunction: NOT (a AND b) is an OR, which is never pushed down
        _, _, pos = toks.next()
        inner = []
        while True:
            inner.extend(_clause(toks, time_zone))
            if not toks.word("AND"):
                break
        toks.expect(")")
        if negated and len(inner) > 1:
            raise ConfigError(f"where: NOT over several clauses (at character {pos}) is an OR, "
                              f"which is never pushed down", option="where")
        return [Predicate(p.column, p.op, p.value, p.negated != negated) for p in inner]
    kind, name, pos = toks.next()
    if kind != "id":
        raise ConfigError(f"where: expected a column at character {pos}, got "
                          f"{name if name is not None else 'the end'!r}", option="where")
    column = _LOWER.get(name.strip("`").lower())
    if column is None:
        raise ConfigError(f"where: no pushdown on column {name!r} (only {', '.join(COLUMNS)})",
                          option="where")
    clause = f"the clause on {column} at character {pos}"
    if toks.word("IS"):
        is_not = toks.word("NOT")
        toks.expect("NULL")
        return [Predicate(column, "true" if is_not else "false", None, negated)]
    if toks.word("NOT"):
        negated = not negated
        if not (toks.peek()[1] or "").upper() in ("IN", "BETWEEN", "LIKE"):
            raise ConfigError(f"where: {clause}: NOT must be followed by IN, BETWEEN or LIKE",
                              option="where")
    if toks.word("IN"):
        toks.expect("(")
        values = [_literal(toks, column, time_zone, clause)]
        while toks.peek()[1] == ",":
            toks.next()
            values.append(_literal(toks, column, time_zone, clause))
        toks.expect(")")
        return [Predicate(column, "in", tuple(sorted(set(values))), negated)]
    if toks.word("BETWEEN"):
        a = _literal(toks, column, time_zone, clause)
        toks.expect("AND")
        b = _literal(toks, column, time_zone, clause)
        if negated:
            raise ConfigError(f"where: {clause}: NOT BETWEEN is an OR, which is never pushed down",
                              option="where")
        return [Predicate(column, ">=", a), Predicate(column, "<=", b)]
    if toks.word("LIKE"):
        pattern = _literal(toks, "topic", time_zone, clause) if column == "topic" else None
        if pattern is None:
            raise ConfigError(f"where: {clause}: LIKE applies to topic only", option="where")
        return [_like(column, pattern, negated, clause)]
    kind, op, opos = toks.next()
    if op not in _OPS:
        raise ConfigError(f"where: {clause}: expected a comparison at character {opos}, got "
                          f"{op if op is not None else 'the end'!r}", option="where")
    value = _literal(toks, column, time_zone, clause)
    op = _OPS[op]
    if op == "<>":
        return [Predicate(column, "=", value, not negated)]
    if column == "topic" and op != "=":
        raise ConfigError(f"where: {clause}: topic compares with =, <>, IN or LIKE only",
                          option="where")
    return [Predicate(column, op, value, negated)]


def _like(column: str, pattern: str, negated: bool, clause: str) -> Predicate:
    body = pattern.strip("%")
    if "%" in body or "_" in body or "\\" in body:
        raise ConfigError(f"where: {clause}: only 'abc%', '%abc' and '%abc%' patterns are pushed "
                          f"down", option="where")
    if pattern.startswith("%") and pattern.endswith("%") and len(pattern) > 1:
        op = "contains"
    elif pattern.endswith("%"):
        op = "startswith"
    elif pattern.startswith("%"):
        op = "endswith"
    else:
        return Predicate(column, "=", pattern, negated)
    return Predicate(column, op, body, negated)
