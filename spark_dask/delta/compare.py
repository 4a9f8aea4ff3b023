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
are the setting's default): :func:`session_ansi` reads it from the session, and
without one a filter whose answer depends on it is refused (:func:`term`).

Widening is monotone, so the column values a term holds for are points and ranges of
the column's own type (:func:`term`): the column is never cast.
"""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import date, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from numbers import Integral, Real

from spark_dask.delta import schema as schemas
from spark_dask.errors import PlanError

INTEGRAL = {"byte": 7, "short": 15, "integer": 31, "long": 63}
DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
SIMPLE = {"float", "double", "string", "binary", "boolean", "date", "timestamp", "timestamp_ntz"}
WIDE = Context(prec=100)  # exact for any DECIMAL(38) and the scaling of a filter value
UNIX = datetime(1970, 1, 1)
NAN = "NaN"  # the key of every NaN in a set of points
TRUE_WORDS = {"t": True, "true": True, "y": True, "yes": True, "1": True,
              "f": False, "false": False, "n": False, "no": False, "0": False}  # fmt: skip
NUMBERS = {"int", "float", "double", "decimal"}


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
            literals = ansi_literals(kind, values, tz, column)
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
    [(kind_of_value, v)] = ansi_literals(kind, [value], tz, column) if ansi else [literal(value, kind, tz, column)]
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


def refusal_message(column: str, value, kind: str, why: str = "") -> str:
    """Why the file reader refuses a filter value, and what works instead."""
    return (
        f"spark-dask: filter value {value!r} of column {column!r} ({kind}) is not compared by the file reader"
        f'{why}; use via="spark" (or a value of the column\'s type)'
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


# ---------------------------------------------------------------------- Spark's ANSI mode
def ansi_mode(version, setting: str | None) -> bool | None:
    """Whether Spark compares with its ANSI rules: the session's ``spark.sql.ansi.enabled``
    (``setting``) where it can be read, else its line's default (``version``, ``(major,
    minor)``: on from Spark 4.0, off before); None with neither (no Spark to ask).

    >>> ansi_mode((4, 0), None), ansi_mode((3, 5), None), ansi_mode((4, 0), "false"), ansi_mode((3, 5), "TRUE")
    (True, False, False, True)
    >>> ansi_mode(None, None) is None
    True
    """
    if setting is not None and str(setting).strip().lower() in ("true", "false"):
        return str(setting).strip().lower() == "true"
    if version is None:
        return None
    return tuple(version[:2]) >= (4, 0)


def session_ansi(spark) -> bool | None:
    """:func:`ansi_mode` of ``spark`` (the active session when None); None without a
    session. On the driver (it asks the session)."""
    from spark_dask.spark.compat import spark_version
    from spark_dask.spark.conf import conf
    from spark_dask.spark.session import active_session

    try:
        spark = active_session(spark)
    except (ImportError, PlanError):
        return None
    try:
        version = spark_version(spark)
    except Exception:  # noqa: BLE001 - a version that cannot be read: the conf may still say
        version = None
    return ansi_mode(version, conf(spark, "spark.sql.ansi.enabled", None, sql=True))


NUMERIC_ORDER = ("byte", "short", "integer", "long", "float", "double")  # UpCastRule.numericPrecedence
INTEGRAL_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}  # DecimalType.forType
DATETIMES = ("date", "timestamp_ntz", "timestamp")  # findWiderDateTimeType: the later wins
SPARK_NAMES = {"byte": "TINYINT", "short": "SMALLINT", "integer": "INT", "long": "BIGINT", "float": "FLOAT",
               "double": "DOUBLE", "date": "DATE", "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ",
               "boolean": "BOOLEAN", "binary": "BINARY", "string": "STRING"}  # fmt: skip
ASCII_BLANKS = "".join(map(chr, range(0x21)))  # Java's String.trim
SPARK_BLANKS = ASCII_BLANKS + "\x7f"  # UTF8String's isWhitespaceOrISOControl, byte by byte
ZONE_WITHOUT_SECONDS = re.compile(r"^\s*[+-]?\d+-\d+-\d+[T ]\d+:\d+\s*[^\s:.\d]")
LONG_TEXT = re.compile(r"[+-]?[0-9]+")  # UTF8String.toLongExact
# Double.parseDouble's decimal form (its trailing type letter too), NaN, Infinity
DOUBLE_TEXT = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
DOUBLE_WORDS = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
                "-inf": -math.inf, "-infinity": -math.inf, "nan": math.nan}  # Cast.processFloatingPointSpecialLiterals  # fmt: skip


def wider_type(a: str, b: str) -> str | None:
    """The type Spark's ANSI mode compares two types in (``AnsiTypeCoercion.findWiderTypeForTwo``
    for the types of a column and a filter value: ``findTightestCommonType``, then the
    wider DECIMAL, then ``AnsiStringPromotionTypeCoercion.findWiderTypeForString``); None
    where there is none (Spark refuses the query). A DECIMAL's precision is not
    bounded to 38 here.

    >>> wider_type("float", "integer"), wider_type("integer", "string"), wider_type("string", "decimal(2,1)")
    ('double', 'long', 'double')
    >>> wider_type("long", "decimal(2,1)"), wider_type("decimal(12,2)", "integer"), wider_type("date", "timestamp")
    ('decimal(21,1)', 'decimal(12,2)', 'timestamp')
    >>> wider_type("integer", "boolean"), wider_type("date", "string"), wider_type("null", "string")
    (None, 'date', 'string')
    """
    if a == b or b == "null":
        return a
    if a == "null":
        return b
    if a in NUMERIC_ORDER and b in NUMERIC_ORDER:
        wider = NUMERIC_ORDER[max(NUMERIC_ORDER.index(a), NUMERIC_ORDER.index(b))]
        return "double" if wider == "float" else wider  # an integer beside a FLOAT: DOUBLE
    if DECIMAL.match(a) or DECIMAL.match(b):
        other, decimal = (a, b) if DECIMAL.match(b) else (b, a)
        precision, scale = (int(g) for g in DECIMAL.match(decimal).groups())
        if other in ("float", "double", "string"):
            return "double"
        if other in INTEGRAL_DIGITS and precision - scale >= INTEGRAL_DIGITS[other]:
            return decimal  # the DECIMAL holds every value of the integer type
        if other in INTEGRAL_DIGITS:
            other = f"decimal({INTEGRAL_DIGITS[other]},0)"
        if not DECIMAL.match(other):
            return None
        p2, s2 = (int(g) for g in DECIMAL.match(other).groups())
        scale_ = max(scale, s2)
        return f"decimal({max(precision - scale, p2 - s2) + scale_},{scale_})"
    if a in DATETIMES and b in DATETIMES:
        return max(a, b, key=DATETIMES.index)
    if "string" in (a, b):
        other = b if a == "string" else a
        if other in INTEGRAL_DIGITS:
            return "long"
        if other in ("float", "double"):
            return "double"
        if other in (*DATETIMES, "boolean", "binary"):
            return other
    return None


def _spark_type(literal_kind: str, value) -> str:
    """The Spark type of a typed filter value (:func:`literal`) as a Spark SQL literal of
    it has it: an integer INT, BIGINT or DECIMAL(n,0) by its size; a Decimal
    DECIMAL(precision, scale) as Spark's ``Decimal`` sets them.

    >>> _spark_type("int", 7), _spark_type("int", 2**40), _spark_type("decimal", Decimal("-0.01")), _spark_type("decimal", Decimal("1.5E+3"))
    ('integer', 'long', 'decimal(2,2)', 'decimal(4,0)')
    """
    if literal_kind == "int":
        if -(2**31) <= value < 2**31:
            return "integer"
        return "long" if -(2**63) <= value < 2**63 else f"decimal({len(str(abs(value)))},0)"
    if literal_kind == "decimal":
        digits, exponent = len(value.as_tuple().digits), value.as_tuple().exponent
        scale = max(0, -exponent)
        return f"decimal({max(digits + max(0, exponent), scale)},{scale})"
    return literal_kind


def ansi_literals(kind: str, values: list, tz: str, column: str) -> list[tuple]:
    """``(type, value)`` of each filter value (as :func:`literal` gives them) cast to the
    type Spark's ANSI mode compares the column of type ``kind`` and all of ``values`` in
    (:func:`wider_type`, folded in order as ``InConversion`` folds an ``in`` list): a
    string cast as Spark's ANSI cast does, or refused where that cast fails (Spark fails
    the query) or the file reader cannot tell.

    >>> ansi_literals("float", [16777217], "UTC", "f"), ansi_literals("integer", ["2", 2.5], "UTC", "i")
    ([('double', 16777217.0)], [('double', 2.0), ('double', 2.5)])
    >>> ansi_literals("date", ["2024-03-10 01:30:00", None], "UTC", "d")
    [('date', datetime.date(2024, 3, 10)), ('null', None)]
    >>> ansi_literals("integer", ["1.5"], "UTC", "i")
    Traceback (most recent call last):
    ...
    spark_dask.errors.PlanError: spark-dask: filter value '1.5' of column 'i' (integer) is not a BIGINT, and Spark refuses it too: its ANSI mode (spark.sql.ansi.enabled, on by default from Spark 4.0) fails the query with CAST_INVALID_INPUT; pass a value of the column's type
    """
    typed = [("string", v) if isinstance(v, str) else literal(v, kind, tz, column) for v in values]
    common = kind
    for literal_kind, value in typed:
        common = wider_type(common, _spark_type(literal_kind, value))
        if common is None:
            shown = values[0] if len(values) == 1 else values
            why = " (Spark's ANSI mode has no common type for them)"
            raise PlanError(refusal_message(column, shown, kind, why))
    return [_ansi_cast(t, v, common, kind, tz, column) for t, v in typed]


def _ansi_cast(literal_kind: str, value, common: str, kind: str, tz: str, column: str) -> tuple:
    """One typed filter value cast to ``common`` (:func:`ansi_literals`)."""
    if literal_kind == "null":
        return "null", None
    if literal_kind == "string":
        return _ansi_string(value, common, kind, tz, column)
    why = " (past every Spark number type)"
    if common in INTEGRAL:
        return "int", value
    if common in ("float", "double"):
        if literal_kind != "int" or abs(value) < 2**1024:
            return "double", float(value)
    elif DECIMAL.match(common):
        if int(DECIMAL.match(common).group(1)) <= 38:
            return "decimal", Decimal(value)
        why = " (Spark's common DECIMAL type would pass 38 digits)"
    elif common == "timestamp" and literal_kind in ("date", "timestamp_ntz"):
        local = value if literal_kind == "date" else UNIX + timedelta(microseconds=value)
        return "timestamp", local_micros(local, tz)
    elif common == "timestamp_ntz" and literal_kind == "date":
        return "timestamp_ntz", local_micros(value, None)
    else:
        return literal_kind, value
    shown = _shown(literal_kind, value)
    raise PlanError(refusal_message(column, shown, kind, why))


def _ansi_string(text: str, common: str, kind: str, tz: str, column: str) -> tuple:
    """A string filter value cast to ``common`` as Spark's ANSI cast does (Cast.scala;
    UTF8String.toLongExact; Double.parseDouble and its special words; the date and time
    forms of DateTimeUtils): refused where that cast fails (Spark fails the query:
    CAST_INVALID_INPUT), with :func:`refusal_message` where the file reader cannot tell.

    >>> _ansi_string(" +7 ", "long", "integer", "UTC", "i"), _ansi_string("1.5d", "double", "float", "UTC", "f")
    (('int', 7), ('double', 1.5))
    >>> _ansi_string("-Inf", "double", "double", "UTC", "d"), _ansi_string(" YES", "boolean", "boolean", "UTC", "b")
    (('double', -inf), ('boolean', True))
    """
    certain = True  # that Spark's cast fails
    if common == "string":
        return "string", text
    if common == "binary":
        return "binary", text.encode("utf-8")
    if common in INTEGRAL:
        digits = text.strip(SPARK_BLANKS)
        if LONG_TEXT.fullmatch(digits) and -(2**63) <= int(digits) < 2**63:
            return "int", int(digits)
    elif common in ("float", "double"):
        number = text.strip(ASCII_BLANKS)
        if DOUBLE_TEXT.fullmatch(number):
            return "double", float(number.rstrip("fFdD"))
        if number.lower() in DOUBLE_WORDS:
            return "double", DOUBLE_WORDS[number.lower()]
        certain = not re.match(r"[+-]?0[xX]", number)  # a hexadecimal float: Java's own form
    elif common == "boolean":
        word = text.strip(SPARK_BLANKS).lower()
        if word in TRUE_WORDS:
            return "boolean", TRUE_WORDS[word]
        certain = text.isascii()
    elif common in DATETIMES:
        try:
            if common == "date" and (day := schemas.parse_date(text)) is not None:
                return "date", day
            if ZONE_WITHOUT_SECONDS.match(text):
                pass  # Spark casts no time with a zone but without seconds (2024-03-10T01:30Z) to a timestamp
            elif common == "timestamp" and (time := schemas.parse_time(text, tz)) is not None:
                return "timestamp", local_micros(time, tz)
            elif common == "timestamp_ntz" and (time := schemas.parse_time(text, None)) is not None:
                return "timestamp_ntz", local_micros(time.replace(tzinfo=None), None)
            certain = not re.search(r"[0-9]", text)  # every date and time form Spark casts has digits
        except (ValueError, OverflowError):
            # a month, day, hour or minute out of range: no date or time for Spark either; a
            # year past 9999 is one for Spark (not for Python)
            certain = bool(re.match(r"\s*[0-9]{4}-", text))
    else:
        certain = False  # a DECIMAL: Spark's rounding of the string to its scale
    target = SPARK_NAMES.get(common, common.upper())
    if certain:  # Spark would fail the whole query at run time
        raise PlanError(
            f"spark-dask: filter value {text!r} of column {column!r} ({kind}) is not a {target}, and Spark refuses it "
            "too: its ANSI mode (spark.sql.ansi.enabled, on by default from Spark 4.0) fails the query with "
            "CAST_INVALID_INPUT; pass a value of the column's type"
        )
    shown, why = text, f" (Spark's ANSI mode casts it to {target})"
    raise PlanError(refusal_message(column, shown, kind, why))


# ---------------------------------------------------------------------- literals
def literal(value, kind: str, tz: str, column: str) -> tuple:
    """``(type, value)`` of a filter value as Spark types the literal beside a column of
    type ``kind``: ``null``, ``boolean``, ``int``, ``float`` (a FLOAT), ``double``,
    ``decimal``, ``string``, ``binary``, ``date`` (a date), ``timestamp`` (microseconds
    since the epoch) or ``timestamp_ntz`` (microseconds of the local time).

    >>> literal("2024-01-01 10:00", "timestamp", "America/New_York", "t")
    ('timestamp', 1704121200000000)
    >>> literal(2.5, "integer", "UTC", "x"), literal("7", "long", "UTC", "k")
    (('double', 2.5), ('int', 7))
    """
    if value is None:
        return "null", None
    if isinstance(value, str):
        return _string_literal(value, kind, tz, column)
    if isinstance(value, bool):
        return "boolean", value
    if isinstance(value, Integral):
        return "int", int(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            shown, why = value, " (not a finite DECIMAL)"
            raise PlanError(refusal_message(column, shown, kind, why))
        return "decimal", value
    if isinstance(value, Real):
        return "double", float(value)
    if isinstance(value, datetime):
        if value.tzinfo is None and kind == "timestamp_ntz":
            return "timestamp_ntz", local_micros(value, None)
        return "timestamp", local_micros(value, tz)
    if isinstance(value, date):
        return "date", value
    if isinstance(value, (bytes, bytearray)):
        return "binary", bytes(value)
    shown, why = value, f" (a {type(value).__name__})"
    raise PlanError(refusal_message(column, shown, kind, why))


def _string_literal(text: str, kind: str, tz: str, column: str) -> tuple:
    """A string beside a column of another type, cast to it as Spark casts it."""
    try:
        if kind == "string":
            return "string", text
        if kind in INTEGRAL:
            return "int", int(text.strip())
        if kind == "float":
            return "float", _float32(float(text))
        if kind == "double" or DECIMAL.match(kind):
            return "double", float(text)
        if kind == "date" and (day := schemas.parse_date(text)) is not None:
            return "date", day
        if kind == "timestamp" and (time := schemas.parse_time(text, tz)) is not None:
            return "timestamp", local_micros(time, tz)
        if kind == "timestamp_ntz" and (time := schemas.parse_time(text, None)) is not None:
            return "timestamp_ntz", local_micros(time.replace(tzinfo=None), None)
        if kind == "boolean" and text.strip().lower() in TRUE_WORDS:
            return "boolean", TRUE_WORDS[text.strip().lower()]
        if kind == "binary":
            return "binary", text.encode("utf-8")
    except (ValueError, OverflowError):
        pass
    raise PlanError(f"spark-dask: filter value {text!r} of column {column!r} is not a {kind}")


def local_micros(value, tz: str | None) -> int:
    """Microseconds since the epoch of a date or datetime: one without a zone is in
    ``tz`` (a time in a daylight-saving gap moves forward, one in an overlap takes the
    earlier offset, as ``java.time`` does); with ``tz`` None, of the local time itself.

    >>> local_micros(datetime(2024, 3, 10, 2, 30), "America/New_York")  # 07:30 UTC, as Spark
    1710055800000000
    >>> local_micros(date(1970, 1, 2), None), local_micros(date(1970, 1, 1), "+01:00")
    (86400000000, -3600000000)
    """
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    local = value.replace(tzinfo=None)
    micros = (local - UNIX) // timedelta(microseconds=1)
    if tz is None:
        return micros
    offset = value.utcoffset() if value.tzinfo is not None else schemas.zone(tz).utcoffset(local)
    return micros - offset // timedelta(microseconds=1)


def _float32(value: float) -> float:
    """The FLOAT nearest to a number (as Java casts a DOUBLE to a FLOAT)."""
    import numpy as np

    with np.errstate(over="ignore"):
        return float(np.float32(value))


def _float32_bounds(value: float) -> tuple[float, float]:
    """The least FLOAT >= ``value`` and the greatest <= it."""
    import numpy as np

    near = np.float32(_float32(value))
    if math.isnan(value):
        return value, value
    low = near if float(near) >= value else np.nextafter(near, np.float32("inf"))
    high = near if float(near) <= value else np.nextafter(near, np.float32("-inf"))
    return float(low), float(high)


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
                v = _float32(value)  # the literal is cast to FLOAT
                return v, v
            v = float(value)
            return _float32_bounds(v) if kind == "float" else (v, v)
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
    shown = _shown(literal_kind, value)
    raise PlanError(refusal_message(column, shown, kind, why))


def _shown(literal_kind: str, value):
    if literal_kind in ("timestamp", "timestamp_ntz"):
        return (UNIX + timedelta(microseconds=value)).isoformat() + ("Z" if literal_kind == "timestamp" else "")
    return value


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
        return _float32(float(value))
    if kind == "double":
        return float(value)
    if DECIMAL.match(kind):
        return Decimal(value)
    return value


__all__ = [
    "EVERYTHING", "Match", "ansi_literals", "ansi_mode", "column_kind", "column_value", "holds", "holds_nan", "key",
    "literal", "local_micros", "order", "overlaps", "refusal_message", "session_ansi", "spark_value", "term",
    "wider_type",
]  # fmt: skip
