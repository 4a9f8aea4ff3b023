"""spark_dask.read_delta on tables as Databricks writes them, written here by Delta
Lake's Spark connector (tests/support/delta_tables.py): every version of each table, and a
timestamp, read from the files on the Dask workers, must equal Spark's own read of
the same version (handed over with ``to_dask``: same rows, same dtypes). Also
``via="spark"`` and ``via="auto"``, the refusal of a feature the file reader does not
implement, filters that read fewer files, the table left unchanged by reading, and
``write_delta`` through Spark's writer.

Delta's jars (tests/support/jars.py) are pinned for Spark 3.5 (Delta 3.3.2) and Spark 4.0
(Delta 4.0.1, Databricks 17.3 LTS's Spark line): the module runs in CI's pyspark 3.5 and
4.0 environments (.venv35, .venv40; on the Delta session tests/conftest.py's
``delta_spark`` shares, with that Spark's own defaults: ANSI mode on in 4.0) and skips on
the newest pyspark (no Delta release pinned for it; the deltalake package's tables are
read in tests/spark/test_delta_files.py there).
"""

from __future__ import annotations

import os

import pandas as pd
import pytest

import spark_dask
from tests.support import delta_tables
from tests.support.extras import needs

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def spark(delta_spark):
    """The Delta session this module shares with test_delta_stores.py and
    test_delta_filters.py (tests/conftest.py)."""
    return delta_spark


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    return delta_tables.write_all(spark, str(tmp_path_factory.mktemp("delta")))


@pytest.fixture(scope="module")
def client(spark, tables):
    with spark_dask.start(spark, n_workers=1, progress=False, memory_limit="2GiB") as c:
        yield c


def spark_read(spark, path: str, version=None, timestamp=None):
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    if timestamp is not None:
        reader = reader.option("timestampAsOf", timestamp)
    return reader.load(path)


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in one order: by ``id`` where the table has one, else by its scalar columns."""
    keys = (
        ["id"]
        if "id" in frame.columns
        else [c for c in frame.columns if frame[c].dtype.kind in "iufMOb" or str(frame[c].dtype) == "string"]
    )
    return frame.sort_values(keys).reset_index(drop=True)


def assert_same(got, want, what: str) -> None:
    """``got`` and ``want`` (Dask or pandas frames) hold the same rows, columns and dtypes."""
    got, want = (ordered(f if isinstance(f, pd.DataFrame) else f.compute()) for f in (got, want))
    assert list(got.columns) == list(want.columns), what
    assert got.dtypes.astype(str).tolist() == want.dtypes.astype(str).tolist(), what
    pd.testing.assert_frame_equal(got, want, check_exact=True, obj=what)


READ_RIGHT = [
    "cm_name_dv",
    "cm_id_v2_clustered",
    "plain_partitioned",
    "dv",
    "dv_inline",
    "dv_absolute",
    "type_widening",
]


@pytest.mark.parametrize("name", READ_RIGHT)
def test_every_version_equals_sparks(spark, tables, client, name):
    table = tables[name]
    wants = {}  # Spark's read of each version, handed over once: the timestamps' checks compare with it again
    for version in table.versions:
        wants[version] = spark_dask.to_dask(spark_read(spark, table.path, version=version)).compute()
        got = spark_dask.read_delta(table.path, version=version, via="files")
        assert_same(got, wants[version], f"{name} version {version}")
    latest = spark_dask.read_delta(table.path, via="files")
    assert_same(latest, spark_dask.to_dask(spark_read(spark, table.path)), f"{name} latest")
    for version, when in (table.timestamps or {}).items():
        got = spark_dask.read_delta(table.path, timestamp=when, via="files")
        assert_same(got, wants[version], f"{name} as of {when}")


def log_state(path: str) -> dict:
    directory = os.path.join(path, "_delta_log")
    return {n: os.path.getmtime(os.path.join(directory, n)) for n in os.listdir(directory)}


def test_reading_leaves_the_table_as_it_was(tables, client):
    table = tables["cm_name_dv"]
    before = log_state(table.path)
    spark_dask.read_delta(table.path, via="files").compute()
    assert log_state(table.path) == before


def test_filters_read_fewer_files(spark, tables, client):
    table = tables["plain_partitioned"]
    where = [("p_str", "==", "a"), ("x", ">=", 40)]
    everything = spark_dask.read_delta(table.path, via="files")
    pruned = spark_dask.read_delta(table.path, via="files", filters=where, columns=["x", "z"])
    assert 0 < pruned.npartitions < everything.npartitions, (pruned.npartitions, everything.npartitions)
    want = spark_dask.read_delta(table.path, via="spark", filters=where, columns=["x", "z"])
    assert_same(pruned.assign(id=pruned.x), want.assign(id=want.x), "filtered")
    assert len(want) > 0


def test_via_spark_equals_files(spark, tables, client):
    table = tables["cm_name_dv"]
    assert_same(spark_dask.read_delta(table.path, via="spark", version=3),
                spark_dask.read_delta(table.path, via="files", version=3), "via spark")  # fmt: skip


def test_unknown_reader_feature_is_refused(spark, tables, client):
    table = tables["future_reader_feature"]
    with pytest.raises(spark_dask.DeltaError, match="someFutureFeature', which spark-dask's file reader does not know"):
        spark_dask.read_delta(table.path, via="files")
    # auto: the file reader declines with one warning, and Spark's reader decides (here it refuses too)
    with pytest.warns(UserWarning, match="through Spark: it uses the Delta reader feature 'someFutureFeature'"):
        with pytest.raises(Exception, match="someFutureFeature"):
            spark_dask.read_delta(table.path)
    # a version before the feature still reads from the files (Delta's Spark reader checks the
    # latest protocol and refuses every version): its 30 rows, written by Spark
    older = spark_dask.read_delta(table.path, version=table.versions[-2]).compute()
    assert sorted(older.id) == list(range(30)) and older.name.tolist() == [f"n{i}" for i in older.id]


def test_dask_deltatable_returns_deleted_rows(spark, tables, client):
    """Why read_delta exists: dask-deltatable 0.4 reads every file whole. When this
    fails, it applies deletion vectors (docs/delta.md's comparison then changes)."""
    dask_deltatable = needs("dask_deltatable", "examples")
    table = tables["dv"]
    assert len(dask_deltatable.read_deltalake(table.path)) > spark_read(spark, table.path).count()


def test_write_delta_round_trip(spark, tables, client, tmp_path):
    source = spark_dask.read_delta(tables["dv"].path, via="files")
    target = str(tmp_path / "written")
    spark_dask.write_delta(source, target, partition_by="g")
    with pytest.raises(spark_dask.DeltaError, match="exists already: pass mode='append' or mode='overwrite'"):
        spark_dask.write_delta(source, target)
    spark_dask.write_delta(source.head(3, compute=False), target, mode="append")
    assert spark_read(spark, target).count() == len(source) + 3
    assert_same(spark_dask.read_delta(target, version=0, via="files"), source, "written")
    with pytest.raises(spark_dask.PlanError, match="mode must be one of error, append, overwrite"):
        spark_dask.write_delta(source, target, mode="ignore")


def test_table_names_go_through_spark(spark, tables, client):
    """A name (``schema.table``, as Unity Catalog's ``catalog.schema.table``) is written
    with saveAsTable and read through Spark by default, time travel included."""
    source = spark_dask.read_delta(tables["dv"].path, via="files")
    spark_dask.write_delta(source, "default.dv_copy", partition_by="g")
    spark_dask.write_delta(source.head(5, compute=False), "default.dv_copy", mode="append")
    assert_same(spark_dask.read_delta("default.dv_copy", version=0), source, "by name, version 0")
    assert len(spark_dask.read_delta("default.dv_copy", columns=["id"], filters=[("g", "==", "g1")])) == (
        spark.table("default.dv_copy").where("g = 'g1'").count()
    )
    with pytest.raises(spark_dask.DeltaError, match="default.dv_copy exists already"):
        spark_dask.write_delta(source, "default.dv_copy")
    spark.sql("DROP TABLE default.dv_copy")


def test_negative_zero_equals_zero_as_sql_says(spark, client, tmp_path):
    """Issue 68, point 1: for ``d = 0`` Spark's default read drops the rows of a Parquet
    row group whose statistics are min = max = -0.0: parquet-java's row-group filter
    orders -0.0 below 0.0, where parquet-format says "if the max is -0, the row group may
    contain +0 values as well" (PARQUET-1222); Spark's own row filter, and Spark with
    spark.sql.parquet.filterPushdown=false, keep them. The file reader gives SQL's
    answer, -0.0 = 0 (docs/delta.md). When the pushed read stops dropping them, Spark
    fixed it: the docs' note goes."""
    path = str(tmp_path / "zeros")
    spark.createDataFrame([(1, -0.0), (2, -0.0)], "id long, d double").coalesce(1).write.format("delta").save(path)
    more = spark.createDataFrame([(3, 0.0), (4, 1.0)], "id long, d double").coalesce(1)
    more.write.format("delta").mode("append").save(path)
    got = sorted(spark_dask.read_delta(path, via="files", filters=[("d", "==", 0)]).compute().id)
    assert got == [1, 2, 3]
    pushed = sorted(r.id for r in spark_read(spark, path).filter("d = 0").collect())
    spark.conf.set("spark.sql.parquet.filterPushdown", "false")
    try:
        unpushed = sorted(r.id for r in spark_read(spark, path).filter("d = 0").collect())
    finally:
        spark.conf.unset("spark.sql.parquet.filterPushdown")
    assert unpushed == got and pushed == [3]


def test_year_one_in_a_zone_with_pandas_2_names_read_deltas_ways_out(spark, client, tmp_path):
    """Issue 68, point 3: pandas 2 crashes on times before 1677 in a zone with rules, so
    the read is refused; the message names what works for read_delta (columns= without
    the column, pandas >= 3, a UTC session), not only to_dask's fixes."""
    if int(pd.__version__.split(".")[0]) >= 3:
        pytest.skip("pandas >= 3 shows such times")
    path = str(tmp_path / "year_one")
    rebase = ("spark.sql.parquet.int96RebaseModeInWrite", "spark.sql.parquet.datetimeRebaseModeInWrite")
    zone = "spark.sql.session.timeZone"
    for key in rebase:
        spark.conf.set(key, "CORRECTED")
    try:
        spark.sql("SELECT 1 AS id, TIMESTAMP'0001-01-01 12:00:00' AS t").write.format("delta").save(path)
        spark.conf.set(zone, "America/Los_Angeles")
        with pytest.raises(spark_dask.HandoffTypeError) as e:
            spark_dask.read_delta(path, via="files").compute()
        assert "leave the column out (read_delta's columns=)" in str(e.value) and "pandas >= 3" in str(e.value)
        assert spark_dask.read_delta(path, via="files", columns=["id"]).compute().id.tolist() == [1]
    finally:
        spark.conf.set(zone, "UTC")
        for key in rebase:
            spark.conf.unset(key)
