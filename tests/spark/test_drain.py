"""A graceful drain when Spark decommissions an executor: real local-cluster[2,2,1024]
applications with ``spark.decommission.enabled``.

Spark starts a decommission in two ways that these tests use: the driver's own call
(``CoarseGrainedSchedulerBackend.decommissionExecutor``, as Spark's
WorkerDecommissionSuite does; what a standalone Master's worker decommission and the
allocation manager end in) and SIGPWR to the executor's JVM (what Kubernetes' decom.sh
sends; ``spark.executor.decommission.signal``). Either way the executor's Dask worker is
retired before the executor goes, its data kept on the other worker, the other worker's
barrier task runs on, and the cluster grows back once Spark's master has started a new
executor. With two worker groups on the executors, a decommission drains every worker
there, whatever its group, and a killed executor relaunches only the groups that had a
worker on it. The multi-host
version (a worker host decommissioned) is in tests/multihost/test_multihost_faults.py.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import suppress

import dask
import distributed
import psutil
import pytest

import spark_dask
from tests.support.parts import parts_of
from tests.support.processes import driver_url, executor_jvm, wait_until
from tests.support.spark import active_jobs, assert_no_leftovers, decommission_executor, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def spark():
    s = make_spark("local-cluster[2,2,1024]", **{"spark.decommission.enabled": "true"})
    yield s
    stop_spark(s)


def _executor_ids(spark) -> list[str]:
    ids = spark.sparkContext._jsc.sc().getExecutorIds()
    return sorted(ids.apply(i) for i in range(ids.size()))


@pytest.fixture
def two_executors(spark):
    """Both executors up (a decommissioned one is replaced by Spark's master)."""
    assert wait_until(lambda: len(_executor_ids(spark)) == 2, 90), _executor_ids(spark)


def _decommission_from_driver(spark, executor: str) -> None:
    assert decommission_executor(spark, executor)


def _decommission_by_signal(spark, executor: str) -> None:
    """SIGPWR to the executor's JVM (``spark.executor.decommission.signal``)."""
    _signal_executor(spark, executor, signal.SIGPWR)


def _signal_executor(spark, executor: str, sig: int) -> None:
    """``sig`` to the executor's JVM."""
    os.kill(executor_jvm(driver_url(spark), executor), sig)


def _kill_executor(spark, executor: str) -> None:
    """SIGKILL the executor's JVM (a reclaim without notice)."""
    _signal_executor(spark, executor, signal.SIGKILL)


def _data_on_each_worker(client) -> dict[str, list]:
    """Futures of results held by each worker (by address), 8 each."""
    return {a: client.scatter([(a, i, os.urandom(1 << 16)) for i in range(8)], workers=[a]) for a in client.ncores()}


@pytest.mark.parametrize("trigger", [_decommission_from_driver, _decommission_by_signal], ids=["driver", "sigpwr"])
def test_a_decommissioned_executor_is_drained_and_its_data_kept(spark, two_executors, trigger):
    with spark_dask.start(spark, progress=False) as client:
        cluster = client.cluster
        data = _data_on_each_worker(client)
        victim, survivor = sorted(data)
        info = client.scheduler_info()["workers"]
        name, executor = info[victim]["name"], info[victim]["spark"]["executor_id"]
        survivor_pid = client.run(os.getpid, workers=[survivor])[survivor]
        trigger(spark, executor)
        assert wait_until(lambda: parts_of(cluster).drains, 30), cluster.get_logs()["Cluster"]
        (drained,) = parts_of(cluster).drains
        assert drained["executor"] == executor and drained["workers"] == [name]
        assert drained["keys"] == drained["moved"] == 8 and drained["lost"] == 0, drained
        # every key the retired worker held is now on the survivor, not recomputed
        who_has = client.who_has(data[victim])
        assert all(who_has[f.key] == (survivor,) for f in data[victim]), who_has
        assert [v[0] for v in client.gather(data[victim])] == [victim] * 8
        log = cluster.get_logs()["Cluster"]
        assert f"Spark is decommissioning executor {executor}: Dask worker {name} on " in log, log
        assert "its 8 keys (" in log and "moved to the other workers" in log, log
        # the survivor's barrier task ran on: the same process, no relaunch spent
        assert client.run(os.getpid, workers=[survivor])[survivor] == survivor_pid
        assert parts_of(cluster).relaunches == 0
        assert not any(g.status.startswith("failed") for g in parts_of(cluster).gangs)
        # Spark's master replaces the executor once it left: the cluster grows back
        client.wait_for_workers(2, timeout=90)
        assert executor not in _executor_ids(spark)
        assert name not in {w["name"] for w in client.scheduler_info()["workers"].values()}
        assert client.submit(len, data[survivor]).result() == 8
    assert_no_leftovers(spark, cluster)
    assert not active_jobs(spark)


def test_a_window_too_short_closes_the_worker_and_dask_recomputes(spark, two_executors):
    """drain-timeout 0: nothing is moved; the line says so, the worker still leaves
    before its executor (the other worker's barrier task runs on) and what it held is
    recomputed when asked for."""
    with (
        dask.config.set({"spark-dask.drain-timeout": 0}),
        spark_dask.start(spark, progress=False) as client,
    ):
        cluster = client.cluster
        victim, survivor = sorted(client.ncores())
        info = client.scheduler_info()["workers"]
        name, executor = info[victim]["name"], info[victim]["spark"]["executor_id"]
        held = client.map(lambda i: i * i, range(6), workers=[victim], allow_other_workers=True, pure=False)
        distributed.wait(held)
        assert all(w == (victim,) for w in client.who_has(held).values())
        survivor_pid = client.run(os.getpid, workers=[survivor])[survivor]
        _decommission_from_driver(spark, executor)
        assert wait_until(lambda: parts_of(cluster).drains, 30), cluster.get_logs()["Cluster"]
        (drained,) = parts_of(cluster).drains
        assert drained["keys"] == 6 and drained["moved"] == 0 and drained["lost"] == 6, drained
        log = cluster.get_logs()["Cluster"]
        assert f"Dask worker {name} on " in log and "closed after the drain window (0 s" in log, log
        assert "with 6 keys not moved (recomputed when needed)" in log, log
        assert client.gather(held) == [i * i for i in range(6)]  # recomputed
        assert client.run(os.getpid, workers=[survivor])[survivor] == survivor_pid
        assert parts_of(cluster).relaunches == 0
    assert_no_leftovers(spark, cluster)


def _placed(client) -> dict[str, list[tuple[str, str]]]:
    """``{executor id: [(group, worker name), ...]}`` from the workers' Spark facts."""
    out: dict[str, list[tuple[str, str]]] = {}
    for w in client.scheduler_info()["workers"].values():
        out.setdefault(w["spark"]["executor_id"], []).append((w["spark"].get("group", "default"), w["name"]))
    return {e: sorted(ws) for e, ws in out.items()}


def _per_group(client) -> dict[str, int]:
    out: dict[str, int] = {}
    for ws in _placed(client).values():
        for group, _ in ws:
            out[group] = out.get(group, 0) + 1
    return out


def test_two_groups_a_decommission_drains_both_a_kill_relaunches_only_the_groups_there(spark, two_executors):
    """A default group and an ``io`` group of two workers each (a core each) on two
    executors of two cores, placed as Spark places the barrier tasks. Decommissioning
    the executor of an ``io`` worker drains every worker there, whatever its group (each
    group owes its own, started on the executor Spark's master brings back); killing
    the executor of a default worker fails the barrier stages of the groups with a task
    there, and only those groups relaunch."""
    groups = {"io": {"worker": "cpu", "n_workers": 2, "threads_per_worker": 1}}
    with spark_dask.start(spark, task_profile=False, worker_groups=groups, progress=False) as client:
        cluster = client.cluster
        pools = parts_of(cluster).pools
        assert _per_group(client) == {"default": 2, "io": 2}
        placed = _placed(client)
        first = next(e for e, ws in placed.items() if any(g == "io" for g, _ in ws))
        on_io = next(n for g, n in placed[first] if g == "io")
        held = client.scatter([b"x" * 1000 + bytes([i]) for i in range(6)], workers=[on_io])
        _decommission_from_driver(spark, first)
        assert wait_until(lambda: parts_of(cluster).drains, 30), cluster.get_logs()["Cluster"]
        (drained,) = parts_of(cluster).drains
        assert sorted(drained["workers"]) == sorted(n for _, n in placed[first]) and drained["moved"] == 6, drained
        assert all(pool.relaunches == 0 for pool in pools.values())
        client.wait_for_workers(4, timeout=90)  # each group's replacement on the new executor
        assert wait_until(lambda: _per_group(client) == {"default": 2, "io": 2}, 30), _placed(client)
        assert client.gather(held)[0].startswith(b"x")
        # now a kill: the groups with a worker on the killed executor relaunch, no other
        placed = _placed(client)
        victim = next(e for e, ws in placed.items() if any(g == "default" for g, _ in ws))
        hit = {g for g, _ in placed[victim]}
        _kill_executor(spark, victim)
        assert wait_until(lambda: all(pools[g].relaunches == 1 for g in hit), 60), cluster.get_logs()["Cluster"]
        client.wait_for_workers(4, timeout=90)
        assert wait_until(lambda: _per_group(client) == {"default": 2, "io": 2}, 30), _placed(client)
        assert {g: pool.relaunches for g, pool in pools.items()} == {g: int(g in hit) for g in pools}
        io = [w for w in client.scheduler_info()["workers"].values() if w["resources"].get("group-io")]
        assert len(io) == 2 and all(w["spark"].get("group") == "io" for w in io), io
        assert parts_of(cluster).drains == [drained]
    assert_no_leftovers(spark, cluster)


def _freeze(client, address: str, stopped: list) -> list[psutil.Process]:
    """SIGSTOP the worker process at ``address`` and its nanny (alive, their connections
    open, never answering): ``[nanny, worker]``, also added to ``stopped``."""
    worker = psutil.Process(client.run(os.getpid, workers=[address])[address])
    nanny = worker.parent()
    assert nanny.name() == "dask-nanny", nanny
    for p in (nanny, worker):
        p.suspend()
        stopped.append(p)
    return [nanny, worker]


def _gone(procs: list[psutil.Process]) -> bool:
    def ended(p):
        with suppress(psutil.NoSuchProcess):
            return p.status() == psutil.STATUS_ZOMBIE  # ended; its new parent may not reap it
        return True

    return all(ended(p) for p in procs)


@pytest.mark.timeout(150)
def test_a_frozen_worker_stalls_no_scale_drain_or_close(spark, two_executors):
    """Issue 54: a worker whose nanny and worker processes are frozen (SIGSTOP: alive,
    their connections open) held the pool's lock for good, so no later scale, drain or
    relaunch ran, and ``get_logs()`` waited for its log for good. Now ``get_logs()``, a
    scale-down that retires it, a drain of its executor and the close each give up on it
    after close-timeout (one line each saying what was waited for), end its processes
    through its Spark task's line, and go on."""
    stopped: list[psutil.Process] = []
    options = {"spark-dask.close-timeout": "1s", "spark-dask.kill-grace": "1s"}
    try:
        with dask.config.set(options), spark_dask.start(spark, progress=False) as client:
            cluster = client.cluster
            victim, survivor = sorted(client.ncores())
            name = client.scheduler_info()["workers"][victim]["name"]
            kept = client.scatter([os.urandom(1 << 10)], workers=[victim])  # the least data: scaled down first
            more = client.scatter([os.urandom(1 << 20)], workers=[survivor])
            frozen = _freeze(client, victim, stopped)
            logs = cluster.get_logs()  # before: it waited for the frozen worker's log for good
            assert "spark-dask: waited 1s for every Dask worker to send its log" in logs["Cluster"], logs["Cluster"]
            cluster.scale(1)
            assert wait_until(lambda: _gone(frozen), 30), cluster.get_logs()["Cluster"]
            log = cluster.get_logs()["Cluster"]
            assert f"spark-dask: waited 1s for Dask worker {name} (" in log, log
            assert "to hand its data to the other workers, without an answer (frozen?); it is removed" in log, log
            assert f"waited 1s for the nanny of Dask worker {name} (" in log, log
            assert f"its Spark task ends the processes of {name} (SIGKILL after kill-grace)" in log, log
            cluster.scale(2)  # the pool goes on: before, its lock was held for good
            client.wait_for_workers(2, timeout=60)
            assert len(client.gather(more)[0]) == 1 << 20 and len(kept) == 1

            # a drain: the worker of the decommissioned executor is frozen
            (last,) = [a for a in client.ncores() if a != survivor]
            executor = client.scheduler_info()["workers"][survivor]["spark"]["executor_id"]
            frozen = _freeze(client, survivor, stopped)
            drained = client.scheduler_info()["workers"][survivor]["name"]
            assert decommission_executor(spark, executor)
            assert wait_until(lambda: parts_of(cluster).drains and _gone(frozen), 30), cluster.get_logs()["Cluster"]
            assert f"waited 1s for the nanny of Dask worker {drained} (" in cluster.get_logs()["Cluster"]

            # the close: the other worker is frozen
            last_name = client.scheduler_info()["workers"][last]["name"]
            frozen = _freeze(client, last, stopped)
            t0 = time.monotonic()
        closed_in = time.monotonic() - t0
        assert closed_in < 30, closed_in  # close-timeout for the nannies, and as long for the gangs
        assert wait_until(lambda: _gone(frozen), 10)
        log = "\n".join(text for _, text in parts_of(cluster).events.logs)
        assert f"waited 1s for the nanny of Dask worker {last_name} (" in log and "as the cluster closes" in log, log
        assert_no_leftovers(spark, cluster)
        assert not active_jobs(spark)
    finally:
        for p in stopped:  # never left stopped, whatever failed
            with suppress(psutil.NoSuchProcess):
                p.kill()
