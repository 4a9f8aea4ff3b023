"""Read one data file of a Delta table on a Dask worker: its deletion vector applied,
its columns under their logical names and types, its partition values added, the
row filter and the projection applied. Shipped by value to the workers (they need
pyarrow and fsspec, and pyroaring for a table with deletion vectors).

A task is one file's record from the log (``path``, ``partitionValues``,
``deletionVector``); the plan is what every file of the read shares (see
:func:`plan`).
"""

from __future__ import annotations

from urllib.parse import unquote, urlparse

from spark_dask import arrow_types
from spark_dask.delta import dv as dvs
from spark_dask.delta import prune
from spark_dask.delta import schema as schemas


def plan(root: str, table_schema: dict, mode: str, tz: str, columns, filters, storage_options, backend: str) -> dict:
    """What every file task of one read shares (small and picklable)."""
    arrow = schemas.arrow_schema(table_schema, tz)
    return {
        "root": root,
        "fields": table_schema["fields"],
        "schema": arrow.serialize().to_pybytes(),
        "mode": mode,
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
    the table's root, or an absolute URI.

    >>> file_uri("/t", "k=1/part%20one.parquet")
    '/t/k=1/part one.parquet'
    >>> file_uri("s3://b/t", "s3://other/x.parquet")
    's3://other/x.parquet'
    >>> file_uri("/t", "file:/data/x.parquet")
    '/data/x.parquet'
    """
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if parsed.scheme:
        return path
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
    out = []
    for field in plan["fields"]:
        if needed is not None and field["name"] not in needed:
            continue
        index = schemas.field_index(file_schema, field, plan["mode"])
        if index is not None:
            out.append(file_schema.field(index).name)
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
            value = schemas.partition_value(partition_values[key], field["type"], field["name"])
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
    """The Arrow expression of filters in disjunctive normal form, each value a scalar of
    its column's type (pyarrow's own ``filters_to_expression`` leaves a Decimal of
    another scale or a string beside a date to the kernels, which get them wrong or fail).

    >>> import pyarrow as pa
    >>> str(row_filter([[("x", ">", 3), ("x", "!=", 5)], [("x", "==", 0)]], pa.schema([("x", pa.int64())])))
    '(((x > 3) and (x != 5)) or (x == 0))'
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    def literal(name, value):
        return pa.scalar(value, type=schema.field(name).type)

    def isin(column, name, values):
        return column.isin(pa.array(list(values), type=schema.field(name).type))

    return prune.fold(dnf, pc.field, literal, isin)


def to_frame(table, plan: dict):
    if plan["backend"] == "cudf":
        import cudf

        return cudf.DataFrame.from_arrow(table)
    return arrow_types.table_to_pandas(table)


__all__ = ["file_uri", "logical_table", "plan", "read_file", "row_filter", "target_schema", "to_frame"]
