"""YARN on many hosts (``tests/support/yarn_hosts.py``): the ResourceManager and the
Spark driver on host ``driver``, a NodeManager on each of ``worker-1`` and ``worker-2``,
so that every container has its host's own address and private disk, and a host can be
cut off the network (its containers silent, not dead: what a switch or a VM's network
failing does, and what a killed NodeManager on one machine cannot show).

Each NodeManager offers 2 GiB: the application master's container (640 MiB) and one
executor's (512 MiB heap + 768 MiB overhead), so each executor is on its own host and
a lost one cannot come back on the other. The ResourceManager gives up on a silent
NodeManager after 20 s (``yarn.nm.liveness-monitor.expiry-interval-ms``; 10 minutes by
default) and tells Spark's AM that its containers there were released (ABORTED, -100).
The driver has ``spark.decommission.enabled``: Spark decommissions the executors of a
node YARN decommissions gracefully (EMR's way with spot and managed scaling).
"""

from __future__ import annotations

import time

import pytest

from tests.support.hosts import cmdline
from tests.support.multihost import multihost_or_skip
from tests.support.processes import wait_until
from tests.support.yarn import node_id
from tests.support.yarn_fixtures import yarn_jars
from tests.support.yarn_hosts import yarn_driver_conf, yarn_on_hosts

pytestmark = [pytest.mark.multihost, pytest.mark.timeout(300)]

S = "tests.multihost.multihost_scenarios:"
F = "tests.multihost.multihost_fault_scenarios:"
EXPIRY_S = 20
SETTINGS = {
    "yarn.nodemanager.resource.memory-mb": "2048",
    "yarn.scheduler.maximum-allocation-mb": "2048",
    "yarn.nm.liveness-monitor.expiry-interval-ms": str(EXPIRY_S * 1000),
}
AM_CLASS = "org.apache.spark.deploy.yarn.ExecutorLauncher"  # client mode's application master


@pytest.fixture(scope="module")
def yarn():
    multihost_or_skip()
    with yarn_on_hosts(2, settings=SETTINGS, jars=yarn_jars()) as (hosts, bed):
        yield hosts, bed


@pytest.fixture(scope="module")
def d(yarn):
    hosts, bed = yarn
    # 3 cores: a worker's task takes 2 (spark-dask's CPU task profile, cores // 2 + 1),
    # leaving each executor a slot for the hand-off's Spark jobs
    conf = {"spark.executor.memoryOverhead": "768m", "spark.decommission.enabled": "true"}
    driver = hosts.driver(**yarn_driver_conf(bed, cores=3, **conf))
    yield driver
    if driver.pid is not None:
        driver.call(S + "close_all", timeout=60)
    driver.close()
    # the application ended: YARN holds no container, the worker hosts run nothing but
    # their NodeManager
    assert wait_until(lambda: bed.metrics()["containersAllocated"] == 0, 30), bed.metrics()
    for h in hosts.workers:
        assert wait_until(lambda h=h: not containers_on(hosts, h.name), 30), containers_on(hosts, h.name)


def containers_on(hosts, name: str) -> list[str]:
    """The processes on host ``name`` that are not its holder or its NodeManager."""
    holder = hosts.hosts[name].holder
    return [c for p in hosts.pids(name) if p != holder and "NodeManager" not in (c := cmdline(p))]


def node_states(bed) -> dict[str, str]:
    """The RM's nodes: host name -> state."""
    return {node_id(n).split(":")[0]: n["state"] for n in bed.nodes()}


def am_host(hosts) -> str:
    """The worker host that runs the application master."""
    (found,) = [h.name for h in hosts.workers if any(AM_CLASS in cmdline(p) for p in hosts.pids(h.name))]
    return found


def test_each_worker_runs_in_a_container_on_its_own_host(yarn, d):
    hosts, _ = yarn
    seen = d.call(S + "start", "own")
    try:
        by_host = {w["hostname"]: w for w in seen["workers"].values()}
        assert sorted(by_host) == ["worker-1", "worker-2"]
        for name, w in by_host.items():
            host = hosts.hosts[name]
            assert w["spark"]["host"] == host.ip  # the executor's address: its NodeManager's host
            assert w["local_dirs"].startswith(f"{host.local}/yarn/usercache/"), w  # its host's private disk
        got = d.call(S + "compute", "own")
        assert got["total"] == got["want"] and got["hosts"] == ["worker-1", "worker-2"]
        handed = d.call(S + "handoff", "own")
        assert handed["sums_equal"] and handed["rows"] == 30_000, handed
        assert (handed["missing"], handed["extra"], handed["derived_missing"], handed["derived_extra"]) == (0,) * 4
        tag = seen["tag"]
        assert sorted(hosts.dask_processes(tag)) == ["worker-1", "worker-2"]
    finally:
        closed = d.call(S + "close", "own")
    assert closed["active_jobs"] == []
    assert wait_until(lambda: not hosts.dask_processes(tag), 30), hosts.dask_processes(tag)


def test_a_host_cut_off_the_network_is_named_and_its_workers_leave_at_once(yarn, d):
    """worker-2 (not the AM's host) cut off: its executor and Dask worker stay alive but
    silent. The RM gives up on its NodeManager after 20 s, the AM's containers there are
    ABORTED, Spark ends the barrier stage; the cut-off worker leaves the Dask scheduler
    then (not after distributed's worker-ttl, 5 minutes: tasks would wait on it), the
    cluster computes on the worker left, and has both back soon after the link returns
    (the NodeManager resyncs, which ends its old containers and their workers)."""
    hosts, _ = yarn
    victim = next(h.name for h in hosts.workers if h.name != am_host(hosts))
    healthy = next(h.name for h in hosts.workers if h.name != victim)
    seen = d.call(S + "start", "cut")
    old = d.call(F + "addresses", "cut")
    zombies = hosts.dask_processes(seen["tag"])[victim]
    d.call(F + "watch", "cut")
    t0 = time.time()
    hosts.cut(victim)
    try:
        assert wait_until(lambda: "failed (executor" in d.call(S + "logs", "cut")["Cluster"], EXPIRY_S + 40)
        t_loss = time.time()
        victim_ip = hosts.hosts[victim].ip
        assert wait_until(lambda: not [a for a in d.call(F + "addresses", "cut") if victim_ip in a], 10)
        got = d.call(S + "compute", "cut", timeout=60)  # no task waits on the silent worker
        assert got["total"] == got["want"] and got["hosts"] == [healthy]
    finally:
        hosts.restore(victim)
    t_restore = time.time()
    back = d.call(F + "wait_workers", "cut", 2, 120, since=t_restore, old=old)
    saw = d.call(F + "unwatch", "cut", t0)
    print(f"\nworker-2 cut off: the loss said {t_loss - t0:.1f} s after the cut; both workers back "
          f"{back - t_restore:.1f} s after the link's return" if back else "\nnot back")  # fmt: skip
    assert back is not None, saw["log"]
    assert sorted(saw["hosts"].values()) == ["worker-1", "worker-2"], saw
    assert "lost: YARN released its container (ABORTED: its node was lost" in saw["log"], saw["log"]
    assert "2 Dask workers lost" in saw["log"] and saw["relaunches"] == 1, saw["log"]
    # the cut-off executor's worker processes ended once its NodeManager was back
    assert wait_until(lambda: not set(zombies) & set(hosts.pids(victim)), 60), zombies
    got = d.call(S + "compute", "cut")
    assert got["total"] == got["want"] and got["hosts"] == ["worker-1", "worker-2"]
    tag = seen["tag"]
    assert d.call(S + "close", "cut")["active_jobs"] == []
    assert wait_until(lambda: not hosts.dask_processes(tag), 30), hosts.dask_processes(tag)


def test_a_node_decommissioned_gracefully_is_drained(yarn, d):
    """YARN decommissions worker-2 gracefully (``yarn rmadmin -refreshNodes -g``, its host
    in the RM's exclude file: what EMR does before a spot or managed-scaling node
    goes); Spark's AM tells the driver, which decommissions the executor there, and the
    Dask worker on it is retired before it goes: its results move to worker-1's worker,
    the barrier stage runs on (no relaunch, never 0 workers). The node taken back into
    service, the cluster grows back to 2 there."""
    hosts, bed = yarn
    victim = next(h.name for h in hosts.workers if h.name != am_host(hosts))
    healthy = next(h.name for h in hosts.workers if h.name != victim)
    d.call(S + "start", "decom")
    keys = d.call(F + "keep_on", "decom", victim)
    old = d.call(F + "addresses", "decom")
    d.call(F + "watch", "decom")
    t0 = time.time()
    bed.exclude([victim])
    try:
        d.call(S + "yarn_refresh_nodes", 120)
        assert node_states(bed)[victim] == "DECOMMISSIONING", node_states(bed)
        assert wait_until(lambda: d.call(F + "drains", "decom"), 60)
        (drained,) = d.call(F + "drains", "decom")
        t_drained = time.time()
        assert drained["keys"] == len(keys) == drained["moved"] and drained["lost"] == 0, drained
        assert d.call(F + "kept_on", "decom", victim) == {"kept": 16, "of": 16, "hosts": [healthy], "intact": True}
    finally:
        bed.exclude([])
        d.call(S + "yarn_refresh_nodes")  # back into service
    assert wait_until(lambda: node_states(bed)[victim] == "RUNNING", 30), node_states(bed)
    back = d.call(F + "wait_workers", "decom", 2, 120, since=t_drained, old=old)
    saw = d.call(F + "unwatch", "decom", t0)
    print(
        f"\nworker-2 decommissioned by YARN: drained {drained['moved']} keys in {drained['seconds']:.2f} s, "
        f"{t_drained - t0:.1f} s after the refresh; both workers back {back - t0:.1f} s after it"
        if back
        else ""
    )
    assert back is not None, saw["log"]
    assert saw["min"] >= 1 and saw["seconds_with_none"] == 0 and saw["relaunches"] == 0, saw
    assert f"Spark is decommissioning executor {drained['executor']}: Dask worker " in saw["log"], saw["log"]
    assert sorted(saw["hosts"].values()) == ["worker-1", "worker-2"], saw
    tag = d.call(S + "close", "decom")["tag"]
    assert wait_until(lambda: not hosts.dask_processes(tag), 30), hosts.dask_processes(tag)
