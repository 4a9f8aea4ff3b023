"""spark_dask.to_dask / to_spark on a real local-cluster[2,4,1024] application.

The gang (2 workers, 3 CPUs each through a task profile) leaves one core per executor
for the transfers' Spark tasks. Spark's local directories are a temporary directory of
this module, so a leftover transfer file anywhere in them is seen.
"""

from __future__ import annotations

import datetime as dt
import decimal
import gc
import glob
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest
from distributed import Client

import spark_dask
from spark_dask import HandoffError, HandoffTypeError
from spark_dask.handoff import driver as handoff
from spark_dask.handoff import transfer as handoff_task
from spark_dask.handoff.files import LOAD_KEY_PREFIX
from spark_dask.handoff.registry import TransferFiles
from spark_dask.spark import jobs
from spark_dask.spark.shipping import by_value
from tests.support.parts import parts_of
from tests.support.processes import driver_url, executor_jvms, wait_until
from tests.support.spark import active_jobs, make_spark, stop_spark, task_localities

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]
# core (also run on pyspark 3.5): the type table, empty data, errors, file lifetime; the
# fault tests, the network path and the no-free-slot gang of 8 run on the newest pyspark only

TZ = "America/Los_Angeles"
UTC = dt.timezone.utc


@pytest.fixture(scope="module")
def local_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("spark-local"))


@pytest.fixture(scope="module")
def spark(local_dir):
    s = make_spark(
        "local-cluster[2,4,1024]",
        **{"spark.local.dir": local_dir, "spark.sql.session.timeZone": TZ, "spark.task.maxFailures": "4"},
    )
    yield s
    stop_spark(s)


@pytest.fixture(scope="module")
def client(spark):
    with spark_dask.start(spark, progress=False, memory_limit="2GiB") as c:
        yield c


def loaded(client, n: int, timeout: float = 60, exclude=()) -> dict:
    """Wait until ``n`` partitions of Spark -> Dask transfers (other than ``exclude``) are
    in worker memory; who has them."""

    def held():
        return {k: ws for k, ws in client.who_has().items()
                if str(k).startswith(LOAD_KEY_PREFIX) and ws and k not in exclude}  # fmt: skip

    assert wait_until(lambda: len(held()) >= n, timeout), held()
    return held()


def leftovers(local_dir) -> list[str]:
    return glob.glob(os.path.join(local_dir, "**", "spark-dask-handoff-*"), recursive=True)


# ------------------------------------------------------------------ errors without a cluster
@pytest.mark.core
def test_transfer_files_that_cannot_be_removed_are_named(caplog):
    """A removal that cannot reach the workers (the cluster's event loop is gone) says
    which files stay where (issue 37: nothing was said). No Spark: an unstarted
    scheduler and a stopped loop."""
    from functools import partial
    from types import SimpleNamespace

    from distributed import Scheduler
    from distributed.utils import LoopRunner, sync

    runner = LoopRunner(asynchronous=False)
    runner.start()
    loop = runner.loop
    runner.stop()
    registry = TransferFiles(SimpleNamespace(scheduler=Scheduler(validate=False), sync=partial(sync, loop)))
    registry.add("t1", [("host-a", "/local/spark-dask-x-t1"), ("host-b", "/data/spark-dask-x-t1")])
    with caplog.at_level("WARNING", logger="spark_dask"):
        registry.remove_now("t1")
    [said] = [r.getMessage() for r in caplog.records if "could not be removed" in r.getMessage()]
    assert said.startswith("spark-dask: the transfer files in host-a:/local/spark-dask-x-t1, host-b:/data/spark-dask-x-t1 "
                           "(the executors' SPARK_LOCAL_DIRS) could not be removed (RuntimeError: IOLoop is closed)")  # fmt: skip


@pytest.mark.core
def test_the_cpu_profiles_of_stopped_sessions_are_forgotten():
    cache = {"app-1": ("profile-1", "stopped"), "app-2": ("profile-2", "running")}
    jobs.forget_stopped(cache, lambda session: session == "stopped")
    assert cache == {"app-2": ("profile-2", "running")}


@pytest.mark.core
def test_without_a_cluster_the_error_says_to_start_one(spark):
    df = spark.range(3)
    with pytest.raises(HandoffError, match=r"no running Dask cluster.*spark_dask.start"):
        spark_dask.to_dask(df)


@pytest.mark.core
def test_sparks_redundant_byte_limit_is_lifted_only_while_a_transfer_runs(spark):
    """Spark >= 4.0 estimates an Arrow batch's size after every row it sends to Python
    unless maxBytesPerBatch is Int.MaxValue; a transfer lifts the limit when it cannot
    end a batch of its rows and puts the session's own setting back (Spark 3.x: no
    such limit, nothing changes)."""
    import pyarrow as pa

    from spark_dask.spark.compat import spark_version

    key, records = "spark.sql.execution.arrow.maxBytesPerBatch", "spark.sql.execution.arrow.maxRecordsPerBatch"
    fixed = pa.schema([("a", pa.int64()), ("x", pa.float64()), ("b", pa.bool_())])
    lifted = str(2**31 - 1) if spark_version(spark) >= (4, 0) else None
    assert spark.conf.get(key, None) is None
    with handoff._transfer_confs(spark, fixed):
        assert spark.conf.get(key, None) == lifted
        with handoff._transfer_confs(spark, fixed):  # a concurrent transfer
            assert spark.conf.get(key, None) == lifted
        assert spark.conf.get(key, None) == lifted  # the first one still runs
    assert spark.conf.get(key, None) is None  # unset again: Spark's default applies
    spark.conf.set(key, "4m")
    try:
        with handoff._transfer_confs(spark, fixed):
            assert spark.conf.get(key) == (lifted or "4m")
        assert spark.conf.get(key) == "4m"
        # strings: the limit can end a batch; 1M rows of 21 bytes > 4 MB: it can too
        with handoff._transfer_confs(spark, pa.schema([("s", pa.string())])):
            assert spark.conf.get(key) == "4m"
        with pytest.raises(RuntimeError, match="the job failed"), handoff._transfer_confs(spark, fixed):
            assert spark.conf.get(key) == (lifted or "4m")
            raise RuntimeError("the job failed")
        assert spark.conf.get(key) == "4m"  # restored after a failed job too
        # the transfer's own batch size (~64 MiB of fixed-width rows): one batch a
        # partition under any session limit; rows of no fixed width keep the limit
        with handoff._transfer_confs(spark, fixed, handoff.batch_rows(fixed)):
            assert spark.conf.get(key) == (lifted or "4m")
        with handoff._transfer_confs(spark, pa.schema([("s", pa.string())]), 10_000):
            assert spark.conf.get(key) == "4m"
        assert spark.conf.get(key) == "4m" and spark.conf.get(records, None) is None
        spark.conf.set(records, "1000000")
        with handoff._transfer_confs(spark, fixed):
            assert spark.conf.get(key) == "4m"
    finally:
        spark.conf.unset(key)
        spark.conf.unset(records)
    assert not handoff._confs_set
    # Spark >= 4.1 compresses the JVM's Arrow batches when the session asks: off for the
    # transfer's job, the session's setting back after it
    codec = "spark.sql.execution.arrow.compression.codec"
    spark.conf.set(codec, "zstd")
    try:
        with handoff._transfer_confs(spark):
            assert spark.conf.get(codec) == "none"
            assert spark.conf.get(key, None) is None  # no schema: the byte limit is left as it is
        assert spark.conf.get(codec) == "zstd"
    finally:
        spark.conf.unset(codec)
    assert handoff.transfer_confs(spark) == {}


@pytest.mark.core
def test_a_client_of_another_cluster_is_refused(spark):
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as lc, Client(lc) as c:
        with pytest.raises(HandoffError, match="not connected to a spark-dask cluster"):
            spark_dask.to_dask(spark.range(3), client=c)


# ------------------------------------------------------------------ the type table
def _ts(*args):
    return dt.datetime(*args, tzinfo=UTC)


# column: (Spark DDL type, three values, Dask dtype as str(dtype))
TYPES = {
    "k": ("bigint not null", [0, 1, 2], "int64"),
    "bool": ("boolean not null", [True, False, True], "bool"),
    "bool_null": ("boolean", [True, None, False], "bool[pyarrow]"),
    "i8": ("tinyint", [-128, 127, None], "int8[pyarrow]"),
    "i16": ("smallint not null", [-32768, 32767, 0], "int16"),
    "i32": ("int", [-(2**31), 2**31 - 1, None], "int32[pyarrow]"),
    "i64": ("bigint", [-(2**63), 2**63 - 1, None], "int64[pyarrow]"),
    "f32": ("float", [1.5, float("nan"), None], "float[pyarrow]"),
    "f64": ("double not null", [1.5, float("nan"), float("-inf")], "float64"),
    "f64_null": ("double", [2.5, float("nan"), None], "double[pyarrow]"),
    "dec": ("decimal(38,10)", [decimal.Decimal("1234567890123456789012345678.0123456789"),
                               decimal.Decimal("-0.0000000001"), None], "decimal128(38, 10)[pyarrow]"),
    "str": ("string", ["ünïcödé 😀", "", None], "string"),
    "bin": ("binary", [b"\x00\xff", b"", None], "binary[pyarrow]"),
    "date": ("date", [dt.date(1, 1, 1), dt.date(9999, 12, 31), None], "date32[day][pyarrow]"),
    # 2021-11-07 08:30 UTC is 01:30 PDT, the first of the two 01:30s of that night in Los Angeles
    "ts": ("timestamp", [_ts(2021, 11, 7, 8, 30, 0, 123456), _ts(1900, 1, 1), None], f"datetime64[us, {TZ}]"),
    "ntz": ("timestamp_ntz", [dt.datetime(2021, 3, 14, 2, 30), dt.datetime(1, 1, 1), None], "datetime64[us]"),
    "dti": ("interval day to second", [dt.timedelta(days=3, microseconds=7), dt.timedelta(0), None],
            "timedelta64[us]"),
    "arr": ("array<int>", [[1, None, 3], [], None], "list<element: int32>[pyarrow]"),
    "arr_ts": ("array<timestamp>", [[_ts(2020, 1, 1)], [], None],
               f"list<element: timestamp[us, tz={TZ}]>[pyarrow]"),
    "st": ("struct<a:int,b:string>", [(1, "x"), (None, None), None], "struct<a: int32, b: string>[pyarrow]"),
    "map": ("map<string,double>", [{"a": 1.0, "b": None}, {}, None], "map<string, double>[pyarrow]"),
    "with space": ("string", ["a", None, "c"], "string"),
    "dot.ted": ("int", [1, None, 3], "int32[pyarrow]"),
    "1st": ("bigint", [1, 2, None], "int64[pyarrow]"),
    "ünï": ("double", [0.1, None, 0.3], "double[pyarrow]"),
    "select": ("date", [dt.date(2020, 2, 29), None, dt.date(1970, 1, 1)], "date32[day][pyarrow]"),
}  # fmt: skip


def _schema(spark):
    ddl = ", ".join(f"`{name}` {t}" for name, (t, _, _) in TYPES.items())
    return spark.createDataFrame([], ddl).schema  # StructType.fromDDL needs Spark 4


def _rows():
    names = list(TYPES)
    return [tuple(TYPES[n][1][i] for n in names) for i in range(3)]


def _canon(rows) -> list[str]:
    """Rows as comparable text (NaN == NaN, dict order ignored)."""
    out = []
    for r in rows:
        fields = []
        for v in r:
            if isinstance(v, dict):
                v = sorted(v.items())
            fields.append(repr(v))
        out.append("|".join(fields))
    return out


@pytest.fixture(scope="module")
def round_trip(spark, client):
    df = spark.createDataFrame(_rows(), _schema(spark)).repartition(2)
    ddf = spark_dask.to_dask(df)
    dtypes = {c: str(t) for c, t in ddf.dtypes.items()}
    pdf = ddf.compute().sort_values("k").reset_index(drop=True)
    back = spark_dask.to_spark(ddf)
    return {"df": df, "ddf": ddf, "dtypes": dtypes, "pdf": pdf, "back": back,
            "before": _canon(df.orderBy("k").collect()), "after": _canon(back.orderBy("k").collect())}  # fmt: skip


@pytest.mark.core
@pytest.mark.parametrize("column", list(TYPES))
def test_type_table(round_trip, column):
    spark_type, values, dask_dtype = TYPES[column]
    assert round_trip["dtypes"][column] == dask_dtype
    original = round_trip["df"].schema[column]
    back = round_trip["back"].schema[column]
    assert back.dataType == original.dataType
    if "not null" in spark_type or original.dataType.typeName() not in (
        "string",
        "binary",
        "date",
        "decimal",
        "timestamp",
        "timestamp_ntz",
    ):
        # nullability comes back for numbers and booleans (NumPy dtype: not null)
        assert back.nullable == original.nullable, (back, original)
    got = round_trip["pdf"][column].tolist()
    assert len(got) == 3
    # values, as Spark's rows compare them, unchanged by the round trip
    i = list(TYPES).index(column)
    assert [row.split("|")[i] for row in round_trip["after"]] == [row.split("|")[i] for row in round_trip["before"]]


@pytest.mark.core
def test_values_on_the_dask_side(round_trip):
    pdf = round_trip["pdf"]
    ts = pdf["ts"]
    assert str(ts.dt.tz) == TZ  # the session time zone, as in Spark's Arrow batches
    assert ts[0] == pd.Timestamp("2021-11-07 08:30:00.123456", tz="UTC")  # the same instant
    assert ts[0].strftime("%H:%M %Z") == "01:30 PDT"  # the first 01:30 of that night (ambiguous wall time)
    assert pd.isna(ts[2])
    assert pdf["ntz"][0] == pd.Timestamp("2021-03-14 02:30")  # wall-clock time, no zone applied
    assert math.isnan(pdf["f64"][1]) and pdf["f64"][2] == -np.inf
    assert math.isnan(pdf["f64_null"][1]) and pd.isna(pdf["f64_null"][2])  # NaN and null stay apart
    assert pdf["f64_null"].array._pa_array.null_count == 1
    assert pdf["dec"][0] == decimal.Decimal("1234567890123456789012345678.0123456789")
    assert pdf["date"][0] == dt.date(1, 1, 1) and pdf["date"][1] == dt.date(9999, 12, 31)
    assert pdf["bin"][0] == b"\x00\xff"
    assert pdf["str"][0] == "ünïcödé 😀" and pdf["str"][1] == "" and pd.isna(pdf["str"][2])
    assert pdf["arr"][0] == [1, None, 3] and pdf["map"][0] == [("a", 1.0), ("b", None)]
    assert pdf["st"][0] == {"a": 1, "b": "x"}
    assert pdf["dti"][0] == pd.Timedelta(days=3, microseconds=7)
    assert pdf["i64"][0] == -(2**63) and pd.isna(pdf["i64"][2])


@pytest.mark.core
def test_meta_is_known_without_computing(round_trip):
    ddf = round_trip["ddf"]
    assert list(ddf._meta.columns) == list(TYPES) and len(ddf._meta) == 0
    assert ddf.npartitions == 2


@pytest.mark.core
def test_dask_frames_of_pandas_types_to_spark(spark, client):
    import dask.dataframe as dd
    from pyspark.sql import types as T

    pdf = pd.DataFrame({
        "i": np.arange(6, dtype="int32"),
        "u8": np.arange(6, dtype="uint8"),
        "u32": np.array([0, 1, 2, 3, 4, 2**32 - 1], dtype="uint32"),
        "f": [0.5, np.nan, 1.5, 2.5, np.inf, -0.0],
        "nullable": pd.array([1, None, 3, 4, 5, 6], dtype="Int64"),
        "obj": ["a", "b", None, "d", "e", "f"],
        "cat": pd.Categorical(["x", "y", "x", None, "y", "x"]),
        "naive": pd.to_datetime(["2020-01-01 00:00:00.000001999"] * 6),  # ns: truncated to us as Spark does
        "aware": pd.date_range("2020-03-08", periods=6, freq="h", tz="Europe/Berlin"),
        "td": pd.to_timedelta(np.arange(6), unit="s"),
        "flag": [True, False] * 3,
    })  # fmt: skip
    ddf = dd.from_pandas(pdf, npartitions=3)
    sdf = spark_dask.to_spark(ddf)
    schema = {f.name: (f.dataType, f.nullable) for f in sdf.schema}
    assert schema["i"] == (T.IntegerType(), False)
    assert schema["u8"] == (T.ShortType(), False) and schema["u32"] == (T.LongType(), False)
    assert schema["f"] == (T.DoubleType(), False)
    assert schema["nullable"] == (T.LongType(), True)
    assert schema["obj"][0] == T.StringType() and schema["cat"][0] == T.StringType()
    assert schema["naive"][0] == T.TimestampNTZType() and schema["aware"][0] == T.TimestampType()
    assert schema["td"][0] == T.DayTimeIntervalType() and schema["flag"] == (T.BooleanType(), False)
    rows = sdf.orderBy("i").collect()
    assert rows[5]["u32"] == 2**32 - 1
    assert math.isnan(rows[1]["f"]) and rows[4]["f"] == math.inf  # NaN stays NaN, not null
    assert rows[1]["nullable"] is None and rows[2]["obj"] is None and rows[3]["cat"] is None
    assert rows[0]["naive"] == dt.datetime(2020, 1, 1, 0, 0, 0, 1)
    aware = sdf.selectExpr("i", "cast(aware as long) as epoch").orderBy("i").collect()
    assert [r["epoch"] for r in aware] == [int(t.timestamp()) for t in pdf["aware"]]
    assert rows[2]["td"] == dt.timedelta(seconds=2)
    # an explicit schema: non-nullable, and what an object column holds
    back = spark_dask.to_spark(ddf[["i", "obj"]], schema="i int not null, obj string")
    assert [f.nullable for f in back.schema] == [False, True]


@pytest.mark.core
def test_to_spark_reads_where_the_files_are(spark, client, caplog):
    """Each read task prefers its file's executor host, named as Spark names it (the
    gang task's facts, not the machine's host name): every task ran NODE_LOCAL, and no
    file was streamed across hosts (issue 36)."""
    import dask.dataframe as dd

    ddf = dd.from_pandas(pd.DataFrame({"id": np.arange(4000)}), npartitions=4)
    sdf = spark_dask.to_spark(ddf)
    rdd = sdf._jdf.queryExecution().toRdd()
    jsc = spark.sparkContext._jsc.sc()  # the scheduler's view: through the narrow dependencies
    hosts = {jsc.getPreferredLocs(rdd, i).mkString(",") for i in range(rdd.getNumPartitions())}
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().keySet().mkString(",")
    executors = {e.rsplit(":", 1)[0] for e in status.split(",")}
    assert len(hosts) == 1 and hosts <= executors, (hosts, executors)
    sc = spark.sparkContext
    with caplog.at_level(logging.WARNING, logger="spark_dask"):
        sc.setJobGroup("to-spark-locality", "to_spark locality")
        try:
            sdf.write.format("noop").mode("overwrite").save()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
    localities = task_localities(spark, "to-spark-locality")
    assert len(localities) == 4 and {loc for loc, _ in localities} == {"NODE_LOCAL"}, localities
    assert not [r for r in caplog.records if "across hosts" in r.getMessage()]


def py4j_calls(fn):
    """``(fn(), how many py4j calls it made)``: this thread's (the running cluster's
    watches make their own)."""
    import py4j.clientserver
    import py4j.java_gateway

    calls, me = [], threading.get_ident()

    def counting(send):
        return lambda self, *a, **k: calls.append(threading.get_ident() == me) or send(self, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        for cls in (py4j.clientserver.ClientServerConnection, py4j.java_gateway.GatewayConnection):
            mp.setattr(cls, "send_command", counting(cls.send_command))
        return_value = fn()
    return return_value, sum(calls)


@pytest.mark.core
def test_the_read_jobs_placement_costs_py4j_calls_per_host_not_per_partition(spark):
    """Issue 70, point 5: the partitions of to_spark's read job, each preferring its
    file's host, were made with several py4j calls per partition (about 1 ms each on
    the driver); now per distinct host. Partition i still holds the number i and
    prefers hosts[i]."""
    from spark_dask.spark import frames

    frames.preferred_host_ids(spark, ["h0"])  # py4j's first lookups
    hosts = [f"h{i % 3}" for i in range(300)]
    few, few_calls = py4j_calls(lambda: frames.preferred_host_ids(spark, hosts[:6]))
    many, many_calls = py4j_calls(lambda: frames.preferred_host_ids(spark, hosts))
    assert few_calls == many_calls < 300, (few_calls, many_calls)  # was 7 a partition
    assert few.rdd.glom().map(lambda rows: [r.id for r in rows]).collect() == [[i] for i in range(6)]
    jsc = spark.sparkContext._jsc.sc()
    for ids, n in ((few, 6), (many, 300)):
        rdd = ids._jdf.queryExecution().toRdd()
        assert [jsc.getPreferredLocs(rdd, i).mkString(",") for i in range(n)] == hosts[:n]


@pytest.mark.core
def test_a_named_index_and_a_named_series_become_columns(spark, client):
    """Issue 42, point 5: a groupby result's key (its index) was dropped without a word,
    and a Series failed with a raw AttributeError. A named index is a column, as
    reset_index() makes it; an unnamed one is dropped; a named Series is one column."""
    import dask.dataframe as dd

    pdf = pd.DataFrame({"k": ["a", "b", "a", "c", "b", "a"], "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    ddf = dd.from_pandas(pdf, npartitions=2)
    means = spark_dask.to_spark(ddf.groupby("k").x.mean().to_frame())
    assert means.columns == ["k", "x"]
    assert sorted((r["k"], r["x"]) for r in means.collect()) == [("a", 10 / 3), ("b", 3.5), ("c", 4.0)]
    assert spark_dask.to_spark(ddf).columns == ["k", "x"]  # the default unnamed index: not carried
    sums = spark_dask.to_spark(ddf.groupby("k").x.sum(), schema="k string, total double")  # the index first
    assert sorted(tuple(r) for r in sums.collect()) == [("a", 10.0), ("b", 7.0), ("c", 4.0)]
    assert sorted(r["x"] for r in spark_dask.to_spark(ddf.x).collect()) == pdf.x.tolist()
    with pytest.raises(HandoffTypeError, match=r"Series without a name.*to_frame\('value'\)"):
        spark_dask.to_spark(ddf.x + 1 - ddf.x.rename("y"))
    with pytest.raises(HandoffTypeError, match=r"the index is named 'k' like a column.*rename_axis"):
        spark_dask.to_spark(ddf.set_index("k", drop=False))
    with pytest.raises(HandoffTypeError, match=r"got pandas.DataFrame.*dask.dataframe.from_pandas"):
        spark_dask.to_spark(pdf)


@pytest.mark.core
def test_unsupported_types_fail_before_any_data_moves(spark, client, monkeypatch):
    jobs = []
    monkeypatch.setattr(handoff, "_collect", lambda *a, **k: jobs.append(1))
    df = spark.sql("SELECT 1 AS ok, INTERVAL '1-2' YEAR TO MONTH AS `months col`")
    with pytest.raises(HandoffTypeError, match=r"column 'months col' has type interval year to month"):
        spark_dask.to_dask(df)
    with pytest.raises(HandoffTypeError, match="duplicate column names"):
        spark_dask.to_dask(spark.sql("SELECT 1 AS a, 2 AS a"))
    assert not jobs

    import dask
    import dask.dataframe as dd

    bad = dd.from_pandas(pd.DataFrame({"ok": [1], "big": np.array([1], dtype="uint64")}), npartitions=1)
    with pytest.raises(HandoffTypeError, match=r"column 'big'.*unsigned 64-bit"):
        spark_dask.to_spark(bad)
    cplx = dd.from_pandas(pd.DataFrame({"z": [1 + 2j]}), npartitions=1)
    with pytest.raises(HandoffTypeError, match=r"column 'z' has pandas dtype complex128"):
        spark_dask.to_spark(cplx)
    # issue 68 point 5: an object column of an int beyond Spark's long raised pyarrow's OverflowError
    # (an object column stays one with dataframe.convert-string off, as test_object_columns_... does)
    with dask.config.set({"dataframe.convert-string": False}):
        huge = dd.from_pandas(pd.DataFrame({"x": pd.Series([1, 2**64], dtype=object)}), npartitions=1)
        with pytest.raises(HandoffTypeError, match=r"column 'x'.*outside Spark's long range.*schema=\.\.\."):
            spark_dask.to_spark(huge)
        assert [r.x for r in spark_dask.to_spark(huge, schema="x decimal(38,0)").collect()] == [1, 2**64]


@pytest.mark.core
def test_object_columns_far_times_and_lost_partitions(spark, client, tmp_path):
    """Issue 55. Point 1: object columns (bytes, dicts, lists, Decimals, dates) get the
    types and values ``spark.createDataFrame`` gives the same pandas frame (bytes came as
    string, the others were refused in pyarrow's words). Point 2: TIMESTAMP'0001-01-01
    12:00:00' in this Los Angeles session crashed pandas < 3 when printed (done in a
    subprocess here); now refused naming the column there, shown as Spark shows it on
    pandas >= 3. Point 8: a to_dask result computed outside its cluster said ``Missing
    dependency`` (dask with dask._task_spec) or gave Future objects as data (older dask, 2024.8)."""
    import dask
    import dask.dataframe as dd

    pdf = pd.DataFrame({
        "k": [0, 1, 2, 3],
        "bin": [b"\x00\x01", None, b"", b"\xff"],
        "m": [{"a": 1, "b": None}, {}, None, {"c": 3}],
        "arr": [[1.5, None], [], None, [2.5]],
        "dec": [decimal.Decimal("1.25"), None, decimal.Decimal("-0.000000000000000001"), decimal.Decimal("7")],
        "day": [dt.date(1, 1, 1), dt.date(2024, 2, 29), None, dt.date(9999, 12, 31)],
        "nested": [{"x": [{"y": 1}]}, None, {"z": []}, {}],
    }, dtype=object).astype({"k": "int64"})  # fmt: skip

    # off while the frame is made and computed (dask-expr < 2025 reads it when it computes)
    def no_text():
        return dask.config.set({"dataframe.convert-string": False})

    with no_text():
        ddf = dd.from_pandas(pdf, npartitions=2)
    assert all(str(t) == "object" for t in ddf.dtypes[1:])
    # Spark's inference of Python objects (pyspark.sql.types._infer_type): dicts as maps,
    # Decimal as decimal(38,18); Spark 4's default Arrow path of createDataFrame(pandas)
    # reads them as pyarrow does (dicts as structs) instead
    arrow = "spark.sql.execution.arrow.pyspark.enabled"
    before = spark.conf.get(arrow)
    spark.conf.set(arrow, "false")
    try:
        spark_own = spark.createDataFrame(pdf)
    finally:
        spark.conf.set(arrow, before)
    with no_text():
        ours = spark_dask.to_spark(ddf)
    assert [(f.name, f.dataType) for f in ours.schema] == [(f.name, f.dataType) for f in spark_own.schema]
    assert sorted(_canon(ours.collect())) == sorted(_canon(spark_own.collect()))  # no shuffle: k leads each row

    far = spark_dask.to_dask(spark.sql("SELECT TIMESTAMP'0001-01-01 12:00:00' AS t, 1 AS k"))
    if int(pd.__version__.split(".")[0]) < 3:
        with pytest.raises(HandoffTypeError, match=r"column 't' holds times before 1677-09-21.*America/Los_Angeles"):
            far.compute()
    else:
        path = tmp_path / "far.pkl"
        far.compute().to_pickle(path)
        show = "import sys, pandas as pd; f = pd.read_pickle(sys.argv[1]); print(f); print(f['t'].tolist())"
        run = subprocess.run([sys.executable, "-c", show, str(path)], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0 and "0001-01-01 12:00:00-07:52:58" in run.stdout, (run.returncode, run.stderr)

    with pytest.raises(HandoffError, match=r"a Dask DataFrame of to_dask \(transfer \w+\) was computed without"):
        spark_dask.to_dask(spark.range(3)).compute(scheduler="sync")


@pytest.mark.core
def test_classic_spark_hands_the_jvms_arrow_batches_to_the_writers(spark, client, monkeypatch):
    """Classic Spark: the transfer's tasks get the rows as Arrow batches made in the JVM
    (toArrowBatchRdd), not through mapInArrow; the values are exact."""

    def no_map_in_arrow(spec):
        raise AssertionError("the classic transfer used mapInArrow")

    monkeypatch.setattr(handoff_task, "spark_writer", no_map_in_arrow)
    df = spark.range(0, 50_000, 1, 3).selectExpr("id", "CAST(id AS STRING) AS s", "id / 7 AS x")
    pdf = spark_dask.to_dask(df).compute()
    assert pdf["id"].tolist() == list(range(50_000))
    assert pdf["s"].tolist() == [str(i) for i in range(50_000)]
    assert pdf["x"].tolist() == [i / 7 for i in range(50_000)]


@pytest.mark.core
def test_empty_frames_and_empty_partitions(spark, client, local_dir):
    empty = spark.range(0, 10, 1, 4).where("id > 100").selectExpr("id", "cast(id as string) as s")
    ddf = spark_dask.to_dask(empty)
    assert ddf.npartitions == 1 and len(ddf.compute()) == 0
    assert {c: str(t) for c, t in ddf.dtypes.items()} == {"id": "int64", "s": "string"}
    back = spark_dask.to_spark(ddf)
    assert back.count() == 0 and [f.dataType for f in back.schema] == [f.dataType for f in empty.schema]

    sparse = spark.range(0, 100, 1, 8).where("id < 10 OR id >= 90")  # 6 of 8 partitions empty
    ddf = spark_dask.to_dask(sparse)
    assert ddf.npartitions == 2
    assert sorted(ddf.compute()["id"]) == list(range(10)) + list(range(90, 100))
    import dask.dataframe as dd

    holes = dd.from_pandas(pd.DataFrame({"x": np.arange(20)}), npartitions=4)
    holes = holes[holes.x < 3]  # three empty partitions
    assert sorted(r.x for r in spark_dask.to_spark(holes).collect()) == [0, 1, 2]


def test_npartitions(spark, client):
    df = spark.range(0, 1000, 1, 6)
    assert spark_dask.to_dask(df, npartitions=2).npartitions == 2
    ddf = spark_dask.to_dask(df, npartitions=9)
    assert ddf.npartitions == 9 and ddf["id"].sum().compute() == sum(range(1000))
    with pytest.raises(spark_dask.PlanError, match="npartitions"):
        spark_dask.to_dask(df, npartitions=0)


@pytest.mark.core
def test_files_are_local_and_removed_when_released(spark, client, local_dir):
    df = spark.range(0, 50_000, 1, 4).selectExpr("id", "id * 2 as y")
    before, dirs_before = set(client.who_has()), set(leftovers(local_dir))
    ddf = spark_dask.to_dask(df)
    loaded(client, 4, exclude=before)
    files = [f for d in set(leftovers(local_dir)) - dirs_before for f in glob.glob(os.path.join(d, "*.arrow"))]
    assert len(files) == 4, files
    # one record batch a file (a partition under 64 MiB): loaded without a copy (issue 36)
    import pyarrow as pa

    assert [pa.ipc.open_file(f).num_record_batches for f in files] == [1] * 4
    roots = {w["root"] for w in client.run(handoff_task.host_info).values()}
    assert all(any(f.startswith(r) for r in roots) for f in files)  # in an executor's SPARK_LOCAL_DIRS
    persisted = (ddf.y + 1).persist()  # depends on the loaded partitions: they must stay
    del ddf
    gc.collect()
    time.sleep(0.5)
    assert all(os.path.exists(f) for f in files)
    assert persisted.sum().compute() == sum(2 * i + 1 for i in range(50_000))
    del persisted
    gc.collect()
    assert wait_until(lambda: not any(os.path.exists(f) for f in files), 10), files
    # the worker's rmtree takes the files first, then their directory: wait for both
    assert wait_until(lambda: set(leftovers(local_dir)) <= dirs_before, 10), set(leftovers(local_dir)) - dirs_before


def test_partitions_of_machines_without_workers_go_over_the_network(spark, client, monkeypatch, local_dir, caplog):
    # Pretend the workers run on another machine: every Spark task then sends its
    # partition to a worker over the cluster's TLS comms, and each loader, finding the
    # file's machine is not its own, pulls it from the other worker of that machine.
    real = handoff._hosts

    def elsewhere(c):
        return {f"elsewhere-{name}": entry for name, entry in real(c).items()}

    monkeypatch.setattr(handoff, "_hosts", elsewhere)
    dirs_before = set(leftovers(local_dir))
    df = spark.range(0, 20_000, 1, 4).selectExpr("id", "cast(id as string) as s")
    ddf = spark_dask.to_dask(df)
    assert ddf["id"].sum().compute() == sum(range(20_000))
    pdf = ddf.compute()
    assert (pdf["s"] == pdf["id"].astype(str)).all()

    # Dask -> Spark: the Spark tasks pull every file from a worker instead of reading it
    original = handoff_task.write_partition

    def written_elsewhere(*args):
        out = original(*args)
        return {**out, "hostname": "elsewhere"} if out["path"] else out

    # the workers run the graph's function, sent by value (handoff._WRITE_PARTITION), not the module's
    monkeypatch.setattr(handoff, "_WRITE_PARTITION", by_value(written_elsewhere))
    before_lazy = set(leftovers(local_dir))
    lazy = spark_dask.to_spark(ddf)  # streams the files at each Spark computation
    with caplog.at_level(logging.WARNING, logger="spark_dask"):
        assert lazy.count() == 20_000 and lazy.agg({"id": "sum"}).collect()[0][0] == sum(range(20_000))
        # the workers' events reach the driver's scheduler: one line for the transfer
        assert wait_until(lambda: [r for r in caplog.records if "across hosts" in r.getMessage()], 10)
    said = [r.getMessage() for r in caplog.records if "across hosts" in r.getMessage()]
    assert len(said) == 1 and "spark.locality.wait" in said[0], said
    lazy_dirs = set(leftovers(local_dir)) - before_lazy  # kept until the cluster closes
    assert lazy_dirs
    kept = spark_dask.to_spark(ddf, checkpoint=True)  # pulls them once into Spark's cache
    assert kept.count() == 20_000 and kept.agg({"id": "sum"}).collect()[0][0] == sum(range(20_000))
    kept.unpersist()
    # the files the workers received are removed once released, like local ones; the
    # kept DataFrame's at once; the lazy DataFrame's stay
    del ddf
    gc.collect()
    assert wait_until(lambda: set(leftovers(local_dir)) <= dirs_before | lazy_dirs, 10), leftovers(local_dir)
    assert lazy.count() == 20_000


def test_a_dataframe_of_another_application_is_refused(spark, client):
    class Other:
        version = spark.version
        sparkContext = type("SC", (), {"applicationId": "app-other", "_jsc": spark.sparkContext._jsc})()

    with pytest.raises(HandoffError, match=r"another Spark application \(app-other\)"):
        handoff._check_session(Other(), client.cluster, "the DataFrame")
    # another session of the same application shares its executors: fine
    other = spark.newSession()
    assert spark_dask.to_dask(other.range(5))["id"].sum().compute() == 10


# ------------------------------------------------------------------ faults
def test_a_killed_worker_reloads_its_partitions_from_the_files(spark, client, local_dir):
    df = spark.range(0, 200_000, 1, 8).selectExpr("id", "id % 7 as k", "rand(3) as x")
    expected = df.groupBy("k").sum("x").toPandas().set_index("k")["sum(x)"].sort_index()
    before = set(client.who_has())
    ddf = spark_dask.to_dask(df)
    holders = loaded(client, 8, exclude=before)
    victim = next(iter(holders.values()))[0]
    lost = [k for k, ws in holders.items() if victim in ws]
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: victim not in client.scheduler_info()["workers"], 30)
    got = ddf.groupby("k").x.sum().compute().sort_index()
    np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), rtol=1e-12)
    assert len(ddf) == 200_000
    now = client.who_has()
    assert all(now.get(k) and victim not in now[k] for k in lost), (lost, now)  # loaded again, elsewhere
    client.wait_for_workers(2, timeout=60)


def _slow_batches():
    def slow(batches):
        time.sleep(1.5)
        yield from batches

    return slow


@pytest.mark.timeout(300)
def test_a_lost_executor_during_the_transfer_is_retried_and_the_result_is_exact(spark, client, local_dir):
    cluster = client.cluster
    df = spark.range(0, 80_000, 1, 8).selectExpr("id", "id % 5 as k")
    df = df.mapInArrow(_slow_batches(), df.schema)  # 1.5 s per partition: time to kill an executor
    result = {}

    def run():
        try:
            result["ddf"] = spark_dask.to_dask(df)
        except BaseException as e:  # noqa: BLE001
            result["error"] = e

    t = threading.Thread(target=run)
    t.start()
    tracker = spark.sparkContext.statusTracker()
    gang = set()
    for job in tracker.getJobIdsForGroup(cluster.tag):
        info = tracker.getJobInfo(job)
        gang.update(info.stageIds if info else ())

    def transfer_running():
        stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds() if s not in gang]
        return any(s and s.numActiveTasks > 0 for s in stages)

    assert wait_until(transfer_running, 60)
    time.sleep(0.5)
    executor_jvms(driver_url(spark))[0].kill()
    t.join(200)
    assert "error" not in result, result.get("error")
    ddf = result["ddf"]
    pdf = ddf.compute()  # waits for the relaunched workers
    assert sorted(pdf["id"]) == list(range(80_000))
    assert (pdf["k"] == pdf["id"] % 5).all()
    assert wait_until(lambda: cluster.gang_status == "running", 120), cluster.gang_status
    assert parts_of(cluster).relaunches == 1
    del ddf, pdf
    result.clear()
    gc.collect()


@pytest.mark.core
def test_nothing_is_left_after_close(spark, client, local_dir):
    """After the fault tests: close the module's cluster with live transfer data."""
    ddf = spark_dask.to_dask(spark.range(0, 1000, 1, 2))
    loaded(client, 2)
    lazy = spark_dask.to_spark(ddf)  # the default: reads the files each time
    assert lazy.count() == 1000 and lazy.count() == 1000
    kept = spark_dask.to_spark(ddf, checkpoint=True)  # the rows in Spark's cache, its files removed at once
    assert leftovers(local_dir)
    cluster = client.cluster
    client.close()
    assert cluster.status.name == "closed"
    assert not leftovers(local_dir), leftovers(local_dir)
    with pytest.raises(Exception, match="is gone: the Dask cluster that wrote it closed .*pass checkpoint=True"):
        lazy.count()
    assert kept.count() == 1000 and sorted(r.id for r in kept.collect()) == list(range(1000))
    kept.unpersist(blocking=True)  # dropped from the cache: the files are gone
    with pytest.raises(Exception, match=r"is gone: .*dropped from its cache \(unpersist\(\)"):
        kept.count()
    assert wait_until(lambda: not active_jobs(spark))
    with pytest.raises(HandoffError, match="closed"):
        spark_dask.to_dask(spark.range(3), client=client)
