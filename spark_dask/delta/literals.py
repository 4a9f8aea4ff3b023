"""A filter value as Spark types it beside a column: the literal's type and value
(``int`` INT or BIGINT, ``float`` DOUBLE, ``Decimal`` DECIMAL, ``str`` cast to the
column's type as Spark 3.5 casts it, ``date``, ``datetime`` in the session time zone,
``bytes``, ``bool``), and the refusal where the file reader cannot give Spark's answer.
Used by :mod:`.compare` (Spark 3.5's rules) and :mod:`.ansi` (Spark's ANSI mode).
Shipped by value to the Dask workers.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timedelta
from decimal import Context, Decimal
from numbers import Integral, Real

from spark_dask.delta import schema as schemas
from spark_dask.errors import PlanError

INTEGRAL = {"byte": 7, "short": 15, "integer": 31, "long": 63}
DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
WIDE = Context(prec=100)  # exact for any DECIMAL(38) and the scaling of a filter value
UNIX = datetime(1970, 1, 1)
TRUE_WORDS = {
    "t": True,
    "true": True,
    "y": True,
    "yes": True,
    "1": True,
    "f": False,
    "false": False,
    "n": False,
    "no": False,
    "0": False,
}
NUMBERS = {"int", "float", "double", "decimal"}
ASCII_BLANKS = "".join(map(chr, range(0x21)))  # Java's String.trim
SPARK_BLANKS = ASCII_BLANKS + "\x7f"  # UTF8String's isWhitespaceOrISOControl, byte by byte
DIGITS = frozenset("0123456789")  # ASCII digits only, as UTF8String reads them
# stringToDate: a year of 4 to 7 digits, then -[m]m and -[d]d; after the day, a blank or T and anything
SPARK_DATE = re.compile(r"([0-9]{4,7})(?:-([0-9]{1,2})(?:-([0-9]{1,2})(?:[ T].*)?|(.+))?|(.+))?$", re.S)


def refusal_message(column: str, value, kind: str, why: str = "") -> str:
    """Why the file reader refuses a filter value, and what works instead."""
    return (
        f"spark-dask: filter value {value!r} of column {column!r} ({kind}) is not compared by the file reader"
        f'{why}; use via="spark" (or a value of the column\'s type)'
    )


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
    """A string beside a column of another type, cast to it as Spark 3.5 (ANSI mode off)
    casts it; ``("null", None)`` where that cast gives NULL (a comparison with it holds
    for no row)."""
    if kind in INTEGRAL:
        number = spark_integral(text, INTEGRAL[kind])
        return ("null", None) if number is None else ("int", number)
    if kind == "date":
        return _spark_date_literal(text, column)
    try:
        if kind == "string":
            return "string", text
        if kind == "float":
            return "float", float32(float(text))
        if kind == "double" or DECIMAL.match(kind):
            return "double", float(text)
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
    shown, why = text, f" (not {'an' if kind[0] in 'aeiou' else 'a'} {kind} as it reads it)"
    raise PlanError(refusal_message(column, shown, kind, why))


def spark_integral(text: str, bits: int) -> int | None:
    """A string cast to an integral type of ``bits`` value bits as Spark casts it with
    ANSI mode off (``UTF8String.toLong``/``toInt`` with a decimal part allowed): blanks
    and control characters around it trimmed, a sign, ASCII digits, a fraction of
    digits dropped (``'1.5'`` is 1); None (Spark's NULL) for anything else or a value
    out of the type's range.

    >>> [spark_integral(t, 31) for t in ("7", " +7 ", "1.5", "-1.", ".5", "1e3", "1_000", "", "-", "2147483648")]
    [7, 7, 1, -1, 0, None, None, None, None, None]
    """
    t = text.strip(SPARK_BLANKS)
    if not t:
        return None
    sign = 1
    if t[0] in "+-":
        if len(t) == 1:
            return None
        sign, t = (-1 if t[0] == "-" else 1), t[1:]
    whole, _, fraction = t.partition(".")
    if any(c not in DIGITS for c in whole) or any(c not in DIGITS for c in fraction):
        return None
    value = sign * int(whole or "0")
    return value if -(2**bits) <= value < 2**bits else None


def spark_date(text: str):
    """A string cast to a DATE as Spark casts it with ANSI mode off
    (``DateTimeUtils.stringToDate``): ``[+-]yyyy[y..]``, ``-[m]m``, ``-[d]d``, then
    anything after a blank or ``T``; a year of 4 to 7 digits. ``(sign, year, month,
    day)``, or None (Spark's NULL) for another form.

    >>> [spark_date(t) for t in ("2024", "2024-3", "2024-03-10 xyz", "+2024-3-5T1", "24-01-01", "2024 x", "abc")]
    [(1, 2024, 1, 1), (1, 2024, 3, 1), (1, 2024, 3, 10), (1, 2024, 3, 5), None, None, None]
    """
    t = text.strip(SPARK_BLANKS)
    sign = -1 if t[:1] == "-" else 1
    t = t[1:] if t[:1] in ("-", "+") else t
    m = SPARK_DATE.match(t)
    if not m or m.group(4) is not None or m.group(5) is not None:  # yyyy and yyyy-[m]m: nothing may follow
        return None
    year, month, day = m.group(1), m.group(2), m.group(3)
    return sign, int(year), int(month or 1), int(day or 1)


def _spark_date_literal(text: str, column: str) -> tuple:
    """``("date", date)``, ``("null", None)`` where Spark's cast gives NULL (another
    form, a day that does not exist), refused for a year Python's dates do not hold."""
    found = spark_date(text)
    if found is None:
        return "null", None
    sign, year, month, day = found
    if sign < 0 or not 1 <= year <= 9999:
        shown, kind, why = text, "date", " (a year outside 1 to 9999)"
        raise PlanError(refusal_message(column, shown, kind, why))
    try:
        return "date", date(year, month, day)
    except ValueError:
        return "null", None


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


def float32(value: float) -> float:
    """The FLOAT nearest to a number (as Java casts a DOUBLE to a FLOAT)."""
    import numpy as np

    with np.errstate(over="ignore"):
        return float(np.float32(value))


def float32_bounds(value: float) -> tuple[float, float]:
    """The least FLOAT >= ``value`` and the greatest <= it."""
    import numpy as np

    near = np.float32(float32(value))
    if math.isnan(value):
        return value, value
    low = near if float(near) >= value else np.nextafter(near, np.float32("inf"))
    high = near if float(near) <= value else np.nextafter(near, np.float32("-inf"))
    return float(low), float(high)


def shown_value(literal_kind: str, value):
    """A literal as a message shows it (a timestamp as its ISO text).

    >>> shown_value("timestamp", 0), shown_value("int", 7)
    ('1970-01-01T00:00:00Z', 7)
    """
    if literal_kind in ("timestamp", "timestamp_ntz"):
        return (UNIX + timedelta(microseconds=value)).isoformat() + ("Z" if literal_kind == "timestamp" else "")
    return value


__all__ = [
    "ASCII_BLANKS",
    "DECIMAL",
    "DIGITS",
    "INTEGRAL",
    "SPARK_BLANKS",
    "SPARK_DATE",
    "spark_date",
    "spark_integral",
    "NUMBERS",
    "TRUE_WORDS",
    "UNIX",
    "WIDE",
    "float32",
    "float32_bounds",
    "literal",
    "local_micros",
    "refusal_message",
    "shown_value",
]
