"""Delta tables on Google Cloud Storage's JSON API: PyPI's ``gcp-storage-emulator``
(tests/support/gcs.py), holds a table Spark wrote with deletion vectors (on the local disk:
the test puts its files on the emulator with gcsfs, each commit's data files and deletion
vectors before its log entry, as a writer does), and ``read_delta`` reads ``gs://`` through
gcsfs on the Dask workers of a spark-dask cluster; Spark's own read of the local table is
the answer.

- a read after a commit reached the store sees it (gcsfs keeps listings for the life of
  the process, as s3fs and adlfs do).

- a table named in Unity Catalog (a stand-in for its REST API:
  tests/support/unity_catalog.py) at its emulator location reads by name with the OAuth
  token the catalog vends, as google-auth ``Credentials`` in gcsfs on the driver and the
  worker (the options are the endpoint only), without a lookup of Google's hosts.

Not tried here: a store that refuses the reader, or a vended token's expiry. The emulator checks no credentials (any
token or none is served; it never answers 401 or 403), so a refusal cannot be seen on it.

The S3 and Azure counterparts are test_delta_stores.py and test_delta_azure.py. Delta's
jars are for Spark 3.5: the module runs in CI's pyspark 3.5 environment, on the Delta
session tests/conftest.py's ``delta_spark`` shares.
"""

from __future__ import annotations

import socket
import uuid
import warnings

import pytest

import spark_dask
from spark_dask.delta import stores
from tests.support import delta_tables
from tests.support.extras import needs
from tests.support.gcs import ENV, GcsServer
from tests.support.stores import deletion_vectors_on, ordered, plain, publish

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(300)]

SCHEMA = "spark_catalog.uc_gcs"


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


@pytest.fixture
def uc(delta_spark):
    """The stand-in catalog (it vends a made-up token for any ``gs://`` location), with
    ``SCHEMA`` in Spark's catalog and granted."""
    needs("databricks.sdk", "test-core")
    from tests.support.unity_catalog import CatalogStandIn

    delta_spark.sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    with CatalogStandIn.start(None, token=f"dapi-{uuid.uuid4().hex}") as catalog:
        catalog.grant_external_use(SCHEMA)
        yield catalog
    delta_spark.sql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def test_a_name_reads_with_a_vended_token(delta_spark, server, client, uc, tmp_path, monkeypatch):
    """``read_delta("catalog.schema.table")`` with the emulator's endpoint as the only
    storage option: Spark's rows; the vended token reached gcsfs as google-auth
    ``Credentials`` on the driver and the worker (valid as they are, no refresh token:
    gcsfs never refreshes them) and reading from the emulator; the same token's options
    give the same filesystem (fsspec's cache: not one per file); the driver looked up
    none of Google's hosts (an OAuth refresh, the metadata server)."""
    import fsspec
    from databricks.sdk import WorkspaceClient

    def token_readers() -> list[dict]:  # nested: pickled by value for the worker
        """This process's gcsfs filesystems that read with google-auth Credentials."""
        import gcsfs
        from google.oauth2.credentials import Credentials

        found = []
        for fs in list(gcsfs.GCSFileSystem._cache.values()):
            held = fs.credentials.credentials
            if isinstance(held, Credentials):
                found.append(
                    {"token": held.token, "refresh": held.refresh_token, "valid": held.valid, "at": fs._location}
                )
        return found

    table = delta_tables.write_dv(delta_spark, str(tmp_path / "t"))
    key = f"uc/orders-{uuid.uuid4().hex[:6]}"
    publish(server.filesystem(), table.path, f"{server.bucket}/{key}")
    name = f"{SCHEMA}.orders"
    delta_spark.sql(f"DROP TABLE IF EXISTS {name}")
    delta_spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{table.path}'")
    uc.add_table(name, server.url(key))
    looked_up = []
    lookup = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: looked_up.append(host) or lookup(host, *a, **k))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to Spark, no warning
        ddf = spark_dask.read_delta(
            name, storage_options=server.endpoint_options, catalog=WorkspaceClient(host=uc.url, token=uc.token)
        )
        got = ddf.compute()
    assert plain(ordered(got)).equals(plain(ordered(delta_spark.sql(f"SELECT * FROM {name}").toPandas())))
    assert not [h for h in looked_up if "google" in str(h) or str(h).startswith("169.254.")], looked_up

    (vended,) = [v["oauth_token"] for v in uc.vended]
    readers = {"the driver": token_readers(), **client.run(token_readers)}
    for where, found in readers.items():
        mine = [r for r in found if r["token"] == vended]
        assert mine, f"{where}: no gcsfs with the vended token: {found}"
        assert all(r["refresh"] is None and r["valid"] and r["at"] == server.endpoint for r in mine), (where, mine)
    options = stores.vended_options(server.endpoint_options, {"gcp_token": vended})
    again = stores.vended_options(server.endpoint_options, {"gcp_token": vended})
    assert fsspec.filesystem("gcs", **options) is fsspec.filesystem("gcs", **again), "one filesystem per token"
