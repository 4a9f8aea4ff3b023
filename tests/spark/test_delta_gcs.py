"""Delta tables on Google Cloud Storage's JSON API: PyPI's ``gcp-storage-emulator``
(tests/support/gcs.py), holds a table Spark wrote with deletion vectors (on the local disk:
the test puts its files on the emulator with gcsfs, each commit's data files and deletion
vectors before its log entry, as a writer does), and ``read_delta`` reads ``gs://`` through
gcsfs on the Dask workers of a spark-dask cluster; Spark's own read of the local table is
the answer.

- a read after a commit reached the store sees it (gcsfs keeps listings for the life of
  the process, as s3fs and adlfs do).

Not tried here: a store that refuses the reader. The emulator checks no credentials (any
token or none is served; it never answers 401 or 403), so a refusal cannot be seen on it.

The S3 and Azure counterparts are test_delta_stores.py and test_delta_azure.py. Delta's
jars are for Spark 3.5: the module runs in CI's pyspark 3.5 environment, on the Delta
session tests/conftest.py's ``delta_spark`` shares.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest

import spark_dask
from tests.support import delta_tables
from tests.support.gcs import ENV, GcsServer

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with GcsServer.start(str(tmp_path_factory.mktemp("gcs"))) as s:
        yield s


@pytest.fixture(scope="module")
def spark(delta_spark):
    """The Delta session this module shares with the other Delta modules (tests/conftest.py)."""
    return delta_spark


@pytest.fixture(scope="module")
def client(spark, server):
    with spark_dask.start(spark, n_workers=1, progress=False, memory_limit="2GiB", env=ENV) as c:
        yield c


def publish(fs, local: str, key: str) -> list[str]:
    """Put the files of the table at ``local`` that the store lacks under ``key``
    (bucket and prefix): data files and deletion vectors first, the log's files last (a
    commit is visible once its ``_delta_log`` entry is). Returns the keys put."""
    have = set(fs.find(key)) if fs.exists(key) else set()
    files = sorted(
        (os.path.relpath(os.path.join(d, n), local) for d, _, names in os.walk(local) for n in names),
        key=lambda rel: (rel.startswith("_delta_log"), rel),
    )
    put = []
    for rel in files:
        target = f"{key}/{rel}"
        if target not in have:
            fs.put_file(os.path.join(local, rel), target)
            put.append(target)
    return put


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("id").reset_index(drop=True)


def sparks(spark, url: str, **options) -> pd.DataFrame:
    return ordered(spark.read.format("delta").options(**options).load(url).toPandas())


def plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Python values, a null as None (Dask's ``<NA>``, Spark's NaN or None)."""
    return frame.astype(object).where(frame.notna(), None)


def assert_same(ddf, want: pd.DataFrame, what: str) -> None:
    got = ordered(ddf.compute())
    assert list(got.columns) == list(want.columns), what
    pd.testing.assert_frame_equal(plain(got), plain(want), obj=what)


def test_a_table_with_deletion_vectors_on_the_gcs_emulator(spark, server, client, tmp_path):
    """Spark's table with deletion vectors, on the emulator: ``read_delta("gs://...")``
    (gcsfs) has Spark's rows at the latest version and at version 1; after Spark's next
    DELETE reaches the store, a new read (same process) has it."""
    table = delta_tables.write_dv(spark, str(tmp_path))
    fs, key, url = server.filesystem(), f"{server.bucket}/dv", server.url("dv")
    put = publish(fs, table.path, key)
    assert any("deletion_vector" in p for p in put), put  # the table has deletion vectors

    first = spark_dask.read_delta(url, storage_options=server.storage_options, via="files")
    assert_same(first, sparks(spark, table.path), "the latest version (2)")
    assert_same(
        spark_dask.read_delta(url, version=1, storage_options=server.storage_options, via="files"),
        sparks(spark, table.path, versionAsOf=1),
        "version 1",
    )

    spark.sql(f"DELETE FROM delta.`{table.path}` WHERE id < 40")  # version 3: deletion vectors replaced
    assert f"{key}/_delta_log/{3:020d}.json" in publish(fs, table.path, key)
    want = sparks(spark, table.path)
    second = spark_dask.read_delta(url, storage_options=server.storage_options, via="files")
    assert_same(second, want, "after Spark's DELETE (version 3)")
    assert len(second) == len(want) < len(first)
