"""Fake GPUs on a multi-host cluster (``tests/support/hosts.py``): each worker host's Spark
Worker discovers two GPUs, "0" and "1", with a discovery script of its own, as real
machines number theirs; one executor per host owns both. Every host's workers must be
pinned to that host's GPUs, one worker per GPU, in ``gpu_mode`` shared and exclusive
(``local-cluster`` cannot show this: its executors share one script and one "0")."""

from __future__ import annotations

import pytest

from tests.support.multihost import MULTIHOST_GPUS
from tests.support.processes import wait_until

pytestmark = [pytest.mark.multihost, pytest.mark.timeout(240)]

S = "tests.multihost.multihost_scenarios:"
GPU_CONF = {"spark.executor.resource.gpu.amount": "2", "spark.task.resource.gpu.amount": "1"}


@pytest.fixture(scope="module")
def multihost_driver(multihost):
    """The driver service with GPU executors (two GPUs each, one per task)."""
    d = multihost.driver(**GPU_CONF)
    yield d
    d.close()


@pytest.fixture
def d(multihost_driver):
    yield multihost_driver
    multihost_driver.call(S + "close_all", timeout=60)


@pytest.mark.parametrize("gpu_mode", ["shared", "exclusive"])
def test_each_host_pins_a_worker_to_each_of_its_own_gpus(multihost, d, gpu_mode):
    seen = d.call(S + "start", "gpus", worker="cpu", gpu_mode=gpu_mode)
    workers = list(seen["workers"].values())
    by_host = {}
    for w in workers:
        by_host.setdefault(w["hostname"], []).append(w["cuda"])
        assert w["spark"]["gpu"] == w["cuda"], w
        assert w["name"].endswith("-gpu" + w["cuda"]), w
        assert w["spark"]["host"] == multihost.hosts[w["hostname"]].ip, w
    assert {h: sorted(g) for h, g in by_host.items()} == MULTIHOST_GPUS, by_host
    closed = d.call(S + "close", "gpus")
    assert closed["active_jobs"] == []
    assert wait_until(lambda: not multihost.dask_processes(closed["tag"]), 20)
