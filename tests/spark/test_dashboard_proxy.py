"""The dashboard as a Databricks user sees it: through a prefix-stripping proxy, in a
real headless browser, from a real cluster on a faked Databricks driver."""

from __future__ import annotations

import asyncio
import re
import time
from urllib.parse import urlparse

import pytest

from spark_dask.spark import databricks as db
from tests.support.spark import make_spark, stop_spark
from tests.support.web import PAINTED_CANVASES_JS, Chromium, StrippingProxy, chromium_or_skip, split_proxy_path

# An Azure Government workspace with no org-id conf: the org id comes from the host.
WORKSPACE = "adb-7712345678901234.12.databricks.azure.us"
ORG = "7712345678901234"
CLUSTER = "0123-456789-abcdefgh"
# Every page of the dashboard's navigation bar that is a Bokeh app.
NAV_PAGES = ("workers", "tasks", "system", "profile", "graph", "groups")


def test_proxy_path_split_like_the_driver_proxy():
    assert split_proxy_path(f"/driver-proxy/o/{ORG}/{CLUSTER}/9001/status/ws", ORG, CLUSTER) == (9001, "/status/ws")
    assert split_proxy_path(f"/driver-proxy/o/{ORG}/{CLUSTER}/9001?a=b", ORG, CLUSTER) == (9001, "/?a=b")
    assert split_proxy_path(f"/driver-proxy/o/1/{CLUSTER}/9001/status", ORG, CLUSTER) is None  # other org
    assert split_proxy_path(f"/driver-proxy/o/{ORG}/{CLUSTER}/x/status", ORG, CLUSTER) is None
    assert split_proxy_path("/status", ORG, CLUSTER) is None


@pytest.fixture(scope="module")
def chromium():
    return chromium_or_skip()


@pytest.fixture(scope="module")
def databricks_spark():
    """local-cluster[2,1,1024] with the environment and Spark confs of a Databricks driver.

    Tests that need the browser list ``chromium`` first: it is checked (skip or fail)
    before this session starts."""
    mp = pytest.MonkeyPatch()
    mp.setenv(db.RUNTIME_ENV, "16.4")
    spark = make_spark("local-cluster[2,1,1024]", **{db.WORKSPACE_URL: f"https://{WORKSPACE}/", db.CLUSTER_ID: CLUSTER})
    yield spark
    stop_spark(spark)
    mp.undo()


def _painted(n: int) -> str:
    return f"(() => {{ const c = {PAINTED_CANVASES_JS}; return c.filter(x => x.painted).length >= {n} ? c : null }})()"


# Text of a Bokeh model (a title, a div) in the page's documents that matches a regex.
MODEL_TEXT_JS = """
((re) => (window.Bokeh && Bokeh.documents || []).flatMap(d => [...d.all_models])
   .map(m => m.text).filter(t => typeof t === 'string' && re.test(t))[0] || null)
"""


async def _browse(chromium: str, proxy: StrippingProxy, path: str, client, shots: str) -> dict:
    out = {}
    async with Chromium(chromium) as browser:
        url = f"http://127.0.0.1:{proxy.port}{path}"
        await browser.open(url)
        out["canvases"] = await browser.wait_for(_painted(5), timeout=60)
        # Live data reaches the page through the proxied websocket.
        futures = client.map(lambda x: time.sleep(0.05) or x, range(40), pure=False)
        await asyncio.to_thread(client.gather, futures)
        out["progress"] = await browser.wait_for(MODEL_TEXT_JS + r"(/total: 40\b.*in-memory: 40\b/)", timeout=60)
        await asyncio.sleep(1.0)  # let the task stream draw its last patch
        out["title"] = await browser.evaluate("document.title")
        out["href"] = await browser.evaluate("location.href")
        out["screenshot"] = await browser.screenshot(f"{shots}/dashboard-status.png")
        out["nav"] = {}
        for page in NAV_PAGES:
            await browser.open(url.rsplit("/", 1)[0] + "/" + page)
            ws_ok = await browser.wait_for(
                "(window.Bokeh && Bokeh.documents && Bokeh.documents.length > 0) || null", timeout=30
            )
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not [
                e for e in proxy.log if e.websocket and e.path.endswith(f"/{page}/ws") and e.to_browser
            ]:
                await asyncio.sleep(0.2)
            out["nav"][page] = (await browser.evaluate("document.title"), bool(ws_ok))
        out["record"] = browser.record
    return out


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_dashboard_through_prefix_stripping_proxy_in_a_browser(chromium, databricks_spark, tmp_path):
    import spark_dask

    with spark_dask.start(databricks_spark, n_workers=2, progress=False) as client:
        cluster = client.cluster
        port = cluster.scheduler_info["services"]["dashboard"]
        prefix = f"/driver-proxy/o/{ORG}/{CLUSTER}/{port}"
        link = cluster.dashboard_link
        assert link == f"https://{WORKSPACE}{prefix}/status"
        driver = cluster.scheduler_address.split("://")[1].rsplit(":", 1)[0]
        # The proxy connects to the driver's address, like the Databricks driver proxy.
        with StrippingProxy(ORG, CLUSTER, driver) as proxy:
            seen = asyncio.run(_browse(chromium, proxy, urlparse(link).path, client, str(tmp_path)))

    record = seen["record"]
    base = f"127.0.0.1:{proxy.port}{prefix}/"
    print("screenshot:", seen["screenshot"])
    # The page and everything it loaded came through the proxy, under its prefix.
    assert seen["href"] == f"http://{base}status" and seen["title"] == "Dask: Status"
    escaped = [u for u in record.requests if not re.match(rf"^(https?|wss?)://{re.escape(base)}", u)
               and not u.startswith(("data:", "about:", "blob:"))]  # fmt: skip
    assert not escaped, escaped
    assert not record.failures, record.failures
    assert not [(u, s) for u, s in record.responses.items() if s >= 400]
    assert not record.errors, record.errors
    # The proxy's view: nothing outside the prefix, no 4xx/5xx, websockets open and talking.
    assert proxy.log and not [e for e in proxy.log if e.upstream is None or e.status >= 400], proxy.log
    ws = [e for e in proxy.log if e.websocket and e.path == f"{prefix}/status/ws"]
    assert ws and ws[0].status == 101 and ws[0].to_browser > 10 and ws[0].to_upstream > 0, ws
    assert any(e.path.startswith(f"{prefix}/static/js/bokeh") and e.status == 200 for e in proxy.log)
    # The plots rendered, with the cluster's live data.
    assert len([c for c in seen["canvases"] if c["painted"]]) >= 5, seen["canvases"]
    assert "total: 40" in seen["progress"]
    for page, (title, loaded) in seen["nav"].items():
        assert title.startswith("Dask:") and loaded, (page, title)
        assert [e for e in proxy.log if e.path == f"{prefix}/{page}/ws" and e.status == 101 and e.to_browser], page


@pytest.mark.spark
@pytest.mark.timeout(240)
def test_the_proxy_check_can_fail(databricks_spark):
    """Control: a dashboard served under the full prefix is NOT reachable through a
    stripping proxy, and the proxy logs a request outside its prefix as a 404."""
    import urllib.error
    import urllib.request

    import dask

    import spark_dask

    with dask.config.set({"spark-dask.dashboard-prefix": "driver-proxy"}):
        with spark_dask.start(databricks_spark, n_workers=1, progress=False) as client:
            cluster = client.cluster
            driver = cluster.scheduler_address.split("://")[1].rsplit(":", 1)[0]
            with StrippingProxy(ORG, CLUSTER, driver) as proxy:
                for path in (urlparse(cluster.dashboard_link).path, "/static/js/bokeh.min.js"):
                    with pytest.raises(urllib.error.HTTPError) as err:
                        urllib.request.urlopen(f"http://127.0.0.1:{proxy.port}{path}", timeout=30)
                    assert err.value.code == 404
    assert [(e.upstream is not None, e.status) for e in proxy.log] == [(True, 404), (False, 404)]
