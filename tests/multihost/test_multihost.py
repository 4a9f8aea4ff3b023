"""spark_dask on a multi-host Spark standalone cluster (``tests/support/hosts.py``): the Spark
driver and Master on host ``driver`` (198.18.0.1), one Spark Worker on each of
``worker-1`` (198.18.0.11) and ``worker-2`` (198.18.0.12), each host with its own host
name, ``/etc/hosts`` and private local disk. One executor of 4 cores per worker host.

The Spark driver runs in the driver service; the test sends it the driver-side halves
(``tests/multihost/multihost_scenarios.py``) and checks what they saw, and runs the other
processes (a Dask client, an HTTP client) on worker hosts.
"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from tests.support.hosts import DRIVER
from tests.support.processes import wait_until

pytestmark = [pytest.mark.multihost, pytest.mark.timeout(240)]

S = "tests.multihost.multihost_scenarios:"
WORKER_HOSTS = ["worker-1", "worker-2"]


def address_host(address: str) -> str:
    """``tls://198.18.0.11:4242`` -> ``198.18.0.11``."""
    return address.split("://", 1)[-1].rsplit(":", 1)[0]


@pytest.fixture(scope="module")
def multihost_driver(multihost):
    """The driver service, with Spark's locality wait long enough that a read task whose
    file's host has no free slot yet waits for one (the hand-off's locality check is
    about where the tasks may run, not about how long Spark waits: with one Dask worker,
    all 6 files are on one host, and under load the default 3 s ran out, tasks going
    ``ANY``)."""
    d = multihost.driver(**{"spark.locality.wait": "60s"})
    yield d
    d.close()


@pytest.fixture
def d(multihost_driver):
    """The module's driver service; any cluster a failed test left is closed after it."""
    yield multihost_driver
    multihost_driver.call(S + "close_all", timeout=60)


def check_workers_on_their_hosts(hosts, seen: dict) -> None:
    """Each worker listens on its own host's address and sees its host's name and disk."""
    for addr, w in seen["workers"].items():
        host = hosts.hosts[w["hostname"]]
        assert address_host(addr) == host.ip, (addr, w)
        assert w["spark"]["host"] == host.ip, w
        assert w["local_dirs"].startswith(host.local + "/"), w
        assert w["tmp"].startswith(host.local + "/"), w


def check_gone(hosts, d, closed: dict) -> None:
    """After close: no Spark job active, no spark-dask process on any host."""
    assert closed["active_jobs"] == []
    assert wait_until(lambda: not hosts.dask_processes(closed["tag"]), 20), hosts.dask_processes(closed["tag"])


def test_one_worker_per_executor_host_at_its_address(multihost, d):
    seen = d.call(S + "start", "one-per-host")
    assert address_host(seen["scheduler"]) == multihost.hosts[DRIVER].ip
    assert seen["scheduler"].startswith("tls://")
    assert sorted(w["hostname"] for w in seen["workers"].values()) == WORKER_HOSTS
    check_workers_on_their_hosts(multihost, seen)
    assert sorted(multihost.dask_processes(seen["tag"])) == WORKER_HOSTS
    got = d.call(S + "compute", "one-per-host")
    assert got["total"] == got["want"]
    assert got["hosts"] == WORKER_HOSTS
    check_gone(multihost, d, d.call(S + "close", "one-per-host"))


@pytest.mark.parametrize(
    "n_workers, misplace", [(2, False), (1, True)], ids=["worker-on-every-host", "one-worker-reads-elsewhere"]
)
def test_handoff_both_ways_exact(multihost, d, n_workers, misplace):
    # with one worker, the other host's Spark partitions go to it over the network: each
    # host's disk is its own, so a file read on the wrong host fails. to_spark's read
    # tasks run where their files are (Spark's locality: NODE_LOCAL); made to prefer the
    # other host, they stream every file from the worker's host, exactly, and the driver
    # says so once per transfer
    seen = d.call(S + "start", "handoff", n_workers=n_workers)
    assert len({w["hostname"] for w in seen["workers"].values()}) == n_workers
    got = d.call(S + "handoff", "handoff", misplace, timeout=180)
    assert got["spark_hosts"] == WORKER_HOSTS  # Spark's partitions are on both hosts
    assert got["rows"] == 30_000 and got["npartitions"] == 6
    assert got["sums_equal"]
    assert got["schema"] == got["want_schema"]
    assert (got["missing"], got["extra"]) == (0, 0)
    assert (got["derived_missing"], got["derived_extra"]) == (0, 0)
    assert len(got["localities"]) == 6 and set(got["localities"]) == {"NODE_LOCAL"}, got["localities"]
    if misplace:
        assert len(got["across_hosts"]) == 2, got["across_hosts"]  # back and derived: one line each
    else:
        assert got["across_hosts"] == [], got["across_hosts"]
    check_gone(multihost, d, d.call(S + "close", "handoff"))


def test_scale_up_to_the_other_host_and_down(multihost, d):
    seen = d.call(S + "start", "scale", n_workers=1)
    assert len(seen["workers"]) == 1
    seen = d.call(S + "scale", "scale", 2)
    assert sorted(w["hostname"] for w in seen["workers"].values()) == WORKER_HOSTS
    check_workers_on_their_hosts(multihost, seen)
    assert len(seen["gangs"]) == 2
    seen = d.call(S + "scale", "scale", 1)
    assert len(seen["workers"]) == 1
    (left,) = seen["workers"].values()
    assert wait_until(lambda: len(multihost.dask_processes(seen["tag"])) == 1, 30), multihost.dask_processes()
    got = d.call(S + "compute", "scale")
    assert got["total"] == got["want"] and got["hosts"] == [left["hostname"]]
    check_gone(multihost, d, d.call(S + "close", "scale"))


DASHBOARD_CLIENT = """
import json, re, sys, urllib.parse, urllib.request
from tests.support.web import StrippingProxy
driver, port, link = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = {}
with StrippingProxy("7712345678901234", "0123-456789-abcdefgh", driver) as proxy:
    url = proxy.url(port, "status")
    page = urllib.request.urlopen(url, timeout=30).read().decode()
    out["title"] = re.search("<title>(.*?)</title>", page, re.S).group(1).strip()
    scripts = re.findall(r'<script[^>]+src="([^"]+)"', page)
    out["scripts"] = [(s, urllib.request.urlopen(urllib.parse.urljoin(url, s), timeout=30).status) for s in scripts]
    out["log"] = [(e.path, e.upstream, e.status) for e in proxy.log]
out["direct"] = urllib.request.urlopen(link, timeout=30).status
print(json.dumps(out))
"""


def test_dashboard_through_a_stripping_proxy_from_another_host(multihost, d):
    # the proxy runs on worker-1 and connects to the driver's address, as the Databricks
    # driver proxy does; so does a browser that opens the dashboard link there
    seen = d.call(S + "start", "dashboard", n_workers=1)
    driver_ip = multihost.hosts[DRIVER].ip
    link, port = seen["dashboard_link"], seen["dashboard_port"]
    assert re.match(rf"^https?://(driver|{re.escape(driver_ip)}):{port}/status$", link), link
    out = json.loads(multihost.python("worker-1", DASHBOARD_CLIENT, driver_ip, str(port), link, timeout=90))
    assert out["title"].startswith("Dask")  # the page before Bokeh names it "Dask: Status"
    assert out["direct"] == 200
    assert out["scripts"] and all(status == 200 for _, status in out["scripts"]), out["scripts"]
    assert any("bokeh" in s for s, _ in out["scripts"])
    assert out["log"] and all(up and up.startswith(f"http://{driver_ip}:{port}/") for _, up, _ in out["log"]), out[
        "log"
    ]
    assert all(status == 200 for _, _, status in out["log"]), out["log"]
    check_gone(multihost, d, d.call(S + "close", "dashboard"))


CONNECTION_CLIENT = """
import json, os, socket
from distributed import Client
with Client(timeout=60) as c:
    hosts = c.run(socket.gethostname)
    total = c.submit(sum, range(100)).result()
    print(json.dumps({"me": socket.gethostname(), "scheduler": c.scheduler.address,
                      "workers": sorted(hosts.values()), "total": total}))
"""


def test_a_client_on_another_host_through_the_connection_files(multihost, d):
    seen = d.call(S + "start", "connection")
    directory = f"{multihost.shared_dir}/connection"
    path = d.call(S + "write_connection", "connection", directory)
    assert path == f"{directory}/scheduler.json"
    env = {"DASK_CONFIG": directory}
    out = multihost.run("worker-1", [sys.executable, "-c", CONNECTION_CLIENT], timeout=90, env=env)
    got = json.loads(out.stdout)
    assert got == {"me": "worker-1", "scheduler": seen["scheduler"], "workers": WORKER_HOSTS, "total": 4950}
    check_gone(multihost, d, d.call(S + "close", "connection"))
    assert wait_until(lambda: not os.path.exists(path), 10)  # the files go with the cluster
