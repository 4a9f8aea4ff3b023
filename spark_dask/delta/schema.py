"""A Delta table's columns: logical names and types, as Spark reads them, from what a
data file physically holds.

The table's schema (``metaData.schemaString``) is Spark's StructType JSON, so its
Arrow form is :func:`spark_dask.arrow_types.spark_to_arrow_schema`'s, the one
``to_dask`` produces: ``timestamp`` is ``timestamp[us, tz]`` in the session time zone,
``timestamp_ntz`` ``timestamp[us]``, decimals ``decimal128``. Column mapping
(``PROTOCOL.md``, "Column Mapping"): under ``name`` a field's data is stored under
its ``delta.columnMapping.physicalName`` (nested fields too), under ``id`` the reader
matches the Parquet field id to ``delta.columnMapping.id``; partition values and
statistics are keyed by physical names. Shipped by value to the Dask workers.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from decimal import Decimal

from spark_dask import arrow_types
from spark_dask.errors import DeltaError

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
    return arrow_types.spark_to_arrow_schema(schema, tz)


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
    if mode == "id":
        wanted = str((field.get("metadata") or {}).get(FIELD_ID, ""))
        for i, f in enumerate(arrow_fields):
            if f.metadata and f.metadata.get(PARQUET_ID, b"").decode() == wanted and wanted:
                return i
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
def zone(tz: str):
    """The time zone of a Spark session time zone name."""
    from zoneinfo import ZoneInfo

    return timezone.utc if tz.upper() in ("UTC", "Z") else ZoneInfo(tz)


def local_time(value, tz: str) -> datetime:
    """An ISO string or a datetime as an aware datetime; one without a zone is in ``tz``
    (as Spark reads a time literal in its session time zone). Raises ValueError.

    >>> local_time("1970-01-01 01:00", "Europe/Paris").timestamp(), local_time("1970-01-01T00:00Z", "Asia/Tokyo").timestamp()
    (0.0, 0.0)
    """
    if isinstance(value, str):
        value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=zone(tz))


# ---------------------------------------------------------------------- partition values
def partition_value(text, delta_type: str, column: str):
    """A partition value from its string in the log, typed (``PROTOCOL.md``,
    "Partition Value Serialization"); None for null.

    >>> partition_value("7", "integer", "k"), partition_value(None, "long", "k")
    (7, None)
    >>> partition_value("2024-02-29", "date", "d")
    datetime.date(2024, 2, 29)
    >>> partition_value("2024-02-29 10:00:00.5", "timestamp", "t")
    datetime.datetime(2024, 2, 29, 10, 0, 0, 500000, tzinfo=datetime.timezone.utc)
    >>> partition_value("1970-01-01T00:00:00.123456Z", "timestamp_ntz", "t")
    datetime.datetime(1970, 1, 1, 0, 0, 0, 123456)
    >>> partition_value("12.50", "decimal(10,2)", "x")
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
            return date.fromisoformat(text)
        if delta_type in ("timestamp", "timestamp_ntz"):
            value = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
            if delta_type == "timestamp":
                return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
            return value.replace(tzinfo=None)
        if delta_type.startswith("decimal"):
            return Decimal(text)
        if delta_type == "binary":
            return text.encode("utf-8")
    except (ValueError, KeyError):
        raise DeltaError(f"spark-dask: partition value {text!r} of column {column!r} is not a {delta_type}") from None
    raise DeltaError(f"spark-dask: partition column {column!r} has type {delta_type}, which Delta cannot partition by")


def partition_column(value, target, num_rows: int):
    """A column of ``num_rows`` copies of one partition value."""
    import pyarrow as pa

    if value is None:
        return pa.nulls(num_rows, target.type)
    return pa.repeat(pa.scalar(value, type=target.type), num_rows)


__all__ = [
    "FIELD_ID", "PHYSICAL", "arrow_schema", "logical_column", "partition_column", "partition_value",
    "field_index", "local_time", "physical_name", "table_schema", "zone",
]  # fmt: skip
