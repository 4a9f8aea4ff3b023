"""Type mapping between Spark SQL, Arrow and pandas, for ``to_dask`` / ``to_spark``.

Pure functions: no Spark, no cluster. They read Spark schemas as JSON
(``df.schema.jsonValue()``), so they run anywhere pyarrow does. Shipped by value to the
Dask workers (which load the Arrow files) together with :mod:`spark_dask.handoff.transfer`.

Spark → Arrow follows Spark's own conversion (``pyspark/sql/pandas/types.py``
``to_arrow_type``, the JVM's ``ArrowUtils.toArrowType``): ``TimestampType`` is
``timestamp[us, tz=<spark.sql.session.timeZone>]`` (nested ones too),
``TimestampNTZType`` ``timestamp[us]``, ``DayTimeIntervalType`` ``duration[us]``,
strings and binaries ``large_*`` when ``spark.sql.execution.arrow.useLargeVarTypes``
is on; nullability is carried in the Arrow fields.

Arrow → pandas is chosen to be lossless (see :func:`pandas_dtype`); pandas → Arrow →
Spark is its inverse, so a Spark → Dask → Spark round trip gives back the same types
and values.
"""

from __future__ import annotations

import re

from spark_dask.errors import HandoffTypeError

_SIMPLE = {
    "boolean": "bool",
    "byte": "int8",
    "short": "int16",
    "integer": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "date": "date32",
    "void": "null",
}

_WHY_NOT = {
    "calendarinterval": "Spark's CalendarIntervalType has no Arrow form in Spark's conversion",
    "variant": "VARIANT values are Spark-specific binary encodings",
    "udt": "user-defined types (e.g. pyspark.ml vectors) are not carried as such; convert them first "
    "(pyspark.ml.functions.vector_to_array)",
}


def _column_error(column: str, what: str, why: str) -> HandoffTypeError:
    return HandoffTypeError(
        f"spark-dask: column {column!r} has type {what}, which cannot move between Spark and Dask: {why}"
    )


def _type_name(t) -> str:
    if isinstance(t, str):
        return t
    return t.get("type", "?") if isinstance(t, dict) else str(t)


def spark_to_arrow_type(t, timezone: str, large: bool = False, column: str = "?"):
    """The Arrow type Spark produces for a Spark type (JSON form of ``DataType.jsonValue()``)."""
    import pyarrow as pa

    if isinstance(t, str):
        if t in _SIMPLE:
            return getattr(pa, _SIMPLE[t])() if t != "boolean" else pa.bool_()
        if t == "string" or re.fullmatch(r"(var)?char\(\d+\)", t) or t.startswith("string collate"):
            return pa.large_string() if large else pa.string()
        if t == "binary":
            return pa.large_binary() if large else pa.binary()
        if t == "timestamp":
            return pa.timestamp("us", tz=timezone)
        if t == "timestamp_ntz":
            return pa.timestamp("us")
        m = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", t)
        if m:
            return pa.decimal128(int(m.group(1)), int(m.group(2)))
        if t == "decimal":
            return pa.decimal128(10, 0)
        if re.fullmatch(r"interval (day|hour|minute|second)( to (hour|minute|second))?", t):
            return pa.duration("us")
        if t.startswith("interval"):
            raise _column_error(
                column,
                t,
                "year-month intervals have no lossless pandas or cudf form; cast to an integer number of months first",
            )
        why = _WHY_NOT.get(t.split("(")[0], "Spark's Arrow conversion (and pandas) do not carry it")
        raise _column_error(column, t, why)
    kind = t.get("type")
    if kind == "array":
        element = spark_to_arrow_type(t["elementType"], timezone, large, column)
        return pa.list_(pa.field("element", element, nullable=bool(t.get("containsNull", True))))
    if kind == "map":
        key = pa.field("key", spark_to_arrow_type(t["keyType"], timezone, large, column), nullable=False)
        value = spark_to_arrow_type(t["valueType"], timezone, large, column)
        return pa.map_(key, pa.field("value", value, nullable=bool(t.get("valueContainsNull", True))))
    if kind == "struct":
        return pa.struct([spark_to_arrow_field(f, timezone, large, column) for f in t["fields"]])
    raise _column_error(column, _type_name(t), _WHY_NOT.get(kind, "Spark's Arrow conversion does not carry it"))


def spark_to_arrow_field(f: dict, timezone: str, large: bool = False, column: str | None = None):
    import pyarrow as pa

    return pa.field(
        f["name"],
        spark_to_arrow_type(f["type"], timezone, large, column or f["name"]),
        nullable=bool(f.get("nullable", True)),
    )


def spark_to_arrow_schema(schema: dict, timezone: str, large: bool = False):
    """The Arrow schema of Spark's Arrow batches for a DataFrame schema (JSON).

    Raises :class:`HandoffTypeError` naming the first column that cannot move, and for
    duplicate or missing column names (pandas and Dask need unique names).
    """
    import pyarrow as pa

    fields = schema.get("fields", [])
    if not fields:
        raise HandoffTypeError("spark-dask: the DataFrame has no columns; there is nothing to move")
    names = [f["name"] for f in fields]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise HandoffTypeError(
            f"spark-dask: duplicate column names {dup}: a Dask DataFrame needs unique names; rename them "
            "first (df.toDF(...) or alias)"
        )
    return pa.schema([spark_to_arrow_field(f, timezone, large) for f in fields])


# ---------------------------------------------------------------------- Arrow -> pandas
def pandas_dtype(field):
    """The pandas dtype a column of this Arrow field becomes (lossless).

    * non-nullable integers, floats, booleans: NumPy dtypes (``int64``, ``float64``, ``bool``);
    * nullable ones: Arrow-backed (``int64[pyarrow]``, ``double[pyarrow]``, ``bool[pyarrow]``):
      nulls stay nulls, and NaN stays distinct from null (pandas' masked ``Float64``
      turns NaN into NA when it reads Arrow);
    * strings: ``pd.StringDtype("pyarrow")``;
    * ``timestamp[us, tz]`` (Spark TIMESTAMP): ``datetime64[us, tz]`` in the session time zone;
      ``timestamp[us]`` (TIMESTAMP_NTZ): ``datetime64[us]``; durations ``timedelta64[us]``
      (NaT is null);
    * everything else (decimal, date, binary, arrays, maps, structs, null): ``pd.ArrowDtype``.
    """
    import pandas as pd
    import pyarrow as pa

    t = field.type
    numeric = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
    if numeric and not field.nullable:
        return _numpy_dtype(t)
    if numeric:
        return pd.ArrowDtype(t)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pd.StringDtype("pyarrow")
    if pa.types.is_timestamp(t):
        return pd.DatetimeTZDtype(unit=t.unit, tz=t.tz) if t.tz else _numpy_dtype(t)
    if pa.types.is_duration(t):
        return _numpy_dtype(t)
    return pd.ArrowDtype(t)


def _numpy_dtype(t):
    import numpy as np

    return np.dtype(t.to_pandas_dtype())


# The earliest time (µs since the epoch) pandas < 3 can show in a time zone with rules
# (pd.Timestamp.min: nanoseconds in an int64); before it, printing a datetime64[us, zone]
# value or .tolist() ends the process (a segmentation fault: pandas 2.3.3, America/New_York,
# Europe/Berlin, Asia/Kolkata; UTC and fixed offsets are safe; pandas 3.0 and 3.1 are not affected).
PANDAS2_ZONE_FLOOR_US = -(2**63) // 1000 + 1
_SAFE_ZONE = re.compile(r"^(UTC|Etc/UTC|GMT|Etc/GMT|Z|[+-]\d\d:?\d\d)$")


def zone_range_problem(column, field, pandas_version: str) -> str | None:
    """Why a ``timestamp[us, tz]`` column cannot become a pandas column here (None: it
    can): pandas < 3 crashes on times before 1677-09-21 in a zone with rules.

    >>> import datetime as dt, pyarrow as pa
    >>> t = pa.field("t", pa.timestamp("us", tz="America/New_York"))
    >>> far = pa.chunked_array([pa.array([dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc)], t.type)])
    >>> zone_range_problem(far, t, "2.3.3")[:87]
    "spark-dask: column 't' holds times before 1677-09-21 (the earliest: 0001-01-01 00:00:00"
    >>> zone_range_problem(far, t, "3.0.0") is None, zone_range_problem(far, t.with_type(pa.timestamp("us", tz="UTC")), "2.3.3")
    (True, None)
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    tz = field.type.tz
    if int(pandas_version.split(".")[0]) >= 3 or _SAFE_ZONE.match(tz or "UTC") or not len(column):
        return None
    earliest = pc.min(column.cast(pa.int64())).as_py()
    if earliest is None or earliest >= PANDAS2_ZONE_FLOOR_US:
        return None
    first = pc.min(column.cast(pa.timestamp("us"))).as_py()  # in UTC: the zone's own may be before year 1
    return (
        f"spark-dask: column {field.name!r} holds times before 1677-09-21 (the earliest: {first} UTC), which pandas "
        f"{pandas_version} cannot show in the time zone {tz} (printing them crashes Python). Use pandas >= 3 (on "
        "the driver and the Dask workers), or set spark.sql.session.timeZone to 'UTC' for the read or transfer; or "
        "leave the column out (read_delta's columns=), or cast it to a string or timestamp_ntz in Spark first "
        "(to_dask)"
    )


def column_to_pandas(column, field):
    """One Arrow column (ChunkedArray) as a pandas Series of :func:`pandas_dtype`;
    a HandoffTypeError, naming the column, for times pandas would crash on
    (:func:`zone_range_problem`)."""
    import pandas as pd

    dtype = pandas_dtype(field)
    if isinstance(dtype, pd.DatetimeTZDtype) and (problem := zone_range_problem(column, field, pd.__version__)):
        raise HandoffTypeError(problem)
    if isinstance(dtype, pd.ArrowDtype):
        return pd.Series(pd.arrays.ArrowExtensionArray(column), name=field.name, copy=False)
    if isinstance(dtype, pd.StringDtype):
        import pyarrow as pa

        if pa.types.is_large_string(column.type):
            column = column.cast(pa.string()) if column.nbytes < 2**31 else column
        return pd.Series(dtype.__from_arrow__(column), name=field.name, copy=False)
    series = column.to_pandas()
    if series.dtype != dtype:
        series = series.astype(dtype)
    series.name = field.name
    return series


def table_to_pandas(table):
    """An Arrow table as a pandas DataFrame with the dtypes of :func:`pandas_dtype`.

    Without a copy where Arrow allows one: a column of one chunk (a file of one record
    batch) becomes a NumPy or Arrow-backed column over the same memory (a memory-mapped
    file's pages), and the frame keeps its columns as they are (no consolidation into
    2-D blocks, which copies; ``pd.concat`` did in pandas 2)."""
    import pandas as pd

    names = [f.name for f in table.schema]
    if len(set(names)) != len(names):  # pragma: no cover - names are unique (checked on the driver)
        raise HandoffTypeError("spark-dask: duplicate column names")
    columns = {f.name: column_to_pandas(table.column(i), f) for i, f in enumerate(table.schema)}
    return pd.DataFrame(columns, copy=False) if columns else pd.DataFrame(index=pd.RangeIndex(table.num_rows))


def empty_frame(schema, backend: str = "pandas"):
    """The empty frame (Dask ``meta``) for an Arrow schema."""
    table = schema.empty_table()
    if backend == "cudf":
        import cudf

        return cudf.DataFrame.from_arrow(table)
    return table_to_pandas(table)


# ---------------------------------------------------------------------- pandas -> Arrow -> Spark
def arrow_from_pandas_dtype(dtype, column: str = "?"):
    """(Arrow type, nullable) of a pandas dtype, for a Dask → Spark transfer.

    ``object`` columns are strings here (Dask's own convention); ``to_spark`` gives them
    the Spark type of their values instead, typed where each partition is written
    (:func:`infer_object_column`, :func:`merged_object_types`).
    """
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    if isinstance(dtype, pd.ArrowDtype):
        return dtype.pyarrow_dtype, True
    if isinstance(dtype, pd.CategoricalDtype):
        return arrow_from_pandas_dtype(dtype.categories.dtype, column)[0], True
    if isinstance(dtype, pd.StringDtype) or dtype == object:  # noqa: E721
        return pa.string(), True
    if isinstance(dtype, pd.DatetimeTZDtype):
        return pa.timestamp("us", tz=str(dtype.tz)), True
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and hasattr(dtype, "numpy_dtype") and dtype.kind in "iufb":
        # masked Int64 / UInt8 / Float64 / boolean
        return pa.from_numpy_dtype(dtype.numpy_dtype), True
    if isinstance(dtype, np.dtype):
        if dtype.kind == "M":
            return pa.timestamp("us"), True  # NaT is null
        if dtype.kind == "m":
            return pa.duration("us"), True
        if dtype.kind in "iufb":
            return pa.from_numpy_dtype(dtype), False
    raise HandoffTypeError(
        f"spark-dask: column {column!r} has pandas dtype {dtype}, which cannot move to Spark; convert it "
        "first (e.g. .astype(str)), or pass schema=..."
    )


def arrow_to_spark_type(t, column: str = "?"):
    """The Spark type (JSON form) that holds an Arrow type exactly."""
    import pyarrow as pa

    def no(why):
        return HandoffTypeError(f"spark-dask: column {column!r} has Arrow type {t}, which cannot move to Spark: {why}")

    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        signed = {8: "byte", 16: "short", 32: "integer", 64: "long"}
        unsigned = {8: "short", 16: "integer", 32: "long"}  # widened: Spark has no unsigned types
        if pa.types.is_signed_integer(t):
            return signed[t.bit_width]
        if t.bit_width in unsigned:
            return unsigned[t.bit_width]
        raise no("Spark has no unsigned 64-bit type; cast to int64 (if it fits) or to decimal(20,0)")
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise no("Spark decimals have at most 38 digits")
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", lambda _: False)(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_duration(t):
        return "interval day to second"
    if pa.types.is_null(t):
        return "void"
    if pa.types.is_dictionary(t):
        return arrow_to_spark_type(t.value_type, column)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return {
            "type": "array",
            "elementType": arrow_to_spark_type(t.value_type, column),
            "containsNull": t.value_field.nullable,
        }
    if pa.types.is_map(t):
        return {
            "type": "map",
            "keyType": arrow_to_spark_type(t.key_type, column),
            "valueType": arrow_to_spark_type(t.item_type, column),
            "valueContainsNull": t.item_field.nullable,
        }
    if pa.types.is_struct(t):
        return {
            "type": "struct",
            "fields": [
                {"name": f.name, "type": arrow_to_spark_type(f.type, column), "nullable": f.nullable, "metadata": {}}
                for f in (t.field(i) for i in range(t.num_fields))
            ],
        }
    raise no("Spark has no matching type")


def _refuse_object(column: str, why: str) -> HandoffTypeError:
    return HandoffTypeError(
        f"spark-dask: column {column!r} is an object column whose values have no Spark type: {why}; convert it "
        "first, or pass schema=... to to_spark to say what it holds"
    )


def inferred_spark_type(t, column: str = "?"):
    """The Spark type (JSON form) that Spark's own inference (``createDataFrame`` of
    Python objects, ``pyspark.sql.types._infer_type``) gives the values of an object
    column, from the Arrow type pyarrow infers for them: ``bytes`` binary, ``Decimal``
    ``decimal(38,18)``, ``date`` date, ``dict`` a map (Spark's default,
    ``spark.sql.pyspark.inferNestedDictAsStruct.enabled`` off) of string keys, lists
    arrays; ``void`` where every value is missing.

    >>> import pyarrow as pa
    >>> inferred_spark_type(pa.array([{"a": [1]}, {"b": None}]).type)
    {'type': 'map', 'keyType': 'string', 'valueType': {'type': 'array', 'elementType': 'long', 'containsNull': True}, 'valueContainsNull': True}
    >>> import decimal
    >>> inferred_spark_type(pa.array([decimal.Decimal("1.5"), b"x"][:1]).type), inferred_spark_type(pa.null())
    ('decimal(38,18)', 'void')
    """
    import pyarrow as pa

    if pa.types.is_decimal(t):
        return "decimal(38,18)"
    if pa.types.is_struct(t):  # pyarrow reads dicts as structs; Spark as maps of one value type
        value = "void"
        for i in range(t.num_fields):
            value = merge_spark_types(value, inferred_spark_type(t.field(i).type, column), column)
        key = "string" if t.num_fields else "void"
        return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": True}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        element = inferred_spark_type(t.value_type, column)
        return {"type": "array", "elementType": element, "containsNull": True}
    if pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        raise _refuse_object(
            column, f"it holds {t} values (datetime objects); make it a datetime column first (pd.to_datetime)"
        )
    if pa.types.is_null(t) or pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t):
        return arrow_to_spark_type(pa.int64() if pa.types.is_integer(t) else t, column)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return arrow_to_spark_type(t, column)
    if pa.types.is_date(t):
        return "date"
    raise _refuse_object(column, f"pyarrow reads them as {t}")


def merge_spark_types(a, b, column: str = "?"):
    """One Spark type (JSON form) for two partitions' (or values') inferred types:
    ``void`` (nothing known) gives way to the other; arrays and maps merge their
    parts; any other difference is refused, naming the column.

    >>> merge_spark_types({"type": "array", "elementType": "void", "containsNull": True},
    ...                   {"type": "array", "elementType": "long", "containsNull": True})
    {'type': 'array', 'elementType': 'long', 'containsNull': True}
    """
    if a == b or b == "void":
        return a
    if a == "void":
        return b
    kind = a.get("type") if isinstance(a, dict) else None
    if kind is not None and isinstance(b, dict) and b.get("type") == kind and kind in ("array", "map"):
        parts = ("elementType",) if kind == "array" else ("keyType", "valueType")
        return {**a, **{p: merge_spark_types(a[p], b[p], column) for p in parts}}
    raise _refuse_object(column, f"its values have different types ({_type_text(a)} and {_type_text(b)})")


def _type_text(t) -> str:
    if not isinstance(t, dict):
        return t
    if t.get("type") == "array":
        return f"array<{_type_text(t['elementType'])}>"
    return f"map<{_type_text(t['keyType'])},{_type_text(t['valueType'])}>"


LONG_RANGE = (
    "it holds an integer outside Spark's long range (-2**63 to 2**63-1), as Spark's own inference refuses it; "
    "a decimal(38,0) holds integers of up to 38 digits"
)


def infer_object_column(series, column: str):
    """The Spark type (JSON form) of an ``object`` column's values
    (:func:`inferred_spark_type`); values of types pyarrow cannot put in one column
    are refused, naming the column."""
    import pyarrow as pa

    try:
        t = pa.array(series.to_numpy(dtype=object), from_pandas=True).type
    except OverflowError:  # an int beyond int64, where Spark's inference says long and fails too
        raise _refuse_object(column, LONG_RANGE) from None
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        raise _refuse_object(column, f"pyarrow cannot make one column of them ({e})") from None
    return inferred_spark_type(t, column)


def has_void(t) -> bool:
    """Whether a Spark type (JSON form) has a part nothing was inferred for.

    >>> has_void({"type": "map", "keyType": "string", "valueType": "void", "valueContainsNull": True})
    True
    """
    if isinstance(t, dict):
        return any(has_void(t[p]) for p in ("elementType", "keyType", "valueType") if p in t)
    return t == "void"


def with_inferred_types(schema, types: dict):
    """The Arrow schema ``schema`` with the columns ``types`` names (index -> Spark type,
    JSON form, of :func:`infer_object_column`) of those types, as Spark's Arrow form
    makes them (``void``: Arrow ``null``)."""
    import pyarrow as pa

    fields = list(schema)
    for i, t in types.items():
        large = pa.types.is_large_string(fields[i].type)
        fields[i] = fields[i].with_type(spark_to_arrow_type(t, "UTC", large, fields[i].name))
    return pa.schema(fields)


def merged_object_types(spark_schema: dict, reports, columns) -> dict:
    """The Spark schema (JSON) of a ``to_spark`` whose ``object`` columns (indices
    ``columns``) the write tasks typed, each partition by its values (``reports``' ``types``):
    the partitions' types merged (:func:`merge_spark_types`). A column without a value
    stays ``string`` (Dask's convention for ``object``); one with parts no value
    typed (only empty lists or dicts) is refused, as Spark refuses it."""
    fields = [dict(f) for f in spark_schema["fields"]]
    for i in columns:
        column = fields[i]["name"]
        t = "void"
        for report in reports:
            t = merge_spark_types(t, report["types"].get(str(i), "void"), column)
        if has_void(t) and t != "void":
            raise _refuse_object(
                column, f"the type of some of its parts is unknown: no row holds a value there ({_type_text(t)})"
            )
        fields[i]["type"] = "string" if t == "void" else t
    return {**spark_schema, "fields": fields}


def spark_schema_for_frame(meta) -> dict:
    """The Spark schema (JSON) of a pandas or cudf meta frame; the index is not carried."""
    names = [str(c) for c in meta.columns]
    if not names:
        raise HandoffTypeError("spark-dask: the Dask DataFrame has no columns; there is nothing to move")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise HandoffTypeError(f"spark-dask: duplicate column names {dup}: Spark needs unique names; rename them first")
    fields = []
    if _is_cudf(meta):
        schema = meta.to_arrow(preserve_index=False).schema
        for name, field in zip(names, schema):
            fields.append(
                {"name": name, "type": arrow_to_spark_type(field.type, name), "nullable": True, "metadata": {}}
            )
        return {"type": "struct", "fields": fields}
    for name, dtype in zip(names, meta.dtypes):
        t, nullable = arrow_from_pandas_dtype(dtype, name)
        fields.append({"name": name, "type": arrow_to_spark_type(t, name), "nullable": nullable, "metadata": {}})
    return {"type": "struct", "fields": fields}


def _is_cudf(frame) -> bool:
    return type(frame).__module__.split(".")[0] == "cudf"


def frame_to_arrow(frame, schema):
    """A pandas or cudf partition as an Arrow table of exactly ``schema`` (Spark's Arrow types).

    Times finer than microseconds are truncated, as Spark's own conversion does
    (``spark.sql.execution.pandas.convertToArrowArraySafely`` is false by default).
    A value that does not fit raises naming the column.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if _is_cudf(frame):
        table = frame.to_arrow(preserve_index=False)
    else:
        table = None
    columns = []
    for i, field in enumerate(schema):
        try:
            if table is not None:
                col = table.column(i)
            else:
                series = frame.iloc[:, i]
                col = _series_to_arrow(series, field.type)
            if col.type != field.type:
                col = col.cast(options=pc.CastOptions(field.type, allow_time_truncate=True))
        except (
            pa.ArrowInvalid,
            pa.ArrowTypeError,
            pa.ArrowNotImplementedError,
            TypeError,
            ValueError,
            OverflowError,
        ) as e:
            raise HandoffTypeError(
                f"spark-dask: column {field.name!r} cannot be converted to Spark's {field.type}: {e}. "
                "Convert the column first, or pass schema=... to to_spark"
            ) from None
        if not field.nullable and col.null_count:
            raise HandoffTypeError(
                f"spark-dask: column {field.name!r} holds {col.null_count} nulls but its Spark type is not nullable"
            )
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)


def _series_to_arrow(series, target):
    import pandas as pd
    import pyarrow as pa

    dtype = series.dtype
    if isinstance(dtype, pd.ArrowDtype):
        return (
            pa.chunked_array(series.array._pa_array)
            if hasattr(series.array, "_pa_array")
            else pa.chunked_array([pa.array(series.array)])
        )
    if isinstance(dtype, pd.CategoricalDtype):
        series = series.astype(series.cat.categories.dtype)
        dtype = series.dtype
    if dtype.kind == "f" and not isinstance(dtype, pd.api.extensions.ExtensionDtype):
        # NumPy floats: NaN stays NaN (Spark distinguishes NaN from null)
        return pa.chunked_array([pa.array(series.to_numpy(), from_pandas=False)])
    if dtype == object:  # noqa: E721
        return pa.chunked_array([pa.array(series.to_numpy(dtype=object), type=target, from_pandas=True)])
    return pa.chunked_array([pa.array(series, from_pandas=True)])
