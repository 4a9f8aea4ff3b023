"""Databricks detection, driver-proxy URL and prefix, widget: fake environment only."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest

from spark_dask.errors import ClusterError
from spark_dask.spark import databricks as db
from tests.support.spark import make_spark, stop_spark

WORKSPACES = {
    # cloud: (workspaceUrl conf, org id conf or None, expected host, expected org, cloud, name)
    # Host formats: learn.microsoft.com/azure/databricks/workspace/workspace-details (Azure),
    # docs.azure.cn/en-us/databricks/workspace/per-workspace-urls (Azure China), the
    # Databricks SDKs' environments (databricks-sdk-py databricks/sdk/environments.py;
    # Azure Government adb-<id>.<n>.databricks.azure.us in databricks-sdk-java's tests).
    "aws": ("https://dbc-a1b2c3d4-e5f6.cloud.databricks.com", "1234567890123456",
            "dbc-a1b2c3d4-e5f6.cloud.databricks.com", "1234567890123456", "aws", "AWS"),
    "aws-govcloud": ("https://dbc-a1b2c3d4-e5f6.cloud.databricks.us/", "2234567890123456",
                     "dbc-a1b2c3d4-e5f6.cloud.databricks.us", "2234567890123456", "aws", "AWS GovCloud"),
    "azure": ("adb-8812345678901234.5.azuredatabricks.net", None,
              "adb-8812345678901234.5.azuredatabricks.net", "8812345678901234", "azure", "Azure"),
    "azure-government": ("https://adb-7712345678901234.12.databricks.azure.us/", None,
                         "adb-7712345678901234.12.databricks.azure.us", "7712345678901234",
                         "azure", "Azure Government"),
    "azure-china": ("https://ADB-5555555555555555.19.databricks.azure.cn", None,
                    "adb-5555555555555555.19.databricks.azure.cn", "5555555555555555", "azure", "Azure China"),
    "gcp": ("https://4455667788990011.1.gcp.databricks.com/", "4455667788990011",
            "4455667788990011.1.gcp.databricks.com", "4455667788990011", "gcp", "GCP"),
}  # fmt: skip
CLUSTER = "0123-456789-abcdefgh"


def _conf(workspace, org):
    values = {db.WORKSPACE_URL: workspace, db.CLUSTER_ID: CLUSTER, db.ORG_ID: org}
    return lambda key: values.get(key)


@pytest.mark.parametrize("workspace", sorted(WORKSPACES))
def test_proxy_url_and_root_serving_per_cloud(workspace):
    url, org, host, want_org, cloud, name = WORKSPACES[workspace]
    info = db.parse({db.RUNTIME_ENV: "15.4"}, _conf(url, org))
    assert info == db.DatabricksInfo("15.4", host, want_org, CLUSTER)
    assert (info.cloud, info.cloud_name) == (cloud, name) and info.has_proxy
    prefix = f"/driver-proxy/o/{want_org}/{CLUSTER}/9412"
    assert db.proxy_prefix(info, 9412) == prefix
    assert db.proxy_url(info, 9412) == f"https://{host}{prefix}/status"
    # Default: served at the root on every interface (the proxy strips its prefix and
    # connects to the driver's IP); the link goes through the proxy.
    settings = db.plan_dashboard("10.1.2.3", info, 9412)
    assert settings.address == ":9412" and settings.prefix == "" and settings.http_prefix == "/"
    assert settings.link("10.1.2.3", 9412) == f"https://{host}{prefix}/status"
    # For a proxy that forwards the full path: served under it, same link.
    full = db.plan_dashboard("10.1.2.3", info, 9412, "driver-proxy")
    assert full.address == ":9412" and full.http_prefix == prefix
    assert full.link("10.1.2.3", 9412) == settings.link("10.1.2.3", 9412)


def test_org_id_from_host_only_where_the_host_carries_it():
    assert db.org_from_host("adb-7712345678901234.12.databricks.azure.us") == "7712345678901234"
    assert db.org_from_host("adb-5555555555555555.19.databricks.azure.cn") == "5555555555555555"
    assert db.org_from_host("adb-1.2.azuredatabricks.net.evil.example") is None
    assert db.org_from_host("dbc-a1b2.cloud.databricks.us") is None
    assert db.org_from_host(None) is None
    assert db.cloud_of("westeurope.azuredatabricks.net") == ("azure", "Azure")  # legacy regional URL
    assert db.cloud_of("dbc-x.cloud.databricks.com.example.org") == ("unknown", "unknown")


def test_prefix_setting():
    info = db.parse({db.RUNTIME_ENV: "15.4"}, _conf("adb-1.2.azuredatabricks.net", None))
    for root in ("auto", "", "/", None, " auto "):
        assert db.prefix_for(root, info, 9001) == ""
    assert db.prefix_for("driver-proxy", info, 9001) == f"/driver-proxy/o/1/{CLUSTER}/9001"
    assert db.prefix_for("driver-proxy", None, None) == ""  # no driver proxy off Databricks
    assert db.prefix_for("dask/", info, 9001) == "/dask"


def test_port_range_is_the_one_the_proxy_passes():
    assert (db.PROXY_PORTS.start, db.PROXY_PORTS.stop) == (9000, 10000)
    choices = db.port_choices()
    assert sorted(choices) == list(range(9000, 10000)) and 8787 not in choices
    assert db.port_choices(range(8780, 8790), rng=__import__("random").Random(1)) != db.port_choices(
        range(8780, 8790), rng=__import__("random").Random(2)
    )  # clusters started together rarely try the same port first
    assert 8787 not in db.port_choices(range(8700, 8800))


def test_off_databricks_is_the_ordinary_link():
    assert db.parse({}, _conf("dbc-x.cloud.databricks.com", "1")) is None
    assert db.detect(None, env={}) is None
    settings = db.plan_dashboard("10.1.2.3", None, None)
    assert settings.address == "10.1.2.3:0" and settings.http_prefix == "/"
    assert db.plan_dashboard("10.1.2.3", None, None, "driver-proxy").http_prefix == "/"
    assert settings.link("10.1.2.3", 8787) == "http://10.1.2.3:8787/status"
    custom = db.plan_dashboard("h", None, None, "/dask/")
    assert custom.http_prefix == "/dask" and custom.link("h", 9) == "http://h:9/dask/status"


def test_incomplete_databricks_conf_has_no_proxy():
    info = db.parse({db.RUNTIME_ENV: "14.3"}, _conf("dbc-x.cloud.databricks.com", None))
    assert info.org_id is None and not info.has_proxy  # AWS host names carry no org id
    assert db.plan_dashboard("h", info, None).link("h", 5) == "http://h:5/status"
    with pytest.raises(ValueError):
        db.proxy_prefix(info, 5)


def test_free_port_is_in_the_range_and_free():
    import socket

    port = db.free_port("127.0.0.1")
    assert 9000 <= port < 10000
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # it is free
        # Only taken ports in a small range: refused with the reason.
        with pytest.raises(ClusterError, match="no free port in"):
            db.free_port("127.0.0.1", range(port, port + 1))
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


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def _listening(port: int) -> set[str]:
    """The local addresses a TCP port of this process listens on."""
    import psutil

    return {
        c.laddr.ip
        for c in psutil.Process().net_connections("tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    }


@pytest.mark.spark
@pytest.mark.timeout(240)
def test_dashboard_served_at_the_root_for_the_driver_proxy(databricks_spark):
    import spark_dask

    with spark_dask.start(databricks_spark, n_workers=1, progress=False) as client:
        cluster = client.cluster
        port = cluster.scheduler_info["services"]["dashboard"]
        assert 9000 <= port < 10000  # the range the proxy passes (not 8787)
        prefix = f"/driver-proxy/o/8812345678901234/{CLUSTER}/{port}"
        assert cluster.dashboard_link == f"https://{AZURE_HOST}{prefix}/status"
        assert client.dashboard_link == cluster.dashboard_link
        # All interfaces: the proxy connects to the driver's IP.
        assert _listening(port) & {"0.0.0.0", "::"}, _listening(port)
        host = cluster.scheduler_address.split("://")[1].rsplit(":", 1)[0]
        for h in (host, "127.0.0.1"):
            status, page = _get(f"http://{h}:{port}/status")
            assert status == 200 and "<html" in page.lower()
        # Every URL the page loads is relative, so it resolves under the proxy's prefix.
        urls = re.findall(r'(?:src|href)="([^"]+)"', page)
        assert any(u.startswith("static/js/bokeh") for u in urls), urls
        assert not [u for u in urls if u.startswith("/")], urls
        assert _get(f"http://{host}:{port}{prefix}/status")[0] == 404  # not under the prefix
        html = cluster._repr_html_()
        for text in (cluster.tag, cluster.dashboard_link, "Workers", "Total threads",
                     "Total memory", "Databricks", "runtime 15.4", "azure"):  # fmt: skip
            assert text in html, text
        info = cluster.spark_info()
        assert info["Databricks"] == f"runtime 15.4, cluster {CLUSTER}, azure"


@pytest.mark.spark
@pytest.mark.timeout(240)
def test_full_path_option_serves_under_the_proxy_prefix(databricks_spark):
    import dask

    import spark_dask

    with dask.config.set({"spark-dask.dashboard-prefix": "driver-proxy"}):
        with spark_dask.start(databricks_spark, n_workers=1, progress=False) as client:
            cluster = client.cluster
            port = cluster.scheduler_info["services"]["dashboard"]
            assert 9000 <= port < 10000
            prefix = f"/driver-proxy/o/8812345678901234/{CLUSTER}/{port}"
            assert cluster.dashboard_link == f"https://{AZURE_HOST}{prefix}/status"
            host = cluster.scheduler_address.split("://")[1].rsplit(":", 1)[0]
            status, page = _get(f"http://{host}:{port}{prefix}/status")
            assert status == 200 and f'src="{prefix}/static/js/bokeh' in page  # Bokeh's URLs carry it
            assert _get(f"http://{host}:{port}/status")[0] == 404
