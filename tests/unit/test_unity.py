"""Which Unity Catalog ``read_delta(name)`` asks, and how (spark_dask/delta/unity.py,
vending.py), without a catalog: the catalog found from the arguments and the
environment, the path a workspace and an open-source server vend on, the renewal's
schedule, the catalog's answers turned into storage options. The calls themselves, the
refusals and the renewal against a catalog: tests/spark/test_delta_unity.py."""

from __future__ import annotations

import pytest

import spark_dask
from spark_dask.delta import stores, unity, vending


class Config:
    """What unity.py reads of a databricks.sdk Config: its host."""

    def __init__(self, host: str):
        self.host = host

    def authenticate(self) -> dict:
        return {"Authorization": "Bearer t"}


class WorkspaceClient:
    """The shape of a databricks.sdk WorkspaceClient (``api_client`` and ``config``)."""

    def __init__(self, host: str):
        self.config, self.api_client = Config(host), object()


def test_no_catalog_configured_is_no_catalog_and_no_word(tmp_path):
    env = {"HOME": str(tmp_path)}  # no ~/.databrickscfg
    assert unity.connect(None, env=env) == (None, "")
    assert unity.connect(False, env={"DATABRICKS_HOST": "https://h", "DATABRICKS_TOKEN": "t"}) == (None, "")


def test_a_workspace_vends_on_its_documented_path_an_open_source_server_on_21():
    workspace, _ = unity.connect(WorkspaceClient("https://adb-1234567890.12.azuredatabricks.net"))
    assert workspace.vend_path == "/api/2.0/unity-catalog/temporary-table-credentials"
    for host in ("https://dbc-a1b2c3.cloud.databricks.com/", "https://1234.5.gcp.databricks.com"):
        assert unity.connect(WorkspaceClient(host))[0].vend_path == unity.VEND_DATABRICKS, host
    server, _ = unity.connect(WorkspaceClient("http://uc.internal:8080"))
    assert server.vend_path == "/api/2.1/unity-catalog/temporary-table-credentials"


def test_a_catalog_of_another_kind_is_refused_before_anything():
    with pytest.raises(spark_dask.PlanError, match="catalog must be a URL, a databricks.sdk.WorkspaceClient or False"):
        unity.connect(42)


def test_an_unreachable_catalog_is_one_line():
    catalog = unity.Catalog(Config("http://127.0.0.1:9"), "http://127.0.0.1:9", unity.VEND_OPEN_SOURCE)
    with pytest.raises(spark_dask.DeltaError, match=r"^Unity Catalog could not be reached \(URLError: "):
        catalog.table("m.s.t")


def test_the_renewal_comes_a_quarter_of_the_life_ahead_at_most_five_minutes():
    assert vending.renew_in(expires=100, vended_at=0, now=0) == 75
    assert vending.renew_in(expires=7200, vended_at=0, now=0) == 6900  # 5 minutes ahead, not 30
    assert vending.renew_in(expires=100, vended_at=0, now=99) == 0.5  # late: at once


def test_each_clouds_credentials_become_its_fsspec_options():
    aws = {"aws_temp_credentials": {"access_key_id": "A", "secret_access_key": "S", "session_token": "T"}}
    plain, expires = vending.plain_credentials({**aws, "expiration_time": 1_700_000_000_500, "url": "s3://b/t"})
    assert expires == 1_700_000_000.5
    assert dict(stores.vended_options({"endpoint_url": "http://h"}, plain)) == {
        "endpoint_url": "http://h",
        "key": "A",
        "secret": "S",
        "token": "T",
    }
    sas = {"azure_user_delegation_sas": {"sas_token": "sv=1&sig=x"}, "url": "abfss://c@acct.dfs.core.windows.net/t"}
    assert dict(stores.vended_options({}, vending.plain_credentials(sas)[0])) == {
        "sas_token": "sv=1&sig=x",
        "account_name": "acct",
    }
    with pytest.raises(spark_dask.DeltaError, match="vended no credential this reader knows"):
        vending.plain_credentials({"expiration_time": 0, "url": "s3://b/t"})


def test_a_lease_pickles_as_its_name_and_base_options_only():
    import pickle

    lease = stores.Lease("spark-dask-vended-x", {"endpoint_url": "http://h", "key": "never-set-here"})
    back = pickle.loads(pickle.dumps(lease))
    assert (back.name, dict(back.base)) == (
        "spark-dask-vended-x",
        {"endpoint_url": "http://h", "key": "never-set-here"},
    )
    assert "never-set-here" not in repr(lease)
