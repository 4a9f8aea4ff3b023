"""A lost executor costs only what it must: real local-cluster[2,1,1024] applications.

Spark's own developer API takes executors away for good (``SparkContext.killExecutors``
lowers the application's executor target, so the standalone master does not replace
them) and gives them back (``requestExecutors``): the local stand-in for a host that is
lost and later replaced. Killing an executor JVM is a lost executor that Spark's worker
replaces at once. The multi-host versions (a whole host killed, a link cut) are in
tests/multihost/test_multihost_faults.py.
"""

from __future__ import annotations

import doctest
import os
import signal
import time

import dask
import psutil
import pytest

import spark_dask
from spark_dask import SparkDaskError
from spark_dask.capacity import placeable
from spark_dask.gangs import faults
from spark_dask.gangs.faults import lost_worker
from tests.support.parts import parts_of
from tests.support.processes import driver_url, executor_jvm, wait_until
from tests.support.spark import active_jobs, assert_no_leftovers

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


def _make_slow_inc():
    # a closure: Dask pickles it by value (the tests package is not on the workers)
    def slow_inc(x):
        time.sleep(0.1)
        return x + 1

    return slow_inc


slow_inc = _make_slow_inc()


# ----------------------------------------------------------------- the rules, no Spark
def test_doctests_of_the_faults_module():
    assert doctest.testmod(faults).failed == 0


def test_a_worker_is_lost_only_when_it_did_not_say_goodbye():
    assert lost_worker("running", retiring=False, cluster_running=True)
    assert lost_worker("paused", retiring=False, cluster_running=True)
    assert lost_worker(None, retiring=False, cluster_running=True)
    assert lost_worker("closing", retiring=False, cluster_running=True)  # closed by itself
    assert not lost_worker("closing_gracefully", retiring=False, cluster_running=True)  # retired
    assert not lost_worker("running", retiring=True, cluster_running=True)
    assert not lost_worker("running", retiring=False, cluster_running=False)


def test_a_barrier_relaunch_takes_only_the_free_slots():
    assert placeable(2, capacity=1, held=0, workers_per_task=1) == 1
    assert placeable(2, capacity=2, held=2, workers_per_task=1) == 0
    assert placeable(3, capacity=4, held=1, workers_per_task=1) == 3
    assert placeable(4, capacity=3, held=2, workers_per_task=2) == 2
    assert placeable(5, capacity=None, held=9, workers_per_task=1) == 5


# ------------------------------------------------------------------ real Spark
def _jsc(spark):
    return spark.sparkContext._jsc.sc()


def _executor_ids(spark) -> list[str]:
    ids = _jsc(spark).getExecutorIds()
    return sorted(ids.apply(i) for i in range(ids.size()))


class _Taken:
    """Executors Spark removes and does not replace (a lost host) until ``give_back``
    (a replaced host); whatever is still taken is given back when the test ends."""

    def __init__(self, spark, ids):
        self.spark = spark
        self.n = len(ids)
        _jsc(spark).killExecutors(spark.sparkContext._jvm.PythonUtils.toSeq(list(ids)))

    def give_back(self, n: int | None = None) -> None:
        n = self.n if n is None else n
        if n > 0:
            _give_executors(self.spark, n)
            self.n -= n


@pytest.fixture
def take(spark):
    taken: list[_Taken] = []
    yield lambda ids: taken.append(_Taken(spark, ids)) or taken[-1]
    for t in taken:
        t.give_back()


def _give_executors(spark, n: int) -> None:
    """Spark asks the master for ``n`` more executors (a replaced host): the
    application's executor total set to what it has plus ``n``."""
    goal = len(_executor_ids(spark)) + n
    jvm = spark.sparkContext._jvm
    _jsc(spark).requestTotalExecutors(goal, 0, jvm.PythonUtils.toScalaMap(jvm.java.util.HashMap()))
    assert wait_until(lambda: len(_executor_ids(spark)) >= goal, 90), _executor_ids(spark)


@pytest.fixture
def two_executors(spark):
    """Every test starts with both executors registered (a test that takes some away
    gives them back itself; a killed JVM is replaced by Spark's worker)."""
    assert wait_until(lambda: len(_executor_ids(spark)) == 2, 90), _executor_ids(spark)


def _worker_pids(client) -> dict[str, int]:
    return client.run(os.getpid)


def _executor_of(client, address: str) -> str:
    return client.scheduler_info()["workers"][address]["spark"]["executor_id"]


def test_isolated_workers_a_lost_executor_costs_only_its_own_worker(spark, two_executors):
    """barrier=False: each worker is a Spark job of its own; killing one executor JVM
    leaves the other worker (and its data) alone, and the lost one is replaced."""
    app_id = driver_url(spark)  # unique on this machine, where application ids are not
    # a grace that Spark's retry of the task fits in even on a loaded 2-CPU machine
    # (under load it took longer than the default 20 s, and the worker was replaced)
    with (
        dask.config.set({"spark-dask.lost-worker-grace": "80s"}),
        spark_dask.start(spark, barrier=False, progress=False) as client,
    ):
        cluster = client.cluster
        assert len(active_jobs(spark)) == 2  # one Spark job per worker
        assert not cluster.gang_plan.barrier
        pids = _worker_pids(client)
        victim, survivor = sorted(pids)
        kept = client.scatter(list(range(1000)), workers=[survivor])
        victim_name = client.scheduler_info()["workers"][victim]["name"]
        executor = _executor_of(client, victim)
        os.kill(executor_jvm(app_id, executor), signal.SIGKILL)
        assert wait_until(lambda: victim not in client.scheduler_info()["workers"], 30)
        client.wait_for_workers(2, timeout=90)
        now = _worker_pids(client)
        assert now[survivor] == pids[survivor]  # never left
        assert victim not in now
        assert client.submit(sum, kept).result() == sum(range(1000))  # its data is still there
        assert sum(client.gather(client.map(slow_inc, range(20)))) == sum(range(1, 21))
        # Spark ran the lost job's task again (a plain job's task is retried): the
        # worker is back under the next attempt's name, no relaunch was needed
        names = {w["name"] for w in client.scheduler_info()["workers"].values()}
        assert f"{victim_name}-a1" in names, names
        assert parts_of(cluster).relaunches == 0 and len(active_jobs(spark)) == 2
        log = cluster.get_logs()["Cluster"]
        assert f"Dask worker {victim_name} on " in log and f"(executor {executor}) was lost" in log, log
        assert "the cluster has 1 of 2 workers; Spark runs its task again" in log, log
        assert wait_until(lambda: f"{victim_name} is back (as {victim_name}-a1)" in cluster.get_logs()["Cluster"], 10)
    assert_no_leftovers(spark, cluster)


def test_barrier_relaunch_runs_with_what_fits_and_grows_back(spark, two_executors, take):
    """barrier stage (default): an executor taken away for good fails the stage (both
    workers die); the cluster relaunches the one worker the executor left can hold,
    says that the other waits, and adds it once Spark has an executor again."""
    with spark_dask.start(spark, progress=False) as client:
        cluster = client.cluster
        victim = sorted(_worker_pids(client))[0]
        lost_host = take([_executor_of(client, victim)])
        assert wait_until(lambda: parts_of(cluster).relaunches == 1 and len(parts_of(cluster).gangs) == 2, 60), (
            cluster.get_logs()["Cluster"]
        )
        relaunched = parts_of(cluster).gangs[1]
        assert relaunched.plan.n_workers == 1 and relaunched.reason == "relaunch"
        assert wait_until(lambda: relaunched.connected == 1 and len(client.scheduler_info()["workers"]) == 1, 90)
        assert sum(client.gather(client.map(slow_inc, range(10)))) == sum(range(1, 11))
        log = cluster.get_logs()["Cluster"]
        assert "2 Dask workers lost" in log and "starting 1 now (relaunch 1 of 3)" in log, log
        assert "1 more once Spark has a free task slot for it" in log, log
        time.sleep(3)  # no executor came back: still one worker, the other waits
        assert len(client.scheduler_info()["workers"]) == 1
        lost_host.give_back()
        client.wait_for_workers(2, timeout=90)  # grew back by itself
        assert parts_of(cluster).relaunches == 1
        assert sum(client.gather(client.map(slow_inc, range(10)))) == sum(range(1, 11))
    assert_no_leftovers(spark, cluster)


def test_a_worker_gone_while_its_task_runs_on_is_replaced(spark, two_executors):
    """A worker whose connection broke and that does not come back (its nanny and
    worker killed; on many hosts: a link cut) is replaced after lost-worker-grace, the
    barrier stage of the other worker running on untouched."""
    with dask.config.set({"spark-dask.lost-worker-grace": "2s"}):
        with spark_dask.start(spark, progress=False) as client:
            cluster = client.cluster
            info = client.scheduler_info()["workers"]
            victim = sorted(info)[0]
            survivor_pid = _worker_pids(client)[sorted(info)[1]]
            nanny_pid = psutil.Process(_worker_pids(client)[victim]).ppid()
            os.killpg(os.getpgid(nanny_pid), signal.SIGKILL)  # the forked nanny's own group
            assert wait_until(lambda: victim not in client.scheduler_info()["workers"], 30)
            client.wait_for_workers(2, timeout=60)
            assert survivor_pid in _worker_pids(client).values()
            assert len(parts_of(cluster).gangs) == 2 and not parts_of(cluster).gangs[0].done  # the first stage runs on
            log = cluster.get_logs()["Cluster"]
            assert "has not come back within 2 s" in log and "1 Dask worker lost" in log, log
    assert_no_leftovers(spark, cluster)


def test_no_worker_for_too_long_fails_the_cluster_with_a_clear_error(spark, two_executors, take):
    """Every executor gone and none coming back: after no-workers-timeout the cluster
    fails; a computation waiting for a worker raises the reason; nothing is left."""
    with dask.config.set({"spark-dask.no-workers-timeout": "6s"}):
        with spark_dask.start(spark, progress=False) as client:
            cluster = client.cluster
            take(_executor_ids(spark))
            t0 = time.monotonic()
            # submitted once no worker is left: a task run before the executors died
            # would just finish (its result is what is then lost)
            assert wait_until(lambda: not cluster.scheduler.workers, 60)
            future = client.submit(slow_inc, 1, pure=False)
            with pytest.raises(SparkDaskError, match="had 0 of its 2 workers") as e:
                future.result(timeout=90)
            waited = time.monotonic() - t0
            assert "no-workers-timeout 6 s" in str(e.value)
            assert wait_until(lambda: cluster.status.name == "failed", 30), cluster.status
            failures = [pool.recovery.failure for pool in parts_of(cluster).pools.values()]  # every group's
            assert failures and all(f and "0 of its 2 workers" in f for f in failures), failures
            print(f"failed {waited:.1f} s after the loss")
    assert wait_until(lambda: not active_jobs(spark), 30), active_jobs(spark)
    assert_no_leftovers(spark, cluster)


@pytest.mark.core
def test_barrier_option_is_checked_before_anything_starts(spark):
    with pytest.raises(spark_dask.PlanError, match="barrier must be 'auto', True or False"):
        spark_dask.SparkCluster(spark, barrier="sometimes")
    assert not active_jobs(spark)
