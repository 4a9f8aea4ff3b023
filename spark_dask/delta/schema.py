"""A Delta table's columns: logical names and types, as Spark reads them, from what a
data file physically holds.

The table's schema (``metaData.schemaString``) is Spark's StructType JSON, so its
Arrow form is :func:`spark_dask.handoff.arrow_types.spark_to_arrow_schema`'s, the one
``to_dask`` produces: ``timestamp`` is ``timestamp[us, tz]`` in the session time zone,
``timestamp_ntz`` ``timestamp[us]``, decimals ``decimal128``. Column mapping
(``PROTOCOL.md``, "Column Mapping"): under ``name`` a field's data is stored under
its ``delta.columnMapping.physicalName`` (nested fields too), under ``id`` the reader
matches the Parquet field id to ``delta.columnMapping.id``; partition values and
statistics are keyed by physical names. Shipped by value to the Dask workers.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

from spark_dask.errors import DeltaError, PlanError
from spark_dask.handoff import arrow_types

PHYSICAL = "delta.columnMapping.physicalName"
FIELD_ID = "delta.columnMapping.id"
PARQUET_ID = b"PARQUET:field_id"


def table_schema(metadata: dict) -> dict:
    """The table's schema as Spark's StructType JSON."""
    return json.loads(metadata["schemaString"])


def physical_name(field: dict, mode: str) -> str:
    """Where a field's values are stored (partition values and stats are keyed by it).

    >>> physical_name({"name": "a", "metadata": {PHYSICAL: "col-1"}}, "name")
    'col-1'
    >>> physical_name({"name": "a", "metadata": {PHYSICAL: "col-1"}}, "none")
    'a'
    """
    if mode == "none":
        return field["name"]
    return (field.get("metadata") or {}).get(PHYSICAL, field["name"])


def arrow_schema(schema: dict, tz: str):
    """The Arrow schema of the table's rows, Spark's reading of it."""
    return arrow_types.spark_to_arrow_schema(schema, arrow_zone(tz))


# ---------------------------------------------------------------------- file -> logical
def logical_column(file_table, field: dict, target, mode: str):
    """One top-level column of the table, from a file read as Arrow (physical names):
    renamed, nested names too, and cast to the table's type (INT96 and type widening);
    all nulls when the file predates the column."""
    import pyarrow as pa

    index = field_index(file_table.schema, field, mode)
    if index is None:
        return pa.nulls(file_table.num_rows, target.type)
    column = (
        file_table.column(index).combine_chunks()
        if file_table.num_rows
        else pa.array([], file_table.schema.field(index).type)
    )
    return _logical(column, field["type"], target.type, mode)


def field_index(arrow_fields, field: dict, mode: str):
    """The index of the Arrow field holding ``field`` (by id under ``id`` mapping)."""
    names = [f.name for f in arrow_fields]
    if mode == "id":  # by id only: a file without the id has no such column (PROTOCOL.md)
        wanted = str((field.get("metadata") or {}).get(FIELD_ID, ""))
        for i, f in enumerate(arrow_fields):
            if f.metadata and f.metadata.get(PARQUET_ID, b"").decode() == wanted and wanted:
                return i
        return None
    name = physical_name(field, mode)
    return names.index(name) if name in names else None


def _logical(array, delta_type, target, mode: str):
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(delta_type, dict) and mode != "none":
        kind = delta_type.get("type")
        if kind == "struct" and pa.types.is_struct(array.type):
            fields = [array.type.field(i) for i in range(array.type.num_fields)]
            children = []
            for child, child_target in zip(delta_type["fields"], target):
                i = field_index(fields, child, mode)
                if i is None:
                    children.append(pa.nulls(len(array), child_target.type))
                else:
                    children.append(_logical(array.field(i), child["type"], child_target.type, mode))
            return pa.StructArray.from_arrays(children, fields=list(target), mask=_mask(array))
        if kind == "array" and pa.types.is_list(array.type):
            values = _logical(array.values, delta_type["elementType"], target.value_type, mode)
            return pa.ListArray.from_arrays(array.offsets, values, type=target, mask=_mask(array))
        if kind == "map" and pa.types.is_map(array.type):
            keys = _logical(array.keys, delta_type["keyType"], target.key_type, mode)
            items = _logical(array.items, delta_type["valueType"], target.item_type, mode)
            return pa.MapArray.from_arrays(array.offsets, keys, items, type=target, mask=_mask(array))
    if array.type == target:
        return array
    return pc.cast(array, target)


def _mask(array):
    return array.is_null() if array.null_count else None


# ---------------------------------------------------------------------- times
# java.time.ZoneId.SHORT_IDS, which Spark's DateTimeUtils.getZoneId passes to ZoneId.of
SHORT_IDS = {
    "ACT": "Australia/Darwin",
    "AET": "Australia/Sydney",
    "AGT": "America/Argentina/Buenos_Aires",
    "ART": "Africa/Cairo",
    "AST": "America/Anchorage",
    "BET": "America/Sao_Paulo",
    "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare",
    "CNT": "America/St_Johns",
    "CST": "America/Chicago",
    "CTT": "Asia/Shanghai",
    "EAT": "Africa/Addis_Ababa",
    "ECT": "Europe/Paris",
    "EST": "-05:00",
    "HST": "-10:00",
    "IET": "America/Indiana/Indianapolis",
    "IST": "Asia/Kolkata",
    "JST": "Asia/Tokyo",
    "MIT": "Pacific/Apia",
    "MST": "-07:00",
    "NET": "Asia/Yerevan",
    "NST": "Pacific/Auckland",
    "PLT": "Asia/Karachi",
    "PNT": "America/Phoenix",
    "PRT": "America/Puerto_Rico",
    "PST": "America/Los_Angeles",
    "SST": "Pacific/Guadalcanal",
    "VST": "Asia/Ho_Chi_Minh",
}
OFFSET = re.compile(r"^(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?$")
TIME = re.compile(
    r"^\s*([+-]?\d{4,6})-(\d{1,2})-(\d{1,2})"
    r"(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{0,9}))?)?)?\s*([^\s]*)\s*$"
)


def zone(tz: str):
    """The time zone of a Spark session time zone: a region (``America/New_York``), an
    offset (``+01:00``, ``+1``, ``-0530``, ``UTC+01:00``, ``GMT+1``), ``UTC``, ``Z``,
    ``GMT`` or a short id (``PST``), as Spark's ``DateTimeUtils.getZoneId`` takes them.

    >>> zone("+1"), zone("GMT-05:30"), zone("Z"), zone("PST").key
    (datetime.timezone(datetime.timedelta(seconds=3600)), datetime.timezone(datetime.timedelta(days=-1, seconds=66600)), datetime.timezone.utc, 'America/Los_Angeles')
    >>> zone("Mars/Base")
    Traceback (most recent call last):
    ...
    spark_dask.errors.DeltaError: spark-dask: time zone 'Mars/Base' is neither a region (Europe/Paris) nor an offset (+01:00)
    """
    from zoneinfo import ZoneInfo

    name = SHORT_IDS.get(tz.strip(), tz.strip())
    if name.upper() in ("UTC", "Z", "GMT", "UT", "ETC/UTC", "ETC/GMT"):
        return timezone.utc
    if m := OFFSET.match(name):
        sign, hours, minutes, seconds = m.groups()
        offset = timedelta(hours=int(hours), minutes=int(minutes or 0), seconds=int(seconds or 0))
        if offset <= timedelta(hours=18):
            return timezone(-offset if sign == "-" else offset) if offset else timezone.utc
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):
        raise DeltaError(
            f"spark-dask: time zone {tz!r} is neither a region (Europe/Paris) nor an offset (+01:00)"
        ) from None


def arrow_zone(tz: str) -> str:
    """The session time zone as Arrow names it (a region or ``+HH:MM``).

    >>> arrow_zone("GMT+1"), arrow_zone("America/New_York"), arrow_zone("Z"), arrow_zone("PST")
    ('+01:00', 'America/New_York', 'UTC', 'America/Los_Angeles')
    """
    found = zone(tz)
    if found is timezone.utc:
        return "UTC"
    if isinstance(found, timezone):
        minutes = int(found.utcoffset(None).total_seconds()) // 60
        return f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    return found.key


def parse_time(text: str, tz: str | None) -> datetime:
    """A time as Spark casts a string to a timestamp: ``yyyy-[m]m-[d]d[( |T)[h]h:[m]m
    [:[s]s[.fraction]]][zone]`` (fractions past microseconds cut off); one without a zone
    is in ``tz`` (naive with ``tz`` None). Works on Python 3.10 (whose ``fromisoformat``
    takes 3 or 6 fraction digits only). None for another form; ValueError for a day
    or hour out of range.

    >>> parse_time("2024-02-29 10:00:00.5", "UTC").isoformat()
    '2024-02-29T10:00:00.500000+00:00'
    >>> parse_time("2024-02-29T10:00:00.1234567Z", None).isoformat()
    '2024-02-29T10:00:00.123456+00:00'
    >>> parse_time("2024-2-9 1:02", "+01:00").isoformat()
    '2024-02-09T01:02:00+01:00'
    """
    m = TIME.match(text)
    if not m:
        return None
    year, month, day, hour, minute, second, fraction, where = m.groups()
    micros = int((fraction or "").ljust(6, "0")[:6])
    value = datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0), micros)
    if where:
        try:
            return value.replace(tzinfo=zone(where))
        except DeltaError:
            return None
    return value.replace(tzinfo=zone(tz)) if tz else value


def parse_date(text: str) -> date:
    """A date as Spark casts a string to one (a time after it is ignored); None for
    another form, ValueError for a day out of range.

    >>> parse_date("2024-02-29"), parse_date("2024-2-9 10:00")
    (datetime.date(2024, 2, 29), datetime.date(2024, 2, 9))
    """
    m = TIME.match(re.split(r"[T ]", text.strip(), maxsplit=1)[0])
    if not m:
        return None
    return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))


def local_time(value, tz: str) -> datetime:
    """An ISO string or a datetime as an aware datetime; one without a zone is in ``tz``
    (as Spark reads a time literal in its session time zone). Raises PlanError (a
    ValueError) for a string of another form.

    >>> local_time("1970-01-01 01:00", "Europe/Paris").timestamp(), local_time("1970-01-01T00:00Z", "Asia/Tokyo").timestamp()
    (0.0, 0.0)
    """
    if isinstance(value, str):
        parsed = parse_time(value.strip(), tz)
        if parsed is None:
            raise PlanError(f"spark-dask: {value!r} is not an ISO date or time (2024-05-01 12:00:00)")
        value = parsed
    return value if value.tzinfo else value.replace(tzinfo=zone(tz))


# ---------------------------------------------------------------------- partition values
def partition_value(text, delta_type: str, column: str, tz: str):
    """A partition value from its string in the log, typed (``PROTOCOL.md``,
    "Partition Value Serialization"); None for null. A timestamp without a zone was
    written in the writer's session time zone and is read in ``tz`` (as Spark reads
    it); Delta 3 writes them in UTC with a ``Z``.

    >>> partition_value("7", "integer", "k", "UTC"), partition_value(None, "long", "k", "UTC")
    (7, None)
    >>> partition_value("2024-02-29", "date", "d", "UTC")
    datetime.date(2024, 2, 29)
    >>> partition_value("2024-02-29 10:00:00.5", "timestamp", "t", "America/New_York").isoformat()
    '2024-02-29T15:00:00.500000+00:00'
    >>> partition_value("1970-01-01T00:00:00.123456Z", "timestamp_ntz", "t", "UTC")
    datetime.datetime(1970, 1, 1, 0, 0, 0, 123456)
    >>> partition_value("12.50", "decimal(10,2)", "x", "UTC")
    Decimal('12.50')
    """
    if text is None or (text == "" and delta_type != "string"):
        return None
    try:
        if delta_type == "string" or delta_type.startswith(("varchar", "char")):
            return text
        if delta_type in ("byte", "short", "integer", "long"):
            return int(text)
        if delta_type in ("float", "double"):
            return float(text)
        if delta_type == "boolean":
            return {"true": True, "false": False}[text.lower()]
        if delta_type == "date":
            return _parsed(parse_date(text), text, delta_type, column)
        if delta_type == "timestamp":
            return _parsed(parse_time(text, tz), text, delta_type, column).astimezone(timezone.utc)
        if delta_type == "timestamp_ntz":
            return _parsed(parse_time(text, None), text, delta_type, column).replace(tzinfo=None)
        if delta_type.startswith("decimal"):
            return Decimal(text)
        if delta_type == "binary":
            return text.encode("utf-8")
    except (ValueError, KeyError, ArithmeticError):
        raise DeltaError(f"spark-dask: partition value {text!r} of column {column!r} is not a {delta_type}") from None
    raise DeltaError(f"spark-dask: partition column {column!r} has type {delta_type}, which Delta cannot partition by")


def _parsed(value, text: str, delta_type: str, column: str):
    if value is None:
        raise DeltaError(f"spark-dask: partition value {text!r} of column {column!r} is not a {delta_type}")
    return value


def partition_column(value, target, num_rows: int):
    """A column of ``num_rows`` copies of one partition value."""
    import pyarrow as pa

    if value is None:
        return pa.nulls(num_rows, target.type)
    return pa.repeat(pa.scalar(value, type=target.type), num_rows)


__all__ = [
    "FIELD_ID",
    "PHYSICAL",
    "SHORT_IDS",
    "arrow_schema",
    "arrow_zone",
    "logical_column",
    "partition_column",
    "partition_value",
    "field_index",
    "local_time",
    "parse_date",
    "parse_time",
    "physical_name",
    "table_schema",
    "zone",
]
