"""Databricks sessions: where spark-dask refuses to start, and the REPL's background jobs.

Faked here: the environment variable of a Databricks driver and Databricks' driver entry
point (``dbruntime``), which only exist on a Databricks runtime.
"""

from __future__ import annotations

import sys
import types

import pytest

import spark_dask
from spark_dask.spark import databricks as db
from tests.support.spark import assert_no_leftovers

DRIVER_ENV = {db.RUNTIME_ENV: "15.4"}


@pytest.mark.parametrize(
    "host",
    ["dbc-a1b2c3d4-e5f6.cloud.databricks.com", "adb-8812345678901234.5.azuredatabricks.net",
     "adb-1.2.databricks.azure.us", "adb-1.2.databricks.azure.cn", "4455667788990011.1.gcp.databricks.com"],
)  # fmt: skip
def test_workspace_hosts(host):
    assert db.is_workspace_host(host) and db.is_workspace_host(host.upper() + ".")
    assert not db.is_workspace_host("spark-connect.internal") and not db.is_workspace_host(None)


def test_open_source_spark_connect_is_fine():
    assert db.connect_problem({}, "localhost", True) is None
    assert db.connect_problem({}, "spark-connect.internal", True) is None


def test_standard_access_mode_is_refused_with_the_supported_modes():
    msg = db.connect_problem(DRIVER_ENV, "localhost", cluster_conf_available=True)
    assert "standard (shared) access mode" in msg
    assert "dedicated (single user) or no-isolation shared" in msg


def test_serverless_is_refused_even_with_a_scheduler_host():
    for env, host in ((DRIVER_ENV, "localhost"), ({}, "adb-1.2.azuredatabricks.net")):
        msg = db.connect_problem(env, host, cluster_conf_available=False, scheduler_host="10.0.0.5")
        assert "serverless" in msg and "Dedicated" in msg


def test_databricks_connect_from_outside():
    msg = db.connect_problem({}, "dbc-1.cloud.databricks.com", cluster_conf_available=True)
    assert "Databricks Connect" in msg and "scheduler_host" in msg
    # a route the user vouches for (VPN, peering)
    assert db.connect_problem({}, "dbc-1.cloud.databricks.com", True, scheduler_host="10.8.0.2") is None


class FakeEntryPoint:
    """The one method of Databricks' driver entry point that spark-dask calls."""

    def __init__(self):
        self.groups = []

    def registerBackgroundSparkJobGroup(self, group):
        self.groups.append(group)


@pytest.fixture
def entry_point(monkeypatch):
    ep = FakeEntryPoint()
    initializer = types.SimpleNamespace(get_spark_entry_point=lambda: ep)
    module = types.ModuleType("dbruntime")
    module.UserNamespaceInitializer = types.SimpleNamespace(getOrCreate=lambda: initializer)
    monkeypatch.setitem(sys.modules, "dbruntime", module)
    return ep


def test_register_background_job_group(entry_point, monkeypatch):
    assert db.register_background_job_group("g", env={}) is None  # not on Databricks
    assert db.register_background_job_group("g", env=DRIVER_ENV) is True
    assert entry_point.groups == ["g"]
    monkeypatch.delitem(sys.modules, "dbruntime")
    monkeypatch.setitem(sys.modules, "IPython", None)  # no notebook either
    assert db.register_background_job_group("h", env=DRIVER_ENV) is False


@pytest.mark.spark
@pytest.mark.core
@pytest.mark.timeout(180)
def test_the_gang_job_group_is_registered_with_databricks(spark, entry_point, monkeypatch):
    monkeypatch.setenv(db.RUNTIME_ENV, "15.4")
    with spark_dask.start(spark, n_workers=1, progress=False) as client:
        cluster = client.cluster
        assert entry_point.groups == [cluster.tag]  # the barrier job's job group
        assert spark.sparkContext.statusTracker().getJobIdsForGroup(cluster.tag)
    assert_no_leftovers(spark, cluster)
