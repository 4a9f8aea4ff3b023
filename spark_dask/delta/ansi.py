"""Spark's ANSI mode (``spark.sql.ansi.enabled``, on by default from Spark 4.0, as on
Databricks 17.3 LTS): the common type Spark compares a column and a filter value in,
and the cast of a string to it, where they differ from Spark 3.5's rules (an integer
beside a FLOAT compares as DOUBLE, a string beside a number as BIGINT or DOUBLE, an
``in`` list in its values' common type; a string that is no value of that type fails
the query, CAST_INVALID_INPUT). Sources: Spark's ``AnsiTypeCoercion.scala``
(``findTightestCommonType``, ``findWiderTypeForString``), ``InConversion``,
``Cast.scala`` and ``UTF8String.toLong``. Shipped by value to the Dask workers.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from decimal import Decimal

from spark_dask.delta import schema as schemas
from spark_dask.delta.literals import (
    ASCII_BLANKS,
    DECIMAL,
    INTEGRAL,
    SPARK_BLANKS,
    TRUE_WORDS,
    UNIX,
    literal,
    local_micros,
    refusal_message,
    shown_value,
)
from spark_dask.errors import PlanError


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


NUMERIC_ORDER = ("byte", "short", "integer", "long", "float", "double")  # UpCastRule.numericPrecedence
INTEGRAL_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}  # DecimalType.forType
DATETIMES = ("date", "timestamp_ntz", "timestamp")  # findWiderDateTimeType: the later wins
SPARK_NAMES = {
    "byte": "TINYINT",
    "short": "SMALLINT",
    "integer": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
    "boolean": "BOOLEAN",
    "binary": "BINARY",
    "string": "STRING",
}
ZONE_WITHOUT_SECONDS = re.compile(r"^\s*[+-]?\d+-\d+-\d+[T ]\d+:\d+\s*[^\s:.\d]")
LONG_TEXT = re.compile(r"[+-]?[0-9]+")  # UTF8String.toLongExact
# Double.parseDouble's decimal form (its trailing type letter too), NaN, Infinity
DOUBLE_TEXT = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
DOUBLE_WORDS = {
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
    "nan": math.nan,
}  # Cast.processFloatingPointSpecialLiterals


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
    shown = shown_value(literal_kind, value)
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


__all__ = ["ansi_literals", "ansi_mode", "wider_type"]
