"""Which data files a filtered read can skip, decided on the driver from the log alone:
partition values, and each file's min/max/null-count statistics.

``filters`` take the form of ``dask.dataframe.read_parquet``'s (and pyarrow's): a list
of ``(column, op, value)`` tuples ANDed together, or a list of such lists ORed
together; ops ``==``/``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``not in``.
Every kept file is also filtered row by row on its worker, so a skip only saves
reading: it is made only when no row of the file can match. Statistics are used for
numbers, dates and strings (Delta truncates long string statistics, so a string max
of 32 characters or more is not used), never for timestamps (kept to milliseconds).
"""

from __future__ import annotations

import json
import operator
from datetime import date, datetime
from decimal import Decimal

from spark_dask.delta import schema as schemas
from spark_dask.errors import DeltaError, PlanError

COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
           ">=": operator.ge}  # fmt: skip
OPS = {"=": "==", "==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "in": "in", "not in": "not in"}
STATS_TYPES = {"byte", "short", "integer", "long", "float", "double", "date", "string"}


def normalize(filters, fields: list[dict], tz: str | None = None) -> list[list[tuple]] | None:
    """Filters in disjunctive normal form, checked against the table's columns; with
    ``tz`` (the file reader), each value converted to its column's type (:func:`coerce`).

    >>> normalize([("k", "=", 1)], [{"name": "k", "type": "long"}])
    [[('k', '==', 1)]]
    >>> normalize([("z", ">", 1)], [{"name": "k", "type": "long"}])
    Traceback (most recent call last):
    ...
    spark_dask.errors.PlanError: spark-dask: filter on 'z', which is not a column of the table (its columns: k)
    """
    if not filters:
        return None
    if not isinstance(filters, (list, tuple)):
        raise PlanError(f"spark-dask: filters must be a list of (column, op, value) tuples, got {filters!r}")
    groups = [filters] if isinstance(filters[0], tuple) else filters
    names = [f["name"] for f in fields]
    out = []
    for group in groups:
        conjunction = []
        for term in group:
            if not (isinstance(term, (tuple, list)) and len(term) == 3):
                raise PlanError(f"spark-dask: a filter is (column, op, value), got {term!r}")
            column, op, value = term
            if column not in names:
                raise PlanError(
                    f"spark-dask: filter on {column!r}, which is not a column of the table (its columns: {', '.join(names)})"
                )
            if op not in OPS:
                raise PlanError(f"spark-dask: filter op {op!r} is not one of {', '.join(sorted(set(OPS)))}")
            field = fields[names.index(column)]
            if OPS[op] in ("in", "not in"):
                value = [coerce(v, field, tz) for v in value] if tz else list(value)
            elif tz:
                value = coerce(value, field, tz)
            conjunction.append((column, OPS[op], value))
        out.append(conjunction)
    return out


def coerce(value, field: dict, tz: str):
    """A filter's value as its column's Python type, as Spark would cast the literal: a
    string for a number, date, timestamp or decimal column is parsed; a time without a
    zone on a ``timestamp`` column is in ``tz``; numbers for decimals become Decimals.

    >>> coerce("2026-11-01", {"name": "d", "type": "date"}, "UTC")
    datetime.date(2026, 11, 1)
    >>> coerce("2026-11-01 10:00", {"name": "t", "type": "timestamp"}, "Europe/Paris").isoformat()
    '2026-11-01T10:00:00+01:00'
    >>> coerce(3, {"name": "x", "type": "decimal(10,2)"}, "UTC"), coerce("7", {"name": "k", "type": "integer"}, "UTC")
    (Decimal('3'), 7)
    >>> coerce("x", {"name": "k", "type": "integer"}, "UTC")
    Traceback (most recent call last):
    ...
    spark_dask.errors.PlanError: spark-dask: filter value 'x' of column 'k' is not a integer
    """
    kind = field.get("type")
    if value is None or not isinstance(kind, str) or kind == "string":
        return value
    try:
        if kind == "timestamp" and isinstance(value, (str, datetime)):
            return schemas.local_time(value, tz).astimezone(schemas.zone(tz))
        if isinstance(value, str):
            value = schemas.partition_value(value, kind, field["name"])
    except (ValueError, DeltaError):
        raise PlanError(f"spark-dask: filter value {value!r} of column {field['name']!r} is not a {kind}") from None
    if kind == "timestamp_ntz" and isinstance(value, datetime) and value.tzinfo:
        value = value.replace(tzinfo=None)
    elif kind == "date" and isinstance(value, datetime):
        value = value.date()
    elif kind.startswith("decimal") and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = Decimal(str(value))
    return value


def keep(record: dict, dnf, fields: dict[str, dict], mode: str) -> bool:
    """Whether a file (its log record) may hold a row that matches ``dnf``.

    >>> fields = {"k": {"name": "k", "type": "integer"}, "x": {"name": "x", "type": "long"}}
    >>> rec = {"partitionValues": {"k": "1"}, "stats": '{"numRecords": 3, "minValues": {"x": 5}, "maxValues": {"x": 9}}'}
    >>> keep(rec, [[("k", "==", 2)]], fields, "none"), keep(rec, [[("x", ">", 9)]], fields, "none")
    (False, False)
    >>> keep(rec, [[("x", ">", 8)]], fields, "none"), keep(rec, [[("k", "==", 2)], [("x", "<=", 5)]], fields, "none")
    (True, True)
    """
    if not dnf:
        return True
    stats = _stats(record)
    return any(all(_may_match(record, stats, fields[c], op, v, mode) for c, op, v in group) for group in dnf)


def _stats(record: dict) -> dict:
    text = record.get("stats")
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return {}


def _may_match(record: dict, stats: dict, field: dict, op: str, value, mode: str) -> bool:
    key = schemas.physical_name(field, mode)
    partitions = record.get("partitionValues") or {}
    if key in partitions:
        actual = schemas.partition_value(partitions[key], field["type"], field["name"])
        if actual is None:
            return False  # a null matches no comparison (the row filter drops it too)
        return _compare(actual, op, value)
    if field["type"] not in STATS_TYPES or not stats:
        return True
    rows, nulls = stats.get("numRecords"), (stats.get("nullCount") or {}).get(key)
    if rows is not None and nulls is not None and nulls >= rows:
        return False
    low, high = (stats.get("minValues") or {}).get(key), (stats.get("maxValues") or {}).get(key)
    if low is None or high is None:
        return True
    if field["type"] == "date":
        low, high = date.fromisoformat(low), date.fromisoformat(high)
    if field["type"] == "string" and len(high) >= 32:
        return True
    try:
        return _overlaps(low, high, op, value)
    except TypeError:  # a value of another type than the column: let the row filter decide
        return True


def _compare(actual, op: str, value) -> bool:
    try:
        if op == "in":
            return actual in value
        if op == "not in":
            return actual not in value
        return COMPARE[op](actual, value)
    except TypeError:
        return True


def fold(dnf, column, literal, isin):
    """Filters in disjunctive normal form as one expression of an engine (Arrow's or
    Spark's): ``column(name)`` is its column, ``literal(name, value)`` a value of the
    column's type, ``isin(column, name, values)`` a membership test.

    >>> class C(str):  # a stand-in engine whose expressions are strings
    ...     def __gt__(self, v): return C(f"({self} > {v})")
    ...     def __and__(self, o): return C(f"{self} & {o}")
    ...     def __or__(self, o): return C(f"{self} | {o}")
    >>> fold([[("x", ">", 1), ("y", ">", 2)], [("z", ">", 3)]], C, lambda name, value: value, None)
    '(x > 1) & (y > 2) | (z > 3)'
    """
    from functools import reduce

    def term(name, op, value):
        left = column(name)
        if op in ("in", "not in"):
            member = isin(left, name, value)
            return member if op == "in" else ~member
        return COMPARE[op](left, literal(name, value))

    return reduce(operator.or_, [reduce(operator.and_, [term(*t) for t in group]) for group in dnf])


def _overlaps(low, high, op: str, value) -> bool:
    if op == "==":
        return low <= value <= high
    if op == "in":
        return any(low <= v <= high for v in value)
    if op == "<":
        return low < value
    if op == "<=":
        return low <= value
    if op == ">":
        return high > value
    if op == ">=":
        return high >= value
    return True  # != and not in: a file of one repeated value could still be skipped; not worth it


__all__ = ["COMPARE", "OPS", "STATS_TYPES", "coerce", "fold", "keep", "normalize"]
