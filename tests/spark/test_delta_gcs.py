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

import pytest

import spark_dask
from tests.support.gcs import ENV, GcsServer
from tests.support.stores import deletion_vectors_on

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with GcsServer.start(str(tmp_path_factory.mktemp("gcs"))) as s:
        yield s


@pytest.fixture(scope="module")
def client(delta_spark, server):
    """One Dask worker on the Delta session the Delta modules share (tests/conftest.py)."""
    with spark_dask.start(delta_spark, n_workers=1, progress=False, memory_limit="2GiB", env=ENV) as c:
        yield c


def test_a_table_with_deletion_vectors_on_the_gcs_emulator(delta_spark, server, client, tmp_path):
    """Spark's table with deletion vectors, on the emulator: ``read_delta("gs://...")``
    (gcsfs) has Spark's rows at the latest version and at version 1; after Spark's next
    DELETE reaches the store, a new read (same process) has it."""
    deletion_vectors_on(delta_spark, server, f"{server.bucket}/dv", server.url("dv"), tmp_path)
