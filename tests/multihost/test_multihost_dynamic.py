"""Dynamic allocation on a multi-host Spark standalone cluster (``tests/support/hosts.py``):
shuffle tracking on, 1 to 2 executors of one core. The first executor is on one worker
host; a second Dask worker's Spark job waits until Spark adds an executor, which the
standalone Master places on the other host (the one with more free cores)."""

from __future__ import annotations

import pytest

from tests.support.processes import wait_until

pytestmark = [pytest.mark.multihost, pytest.mark.timeout(300)]

S = "tests.multihost.multihost_scenarios:"
IDLE = 3  # spark.dynamicAllocation.executorIdleTimeout, seconds
DYNAMIC_CONF = {
    "spark.dynamicAllocation.enabled": "true",
    "spark.dynamicAllocation.shuffleTracking.enabled": "true",
    "spark.dynamicAllocation.minExecutors": "1",
    "spark.dynamicAllocation.maxExecutors": "2",
    "spark.dynamicAllocation.executorIdleTimeout": f"{IDLE}s",
    "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
    "spark.executor.cores": "1",
}


@pytest.fixture(scope="module")
def multihost_driver(multihost):
    """The driver service with dynamic allocation (one executor at start)."""
    d = multihost.driver(**DYNAMIC_CONF)
    yield d
    d.close()


@pytest.fixture
def d(multihost_driver):
    yield multihost_driver
    multihost_driver.call(S + "close_all", timeout=60)


def test_a_waiting_worker_makes_spark_add_an_executor_on_the_other_host(multihost, d):
    before = d.call(S + "executors")
    assert len(before["ids"]) == 1, before
    seen = d.call(S + "start", "dynamic")
    (first,) = seen["workers"].values()
    assert first["spark"]["host"] == before["hosts"][0]

    seen = d.call(S + "scale", "dynamic", 2, wait=150, timeout=180)
    hosts = sorted(w["hostname"] for w in seen["workers"].values())
    assert hosts == ["worker-1", "worker-2"], seen
    after = d.call(S + "executors")
    assert len(after["ids"]) == 2 and sorted(after["hosts"]) == ["198.18.0.11", "198.18.0.12"], after
    got = d.call(S + "compute", "dynamic")
    assert got["total"] == got["want"] and got["hosts"] == hosts

    d.call(S + "scale", "dynamic", 1)  # the retired worker's executor goes idle: released
    assert wait_until(lambda: len(d.call(S + "executors")["ids"]) == 1, 60), d.call(S + "executors")
    closed = d.call(S + "close", "dynamic")
    assert closed["active_jobs"] == []
    assert wait_until(lambda: not multihost.dask_processes(closed["tag"]), 20)
