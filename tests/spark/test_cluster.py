"""spark_dask.start / SparkCluster on a real local-cluster[2,1,1024] Spark application."""

from __future__ import annotations

import asyncio
import os
import time

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client

import spark_dask
from spark_dask import PlanError, SparkCluster, SparkDaskError, internals
from spark_dask.startup import Startup
from tests.support.processes import dask_processes, port_open, wait_until
from tests.support.spark import active_jobs, assert_no_leftovers

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(180)]


def test_start_computes_and_leaves_nothing(spark):
    with spark_dask.start(spark) as client:
        cluster = client.cluster
        info = client.scheduler_info()["workers"]
        assert len(info) == 2
        assert client.scheduler.address.startswith("tls://")
        assert port_open(cluster.scheduler_address)
        assert len(dask_processes(cluster.tag)) >= 2  # nanny + worker per task
        assert active_jobs(spark)  # the barrier stage holds the workers

        pdf = pd.DataFrame({"k": np.arange(1000) % 7, "x": np.arange(1000, dtype=float)})
        ddf = dd.from_pandas(pdf, npartitions=8)
        got = ddf.groupby("k").x.sum().compute().sort_index()
        pd.testing.assert_series_equal(got, pdf.groupby("k").x.sum().sort_index())

        arr = np.random.default_rng(0).random((2000, 200))
        assert np.isclose(da.from_array(arr, chunks=(250, 200)).sum().compute(), arr.sum())

        # a cluster of Python workers runs distributed's scheduler as distributed made it
        assert client.run_on_scheduler(lambda dask_scheduler: internals.replaced(dask_scheduler)) == []

        # the work ran on the Spark-launched workers, not in this process
        pids = set(client.run(os.getpid).values())
        assert os.getpid() not in pids and len(pids) == 2

    assert cluster.status.name == "closed"
    assert_no_leftovers(spark, cluster)
    rows = cluster.task_rows
    assert sorted(r["partition"] for r in rows) == [0, 1]
    assert all(w["exit_code"] == 0 for r in rows for w in r["workers"])
    # closed through the preload's spark_dask_close: the nanny finished its close (its last
    # line, whatever the worker logged before it) and left at once (no interpreter
    # shutdown), so "dask worker" never logged its own end
    for w in (w for r in rows for w in r["workers"]):
        last = w["log_tail"].strip().splitlines()[-1]
        assert last.endswith("spark-dask: the nanny closed (spark_dask_close); its process leaves"), w["log_tail"]
        assert "End worker" not in w["log_tail"], w["log_tail"]
        assert "No handler" not in w["log_tail"], w["log_tail"]


def test_workers_carry_spark_facts_and_sizes(spark):
    with spark_dask.start(spark, threads_per_worker=1, memory_limit="1GiB") as client:
        workers = client.scheduler_info()["workers"].values()
        names = sorted(w["name"] for w in workers)
        assert names == ["spark-0", "spark-1"]
        for w in workers:
            assert w["nthreads"] == 1  # threads above the executor cores are refused
            assert w["memory_limit"] == 2**30
            facts = w["spark"]
            assert facts["partition"] == int(w["name"].split("-")[1])
            assert facts["executor_id"] in ("0", "1")
            assert facts["cluster"] == client.cluster.tag
        assert {w["spark"]["executor_id"] for w in workers} == {"0", "1"}


def test_auto_sizing_follows_spark(spark):
    import psutil

    with spark_dask.start(spark) as client:
        for w in client.scheduler_info()["workers"].values():
            assert w["nthreads"] == 1  # one core per executor
            # host memory left after two 1 GiB executors, split over two workers
            expected = (psutil.virtual_memory().total - 2 * 2**30) // 2
            assert abs(w["memory_limit"] - expected) < 2**27


def test_exception_in_block_propagates_and_tears_down(spark):
    class Boom(Exception):
        pass

    with pytest.raises(Boom, match="inside"):
        with spark_dask.start(spark) as client:
            cluster = client.cluster
            raise Boom("inside")
    assert cluster.status.name == "closed"
    assert_no_leftovers(spark, cluster)


def test_keyboard_interrupt_in_block_tears_down(spark):
    with pytest.raises(KeyboardInterrupt):
        with spark_dask.start(spark) as client:
            cluster = client.cluster
            raise KeyboardInterrupt
    assert_no_leftovers(spark, cluster)


def test_cluster_contract(spark):
    cluster = SparkCluster(spark, n_workers=1, progress=False)
    try:
        assert cluster.status.name == "running"
        assert cluster.scheduler_address.startswith("tls://")
        assert cluster.dashboard_link.startswith("http://")
        assert "/status" in cluster.dashboard_link
        client = cluster.get_client()
        assert client.submit(lambda x: x * 2, 21).result() == 42
        cluster.wait_for_workers(1, timeout=10)
        assert len(cluster.scheduler_info["workers"]) == 1
        logs = cluster.get_logs()
        assert {"Cluster", "Scheduler", "Spark tasks"} <= set(logs)
        assert any(k.startswith("tls://") for k in logs)  # worker logs
        page = cluster._repr_html_()
        assert cluster.tag in page and "SparkCluster" in page and "barrier tasks" in page
        assert cluster.tag in repr(cluster)
        assert cluster._supports_scaling
        with pytest.raises(PlanError, match="number of workers"):
            cluster.scale(-1)
        client.close()
    finally:
        cluster.close()
        cluster.close()  # idempotent
    assert_no_leftovers(spark, cluster)
    logs = cluster.get_logs()  # still readable after close
    assert "task 0 on executor" in logs["Spark tasks"]


def test_async_use(spark):
    async def main():
        async with SparkCluster(spark, n_workers=2, asynchronous=True, progress=False) as cluster:
            async with Client(cluster, asynchronous=True) as client:
                assert await client.submit(sum, [1, 2, 3]) == 6
                assert len(cluster.scheduler_info["workers"]) == 2
        return cluster

    cluster = asyncio.run(main())
    assert cluster.status.name == "closed"
    assert_no_leftovers(spark, cluster)


def test_worker_options_and_env(spark):
    with spark_dask.start(
        spark, n_workers=1, worker_options={"resources": {"FOO": 2}}, env={"SPARK_DASK_TEST": "yes"}
    ) as client:
        (w,) = client.scheduler_info()["workers"].values()
        assert w["resources"] == {"FOO": 2}
        assert set(client.run(lambda: os.environ.get("SPARK_DASK_TEST")).values()) == {"yes"}


def test_worker_command_template(spark):
    template = (
        "{python} -m distributed.cli.dask_worker {scheduler_address} --name {name}-custom "
        "--nthreads 3 --no-nanny --tls-ca-file {tls_ca_file} --tls-cert {tls_cert} "
        "--tls-key {tls_key} --preload {preload}"
    )
    with spark_dask.start(spark, n_workers=2, worker_command=template) as client:
        workers = client.scheduler_info()["workers"].values()
        assert sorted(w["name"] for w in workers) == ["spark-0-custom", "spark-1-custom"]
        assert {w["nthreads"] for w in workers} == {3}
        cluster = client.cluster
    assert_no_leftovers(spark, cluster)


def test_tls_off_warns_and_works(spark):
    with pytest.warns(UserWarning, match="TLS is off"):
        client = spark_dask.start(spark, n_workers=1, tls=False)
    with client:
        assert client.scheduler.address.startswith("tcp://")
        assert client.submit(lambda: 1).result() == 1


def test_client_without_credentials_is_refused(spark):
    with spark_dask.start(spark, n_workers=1) as client:
        with pytest.raises(Exception):  # noqa: B017
            # no TLS credentials. set_as_default=False: a Client whose connection fails in
            # __init__ leaves scheduler='dask.distributed' in dask.config (distributed 2026.8)
            Client(client.scheduler.address, timeout="3s", set_as_default=False)


def test_too_many_workers_fails_fast_without_a_job(spark):
    t0 = time.monotonic()
    with pytest.raises(PlanError, match="n_workers<=2"):
        spark_dask.start(spark, n_workers=3)
    assert time.monotonic() - t0 < 30
    assert not active_jobs(spark)


def test_a_plan_refused_while_the_scheduler_still_starts_leaves_no_scheduler(spark, monkeypatch):
    """The facts and the scheduler start at the same time: a plan refused after the facts
    must still close a scheduler that finishes starting afterwards."""
    started = []
    original = Startup.start_scheduler

    async def slow_start(self, t0, open_contract):
        await asyncio.sleep(1.0)  # the facts, and the plan's refusal, come first
        await original(self, t0, open_contract)
        started.append(self.parts.driver_scheduler.scheduler)

    monkeypatch.setattr(Startup, "start_scheduler", slow_start)
    with pytest.raises(PlanError, match="n_workers<=2"):
        SparkCluster(spark, n_workers=3)
    assert started, "the scheduler's start was waited for"
    scheduler = started[0]
    assert scheduler.status.name == "closed"
    assert not port_open(scheduler.address)
    assert not active_jobs(spark)


@pytest.mark.parametrize("kwargs,match", [
    ({"n_workers": 0}, "at least 1"),
    ({"worker": "gpu"}, "worker must be one of"),
    ({"worker": "cuda"}, "no GPUs"),
    ({"threads_per_worker": 0}, "threads_per_worker"),
    ({"memory_limit": "lots"}, "memory_limit"),
    ({"timeout": "soon"}, "timeout"),
])  # fmt: skip
def test_bad_input_is_refused_before_anything_starts(spark, kwargs, match):
    with pytest.raises(PlanError, match=match):
        spark_dask.start(spark, **kwargs)
    assert not active_jobs(spark)
    assert not dask_processes(spark=spark)


def test_worker_that_cannot_start_fails_fast_with_its_log(spark):
    # a valid option whose value makes the worker program exit before it connects
    t0 = time.monotonic()
    with pytest.raises(SparkDaskError) as e:
        spark_dask.start(spark, worker_options={"worker_class": "no_such_module.Worker"}, timeout=120)
    elapsed = time.monotonic() - t0
    msg = str(e.value)
    assert "exited with code" in msg and "executor" in msg
    assert "--worker-class no_such_module.Worker" in msg  # the command
    assert "No module named 'no_such_module'" in msg  # the worker's log tail
    assert elapsed < 60, elapsed
    assert wait_until_no_jobs(spark)
    # the other barrier task is killed by Spark (spark.python.task.killTimeout, 2 s); its
    # worker follows (parent-death signal, watchdog, kill-grace 5 s): gone within seconds,
    # not left for the death-timeout (60 s)
    assert wait_until(lambda: not dask_processes(spark=spark), 20), dask_processes(spark=spark)


def test_unknown_worker_option_is_refused_on_the_driver_before_submitting(spark, monkeypatch):
    from spark_dask.gangs import gang as gang_module

    submitted = []
    real = gang_module.GangLauncher
    monkeypatch.setattr(gang_module, "GangLauncher", lambda *a, **kw: submitted.append(1) or real(*a, **kw))
    t0 = time.monotonic()
    with pytest.raises(PlanError) as e:
        spark_dask.start(spark, worker_options={"no_such_option": 1})
    elapsed = time.monotonic() - t0
    msg = str(e.value)
    assert "worker_options['no_such_option']" in msg and "distributed.cli.dask_worker" in msg
    assert "has no option --no-such-option" in msg
    assert elapsed < 10, elapsed  # seconds (the driver reads the session), not a worker start
    assert not submitted and not active_jobs(spark)  # checked before anything was submitted
    with pytest.raises(PlanError, match=r"Did you mean 'lifetime_restart'\?"):
        spark_dask.start(spark, worker_options={"lifetime_restar": True})
    with pytest.raises(PlanError, match="use threads_per_worker"):
        spark_dask.start(spark, worker_options={"nthreads": 8})
    assert not submitted and not dask_processes(spark=spark)


def test_worker_without_nanny_from_worker_options(spark):
    with spark_dask.start(spark, n_workers=1, worker_options={"nanny": False}) as client:
        (w,) = client.scheduler_info()["workers"].values()
        assert w.get("nanny") is None
        assert client.submit(lambda: 2).result() == 2
        cluster = client.cluster
    assert_no_leftovers(spark, cluster)


def wait_until_no_jobs(spark):
    from tests.support.processes import wait_until

    return wait_until(lambda: not active_jobs(spark))


def test_two_clusters_at_once_are_independent(spark):
    with spark_dask.start(spark, n_workers=1) as a, spark_dask.start(spark, n_workers=1) as b:
        assert a.cluster.tag != b.cluster.tag
        assert a.scheduler.address != b.scheduler.address
        assert a.submit(lambda: 1).result() + b.submit(lambda: 2).result() == 3
    assert_no_leftovers(spark, a.cluster)
    assert_no_leftovers(spark, b.cluster)


def test_spark_job_waiting_for_slots_is_reported(spark, caplog, capsys):
    # The gang holds both slots of local-cluster[2,1,1024]: said at start; a Spark job
    # in the block waits. It finishes once the cluster closes, and the wait is reported
    # once per stage, through the log only (not printed a second time).
    import logging
    import threading

    with pytest.warns(UserWarning, match="every task slot Spark jobs can use") as started:
        client = spark_dask.start(spark)
    assert "n_workers=1" in str(next(w.message for w in started if "every task slot" in str(w.message)))
    with caplog.at_level(logging.WARNING, logger="spark_dask"), client:
        cluster = client.cluster
        result = {}

        def spark_job():
            result["count"] = spark.sparkContext.parallelize(range(10), 2).count()

        t = threading.Thread(target=spark_job)
        t.start()
        assert wait_until(lambda: "waited" in cluster.get_logs(scheduler=False, workers=False)["Cluster"], 40)
        time.sleep(4.5)  # two more rounds of the watcher (every 2 s): still one report
        assert "count" not in result
    t.join(60)
    assert result["count"] == 10
    reports = [r for r in caplog.records if "has waited" in r.getMessage()]
    assert len(reports) == 1 and "Spark stage" in reports[0].getMessage()
    assert "has waited" not in capsys.readouterr().out


def test_spark_stop_tears_the_cluster_down(spark):
    """Last in this module: it stops the module's SparkSession."""
    client = spark_dask.start(spark, n_workers=2)
    cluster = client.cluster
    t0 = time.monotonic()
    spark.stop()
    assert wait_until(lambda: cluster.status.name == "closed", 30)
    assert wait_until(lambda: not dask_processes(cluster.tag), 30)
    assert not port_open(cluster.scheduler_address)
    assert time.monotonic() - t0 < 30
    assert "SparkSession was stopped" in cluster.get_logs()["Cluster"]
    client.close()


def test_each_cluster_gets_credentials_of_its_own_made_ahead(monkeypatch):
    """TLS credentials are made one cluster ahead in a background thread, each set
    handed out once; a spare that failed is replaced by one made on the spot."""
    from distributed.security import Security

    from spark_dask.scheduler import Credentials

    made = []
    real = Security.temporary

    def temporary():
        made.append(1)
        return real()

    monkeypatch.setattr(Security, "temporary", staticmethod(temporary))
    creds = Credentials()
    first = creds.take()  # nothing ahead yet: made here, and the next one started
    assert wait_until(lambda: creds._spare is not None and creds._spare.done(), timeout=10)
    second = creds.take()
    assert wait_until(lambda: len(made) == 3, timeout=10)  # the third, for the next start
    cas = {first.tls_ca_file, second.tls_ca_file, creds._spare.result().tls_ca_file}
    assert len(cas) == 3  # never the same certificate authority twice

    def broken():
        raise RuntimeError("no entropy")

    monkeypatch.setattr(Security, "temporary", staticmethod(broken))
    creds._spare = None
    creds._make_spare()
    assert wait_until(lambda: creds._spare.done(), timeout=10)
    monkeypatch.setattr(Security, "temporary", staticmethod(temporary))
    third = creds.take()  # the spare failed: made here instead
    assert third.tls_ca_file not in cas
