"""Spark's comparison of a column with a filter value, decided once in the column's own
type: the file reader's row filter (:func:`spark_dask.delta.files.row_filter`) and its
file skipping (:func:`spark_dask.delta.prune.keep`) both use the :class:`Match` made here,
so they cannot disagree. Shipped by value to the Dask workers.

Spark's rules with ANSI mode off (``spark.sql.ansi.enabled=false``, Spark 3.5's default;
each checked against Spark 3.5 by tests/spark/test_delta_filters.py):

- A value's type as a literal: ``int`` INT or BIGINT, ``float`` DOUBLE, ``Decimal``
  DECIMAL(p, s), ``str`` STRING, ``date`` DATE, ``datetime`` TIMESTAMP (one without a
  zone in the session time zone; TIMESTAMP_NTZ on a TIMESTAMP_NTZ column), ``bytes``
  BINARY, ``bool`` BOOLEAN. A string beside another type is cast to the column's type
  (beside a DECIMAL to DOUBLE), as Spark's ``TypeCoercion`` does.
- Numbers compare in the wider type (byte < short < int < long < float < double; a
  DECIMAL beside an integer exactly, beside a float as DOUBLE): an INT column is widened
  to DOUBLE for 2.5, so ``x < 2.5`` holds for 2 and ``x = 2.5`` for nothing; a FLOAT
  column's literal 16777217 is the float 16777216.
- A DATE beside a TIMESTAMP is its midnight in the session time zone (a local time in a
  daylight-saving gap moves forward, as ``java.time`` moves it).
- NaN is above every number and equal to itself; -0.0 equals 0.0.
- Three-valued logic: a null matches no comparison, ``in`` or ``not in``; a null in an
  ``in`` list matches nothing, and nothing is ``not in`` a list that holds a null.
- An ``in`` list compares in the wider type of all its values (1 and 2.5: DOUBLE); with
  a string in it, beside a column of another type, as strings (done here for integer
  and date columns, whose strings are plain; refused for the others).

With ANSI mode on (Spark 4.0's default, Databricks 17.3 LTS; checked against Spark 4.0
by the same test), Spark's ``AnsiTypeCoercion`` (sql/catalyst/.../analysis/AnsiTypeCoercion.scala,
``findWiderTypeForTwo``; its string rule ``findWiderTypeForString``) and ANSI casts decide
instead (:func:`ansi_literals`):

- A comparison or an ``in`` list is done in the wider type of the column and every
  value, taken in order: integers and floats in DOUBLE where one is a FLOAT (an INT
  literal beside a FLOAT column: DOUBLE, not FLOAT); a string beside an integer in
  BIGINT, beside a FLOAT, DOUBLE or DECIMAL in DOUBLE, beside a DATE, TIMESTAMP,
  BOOLEAN or BINARY in that type. So an ``in`` list holding a string is no longer
  compared as strings (``i IN ('02')`` holds for 2), and a FLOAT column beside ``'0.1'``
  compares as DOUBLE (0.1f is not 0.1).
- A string that is no value of that type (``'1.5'`` as BIGINT, ``'abc'`` as DOUBLE) makes
  Spark fail the query at run time (``CAST_INVALID_INPUT``, Cast.scala and
  UTF8String.toLongExact): the file reader refuses it before reading.

Spark 3.5 and 4.0 give the same answers with the same ANSI setting (the differences
are the setting's default): :func:`spark_dask.delta.read.session_ansi` reads it from the
session, and without one a filter whose answer depends on it is refused
(:func:`term`). A value's type as a literal: :mod:`.literals`; the ANSI rules:
:mod:`.ansi`.

Widening is monotone, so the column values a term holds for are points and ranges of
the column's own type (:func:`term`): the column is never cast.
"""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import date, datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from numbers import Integral

from spark_dask.delta import ansi as ansis
from spark_dask.delta import schema as schemas
from spark_dask.delta.literals import (
    DECIMAL,
    INTEGRAL,
    NUMBERS,
    WIDE,
    float32,
    float32_bounds,
    literal,
    local_micros,
    refusal_message,
    shown_value,
)
from spark_dask.errors import PlanError

SIMPLE = {"float", "double", "string", "binary", "boolean", "date", "timestamp", "timestamp_ntz"}
NAN = "NaN"  # the key of every NaN in a set of points


@dataclasses.dataclass(frozen=True)
class Match:
    """The values of a column that a filter term holds for: ``points`` and ``ranges``
    (``(low, low_inclusive, high, high_inclusive)``, None unbounded; unbounded above
    includes NaN), or with ``negate`` every non-null value outside them. Values are of
    the column's type (:func:`column_value`)."""

    points: tuple = ()
    ranges: tuple = ()
    negate: bool = False
    keys: frozenset = dataclasses.field(init=False, repr=False, compare=False)  # the points as set members

    def __post_init__(self):
        object.__setattr__(self, "keys", frozenset(key(p) for p in self.points))


EVERYTHING = Match(ranges=((None, False, None, False),))


def key(value):
    """A value as a set member: every NaN one key, -0.0 the same as 0.0.

    >>> key(float("nan")), key(-0.0) == key(0.0)
    ('NaN', True)
    """
    return NAN if isinstance(value, float) and math.isnan(value) else value


def order(a, b) -> int:
    """Spark's order of two values of one type: -1, 0 or 1; NaN above every number and
    equal to itself, -0.0 equal to 0.0.

    >>> order(float("nan"), float("inf")), order(float("nan"), float("nan")), order(-0.0, 0.0), order(1, 2)
    (1, 0, 0, -1)
    """
    a_nan, b_nan = key(a) is NAN, key(b) is NAN
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    return (a > b) - (a < b)


def holds(match: Match, value) -> bool:
    """Whether the term holds for one column value (None: a null, which matches nothing).

    >>> holds(term({"name": "x", "type": "integer"}, "<", 2.5, "UTC"), 2)
    True
    >>> holds(term({"name": "x", "type": "integer"}, "not in", [1], "UTC"), None)
    False
    >>> holds(term({"name": "x", "type": "double"}, ">", 100, "UTC"), float("nan"))
    True
    """
    if value is None:
        return False
    inside = key(value) in match.keys or any(_in_range(value, r) for r in match.ranges)
    return inside != match.negate


def _in_range(value, bounds) -> bool:
    low, low_in, high, high_in = bounds
    if low is not None and order(value, low) < int(not low_in):
        return False
    return high is None or order(value, high) <= -int(not high_in)


def overlaps(match: Match, low, high, floating: bool) -> bool:
    """Whether a file whose non-null values lie between ``low`` and ``high`` (its
    statistics) may hold a value the term holds for. On a float column NaN may be
    outside the statistics (writers differ), so a term that holds for NaN keeps it.

    >>> overlaps(term({"name": "x", "type": "long"}, ">", 9, "UTC"), 5, 9, False)
    False
    >>> overlaps(term({"name": "x", "type": "double"}, ">", 9, "UTC"), 5.0, 9.0, True)
    True
    """
    if match.negate:
        return floating or order(low, high) != 0 or not holds(Match(match.points, match.ranges), low)
    if floating and holds_nan(match):
        return True
    if any(order(low, p) <= 0 <= order(high, p) for p in match.points):
        return True
    for r_low, low_in, r_high, high_in in match.ranges:
        below = r_low is None or order(r_low, high) < int(low_in)
        above = r_high is None or order(low, r_high) < int(high_in)
        if below and above:
            return True
    return False


def holds_nan(match: Match) -> bool:
    """Whether the term holds for NaN."""
    return holds(match, float("nan"))


# ---------------------------------------------------------------------- terms
def term(field: dict, op: str, value, tz: str, ansi: bool | None = False) -> Match:
    """A filter term ``(column, op, value)`` as the :class:`Match` of the column's values
    it holds for, as Spark compares them; ``op`` is one of ``== != < <= > >= in
    not in``. ``ansi``: Spark's ANSI mode (:func:`session_ansi`), off by default; None
    when no session says (then a term whose answer depends on it is refused). Refused
    (:class:`~spark_dask.PlanError`) where the file reader cannot give Spark's answer,
    and where Spark's ANSI mode fails the query (:func:`ansi_literals`).

    >>> term({"name": "x", "type": "integer"}, "==", 2.5, "UTC")
    Match(points=(), ranges=(), negate=False)
    >>> term({"name": "x", "type": "integer"}, "<", 2.5, "UTC").ranges
    ((None, False, 3, False),)
    >>> term({"name": "k", "type": "long"}, "not in", [1, None], "UTC")
    Match(points=(), ranges=(), negate=False)
    >>> f = {"name": "f", "type": "float"}
    >>> term(f, "==", 16777217, "UTC", ansi=False).points, term(f, "==", 16777217, "UTC", ansi=True).points
    ((16777216.0,), ())
    >>> term({"name": "i", "type": "integer"}, "in", ["02"], "UTC", ansi=True).points  # BIGINT, not strings
    (2,)
    >>> term(f, "==", 16777217, "UTC", ansi=None)
    Traceback (most recent call last):
    ...
    spark_dask.errors.PlanError: spark-dask: filter value 16777217 of column 'f' (float) compares differently with Spark's ANSI mode on (Spark 4's default) and off (Spark 3.5's), and no Spark session says which: pass spark= (the session) or use via="spark"
    """
    if ansi is None:
        return _either_mode(field, op, value, tz)
    kind = column_kind(field)
    column = field["name"]
    if op in ("in", "not in"):
        values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else None
        if values is None:
            raise PlanError(f"spark-dask: filter {op!r} on {column!r} needs a list of values, got {value!r}")
        if ansi:
            literals = ansis.ansi_literals(kind, values, tz, column)
        elif kind != "string" and any(isinstance(v, str) for v in values):
            return _string_list(kind, op, values, column)
        else:
            literals = _widened([literal(v, kind, tz, column) for v in values], tz)
        if op == "not in" and any(t == "null" for t, _ in literals):
            return Match()  # NOT IN (.., NULL) is never true
        matches = [_compare(kind, "==", t, v, tz, column) for t, v in literals if t != "null"]
        points = tuple(p for m in matches for p in m.points)
        ranges = tuple(r for m in matches for r in m.ranges)
        return Match(points, ranges, negate=op == "not in")
    [(kind_of_value, v)] = (
        ansis.ansi_literals(kind, [value], tz, column) if ansi else [literal(value, kind, tz, column)]
    )
    if kind_of_value == "null":
        return Match()  # a comparison with NULL is never true
    return _compare(kind, op, kind_of_value, v, tz, column)


def _either_mode(field: dict, op: str, value, tz: str) -> Match:
    """:func:`term` where no session says whether Spark's ANSI mode is on: the answer
    both modes give; refused where they differ."""
    found = []
    for ansi in (False, True):
        try:
            found.append(term(field, op, value, tz, ansi))
        except PlanError as e:
            found.append(e)
    off, on = found
    if isinstance(off, Match) and isinstance(on, Match) and _same(off, on):
        return off
    if isinstance(off, PlanError) and isinstance(on, PlanError):
        raise off
    raise PlanError(
        f"spark-dask: filter value {value!r} of column {field['name']!r} ({column_kind(field)}) compares differently "
        "with Spark's ANSI mode on (Spark 4's default) and off (Spark 3.5's), and no Spark session says which: pass "
        'spark= (the session) or use via="spark"'
    )


def _same(a: Match, b: Match) -> bool:
    """Whether two Matches hold for the same values (the same points and ranges, in
    any order)."""
    ranges = lambda m: {tuple(key(x) for x in r) for r in m.ranges}  # noqa: E731
    return a.negate == b.negate and a.keys == b.keys and ranges(a) == ranges(b)


CANONICAL_INT = re.compile(r"^(0|-?[1-9][0-9]*)$")


def _string_list(kind: str, op: str, values: list, column: str) -> Match:
    """An ``in`` list holding a string beside a column of another type: Spark compares
    every value and the column as strings (InConversion's common type), so a value
    matches the column values whose string is the value's string. Done for the types
    whose string form is plain (integers, dates); refused for the others.

    >>> _string_list("integer", "in", ["2", "02", 3, 2.0, None], "k")
    Match(points=(2, 3), ranges=(), negate=False)
    >>> _string_list("date", "not in", ["2024-03-10", date(2024, 3, 11)], "d").points
    (datetime.date(2024, 3, 10), datetime.date(2024, 3, 11))
    """
    if kind not in INTEGRAL and kind != "date":
        raise PlanError(
            f"spark-dask: filter {op!r} on {column!r} ({kind}) has a string in its list, and Spark compares "
            'such a list as strings; pass values of the column\'s type, or use via="spark"'
        )
    if op == "not in" and any(v is None for v in values):
        return Match()  # NOT IN (.., NULL) is never true
    texts = {_spark_string(v) for v in values if v is not None}
    if kind in INTEGRAL:
        bits = INTEGRAL[kind]
        found = [int(t) for t in texts if t and CANONICAL_INT.match(t) and -(2**bits) <= int(t) < 2**bits]
    else:
        found = [d for t in texts if t and (d := _iso_date(t)) is not None]
    return Match(tuple(sorted(set(found))), negate=op == "not in")


def _spark_string(value) -> str | None:
    """A value's string as Spark casts it, for the types that can equal an integer's
    or a date's string (None for the others, which equal none of them)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (Integral, Decimal)):
        return str(value)
    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    return None


def _iso_date(text: str):
    m = re.match(r"^(\d{4})-(\d{2})-(\d{2})$", text)
    try:
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None
    except ValueError:
        return None


def column_kind(field: dict) -> str:
    """The column's type as this module names it: a Delta primitive type name
    (``decimal(p,s)`` as it is); refused for nested and other types."""
    kind = field.get("type")
    if isinstance(kind, str) and (kind in INTEGRAL or kind in SIMPLE or DECIMAL.match(kind)):
        return kind
    shown = kind if isinstance(kind, str) else (kind or {}).get("type", "?")
    raise PlanError(
        f"spark-dask: filters on column {field['name']!r} of type {shown} are not supported by the file reader; "
        'use via="spark"'
    )


def _widened(literals: list[tuple], tz: str) -> list[tuple]:
    """An ``in`` list's values in the wider type of them all, as Spark's InConversion."""
    kinds = {t for t, _ in literals} - {"null"}
    if len(kinds) < 2:
        return literals
    if kinds <= NUMBERS:
        wider = "double" if kinds & {"double", "float"} else "decimal"
        convert = float if wider == "double" else Decimal
        return [(t, v) if t == "null" else (wider, convert(v)) for t, v in literals]
    for other in ("timestamp", "timestamp_ntz"):
        if kinds == {"date", other}:
            zone = tz if other == "timestamp" else None
            return [(other, local_micros(v, zone)) if t == "date" else (t, v) for t, v in literals]
    raise PlanError(f"spark-dask: an in list mixes values of types {', '.join(sorted(kinds))}: {literals!r}")


# ---------------------------------------------------------------------- comparisons
def _compare(kind: str, op: str, literal_kind: str, value, tz: str, column: str) -> Match:
    """The Match of ``column op value`` for a typed literal."""
    low, high = _bounds(kind, literal_kind, value, tz, column)
    if op in ("==", "!="):
        if low is None or high is None or order(low, high) > 0:
            equal = Match()
        else:
            equal = Match(points=(low,)) if order(low, high) == 0 else Match(ranges=((low, True, high, True),))
        return Match(equal.points, equal.ranges, negate=True) if op == "!=" else equal
    if op == "<":
        return EVERYTHING if low is None else Match(ranges=((None, False, low, False),))
    if op == "<=":
        return Match() if high is None else Match(ranges=((None, False, high, True),))
    if op == ">":
        return EVERYTHING if high is None else Match(ranges=((high, False, None, False),))
    return Match() if low is None else Match(ranges=((low, True, None, False),))  # >=


def _bounds(kind: str, literal_kind: str, value, tz: str, column: str) -> tuple:
    """``(low, high)``: the least column value that Spark's widening puts at or above
    ``value``, and the greatest at or below it (None where there is none)."""
    if kind in INTEGRAL:
        bits = INTEGRAL[kind]
        widen = {"int": int, "decimal": Decimal, "double": float}.get(literal_kind)
        if widen is not None:
            return _search(-(2**bits), 2**bits - 1, widen, value)
    elif kind in ("float", "double"):
        if literal_kind in NUMBERS:
            if literal_kind == "float" or (kind == "float" and literal_kind == "int"):
                v = float32(value)  # the literal is cast to FLOAT
                return v, v
            v = float(value)
            return float32_bounds(v) if kind == "float" else (v, v)
    elif DECIMAL.match(kind):
        if literal_kind in NUMBERS:
            return _decimal_bounds(kind, literal_kind, value, column)
    elif kind == "date" and literal_kind == "timestamp":
        found = _search(1, date.max.toordinal(), lambda d: local_micros(date.fromordinal(d), tz), value)
        return tuple(None if d is None else date.fromordinal(d) for d in found)
    elif kind in ("timestamp", "timestamp_ntz") and literal_kind == "date":
        v = local_micros(value, tz if kind == "timestamp" else None)
        return v, v
    elif literal_kind == kind or (kind == "date" and literal_kind == "date"):
        return value, value
    why = " (Spark casts the column to TIMESTAMP)" if kind == "timestamp_ntz" and literal_kind == "timestamp" else ""
    shown = shown_value(literal_kind, value)
    raise PlanError(refusal_message(column, shown, kind, why))


def _decimal_bounds(kind: str, literal_kind: str, value, column: str) -> tuple:
    precision, scale = (int(g) for g in DECIMAL.match(kind).groups())
    top = 10**precision - 1
    if literal_kind == "double":
        found = _search(-top, top, lambda u: float(Decimal(u).scaleb(-scale, WIDE)), float(value))
    else:
        exact = Decimal(value)
        digits = max(0, -exact.as_tuple().exponent)
        if digits > scale and precision - scale + digits > 38:
            shown, why = value, " (Spark's common DECIMAL type would pass 38 digits)"
            raise PlanError(refusal_message(column, shown, kind, why))
        scaled = exact.scaleb(scale, WIDE)
        low = int(scaled.to_integral_value(rounding=ROUND_CEILING))
        high = int(scaled.to_integral_value(rounding=ROUND_FLOOR))
        found = (low if low <= top else None, high if high >= -top else None)
        found = tuple(None if u is None else max(-top, min(top, u)) for u in found)
    return tuple(None if u is None else Decimal(u).scaleb(-scale, WIDE) for u in found)


def _search(lowest: int, highest: int, widen, value) -> tuple:
    """For ``widen`` non-decreasing over the integers ``lowest..highest``: the least
    ``i`` with ``widen(i) >= value`` and the greatest with ``widen(i) <= value`` in
    Spark's order (None where there is none).

    >>> _search(-128, 127, float, 2.5), _search(-128, 127, float, float("nan")), _search(0, 9, int, 20)
    ((3, 2), (None, 127), (None, 9))
    >>> _search(-(2**63), 2**63 - 1, float, 2.0**53)  # every long that rounds to 2**53
    (9007199254740992, 9007199254740993)
    """
    a, b = lowest, highest + 1
    while a < b:
        m = (a + b) // 2
        if order(widen(m), value) >= 0:
            b = m
        else:
            a = m + 1
    low = a if a <= highest else None
    a, b = lowest - 1, highest
    while a < b:
        m = (a + b + 1) // 2
        if order(widen(m), value) <= 0:
            a = m
        else:
            b = m - 1
    return low, (a if a >= lowest else None)


def spark_value(value, tz: str, ntz: bool = False):
    """A filter value as handed to Spark's Column API (``via="spark"``): a datetime
    without a zone made aware in the session time zone ``tz`` (py4j's converter would
    read it in this process's zone), or beside a TIMESTAMP_NTZ column (``ntz``) a
    TIMESTAMP_NTZ, as the file reader takes it (:func:`literal`; Spark 4.0 compares an
    NTZ column with a TIMESTAMP as NTZ values, so a local time in a daylight-saving gap
    moved forward no longer equals itself); a date before the year 1000 as a DATE column
    (py4j's converter formats it with ``strftime("%Y-%m-%d")``, whose year has fewer than
    four digits there, and Java's ``Date.valueOf`` refuses it: IllegalArgumentException);
    anything else as it is.

    >>> spark_value(datetime(2024, 1, 1, 10), "America/New_York").isoformat(), spark_value(1, "UTC")
    ('2024-01-01T10:00:00-05:00', 1)
    """
    if isinstance(value, datetime) and value.tzinfo is None and ntz:
        from pyspark.sql import functions

        return functions.lit(value.isoformat(sep=" ")).cast("timestamp_ntz")
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=schemas.zone(tz))
    if isinstance(value, date) and not isinstance(value, datetime) and value.year < 1000:
        from pyspark.sql import functions

        return functions.lit(value.isoformat()).cast("date")
    return value


def column_value(value, kind: str):
    """A value of the column (a typed partition value or statistic) as :class:`Match`
    holds them: timestamps as microseconds, FLOATs rounded to FLOAT.

    >>> from datetime import timezone
    >>> column_value(datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc), "timestamp"), column_value(0.1, "float")
    (1000000, 0.10000000149011612)
    """
    if value is None:
        return None
    if kind == "timestamp":
        return local_micros(value, "UTC")
    if kind == "timestamp_ntz":
        return local_micros(value, None)
    if kind == "float":
        return float32(float(value))
    if kind == "double":
        return float(value)
    if DECIMAL.match(kind):
        return Decimal(value)
    return value


__all__ = [
    "EVERYTHING",
    "Match",
    "column_kind",
    "column_value",
    "holds",
    "holds_nan",
    "key",
    "literal",
    "local_micros",
    "order",
    "overlaps",
    "refusal_message",
    "spark_value",
    "term",
]
