"""Which data files a filtered read can skip, decided on the driver from the log alone:
partition values, and each file's min/max/null-count statistics.

``filters`` take the form of ``dask.dataframe.read_parquet``'s (and pyarrow's): a list
of ``(column, op, value)`` tuples ANDed together, or a list of such lists ORed
together; ops ``==``/``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``not in``.
Each term becomes the values of its column that Spark's comparison keeps
(:mod:`spark_dask.delta.compare`), the same for this skipping and for the row filter
every kept file gets on its worker: a skip only saves reading, made only when no row of
the file can match. Statistics are used for numbers, decimals, dates and strings (Delta
truncates long string statistics, so a string max of 32 characters or more is not
used), never for timestamps (kept to milliseconds), on a float column not for a
term that NaN could match (writers differ on whether NaN is in the max), and not on a
column whose type was widened from one whose statistics are not exact in the new type
(:func:`stats_exact`).
"""

from __future__ import annotations

import json
import operator
from decimal import Decimal

from spark_dask.delta import compare
from spark_dask.delta import schema as schemas
from spark_dask.errors import PlanError

COMPARE = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
OPS = {"=": "==", "==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "in": "in", "not in": "not in"}
STATS_TYPES = {"byte", "short", "integer", "long", "float", "double", "date", "string"}


def normalize(
    filters, fields: list[dict], tz: str | None = None, ansi: bool | None = False
) -> list[list[tuple]] | None:
    """Filters in disjunctive normal form, checked against the table's columns; with
    ``tz`` (the file reader), each term ``(column, op, Match)``: the values of the
    column it holds for, as Spark compares them (:func:`spark_dask.delta.compare.term`, with
    Spark's ANSI mode ``ansi``).

    >>> normalize([("k", "=", 1)], [{"name": "k", "type": "long"}])
    [[('k', '==', 1)]]
    >>> normalize([("k", "in", [1, 2.5])], [{"name": "k", "type": "long"}], "UTC")
    [[('k', 'in', Match(points=(1,), ranges=(), negate=False))]]
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
            if OPS[op] in ("in", "not in") and not isinstance(value, (list, tuple, set, frozenset)):
                raise PlanError(f"spark-dask: filter {op!r} on {column!r} needs a list of values, got {value!r}")
            if tz:
                value = compare.term(fields[names.index(column)], OPS[op], value, tz, ansi)
            elif OPS[op] in ("in", "not in"):
                value = list(value)
            conjunction.append((column, OPS[op], value))
        out.append(conjunction)
    return out


def keep(record: dict, dnf, fields: dict[str, dict], mode: str, tz: str = "UTC") -> bool:
    """Whether a file (its log record) may hold a row that matches ``dnf`` (terms of
    :func:`normalize` with a time zone); ``tz`` reads timestamp partition values
    written without a zone.

    >>> fields = {"k": {"name": "k", "type": "integer"}, "x": {"name": "x", "type": "long"}}
    >>> rec = {"partitionValues": {"k": "1"}, "stats": '{"numRecords": 3, "minValues": {"x": 5}, "maxValues": {"x": 9}}'}
    >>> dnf = lambda filters: normalize(filters, list(fields.values()), "UTC")
    >>> keep(rec, dnf([("k", "==", 2)]), fields, "none"), keep(rec, dnf([("x", ">", 9)]), fields, "none")
    (False, False)
    >>> keep(rec, dnf([("x", ">", 8.5)]), fields, "none"), keep(rec, dnf([[("k", "==", 2)], [("x", "<=", 5)]]), fields, "none")
    (True, True)
    """
    if not dnf:
        return True
    stats = _stats(record)
    return any(all(_may_match(record, stats, fields[c], match, mode, tz) for c, _, match in group) for group in dnf)


def _stats(record: dict) -> dict:
    text = record.get("stats")
    if not text:
        return {}
    try:
        return json.loads(text, parse_float=Decimal)  # decimals exactly; doubles as printed
    except ValueError:
        return {}


def _may_match(record: dict, stats: dict, field: dict, match, mode: str, tz: str) -> bool:
    key = schemas.physical_name(field, mode)
    kind = field["type"]
    partitions = record.get("partitionValues") or {}
    if key in partitions:
        actual = schemas.partition_value(partitions[key], kind, field["name"], tz)
        return compare.holds(match, compare.column_value(actual, kind))
    if not stats:
        return True
    rows, nulls = stats.get("numRecords"), (stats.get("nullCount") or {}).get(key)
    if rows is not None and nulls is not None and nulls >= rows:
        return False  # every row null: a null matches no term
    if (kind not in STATS_TYPES and not kind.startswith("decimal")) or not stats_exact(field):
        return True
    low, high = (stats.get("minValues") or {}).get(key), (stats.get("maxValues") or {}).get(key)
    if low is None or high is None or (kind == "string" and isinstance(high, str) and len(high) >= 32):
        return True
    low, high = _stat_value(low, kind), _stat_value(high, kind)
    if low is None or high is None:
        return True
    return compare.overlaps(match, low, high, floating=kind in ("float", "double"))


def stats_exact(field: dict) -> bool:
    """Whether a column's min/max statistics hold its values exactly in its type today,
    for files written before a type widening too (``delta.typeChanges`` in the field's
    metadata, Delta's type widening): an integer or decimal statistic is the same
    number in the wider integer, decimal or double; a FLOAT's (printed as a FLOAT) is
    not the DOUBLE the widened value is (``0.1`` against 0.10000000149011612), and any
    other change is not trusted.

    >>> stats_exact({"name": "x", "type": "long", "metadata": {"delta.typeChanges": [
    ...     {"fromType": "short", "toType": "integer"}, {"fromType": "integer", "toType": "long"}]}})
    True
    >>> stats_exact({"name": "x", "type": "double", "metadata": {"delta.typeChanges": [
    ...     {"fromType": "float", "toType": "double"}]}})
    False
    >>> stats_exact({"name": "x", "type": "long"})
    True
    """
    changes = (field.get("metadata") or {}).get("delta.typeChanges") or []
    exact = (*compare.INTEGRAL, "decimal")
    for change in changes:
        if change.get("fieldPath"):
            continue  # an element, key or value of a nested column: no statistics are used for those
        before, after = str(change.get("fromType", "")), str(change.get("toType", ""))
        if not before.startswith(exact) or not (after.startswith(exact) or after == "double"):
            return False
    return True


def _stat_value(value, kind: str):
    """A min or max statistic as :mod:`.compare` holds the column's values; None when
    it is not of the column's type."""
    if kind == "date":
        return schemas.parse_date(value) if isinstance(value, str) else None
    if kind == "string":
        return value if isinstance(value, str) else None
    if kind in ("float", "double"):
        try:
            return compare.column_value(float(value), kind)  # "NaN", "Infinity" too
        except (TypeError, ValueError):
            return None
    if isinstance(value, (str, bool)) or not isinstance(value, (int, Decimal)):
        return None
    return compare.column_value(int(value) if kind in compare.INTEGRAL else value, kind)


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


__all__ = ["COMPARE", "OPS", "STATS_TYPES", "fold", "keep", "normalize", "stats_exact"]
