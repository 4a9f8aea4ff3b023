"""Delta tables on Azure Blob Storage's API: Azurite, Microsoft's emulator (npm's
``azurite``: tests/support/azure.py), holds a table Spark wrote with deletion vectors (on
the local disk: the test puts its files on the emulator with adlfs, each commit's data
files and deletion vectors before its log entry, as a writer does), and ``read_delta``
reads ``abfs://`` through adlfs on the Dask workers of a spark-dask cluster; Spark's own
read of the local table is the answer.

- a read after a commit reached the store sees it (adlfs keeps listings for the life of
  the process, as s3fs does);
- the account key of ``storage_options`` shows nowhere;
- a driver with a wrong account key fails with one line naming the table (azure-core's
  ``HttpResponseError``, status 403 ``AuthorizationFailure``), without the key.

The S3 counterpart is test_delta_stores.py. Delta's jars are for Spark 3.5: the module
runs in CI's pyspark 3.5 environment, on the Delta session tests/conftest.py's
``delta_spark`` shares.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest

import spark_dask
from tests.support import delta_tables
from tests.support.azure import KEY, AzuriteServer
from tests.support.extras import needs

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(300)]

WRONG_KEY = KEY[:-12] + "WRONGKEY000="


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    needs("adlfs", "test-core")
    with AzuriteServer.start(str(tmp_path_factory.mktemp("azurite"))) as s:
        yield s


@pytest.fixture(scope="module")
def spark(delta_spark):
    """The Delta session this module shares with the other Delta modules (tests/conftest.py)."""
    return delta_spark


@pytest.fixture(scope="module")
def client(spark, server):
    with spark_dask.start(spark, n_workers=1, progress=False, memory_limit="2GiB") as c:
        yield c


def publish(fs, local: str, key: str) -> list[str]:
    """Put the files of the table at ``local`` that the store lacks under ``key``
    (container and prefix): data files and deletion vectors first, the log's files last (a
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


def test_a_table_with_deletion_vectors_on_azurite(spark, server, client, tmp_path):
    """Spark's table with deletion vectors, on the emulator: ``read_delta("abfs://...")``
    (adlfs, the account key in ``storage_options``) has Spark's rows at the latest version
    and at version 1; after Spark's next DELETE reaches the store, a new read (same
    process) has it; the key shows nowhere; a wrong key is one DeltaError line."""
    table = delta_tables.write_dv(spark, str(tmp_path))
    fs, key, url = server.filesystem(), f"{server.container}/dv", server.url("dv")
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
    shown = "\n".join([repr(second), *map(str, second.__dask_graph__())])
    shown += "\n".join(line for lines in client.get_worker_logs().values() for _, line in lines)
    assert KEY not in shown

    with pytest.raises(spark_dask.DeltaError) as refused:
        spark_dask.read_delta(url, storage_options=server.options(WRONG_KEY), via="files")
    message = str(refused.value)
    assert message.startswith("spark-dask: the driver cannot read the Delta table abfs://"), message
    assert "AuthorizationFailure" in message or "authenticate" in message, message
    assert "\n" not in message and "storage_options=" in message, message
    assert WRONG_KEY not in message and KEY not in message, message
    assert refused.value.__cause__ is None and refused.value.__suppress_context__
