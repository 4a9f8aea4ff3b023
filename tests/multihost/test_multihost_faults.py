"""Faults on many hosts (``tests/support/hosts.py``): a killed executor JVM, every process of a
worker host killed at once (a lost VM), a worker host decommissioned (a spot reclaim's
notice: SIGPWR to its Spark Worker, with ``spark.decommission.enabled`` as Databricks
documents it), a host's link cut for 30 s, the driver killed.

Two worker hosts, one Dask worker on each; data is scattered to the worker on the host
that stays healthy, so "kept" means its worker never left. The driver service samples
the cluster's workers every 0.2 s (tests/multihost/multihost_fault_scenarios.py); each test
prints what was measured (fewest workers, seconds with none, time back to full size).
"""

from __future__ import annotations

import time

import pytest

from tests.support.processes import wait_until

pytestmark = [pytest.mark.multihost, pytest.mark.timeout(300)]

S = "tests.multihost.multihost_scenarios:"
F = "tests.multihost.multihost_fault_scenarios:"
HEALTHY, VICTIM = "worker-1", "worker-2"


@pytest.fixture(scope="module")
def multihost_driver(multihost):
    """The driver service with Spark's decommissioning on (the Workers have it on too:
    tests/support/hosts.py), as on Databricks spot instances."""
    d = multihost.driver(**{"spark.decommission.enabled": "true"})
    yield d
    d.close()


@pytest.fixture
def d(multihost, multihost_driver):
    """The module's driver service, every worker host up before and after the test."""
    yield multihost_driver
    if multihost_driver.pid is not None:
        multihost_driver.call(S + "close_all", timeout=60)
    for h in multihost.workers:
        if h.holder is None:
            multihost.replace_host(h.name)
        multihost.restore(h.name)


def start_two(d, name: str, **options) -> dict:
    seen = d.call(S + "start", name, **options)
    assert sorted(w["hostname"] for w in seen["workers"].values()) == [HEALTHY, VICTIM]
    kept = d.call(F + "keep_data", name, HEALTHY)
    d.call(F + "watch", name)
    return {"seen": seen, "kept": kept, "old": d.call(F + "addresses", name)}


def report(what: str, t0: float, back: float | None, saw: dict) -> None:
    full = f"{back - t0:.1f} s" if back else "not within the wait"
    print(f"\n{what}: fewest workers {saw['min']}, {saw['seconds_with_none']} s with none, "
          f"back to 2 after {full}, relaunches {saw['relaunches']}")  # fmt: skip


def test_isolated_workers_a_killed_executor_costs_only_its_worker(multihost, d):
    start = start_two(d, "exec", barrier=False)
    t0 = time.time()
    assert multihost.kill_executor(VICTIM)
    back = d.call(F + "wait_workers", "exec", 2, 120, since=t0, old=start["old"])
    assert d.call(F + "kept_sum", "exec") == sum(range(100_000))  # the healthy worker's data
    saw = d.call(F + "unwatch", "exec", t0)
    report("barrier=False, executor JVM killed", t0, back, saw)
    assert start["kept"] in saw["hosts"] and saw["hosts"][start["kept"]] == HEALTHY  # never left
    assert saw["min"] >= 1 and saw["seconds_with_none"] == 0
    assert back is not None, saw["log"]
    assert sorted(saw["hosts"].values()) == [HEALTHY, VICTIM]
    assert "was lost (its connection broke)" in saw["log"], saw["log"]


@pytest.mark.parametrize("barrier", [False, True], ids=["isolated", "barrier"])
def test_a_lost_host_and_its_replacement(multihost, d, barrier):
    """Every process of worker-2 killed at once, replaced 20 s later. Isolated workers:
    worker-1's worker and its data stay; barrier stage: Spark ends the whole stage, the
    cluster relaunches the one worker the healthy host can hold (never 0 for long) and
    the second when the host is back."""
    name = f"host-{barrier}"
    start = start_two(d, name, barrier=barrier)
    t0 = time.time()
    multihost.kill_host(VICTIM)
    one = d.call(F + "wait_workers", name, 1, 60, since=t0 + 0.5)
    time.sleep(max(0.0, t0 + 20 - time.time()))  # the host stays lost for 20 s
    assert d.call(F + "wait_workers", name, 2, 1, since=t0 + 15) is None  # nothing to hold it
    t_replace = time.time()
    multihost.replace_host(VICTIM)
    back = d.call(F + "wait_workers", name, 2, 150, since=t_replace, old=start["old"])
    saw = d.call(F + "unwatch", name, t0)
    report(f"barrier={barrier}, host killed and replaced after 20 s", t_replace, back, saw)
    print(f"  one worker running {one - t0:.1f} s after the loss" if one else "  no worker after the loss")
    assert back is not None, saw["log"]
    assert sorted(saw["hosts"].values()) == [HEALTHY, VICTIM]
    if barrier:
        assert saw["relaunches"] == 1, saw["log"]
        assert "failed (executor" in saw["log"] and "2 Dask workers lost" in saw["log"], saw["log"]
        assert "starting 1 now (relaunch 1 of 3), 1 more once Spark has a free task slot" in saw["log"], saw["log"]
        assert saw["seconds_with_none"] < 30, saw
    else:
        assert d.call(F + "kept_sum", name) == sum(range(100_000))
        assert saw["hosts"][start["kept"]] == HEALTHY  # never left
        assert saw["min"] >= 1 and saw["seconds_with_none"] == 0, saw
        assert f"on {multihost.hosts[VICTIM].ip}" in saw["log"] and "was lost" in saw["log"], saw["log"]
        # lost for longer than lost-worker-grace (20 s): its job (whose task Spark would
        # run again) is cancelled and a new one replaces it, so no second worker starts
        assert saw["relaunches"] == 1 and "has not come back within 20 s" in saw["log"], saw["log"]
        assert "retired Dask workers" not in saw["log"], saw["log"]


def test_a_killed_executor_costs_both_workers_a_decommissioned_host_none(multihost, d):
    """One cluster, worker-2's executor twice. First its JVM is SIGKILLed (a reclaim
    without notice, or without decommissioning): Spark ends the whole barrier stage, both
    workers and all their results are gone (scattered: nothing to recompute them from),
    the cluster relaunches, and Spark's Worker starts a new executor on the same host.
    Then worker-2's Spark Worker gets SIGPWR (a spot reclaim's notice; the Workers have
    `spark.decommission.enabled` as Databricks documents it): the Master decommissions the
    executor, the driver sees it, the Dask worker there is retired before the executor
    goes (its 64 MiB of results moved to worker-1's worker) and the barrier stage runs on
    with worker-1's worker: no relaunch, never 0 workers. The decommissioned Worker gets no
    new executor: the cluster grows back when the host is replaced."""
    start = start_two(d, "drain")
    d.call(F + "keep_on", "drain", VICTIM)
    t_kill = time.time()
    assert multihost.kill_executor(VICTIM)
    back = d.call(F + "wait_workers", "drain", 2, 150, since=t_kill, old=start["old"], every=True)
    killed = d.call(F + "unwatch", "drain", t_kill)
    report("barrier=True, worker-2's executor JVM killed", t_kill, back, killed)
    assert back is not None, killed["log"]
    assert d.call(F + "kept_on", "drain", VICTIM) == {"kept": 0, "of": 16, "hosts": [], "intact": True}
    assert killed["relaunches"] == 1 and "2 Dask workers lost" in killed["log"], killed["log"]
    assert start["kept"] not in killed["hosts"]  # worker-1's worker died with the stage too
    # the same host's executor, decommissioned this time
    d.call(F + "keep_data", "drain", HEALTHY)
    keys = d.call(F + "keep_on", "drain", VICTIM)
    old = d.call(F + "addresses", "drain")
    d.call(F + "watch", "drain")
    t0 = time.time()
    assert multihost.decommission_host(VICTIM)
    assert wait_until(lambda: d.call(F + "drains", "drain"), 60)
    (drained,) = d.call(F + "drains", "drain")
    t_drained = time.time()
    assert drained["keys"] == len(keys) == drained["moved"] and drained["lost"] == 0, drained
    assert d.call(F + "kept_on", "drain", VICTIM) == {"kept": 16, "of": 16, "hosts": [HEALTHY], "intact": True}
    assert d.call(F + "kept_sum", "drain") == sum(range(100_000))
    assert d.call(F + "wait_workers", "drain", 2, 3, since=t_drained + 1) is None  # nothing to hold it
    t_replace = time.time()
    multihost.replace_host(VICTIM)
    back = d.call(F + "wait_workers", "drain", 2, 150, since=t_replace, old=old)
    saw = d.call(F + "unwatch", "drain", t0)
    report("barrier=True, worker-2 decommissioned (SIGPWR to its Worker), replaced after", t_replace, back, saw)
    print(f"  drained {drained['moved']} keys ({drained['bytes'] / 2**20:.0f} MiB) in {drained['seconds']:.2f} s, "
          f"{t_drained - t0:.1f} s after the signal")  # fmt: skip
    assert back is not None, saw["log"]
    healthy = [a for a, h in saw["hosts"].items() if h == HEALTHY]
    assert saw["min"] >= 1 and saw["seconds_with_none"] == 0 and saw["relaunches"] == 1, saw  # the kill's only
    assert set(healthy) <= set(old)  # worker-1's worker never left
    assert f"Spark is decommissioning executor {drained['executor']}: Dask worker " in saw["log"], saw["log"]


def test_a_link_cut_for_30s_and_restored(multihost, d):
    """worker-2 cut off for 30 s (barrier stage, the default), shorter than Spark's own
    failure detection (the Master's spark.worker.timeout, 60 s as on a real cluster; the
    executors' heartbeat timeout, 120 s): Spark sees nothing wrong, the barrier stage
    runs on. The other worker stays with its data; the cut-off worker, whose connection
    broke, is replaced within a minute of the link's return."""
    start = start_two(d, "cut")
    t0 = time.time()
    multihost.cut(VICTIM)
    try:
        time.sleep(30)
    finally:
        multihost.restore(VICTIM)
    t_restore = time.time()
    back = d.call(F + "wait_workers", "cut", 2, 60, since=t_restore, old=start["old"])
    saw = d.call(F + "unwatch", "cut", t0)
    report("barrier=True, worker-2's link cut for 30 s", t_restore, back, saw)
    assert back is not None, saw["log"]
    assert d.call(F + "kept_sum", "cut") == sum(range(100_000))
    assert saw["hosts"][start["kept"]] == HEALTHY  # the other host's worker stayed
    assert sorted(saw["hosts"].values()) == [HEALTHY, VICTIM]


def test_killing_the_driver_ends_the_workers_on_every_host(multihost, d):
    """Last in the module: it kills the module's driver service."""
    seen = d.call(S + "start", "driver")
    tag = seen["tag"]
    assert sorted(multihost.dask_processes(tag)) == [HEALTHY, VICTIM]
    t0 = time.monotonic()
    d.kill()
    assert wait_until(lambda: not multihost.dask_processes(tag), 60), multihost.dask_processes(tag)
    print(f"\ndriver killed: every worker gone after {time.monotonic() - t0:.1f} s")
