"""The pure parts of to_dask / to_spark, without Spark: type mapping, placement, slots."""

from __future__ import annotations

import datetime as dt
import math
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from spark_dask import capacity
from spark_dask.capacity import ClusterFacts, GangPlan
from spark_dask.handoff import arrow_types as at
from spark_dask.handoff import files
from spark_dask.handoff import transfer as handoff_task

pytestmark = pytest.mark.core


def field(t, nullable=True, name="c"):
    return {"name": name, "type": t, "nullable": nullable, "metadata": {}}


@pytest.mark.parametrize("spark_type,arrow_type", [
    ("boolean", pa.bool_()), ("byte", pa.int8()), ("short", pa.int16()), ("integer", pa.int32()),
    ("long", pa.int64()), ("float", pa.float32()), ("double", pa.float64()),
    ("decimal(38,10)", pa.decimal128(38, 10)), ("string", pa.string()), ("varchar(5)", pa.string()),
    ("binary", pa.binary()), ("date", pa.date32()), ("timestamp", pa.timestamp("us", tz="Asia/Kolkata")),
    ("timestamp_ntz", pa.timestamp("us")), ("interval day to second", pa.duration("us")),
    ("interval hour", pa.duration("us")), ("void", pa.null()),
    ({"type": "array", "elementType": "timestamp", "containsNull": False},
     pa.list_(pa.field("element", pa.timestamp("us", tz="Asia/Kolkata"), nullable=False))),
    ({"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True},
     pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.int64()))),
    ({"type": "struct", "fields": [field("integer", False, "a")]}, pa.struct([pa.field("a", pa.int32(), False)])),
])  # fmt: skip
def test_spark_to_arrow_follows_sparks_conversion(spark_type, arrow_type):
    # pyspark/sql/pandas/types.py to_arrow_type, with the session time zone on every timestamp
    assert at.spark_to_arrow_type(spark_type, "Asia/Kolkata") == arrow_type


def test_large_var_types():
    assert at.spark_to_arrow_type("string", "UTC", large=True) == pa.large_string()
    assert at.spark_to_arrow_type("binary", "UTC", large=True) == pa.large_binary()


@pytest.mark.parametrize("spark_type,match", [
    ("interval year to month", "year-month intervals"),
    ("calendarinterval", "CalendarIntervalType"),
    ("variant", "VARIANT"),
    ({"type": "udt", "class": "org.apache.spark.ml.linalg.VectorUDT"}, "vector_to_array"),
    ("time(6)", "cannot move"),
])  # fmt: skip
def test_types_that_cannot_cross_name_the_column(spark_type, match):
    schema = {"type": "struct", "fields": [field("long", name="ok"), field(spark_type, name="the col")]}
    with pytest.raises(at.HandoffTypeError, match=match) as e:
        at.spark_to_arrow_schema(schema, "UTC")
    assert "column 'the col'" in str(e.value)


def test_nested_unsupported_type_names_the_top_level_column():
    t = {"type": "array", "elementType": "calendarinterval", "containsNull": True}
    with pytest.raises(at.HandoffTypeError, match="column 'outer'"):
        at.spark_to_arrow_schema({"fields": [field(t, name="outer")]}, "UTC")


def test_duplicate_and_missing_columns():
    with pytest.raises(at.HandoffTypeError, match=r"duplicate column names \['a'\]"):
        at.spark_to_arrow_schema({"fields": [field("long", name="a"), field("long", name="a")]}, "UTC")
    with pytest.raises(at.HandoffTypeError, match="no columns"):
        at.spark_to_arrow_schema({"fields": []}, "UTC")


@pytest.mark.parametrize("arrow_type,nullable,dtype", [
    (pa.int64(), False, "int64"), (pa.int64(), True, "int64[pyarrow]"), (pa.float64(), False, "float64"),
    (pa.float64(), True, "double[pyarrow]"), (pa.bool_(), False, "bool"), (pa.bool_(), True, "bool[pyarrow]"),
    (pa.string(), True, "string"), (pa.large_string(), False, "string"),
    (pa.timestamp("us", tz="UTC"), True, "datetime64[us, UTC]"), (pa.timestamp("us"), True, "datetime64[us]"),
    (pa.duration("us"), True, "timedelta64[us]"), (pa.date32(), True, "date32[day][pyarrow]"),
    (pa.decimal128(5, 2), True, "decimal128(5, 2)[pyarrow]"), (pa.binary(), True, "binary[pyarrow]"),
])  # fmt: skip
def test_pandas_dtypes(arrow_type, nullable, dtype):
    assert str(at.pandas_dtype(pa.field("c", arrow_type, nullable))) == dtype


def test_arrow_to_pandas_keeps_nan_and_null_apart_and_back():
    schema = pa.schema([pa.field("x", pa.float64()), pa.field("n", pa.float64(), nullable=False)])
    table = pa.table({"x": [1.0, float("nan"), None], "n": [float("nan"), 1.0, 2.0]}, schema=schema)
    df = at.table_to_pandas(table)
    assert df["x"].array._pa_array.null_count == 1 and math.isnan(df["x"].array._pa_array[1].as_py())
    back = at.frame_to_arrow(df, schema)
    assert back.schema == schema and repr(back.to_pydict()) == repr(table.to_pydict())  # NaN != NaN: compare text


def test_a_file_of_one_batch_loads_without_a_copy(tmp_path):
    """A partition file of one record batch (one chunk per column) becomes a pandas
    frame over the memory-mapped file (numbers, nullable ones, dates; not strings, whose
    offsets pandas widens to large_string): its columns allocate nothing (NumPy's allocations
    are what tracemalloc sees, Arrow's its memory pool), so the data is held once on
    the host; a file of four
    batches is copied once (its chunks concatenated), as before (issue 36)."""
    import tracemalloc

    n = 500_000
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("x", pa.float64(), nullable=False),
                        pa.field("n", pa.float64()), pa.field("d", pa.date32())])  # fmt: skip
    dates = pa.array(np.arange(n) % 1000, pa.int32()).cast(pa.date32())
    table = pa.table([np.arange(n), np.random.rand(n), np.random.rand(n), dates], schema=schema)
    data = table.nbytes
    for batches in (1, 4):
        path = str(tmp_path / f"part-{batches}.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            for batch in table.to_batches(max_chunksize=-(-n // batches)):
                writer.write_batch(batch)
        mapped = pa.ipc.open_file(pa.memory_map(path, "r")).read_all()
        arrow_before = pa.total_allocated_bytes()
        tracemalloc.start()
        df = at.table_to_pandas(mapped)
        allocated = tracemalloc.get_traced_memory()[1] + pa.total_allocated_bytes() - arrow_before  # NumPy + Arrow
        tracemalloc.stop()
        assert df["id"].sum() == n * (n - 1) // 2 and list(df.columns) == ["id", "x", "n", "d"]
        if batches == 1:
            assert allocated < data / 50, (allocated, data)
        else:
            assert allocated > data / 2, (allocated, data)  # the chunks concatenated
        del df, mapped


def test_frame_to_arrow_conversions():
    schema = pa.schema([
        pa.field("ts", pa.timestamp("us", tz="UTC")), pa.field("u", pa.int64(), nullable=False),
        pa.field("s", pa.string()), pa.field("c", pa.string()),
    ])  # fmt: skip
    df = pd.DataFrame({
        "ts": pd.to_datetime(["2020-01-01 00:00:00.000001999"]).tz_localize("Europe/Paris"),
        "u": np.array([7], dtype="uint32"),
        "s": ["x"],
        "c": pd.Categorical(["y"]),
    })  # fmt: skip
    table = at.frame_to_arrow(df, schema)
    assert table.schema == schema
    assert table.column("ts")[0].as_py() == dt.datetime(2019, 12, 31, 23, 0, 0, 1, tzinfo=dt.timezone.utc)
    with pytest.raises(at.HandoffTypeError, match=r"column 's' cannot be converted"):
        at.frame_to_arrow(pd.DataFrame({"ts": df.ts, "u": df.u, "s": [b"\xff"], "c": df.c}), schema)
    nulls = pa.schema([pa.field("u", pa.int64(), nullable=False)])
    with pytest.raises(at.HandoffTypeError, match="holds 1 nulls"):
        at.frame_to_arrow(pd.DataFrame({"u": pd.array([None], dtype="Int64")}), nulls)


def test_spark_schema_for_frame():
    meta = pd.DataFrame({
        1: pd.Series([], dtype="int16"), "f": pd.Series([], dtype="float32"), "m": pd.Series([], dtype="Int8"),
        "s": pd.Series([], dtype=object), "a": pd.Series([], dtype=pd.ArrowDtype(pa.list_(pa.int64()))),
        "z": pd.Series([], dtype="datetime64[ns, UTC]"),
    })  # fmt: skip
    fields = at.spark_schema_for_frame(meta)["fields"]
    assert [(f["name"], f["type"], f["nullable"]) for f in fields] == [
        ("1", "short", False), ("f", "float", False), ("m", "byte", True), ("s", "string", True),
        ("a", {"type": "array", "elementType": "long", "containsNull": True}, True), ("z", "timestamp", True),
    ]  # fmt: skip
    with pytest.raises(at.HandoffTypeError, match="duplicate column names"):
        at.spark_schema_for_frame(pd.DataFrame([[1, 2]], columns=["a", "a"]))
    with pytest.raises(at.HandoffTypeError, match="column 'p' has pandas dtype period"):
        at.spark_schema_for_frame(pd.DataFrame({"p": pd.period_range("2020", periods=1, freq="M")}))


# ------------------------------------------------------------------ placement and names
def test_host_table_and_push_targets():
    hosts = files.host_table({
        "tls://10.0.0.2:7": {"hostname": "b", "root": "/b/7", "spark_host": "10.0.0.2"},
        "tls://10.0.0.1:9": {"hostname": "a", "root": "/a/9", "spark_host": "10.0.0.1"},
        "tls://10.0.0.1:3": {"hostname": "a", "root": "/a/3"},  # a worker spark-dask did not start
    })  # fmt: skip
    assert hosts["a"] == {"ip": "10.0.0.1", "root": "/a/3", "spark_host": "10.0.0.1",
                          "workers": ["tls://10.0.0.1:3", "tls://10.0.0.1:9"]}  # fmt: skip
    parts = files.read_parts(
        [{"partition": 0, "hostname": "b", "path": "/b/7/p0"}, {"partition": 1, "hostname": "a", "path": None},
         {"partition": 2, "hostname": "a", "path": "/a/3/p2"}], hosts,
    )  # fmt: skip
    assert [(p["partition"], p["spark_host"]) for p in parts] == [(0, "10.0.0.2"), (2, "10.0.0.1")]
    # the workers of each machine: once per machine, not once per file (issue 70, point 5)
    assert not any("workers" in p for p in parts)
    assert files.host_workers(hosts) == {"a": ["tls://10.0.0.1:3", "tls://10.0.0.1:9"], "b": ["tls://10.0.0.2:7"]}
    assert [files.push_target(p, hosts) for p in range(4)] == [
        ("a", "tls://10.0.0.1:3"), ("a", "tls://10.0.0.1:9"), ("b", "tls://10.0.0.2:7"), ("a", "tls://10.0.0.1:3"),
    ]  # fmt: skip
    assert files.transfer_dirs(hosts, "spark-dask-handoff-x") == [
        ("a", "/a/3/spark-dask-handoff-x"),
        ("b", "/b/7/spark-dask-handoff-x"),
    ]
    with pytest.raises(ValueError):
        files.push_target(0, {})


def test_names_and_keys():
    d = files.transfer_dir_name("spark-dask-abc", "t1")
    assert files.is_transfer_dir(f"/x/{d}/") and not files.is_transfer_dir("/x/blockmgr-1")
    assert files.in_transfer_dir(f"/x/{d}/{files.part_file_name(3, 1)}")
    assert not files.in_transfer_dir("/etc/passwd") and not files.in_transfer_dir(f"/x/{d}/.hidden")
    assert files.part_file_name(3, 1) == "part-00003-a1.arrow" and files.part_file_name(12) == "part-00012.arrow"
    assert files.transfer_of_key(files.load_key("ab12", 7)) == "ab12"
    assert files.transfer_of_key("other-key") is None


def test_ordered_parts_keeps_first_attempt_and_drops_empty():
    rows = [
        {"partition": 2, "rows": 5, "attempt": 0}, {"partition": 0, "rows": 3, "attempt": 1},
        {"partition": 1, "rows": 0, "attempt": 0}, {"partition": 2, "rows": 5, "attempt": 1},
    ]  # fmt: skip
    assert [(r["partition"], r["attempt"]) for r in files.ordered_parts(rows)] == [(0, 1), (2, 0)]


def facts(**kw):
    base = dict(executors=2, executor_cores=4, executor_memory=2**30, slots=8, task_profiles=True)
    base.update(kw)
    return ClusterFacts(**base)


def test_transfer_slots_cpu_clusters():
    gang = GangPlan("cpu", False, 2, 2, 1, task_cpus=3)
    assert capacity.transfer_slots(facts(), gang, cpu_only=False) == 2
    every = GangPlan("cpu", False, 8, 8, 1)
    assert capacity.transfer_slots(facts(), every, cpu_only=False) == 0
    assert capacity.transfer_slots(facts(slots=None), gang, cpu_only=False) is None


def test_transfer_slots_gpu_clusters_need_a_cpu_profile():
    # Databricks' default: one GPU per task; the gang holds every GPU (exclusive)
    f = facts(executors=2, executor_cores=8, executor_gpus=1, task_gpus=1, slots=2)
    gang = GangPlan("cuda", True, 2, 2, 1, gpu_mode="exclusive")
    assert capacity.needs_cpu_profile(f, profiles_available=True)
    assert capacity.transfer_slots(f, gang, cpu_only=False) == 0
    assert capacity.transfer_slots(f, gang, cpu_only=True) == 14
    assert not capacity.needs_cpu_profile(facts(), profiles_available=True)
    msg = capacity.no_slot_message(f, gang, "to_dask", cpu_only=False)
    assert "n_workers=1" in msg and "spark.executor.cores" in msg and "CPU-only profile" in msg
    assert "Nothing was started" in msg


def test_worker_side_file_service(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{tmp_path}/missing,{tmp_path}")
    assert handoff_task.local_root() == str(tmp_path)
    info = handoff_task.host_info()
    assert info["root"] == str(tmp_path)
    d = tmp_path / files.transfer_dir_name("spark-dask-t", "x")
    d.mkdir()
    (d / "part-00000.arrow").write_bytes(b"x")
    other = tmp_path / "keep"
    other.mkdir()
    assert (
        handoff_task.remove_dirs([(info["hostname"], str(other)), ("x", str(tmp_path / "spark-dask-handoff-gone"))])
        == 0
    )
    assert other.exists()  # not a transfer directory: kept
    # removed wherever it exists, whatever host was recorded (a pushed file's receiver)
    assert handoff_task.remove_dirs([("another-host", str(d))]) == 1
    assert not d.exists() and other.exists()


def test_write_and_load_a_partition(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("s", pa.string())])
    frame = pd.DataFrame({"a": [1, 2], "s": ["x", None]})
    out = handoff_task.write_partition(
        frame, 4, files.transfer_dir_name("spark-dask-t", "y"), schema.serialize().to_pybytes()
    )
    assert out["rows"] == 2 and os.path.basename(out["path"]) == "part-00004.arrow"
    back = handoff_task.load_partition(out)
    assert back["a"].tolist() == [1, 2] and back["s"].tolist()[0] == "x" and pd.isna(back["s"][1])
    assert str(back["a"].dtype) == "int64" and str(back["s"].dtype) == "string"
    empty = handoff_task.write_partition(frame.iloc[:0], 5, "spark-dask-handoff-z", schema.serialize().to_pybytes())
    assert empty["path"] is None and empty["rows"] == 0
    # in record batches of at most batch_rows rows
    many = pd.DataFrame({"a": range(25), "s": [str(i) for i in range(25)]})
    out = handoff_task.write_partition(many, 6, "spark-dask-handoff-z", schema.serialize().to_pybytes(), 10)
    with pa.ipc.open_file(out["path"]) as f:
        assert [f.get_batch(i).num_rows for i in range(f.num_record_batches)] == [10, 10, 5]
    back = handoff_task.load_partition(out)
    assert back["a"].tolist() == list(range(25)) and back["s"].tolist() == [str(i) for i in range(25)]
