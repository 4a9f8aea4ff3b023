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

import pytest

import spark_dask
from tests.support.azure import KEY, AzuriteServer
from tests.support.extras import needs
from tests.support.stores import deletion_vectors_on

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(300)]

WRONG_KEY = KEY[:-12] + "WRONGKEY000="


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    needs("adlfs", "test-core")
    with AzuriteServer.start(str(tmp_path_factory.mktemp("azurite"))) as s:
        yield s


@pytest.fixture(scope="module")
def client(delta_spark, server):
    """One Dask worker on the Delta session the Delta modules share (tests/conftest.py)."""
    with spark_dask.start(delta_spark, n_workers=1, progress=False, memory_limit="2GiB") as c:
        yield c


def test_a_table_with_deletion_vectors_on_azurite(delta_spark, server, client, tmp_path):
    """Spark's table with deletion vectors, on the emulator: ``read_delta("abfs://...")``
    (adlfs, the account key in ``storage_options``) has Spark's rows at the latest version
    and at version 1; after Spark's next DELETE reaches the store, a new read (same
    process) has it; the key shows nowhere; a wrong key is one DeltaError line."""
    url = server.url("dv")
    second = deletion_vectors_on(delta_spark, server, f"{server.container}/dv", url, tmp_path)
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
