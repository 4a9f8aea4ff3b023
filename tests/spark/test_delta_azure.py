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

A table named in Unity Catalog (a stand-in for its REST API: tests/support/unity_catalog.py)
at its Azurite location reads by name with the SAS the catalog vends, a service SAS that
Azurite checks (signature and expiry): the reader's options are the endpoint only, no
account key; a read after the first SAS expired goes on with the renewed one, and Azurite
refuses the expired one.

The S3 counterpart is test_delta_stores.py (test_delta_unity.py for names). Delta's jars are for Spark 3.5: the module
runs in CI's pyspark 3.5 environment, on the Delta session tests/conftest.py's
``delta_spark`` shares.
"""

from __future__ import annotations

import time
import uuid
import warnings

import cloudpickle
import pytest

import spark_dask
from spark_dask.delta import stores
from tests.support import delta_tables
from tests.support.azure import KEY, AzuriteServer
from tests.support.extras import needs
from tests.support.processes import wait_until
from tests.support.stores import deletion_vectors_on, ordered, plain, publish

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(300)]

WRONG_KEY = KEY[:-12] + "WRONGKEY000="
SCHEMA = "spark_catalog.uc_azure"
LIFETIME = 10.0  # seconds a vended SAS lives in the renewal test


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


@pytest.fixture(scope="module")
def uc(server):
    """The stand-in catalog, vending SAS tokens of the server for ``SCHEMA``'s tables."""
    needs("databricks.sdk", "test-core")
    from tests.support.unity_catalog import CatalogStandIn

    with CatalogStandIn.start(None, token=f"dapi-{uuid.uuid4().hex}", azure=server) as catalog:
        catalog.grant_external_use(SCHEMA)
        yield catalog


@pytest.fixture(scope="module")
def named(delta_spark, server, uc, tmp_path_factory):
    """Spark's table with deletion vectors, on the emulator under one key: ``{"key",
    "dfs", "abfs"}``, the key and its two names, registered in Spark (at the local copy)
    and in the catalog, one at Databricks' form of the location
    (``abfss://container@account.dfs.core.windows.net/key``), one at adlfs's
    (``abfs://container/key``)."""
    table = delta_tables.write_dv(delta_spark, str(tmp_path_factory.mktemp("uc-azure")))
    key = f"uc/orders-{uuid.uuid4().hex[:6]}"
    publish(server.filesystem(), table.path, f"{server.container}/{key}")
    delta_spark.sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    names = {"key": key}
    for form, location in (("dfs", server.dfs_url(key)), ("abfs", server.url(key))):
        names[form] = f"{SCHEMA}.orders_{form}"
        delta_spark.sql(f"DROP TABLE IF EXISTS {names[form]}")
        delta_spark.sql(f"CREATE TABLE {names[form]} USING delta LOCATION '{table.path}'")
        uc.add_table(names[form], location)
    yield names
    delta_spark.sql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def test_a_name_reads_through_a_vended_sas_renewed_after_expiry(delta_spark, server, client, uc, named):
    """``read_delta("catalog.schema.table")`` of a table on Azurite, with the endpoint as
    the only storage option: the driver and the worker read with the SAS the catalog
    vends (no account key in their adlfs filesystems, in the options or the graph) and
    have Spark's rows, for both forms of the location. The first SAS reads the table's
    files; after its expiry Azurite refuses it (a 403 the reader takes for a refusal),
    and the same frame reads again with the renewed SAS."""
    import adlfs
    from databricks.sdk import WorkspaceClient

    def sas_readers() -> list[dict]:  # nested: pickled by value for the worker
        """This process's adlfs filesystems that read with a SAS: whether each holds a key."""
        import adlfs

        found = []
        for fs in list(adlfs.AzureBlobFileSystem._cache.values()):
            connection = fs.connection_string or ""
            if "SharedAccessSignature=" in connection or fs.sas_token:
                found.append({"account_key": fs.account_key, "key_in_connection": "AccountKey=" in connection})
        return found

    workspace = WorkspaceClient(host=uc.url, token=uc.token)
    base = server.endpoint_options
    assert "account_key" not in base and "AccountKey" not in base["connection_string"], base
    want = plain(ordered(delta_spark.sql(f"SELECT * FROM {named['dfs']}").toPandas()))
    uc.lifetime = LIFETIME
    try:
        vended = len(uc.vended)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback to Spark, no warning
            ddf = spark_dask.read_delta(named["dfs"], storage_options=base, catalog=workspace)
            first = uc.vended[vended]
            log = f"{server.container}/{named['key']}/_delta_log/{0:020d}.json"
            direct = adlfs.AzureBlobFileSystem(  # the first SAS, as a reader of its own
                skip_instance_cache=True,
                connection_string=f"BlobEndpoint={server.endpoint};SharedAccessSignature={first['sas_token']}",
            )
            assert direct.cat(log), "the first SAS reads the table"
            assert plain(ordered(ddf.compute())).equals(want), "Databricks' form of the location"
            abfs = spark_dask.read_delta(named["abfs"], storage_options=base, catalog=workspace)
            assert plain(ordered(abfs.compute())).equals(want), "adlfs's form of the location"
        assert [v["table"] for v in uc.vended[vended:][:2]] == [named["dfs"], named["abfs"]], uc.vended[vended:]
        shown = cloudpickle.dumps(dict(ddf.dask)) + repr(ddf).encode()
        assert KEY.encode() not in shown and first["sas_token"].encode() not in shown
        readers = {"the driver": sas_readers(), **client.run(sas_readers)}
        assert all(readers.values()), readers  # the driver and the worker read with a SAS
        assert not any(r["account_key"] or r["key_in_connection"] for rs in readers.values() for r in rs), readers

        expired = first["expiration_time"] / 1000 + 1
        assert wait_until(lambda: time.time() > expired, timeout=LIFETIME + 30)
        with pytest.raises(Exception) as refused:  # Azurite checks the SAS's expiry
            direct.cat(log)
        assert stores.is_denied(refused.value) and "AuthorizationFailure" in str(refused.value), refused.value
        again = ddf.compute()  # the same frame, with the renewed SAS
        assert plain(ordered(again)).equals(want), "after the first SAS expired"
        renewed = [v for v in uc.vended[vended + 2 :] if v["table"] == named["dfs"]]
        assert renewed and all(v["sas_token"] != first["sas_token"] for v in renewed), uc.vended[vended:]
    finally:
        uc.lifetime = 3600.0
