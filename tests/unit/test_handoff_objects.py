"""Issue 55: what ``to_spark`` makes of ``object`` columns (the Spark type of their values,
as Spark's own inference gives it), far times that pandas < 3 crashes on, and a
``to_dask`` result computed without its cluster. No Spark: the differential against
``spark.createDataFrame`` is in tests/spark/test_handoff.py."""

from __future__ import annotations

import datetime as dt
import decimal
import subprocess
import sys

import dask
import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
import pytest
from dask.callbacks import Callback
from dask.delayed import Delayed

from spark_dask.errors import HandoffError, HandoffTypeError
from spark_dask.handoff import arrow_types as at
from spark_dask.handoff import driver, files, registry
from spark_dask.handoff import transfer as handoff_task

pytestmark = pytest.mark.core

MAP_OF_LONGS = {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}


def test_object_columns_get_the_type_spark_infers_for_their_values():
    """bytes -> binary (was: string), dicts -> map, lists -> array, Decimal ->
    decimal(38,18), date -> date: pyspark's _infer_type (createDataFrame of Python
    objects, spark.sql.pyspark.inferNestedDictAsStruct.enabled off)."""
    cases = {
        "binary": [b"\x00\x01", None, b""],
        "map": [{"a": 1, "b": None}, {}, None],
        "array": [[1, None], [], None],
        "decimal": [decimal.Decimal("1.5"), None, decimal.Decimal("-123456789.000000000000000001")],
        "date": [dt.date(1, 1, 1), None, dt.date(9999, 12, 31)],
        "string": ["x", None, "ü"],
        "nested": [{"k": [{"z": 1.5}]}, None, {"j": []}],
    }
    got = {name: at.infer_object_column(pd.Series(values, dtype=object), name) for name, values in cases.items()}
    assert got == {
        "binary": "binary",
        "map": MAP_OF_LONGS,
        "array": {"type": "array", "elementType": "long", "containsNull": True},
        "decimal": "decimal(38,18)",
        "date": "date",
        "string": "string",
        "nested": {"type": "map", "keyType": "string", "valueContainsNull": True, "valueType": {
            "type": "array", "containsNull": True, "elementType": {
                "type": "map", "keyType": "string", "valueType": "double", "valueContainsNull": True}}},
    }  # fmt: skip
    assert at.infer_object_column(pd.Series([None, None], dtype=object), "empty") == "void"


@pytest.mark.parametrize("values,why", [
    ([{"a": 1}, [1]], r"pyarrow cannot make one column of them"),
    ([{"a": 1}, {"b": "x"}], r"different types \(long and string\)"),
    ([dt.datetime(2020, 1, 1), None], r"datetime objects.*pd.to_datetime"),
    ([{1: 2}], r"pyarrow cannot make one column of them"),
    ([1, 2**64], r"integer outside Spark's long range.*decimal\(38,0\)"),  # issue 68 point 5: was OverflowError
    ([[1], [-(2**63) - 1]], r"integer outside Spark's long range"),
])  # fmt: skip
def test_object_columns_of_disagreeing_values_are_refused_naming_the_column(values, why):
    with pytest.raises(HandoffTypeError, match=rf"^spark-dask: column 'odd' is an object column.*{why}.*schema=\.\.\."):
        at.infer_object_column(pd.Series(values, dtype=object), "odd")


def test_an_integer_beyond_the_schemas_type_is_refused_naming_the_column():
    """Issue 68 point 5: with ``schema=`` saying long, a Python int beyond int64 raised
    pyarrow's OverflowError; a decimal(38,0) holds it."""
    frame = pd.DataFrame({"x": pd.Series([1, 2**64], dtype=object)})
    said = r"^spark-dask: column 'x' cannot be converted to Spark's int64: Python int too large.*schema=\.\.\."
    with pytest.raises(HandoffTypeError, match=said):
        at.frame_to_arrow(frame, pa.schema([("x", pa.int64())]))
    table = at.frame_to_arrow(frame, pa.schema([("x", pa.decimal128(38, 0))]))
    assert table.column(0).to_pylist() == [1, 2**64]


def test_the_partitions_types_merge_and_their_files_are_read_as_one_schema(tmp_path, monkeypatch):
    """Each write task types its partition's values; the driver merges them (a part no
    row of a partition filled is Arrow null there) and the read casts each file to the
    merged schema. Parts no partition filled, or types that differ, are refused."""
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    frames = [
        pd.DataFrame({"i": [1, 2], "m": [{"a": None}, {}], "l": [[], None], "b": [b"x", None]}),
        pd.DataFrame({"i": [3], "m": [{"b": 2}], "l": [[dt.date(2020, 1, 2)]], "b": [None]}),
        pd.DataFrame({"i": [], "m": [], "l": [], "b": []}).astype({"i": "int64"}),
    ]
    meta_schema = at.spark_schema_for_frame(frames[0].iloc[:0])
    infer = (1, 2, 3)
    schema = at.spark_to_arrow_schema(meta_schema, "UTC")
    written = [
        handoff_task.write_partition(f, i, "spark-dask-handoff-t-1", schema.serialize().to_pybytes(), None, infer)
        for i, f in enumerate(frames)
    ]
    assert written[0]["types"]["1"]["valueType"] == "void" and written[2]["types"] == {}
    merged = at.merged_object_types(meta_schema, written, infer)
    assert [f["type"] for f in merged["fields"]] == [
        "long", MAP_OF_LONGS, {"type": "array", "elementType": "date", "containsNull": True}, "binary"]  # fmt: skip
    final = at.spark_to_arrow_schema(merged, "UTC")
    rows = []
    for w in written[:2]:
        reader = pa.ipc.open_file(w["path"])
        for j in range(reader.num_record_batches):
            rows += handoff_task.conformed(reader.get_batch(j), final, w["path"]).to_pylist()
    assert rows == [
        {"i": 1, "m": [("a", None)], "l": [], "b": b"x"},
        {"i": 2, "m": [], "l": None, "b": None},
        {"i": 3, "m": [("b", 2)], "l": [dt.date(2020, 1, 2)], "b": None},
    ]
    only_empty = [{"types": {"1": {"type": "array", "elementType": "void", "containsNull": True}}}]
    with pytest.raises(HandoffTypeError, match=r"column 'm' .* no row holds a value there \(array<void>\)"):
        at.merged_object_types(meta_schema, only_empty, (1,))
    clash = [{"types": {"2": "binary"}}, {"types": {"2": "date"}}]
    with pytest.raises(HandoffTypeError, match=r"column 'l' .*different types \(binary and date\)"):
        at.merged_object_types(meta_schema, clash, (2,))
    assert at.merged_object_types(meta_schema, [{"types": {}}], (3,))["fields"][3]["type"] == "string"


SHOW = "import sys, pandas as pd; frame = pd.read_pickle(sys.argv[1]); print(frame); print(frame['t'].tolist())"


def shown_in_a_subprocess(path) -> str:
    """What printing the pickled frame at ``path`` and ``.tolist()`` of its column ``t``
    show, done in another process: a crash there fails the test instead of ending pytest.
    (The frame itself is never an argument or a local of a failing frame: pytest's report
    would print it.)"""
    run = subprocess.run([sys.executable, "-c", SHOW, str(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    return run.stdout


def test_far_times_in_a_zone_never_crash_pandas(tmp_path):
    """Issue 55, point 2: on pandas < 3 printing a datetime64[us, America/New_York] column
    of year 1, or .tolist(), was a segmentation fault. Now pandas < 3 gets a refusal naming
    the column and the ways out; pandas >= 3 shows the time as Spark does: 12:00 local
    mean time."""
    t = pa.timestamp("us", tz="America/New_York")
    # TIMESTAMP'0001-01-01 12:00:00' in a New York session (LMT, -4:56:02), as Spark's Arrow batches hold it
    table = pa.table({"t": pa.array([dt.datetime(1, 1, 1, 16, 56, 2, tzinfo=dt.timezone.utc), None], t)})
    path = tmp_path / "frame.pkl"
    try:
        at.table_to_pandas(table).to_pickle(path)
    except HandoffTypeError as e:
        assert int(pd.__version__.split(".")[0]) < 3, e
        assert str(e).startswith("spark-dask: column 't' holds times before 1677-09-21"), e
        assert "(the earliest: 0001-01-01 16:56:02 UTC)" in str(e) and "spark.sql.session.timeZone" in str(e)
        return
    shown = shown_in_a_subprocess(path)  # on pandas < 3 the old code crashed here
    assert int(pd.__version__.split(".")[0]) >= 3 and "0001-01-01 12:00:00-04:56:02" in shown, shown


@pytest.mark.skipif(not hasattr(dask, "_task_spec"), reason="older dask keeps the Future objects in the graph: "
                    "tests/spark/test_handoff.py checks that with a real cluster")  # fmt: skip
def test_a_to_dask_result_computed_without_its_cluster_is_refused():
    """Issue 55, point 8: a to_dask result's partitions are futures of its cluster; a local
    scheduler (the cluster closed) answered ``Missing dependency spark-to-dask-...``. The
    check registered by the first transfer says what happened (here: a partition whose
    loading key no graph holds, as after the close)."""
    lost = Delayed(files.load_key("ab12", 0), {})  # the future of a closed cluster: a key no graph holds
    ddf = dd.from_delayed([lost], meta=pd.DataFrame({"a": pd.Series([], dtype="int64")}), verify_meta=False)
    with Callback(start=registry.refuse_unloaded):
        with pytest.raises(HandoffError, match=r"to_dask \(transfer ab12\) was computed without the Dask cluster"):
            ddf.compute(scheduler="sync")
    ok = dd.from_pandas(pd.DataFrame({"a": [1, 2]}), npartitions=1)
    with Callback(start=registry.refuse_unloaded):
        assert ok.a.sum().compute(scheduler="sync") == 3
    assert dask.config.get("scheduler", None) is None


def test_to_dask_of_a_pandas_frame_says_what_it_takes():
    """Issue 55, point 5: was ``AttributeError: 'DataFrame' object has no attribute 'sparkSession'``."""
    with pytest.raises(HandoffTypeError, match=r"to_dask moves a Spark DataFrame, got pandas.DataFrame.*from_pandas"):
        driver.to_dask(pd.DataFrame({"a": [1]}))
    with pytest.raises(HandoffTypeError, match=r"got dask.*DataFrame"):
        driver.to_dask(dd.from_pandas(pd.DataFrame({"a": [1]}), npartitions=1))


def test_far_times_are_caught_at_the_pandas_floor():
    t = pa.field("t", pa.timestamp("us", tz="Europe/Berlin"))
    floor = at.PANDAS2_ZONE_FLOOR_US
    edge = pa.chunked_array([pa.array([floor], pa.int64()).cast(t.type)])
    below = pa.chunked_array([pa.array([floor - 1], pa.int64()).cast(t.type)])
    assert at.zone_range_problem(edge, t, "2.3.3") is None
    assert "Europe/Berlin" in at.zone_range_problem(below, t, "2.3.3")
    assert pd.Timestamp(floor, unit="us") >= pd.Timestamp.min  # the floor is pandas' own
