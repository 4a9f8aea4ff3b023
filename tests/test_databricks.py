"""Databricks detection, driver-proxy URL and prefix, widget: fake environment only."""

from __future__ import annotations

import urllib.request

import pytest

from spark_dask import databricks as db

from .conftest import make_spark, stop_spark

WORKSPACES = {
    # cloud: (workspaceUrl conf, org id conf or None, expected host, expected org)
    "aws": ("https://dbc-a1b2c3d4-e5f6.cloud.databricks.com", "1234567890123456",
            "dbc-a1b2c3d4-e5f6.cloud.databricks.com", "1234567890123456"),
    "azure": ("adb-8812345678901234.5.azuredatabricks.net", None,
              "adb-8812345678901234.5.azuredatabricks.net", "8812345678901234"),
    "gcp": ("https://4455667788990011.1.gcp.databricks.com/", "4455667788990011",
            "4455667788990011.1.gcp.databricks.com", "4455667788990011"),
}  # fmt: skip
CLUSTER = "0123-456789-abcdefgh"


def _conf(workspace, org):
    values = {db.WORKSPACE_URL: workspace, db.CLUSTER_ID: CLUSTER, db.ORG_ID: org}
    return lambda key: values.get(key)


@pytest.mark.parametrize("cloud", sorted(WORKSPACES))
def test_proxy_url_and_prefix_per_cloud(cloud):
    workspace, org, host, want_org = WORKSPACES[cloud]
    info = db.parse({db.RUNTIME_ENV: "15.4"}, _conf(workspace, org))
    assert info == db.DatabricksInfo("15.4", host, want_org, CLUSTER)
    assert info.cloud == cloud and info.has_proxy
    prefix = f"/driver-proxy/o/{want_org}/{CLUSTER}/41234"
    assert db.proxy_prefix(info, 41234) == prefix
    assert db.proxy_url(info, 41234) == f"https://{host}{prefix}/status"
    settings = db.plan_dashboard("10.1.2.3", info, 41234)
    assert settings.address == ":41234" and settings.http_prefix == prefix
    assert settings.link("10.1.2.3", 41234) == f"https://{host}{prefix}/status"


def test_off_databricks_is_the_ordinary_link():
    assert db.parse({}, _conf("dbc-x.cloud.databricks.com", "1")) is None
    assert db.detect(None, env={}) is None
    settings = db.plan_dashboard("10.1.2.3", None, None)
    assert settings.address == "10.1.2.3:0" and settings.http_prefix == "/"
    assert settings.link("10.1.2.3", 8787) == "http://10.1.2.3:8787/status"
    custom = db.plan_dashboard("h", None, None, "/dask/")
    assert custom.http_prefix == "/dask" and custom.link("h", 9) == "http://h:9/dask/status"


def test_incomplete_databricks_conf_has_no_proxy():
    info = db.parse({db.RUNTIME_ENV: "14.3"}, _conf("dbc-x.cloud.databricks.com", None))
    assert info.org_id is None and not info.has_proxy  # AWS host names carry no org id
    assert db.plan_dashboard("h", info, None).link("h", 5) == "http://h:5/status"
    with pytest.raises(ValueError):
        db.proxy_prefix(info, 5)


def test_free_port_avoids_the_refused_port():
    port = db.free_port("127.0.0.1")
    assert port != 8787 and 0 < port < 65536
    assert db.workspace_host("  ") is None
    assert db.normalize_prefix("/") == ""


# -------------------------------------------------------------------------- real Spark

AZURE_HOST = WORKSPACES["azure"][2]


@pytest.fixture(scope="module")
def databricks_spark():
    """A local-cluster session with the Spark conf keys a Databricks driver has."""
    mp = pytest.MonkeyPatch()
    mp.setenv(db.RUNTIME_ENV, "15.4")
    spark = make_spark(
        "local-cluster[2,1,1024]",
        **{db.WORKSPACE_URL: AZURE_HOST, db.CLUSTER_ID: CLUSTER, db.ORG_ID: "8812345678901234"},
    )
    yield spark
    stop_spark(spark)
    mp.undo()


@pytest.mark.spark
@pytest.mark.timeout(240)
def test_dashboard_served_behind_proxy_prefix(databricks_spark):
    import spark_dask

    with spark_dask.start(databricks_spark, n_workers=1, progress=False) as client:
        cluster = client.cluster
        port = cluster.scheduler_info["services"]["dashboard"]
        assert port != 8787
        prefix = f"/driver-proxy/o/8812345678901234/{CLUSTER}/{port}"
        assert cluster.dashboard_link == f"https://{AZURE_HOST}{prefix}/status"
        assert client.dashboard_link == cluster.dashboard_link
        host = cluster.scheduler_address.split("://")[1].rsplit(":", 1)[0]
        # What the proxy forwards: the prefixed path, on the driver's address and on loopback.
        for h in (host, "127.0.0.1"):
            with urllib.request.urlopen(f"http://{h}:{port}{prefix}/status", timeout=30) as r:
                assert r.status == 200
                page = r.read().decode()
            assert "<html" in page.lower() and prefix in page  # bokeh's links carry the prefix
        with urllib.request.urlopen(f"http://{host}:{port}{prefix}/info/main/workers.html", timeout=30) as r:
            assert r.status == 200
        html = cluster._repr_html_()
        for text in (cluster.tag, cluster.dashboard_link, "Workers", "Total threads",
                     "Total memory", "Databricks", "runtime 15.4", "azure"):  # fmt: skip
            assert text in html, text
        info = cluster.spark_info()
        assert info["Databricks"] == f"runtime 15.4, cluster {CLUSTER}, azure"
