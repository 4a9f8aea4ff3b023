"""Read one data file of a Delta table on a Dask worker: its deletion vector applied,
its columns under their logical names and types (dates and timestamps of a file in
Spark's legacy hybrid calendar rebased as Spark reads them: :mod:`.calendar`), its
partition values added, the row filter and the projection applied. Shipped by value
to the workers (they need pyarrow and fsspec, and pyroaring for a table with deletion
vectors).

A task is one file's record from the log (``path``, ``partitionValues``,
``deletionVector``); the plan is what every file of the read shares (see
:func:`plan`).
"""

from __future__ import annotations

import functools
import operator
from urllib.parse import unquote, urlparse

from spark_dask.delta import calendar, compare
from spark_dask.delta import dv as dvs
from spark_dask.delta import schema as schemas
from spark_dask.handoff import arrow_types


def plan(root: str, table_schema: dict, mode: str, tz: str, columns, filters, storage_options, backend: str) -> dict:
    """What every file task of one read shares (small and picklable)."""
    arrow = schemas.arrow_schema(table_schema, tz)
    return {
        "root": root,
        "fields": table_schema["fields"],
        "schema": arrow.serialize().to_pybytes(),
        "mode": mode,
        "tz": tz,
        "columns": list(columns) if columns is not None else None,
        "filters": filters,
        "storage_options": storage_options or {},
        "backend": backend,
    }


def target_schema(plan: dict):
    """The Arrow schema of the table's rows (logical names and types), from the plan."""
    import pyarrow as pa

    return pa.ipc.read_schema(pa.py_buffer(plan["schema"]))


def file_uri(root: str, path: str) -> str:
    """A data file's location: ``path`` in the log is a URI-encoded path relative to
    the table's root, or an absolute URI, whose path is encoded too (Delta opens
    ``new Path(new URI(path))``: DeltaFileOperations.absolutePath).

    >>> file_uri("/t", "k=1/part%20one.parquet")
    '/t/k=1/part one.parquet'
    >>> file_uri("s3://b/t", "s3://other/d%3D1/x%20y.parquet")
    's3://other/d=1/x y.parquet'
    >>> file_uri("/t", "file:/data/x%25.parquet")
    '/data/x%.parquet'
    """
    if urlparse(path).scheme:
        return dvs.absolute_path(path)
    return root.rstrip("/") + "/" + unquote(path)


def read_file(task: dict, plan: dict):
    """One Dask partition: the file's live rows, as pandas (or cudf)."""
    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = target_schema(plan)
    fs, _ = fsspec.core.url_to_fs(plan["root"], **plan["storage_options"])
    with fs.open(file_uri(plan["root"], task["path"]), "rb") as f:
        pf = pq.ParquetFile(f, coerce_int96_timestamp_unit="us")
        data = pf.read(columns=_physical_columns(pf.schema_arrow, plan), use_threads=False)
    deleted = dvs.deleted_rows(task.get("deletionVector"), plan["root"], fs)
    mask = dvs.keep_mask(data.num_rows, deleted)
    if mask is not None:
        data = data.filter(pa.array(mask))
    # the live rows only: a deleted row's timestamp cannot refuse the file
    data = calendar.in_gregorian(data, pf, _table_names(pf.schema_arrow, plan), plan["root"], task["path"])
    table = logical_table(data, task.get("partitionValues") or {}, plan, target)
    return to_frame(table, plan)


def _needed(plan: dict) -> set[str] | None:
    """The logical columns the read needs (projected and filtered), or None for all."""
    if plan["columns"] is None:
        return None
    needed = set(plan["columns"])
    for conjunction in plan["filters"] or []:
        needed.update(column for column, _, _ in conjunction)
    return needed


def _physical_columns(file_schema, plan: dict) -> list[str]:
    needed = _needed(plan)
    return [name for name, logical in _table_names(file_schema, plan).items() if needed is None or logical in needed]


def _table_names(file_schema, plan: dict) -> dict[str, str]:
    """The file's top-level columns that hold the table's, each to its name in the table."""
    out = {}
    for field in plan["fields"]:
        index = schemas.field_index(file_schema, field, plan["mode"])
        if index is not None:
            out[file_schema.field(index).name] = field["name"]
    return out


def logical_table(data, partition_values: dict, plan: dict, target):
    """The file's rows under the table's logical schema, filtered and projected."""
    import pyarrow as pa

    needed = _needed(plan)
    arrays, fields = [], []
    for field, arrow_field in zip(plan["fields"], target):
        if needed is not None and field["name"] not in needed:
            continue
        key = schemas.physical_name(field, plan["mode"])
        if key in partition_values:
            value = schemas.partition_value(partition_values[key], field["type"], field["name"], plan["tz"])
            arrays.append(schemas.partition_column(value, arrow_field, data.num_rows))
        else:
            arrays.append(schemas.logical_column(data, field, arrow_field, plan["mode"]))
        fields.append(arrow_field)
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    if plan["filters"]:
        table = table.filter(row_filter(plan["filters"], table.schema))
    if plan["columns"] is not None:
        table = table.select(plan["columns"])
    return table


def row_filter(dnf, schema):
    """The Arrow expression of filters in disjunctive normal form whose terms are
    ``(column, op, Match)`` (:func:`spark_dask.delta.prune.normalize`): each term holds
    where the column's value is one of the Match's (Spark's comparison, decided in
    :mod:`spark_dask.delta.compare`), compared as the column's own type.

    >>> import pyarrow as pa
    >>> from spark_dask.delta import prune
    >>> dnf = prune.normalize([[("x", ">", 3), ("x", "!=", 5)], [("x", "==", 0)]], [{"name": "x", "type": "long"}], "UTC")
    >>> pa.table({"x": [0, 3, 4, 5, 6, None]}).filter(row_filter(dnf, pa.schema([("x", pa.int64())])))["x"].to_pylist()
    [0, 4, 6]
    """
    groups = [
        functools.reduce(operator.and_, [match_expression(c, m, schema.field(c).type) for c, _, m in g]) for g in dnf
    ]
    return functools.reduce(operator.or_, groups)


def match_expression(name: str, match, arrow_type):
    """The Arrow expression of one term: where column ``name`` holds one of the values
    ``match`` holds for (NaN above every number and equal to itself; a null never)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = pc.field(name)
    floating = pa.types.is_floating(arrow_type)
    parts = []
    plain = [p for p in match.points if compare.key(p) != compare.NAN]
    if plain:
        if floating and any(p == 0 for p in plain):
            plain += [0.0, -0.0]  # Spark: -0.0 = 0.0
        parts.append(column.isin(pa.array(plain, type=arrow_type)))
    if compare.NAN in match.keys:
        parts.append(pc.is_nan(column))
    parts += [_range_expression(column, r, arrow_type, floating) for r in match.ranges]
    inner = functools.reduce(operator.or_, parts) if parts else pc.scalar(False)
    return (~inner & column.is_valid()) if match.negate else inner


def _range_expression(column, bounds, arrow_type, floating: bool):
    import pyarrow as pa
    import pyarrow.compute as pc

    low, low_in, high, high_in = bounds
    out = column.is_valid()  # the range (None, None): every non-null value
    if low is not None:
        if floating and compare.key(low) == compare.NAN:
            side = pc.is_nan(column) if low_in else pc.scalar(False)
        else:
            side = (column >= pa.scalar(low, arrow_type)) if low_in else (column > pa.scalar(low, arrow_type))
            side = (side | pc.is_nan(column)) if floating else side  # NaN is above every number
        out = out & side
    if high is not None:
        if floating and compare.key(high) == compare.NAN:
            side = column.is_valid() if high_in else ~pc.is_nan(column)
        else:
            side = (column <= pa.scalar(high, arrow_type)) if high_in else (column < pa.scalar(high, arrow_type))
        out = out & side
    return out


def to_frame(table, plan: dict):
    if plan["backend"] == "cudf":
        import cudf

        return cudf.DataFrame.from_arrow(table)
    return arrow_types.table_to_pandas(table)


__all__ = ["file_uri", "logical_table", "plan", "read_file", "row_filter", "target_schema", "to_frame"]
