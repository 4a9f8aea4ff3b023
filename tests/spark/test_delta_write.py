"""``write_delta`` beside other writers, compared with what Spark's own writer commits in
the same sequence (issue 66, findings 1 and 2):

- Spark's read-then-overwrite of one table keeps a commit made in between (its Delta
  DataFrame is read again at the version the overwrite starts from), unless the read
  was pinned with ``versionAsOf``; a Dask DataFrame from ``read_delta`` holds one
  version's rows, so ``write_delta(..., mode="overwrite")`` of that table from it
  after a newer commit is refused, naming both versions (``replace_newer=True`` to
  replace them on purpose), and a commit that lands just before the overwrite's own is
  named after it;
- ``/dbfs/...`` paths reach Spark as ``dbfs:/...``: on Databricks Spark's default
  filesystem is DBFS, where ``/dbfs/x`` is another place (``dbfs:/dbfs/x``). The test's
  Spark has such a default filesystem: Hadoop's ``ViewFileSystemOverloadScheme`` for the
  ``dbfs`` scheme, its root a directory here, which ``/dbfs`` (a symbolic link the test
  makes, and removes) mounts as Databricks' FUSE does.

On the Delta session tests/conftest.py's ``delta_spark`` shares (pyspark 3.5 lane).
"""

from __future__ import annotations

import os

import pandas as pd
import pytest

import spark_dask
from spark_dask.delta import lineage

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def spark(delta_spark):
    return delta_spark


@pytest.fixture(scope="module")
def client(spark):
    with spark_dask.start(spark, n_workers=1, progress=False, memory_limit="2GiB") as c:
        yield c


def ids(spark, path: str) -> list[int]:
    return sorted(r.id for r in spark.read.format("delta").load(path).select("id").collect())


def spark_version(spark, path: str) -> int:
    return spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0].version


def test_what_spark_commits_for_a_read_then_overwrite(spark, tmp_path):
    """Spark 3.5 + Delta 3.3.2: the read runs again inside the overwrite's transaction
    (the concurrent append's rows are in the result, readVersion 1); a read pinned with
    versionAsOf loses that append, without an error."""
    path = str(tmp_path / "spark")
    spark.range(0, 5).write.format("delta").save(path)
    df = spark.read.format("delta").load(path)
    spark.range(100, 103).write.format("delta").mode("append").save(path)  # another writer
    df.selectExpr("id + 1000 AS id").write.format("delta").mode("overwrite").save(path)
    assert ids(spark, path) == [1000, 1001, 1002, 1003, 1004, 1100, 1101, 1102]
    assert lineage.history(spark, path, after=1)[0]["readVersion"] == 1
    pinned = spark.read.format("delta").option("versionAsOf", 2).load(path)
    spark.range(200, 201).write.format("delta").mode("append").save(path)
    pinned.write.format("delta").mode("overwrite").save(path)
    assert 200 not in ids(spark, path)  # Spark replaced it, silently


@pytest.mark.parametrize("via", ["files", "spark"])
def test_an_overwrite_from_an_older_read_is_refused(spark, client, tmp_path, via):
    path = str(tmp_path / "t")
    spark.range(0, 6).selectExpr("id", "id % 2 AS k").write.format("delta").save(path)
    ddf = spark_dask.read_delta(path, via=via)
    means = ddf.groupby("k").id.sum().to_frame().reset_index().rename(columns={"id": "total"})
    spark.range(100, 103).selectExpr("id", "id % 2 AS k").write.format("delta").mode("append").save(path)
    with pytest.raises(spark_dask.DeltaError) as e:
        spark_dask.write_delta(ddf[ddf.id < 3], path, mode="overwrite")
    assert str(e.value).startswith(
        f"spark-dask: the Delta table {path} is at version 1, newer than version 0 this DataFrame was read at: "
        "overwriting it would replace the changes of version 1"
    )
    assert "replace_newer=True" in str(e.value)
    with pytest.raises(spark_dask.DeltaError, match="newer than version 0"):  # a frame derived from it
        spark_dask.write_delta(means, path, mode="overwrite", options={"overwriteSchema": "true"})
    assert spark_version(spark, path) == 1 and ids(spark, path) == [0, 1, 2, 3, 4, 5, 100, 101, 102]
    spark_dask.write_delta(ddf[ddf.id < 2], path, mode="append")  # appends lose nothing: not checked
    fresh = spark_dask.read_delta(path, via=via)  # read again: version 2, the overwrite goes through
    spark_dask.write_delta(fresh[fresh.id >= 100], path, mode="overwrite")
    assert ids(spark, path) == [100, 101, 102]
    spark_dask.write_delta(ddf, path, mode="overwrite", replace_newer=True)  # on purpose
    assert ids(spark, path) == [0, 1, 2, 3, 4, 5]


def test_overwrites_that_are_not_checked(spark, client, tmp_path):
    """replaceWhere, and a frame read from another table, write as before."""
    path, other = str(tmp_path / "t"), str(tmp_path / "other")
    spark.range(0, 4).selectExpr("id", "id % 2 AS k").write.format("delta").partitionBy("k").save(path)
    spark.range(50, 52).selectExpr("id", "id % 2 AS k").write.format("delta").save(other)
    ddf = spark_dask.read_delta(path, via="files")
    from_other = spark_dask.read_delta(other, via="files")
    spark.range(10, 12).selectExpr("id", "id % 2 AS k").write.format("delta").mode("append").partitionBy("k").save(path)
    spark_dask.write_delta(ddf[ddf.k == 0], path, mode="overwrite", options={"replaceWhere": "k = 0"})
    assert ids(spark, path) == [0, 1, 2, 3, 11]
    spark_dask.write_delta(from_other, path, mode="overwrite")
    assert ids(spark, path) == [50, 51]


def test_a_commit_just_before_the_overwrite_is_named(spark, tmp_path):
    """The window between write_delta's last check and Spark's transaction: an append
    there is replaced by the overwrite; the check after the commit names it."""
    path = str(tmp_path / "race")
    spark.range(0, 3).write.format("delta").save(path)  # version 0: what the frame read
    spark.range(7, 8).write.format("delta").mode("append").save(path)  # 1: the other writer
    spark.range(0, 3).write.format("delta").mode("overwrite").save(path)  # 2: the overwrite
    with pytest.raises(spark_dask.DeltaError) as e:
        lineage.check_replaced(spark, path, read=0)
    assert "another writer committed version 1 after version 0 this DataFrame was read at" in str(e.value)
    assert f"read_delta({path!r}, version=1)" in str(e.value)
    lineage.check_replaced(spark, path, read=1)  # read at 1, overwritten at 2: nothing lost


@pytest.fixture
def dbfs(spark, tmp_path):
    """A Spark whose default filesystem is ``dbfs:`` (its root ``tmp_path/root``), and
    ``/dbfs`` mounting that root here, as on Databricks; both undone after. Delta's log
    store for the scheme is set with the session (tests/support/delta_tables.py)."""
    if os.path.lexists("/dbfs"):
        pytest.skip("/dbfs exists on this machine")
    root = tmp_path / "root"
    root.mkdir()
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    settings = {
        "fs.dbfs.impl": "org.apache.hadoop.fs.viewfs.ViewFileSystemOverloadScheme",
        "fs.viewfs.overload.scheme.target.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
        "fs.viewfs.mounttable.default.linkFallback": f"file://{root}",
        "fs.defaultFS": "dbfs:///",
    }
    before = {k: conf.get(k) for k in settings}
    for key, value in settings.items():
        conf.set(key, value)
    os.symlink(root, "/dbfs")
    try:
        yield root
    finally:
        os.remove("/dbfs")
        for key, value in before.items():
            conf.unset(key) if value is None else conf.set(key, value)


def test_dbfs_paths_reach_spark_as_dbfs_uris(spark, client, dbfs, tmp_path):
    """Finding 1: write_delta("/dbfs/mnt/t") wrote dbfs:/dbfs/mnt/t (a new table
    elsewhere) while the existence check and the file reader looked at /dbfs/mnt/t."""
    seed = str(tmp_path / "seed")
    spark.range(0, 5).write.format("delta").save("file://" + seed)  # the default filesystem is dbfs: now
    rows = spark_dask.read_delta(seed, via="files")
    spark_dask.write_delta(rows, "/dbfs/mnt/t")
    assert (dbfs / "mnt" / "t" / "_delta_log").is_dir() and not (dbfs / "dbfs").exists()
    assert ids(spark, "dbfs:/mnt/t") == list(range(5))
    with pytest.raises(spark_dask.DeltaError, match="exists already"):
        spark_dask.write_delta(rows, "/dbfs/mnt/t")
    by_spark = spark_dask.read_delta("/dbfs/mnt/t", via="spark").compute()
    by_files = spark_dask.read_delta("dbfs:/mnt/t", via="files")
    pd.testing.assert_frame_equal(by_spark.sort_values("id").reset_index(drop=True),
                                  by_files.compute().sort_values("id").reset_index(drop=True))  # fmt: skip
    spark.range(5, 7).write.format("delta").mode("append").save("dbfs:/mnt/t")
    with pytest.raises(spark_dask.DeltaError, match="newer than version 0"):  # one table, two spellings
        spark_dask.write_delta(by_files, "/dbfs/mnt/t", mode="overwrite")


def test_a_write_to_s3_without_a_multi_cluster_log_store_warns_once(spark, client, tmp_path):
    """Finding 6: Spark commits to s3:// and s3a:// with S3SingleDriverLogStore, safe
    within one driver only. The warning comes before anything is computed (this Spark
    has no S3 filesystem, so the write itself fails after it)."""
    path = str(tmp_path / "t")
    spark.range(0, 3).write.format("delta").save(path)
    source = spark_dask.read_delta(path, via="files")
    with pytest.warns(UserWarning) as caught, pytest.raises(Exception, match="s3a"):
        spark_dask.write_delta(source, "s3a://no-such-bucket/t", mode="append")
    shown = [str(w.message) for w in caught if "S3SingleDriverLogStore" in str(w.message)]
    assert len(shown) == 1 and "spark.delta.logStore.s3a.impl=io.delta.storage.S3DynamoDBLogStore" in shown[0]
