"""An autoscaling Spark application: dynamic allocation on local-cluster[2,1,1024]
(shuffle tracking on, 1 to 2 executors). Spark refuses barrier stages there: each Dask
worker runs as a plain one-task Spark job, and Spark adds an executor for a waiting one
and releases it once its worker has been retired."""

from __future__ import annotations

import os
import time

import psutil
import pytest
from distributed import Client

import spark_dask
from spark_dask import SparkCluster
from tests.support.parts import parts_of
from tests.support.processes import driver_url, executor_jvm, wait_until
from tests.support.spark import assert_no_leftovers, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

IDLE = 3  # spark.dynamicAllocation.executorIdleTimeout, seconds


@pytest.fixture(scope="module")
def spark():
    s = make_spark(
        "local-cluster[2,1,1024]",
        **{
            "spark.dynamicAllocation.enabled": "true",
            "spark.dynamicAllocation.shuffleTracking.enabled": "true",
            "spark.dynamicAllocation.minExecutors": "1",
            "spark.dynamicAllocation.maxExecutors": "2",
            "spark.dynamicAllocation.executorIdleTimeout": f"{IDLE}s",
            "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
        },
    )
    yield s
    stop_spark(s)


def executors(spark) -> list[str]:
    ids = spark.sparkContext._jsc.sc().getExecutorIds().mkString(",")
    return [i for i in ids.split(",") if i and i != "driver"]


def _make_double():
    # a closure: Dask pickles it by value (the tests package is not on the workers)
    def double(x):
        return 2 * x

    return double


_double = _make_double()


def test_start_compute_scale_close_under_dynamic_allocation(spark):
    assert wait_until(lambda: len(executors(spark)) == 1, 60)  # minExecutors
    cluster = SparkCluster(spark, progress=False)  # one worker: the executors present now
    try:
        assert not cluster.gang_plan.barrier and parts_of(cluster).facts.max_executors == 2
        client = Client(cluster)
        assert sorted(w["name"] for w in cluster.scheduler_info["workers"].values()) == ["spark-0"]
        assert client.submit(sum, [1, 2, 3]).result() == 6
        info = cluster.spark_info()
        assert info["Spark tasks (plain jobs)"] == 1 and "1 running" in info["gangs"]

        # a second worker: its Spark job waits until dynamic allocation adds an executor
        t0 = time.monotonic()
        cluster.scale(2)
        client.wait_for_workers(2, timeout=120)
        up = time.monotonic() - t0
        assert len(executors(spark)) == 2
        assert sorted(w["name"] for w in cluster.scheduler_info["workers"].values()) == ["spark-0", "spark-1"]
        assert len({w["spark"]["executor_id"] for w in cluster.scheduler_info["workers"].values()}) == 2
        assert client.gather(client.map(_double, range(100))) == [2 * i for i in range(100)]
        assert len(set(client.run(os.getpid).values())) == 2
        log = cluster.get_logs(scheduler=False, workers=False)["Spark tasks"]
        assert f"Spark job {parts_of(cluster).gangs[1].tag} (scale): running" in log

        # beyond maxExecutors: bounded, with a warning
        with pytest.warns(UserWarning, match=r"scale\(3\): .*maxExecutors"):
            cluster.scale(3)
        assert cluster.adapt(minimum=1, maximum=2).maximum == 2
        cluster._adaptive.stop()

        # scale down: the retired worker's job ends, its idle executor is released
        t0 = time.monotonic()
        cluster.scale(1)
        assert wait_until(lambda: len(cluster.scheduler_info["workers"]) == 1, 30)
        assert wait_until(lambda: sum(not g.done for g in parts_of(cluster).gangs) == 1, 30)
        down = time.monotonic() - t0
        assert wait_until(lambda: len(executors(spark)) == 1, 4 * IDLE + 30), executors(spark)
        released = time.monotonic() - t0
        assert client.submit(sum, [4, 5]).result() == 9
        print(f"\ndynamic allocation: scale 1->2 {up:.1f}s (executor added), 2->1 {down:.1f}s, "
              f"executor released after {released:.1f}s (idle timeout {IDLE}s)")  # fmt: skip
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)


def test_a_worker_that_cannot_start_fails_fast_without_spark_retries(spark):
    t0 = time.monotonic()
    with pytest.raises(spark_dask.SparkDaskError) as e:
        spark_dask.start(spark, worker_options={"worker_class": "no_such_module.Worker"}, timeout=120)
    msg = str(e.value)
    assert "exited with code" in msg and "No module named 'no_such_module'" in msg
    assert "Spark job ended before the workers connected" in msg
    assert time.monotonic() - t0 < 60  # one attempt, not spark.task.maxFailures of them


def test_spark_reruns_a_plain_job_task_lost_with_its_executor(spark):
    """Last in this module: it kills an executor."""
    app_id = driver_url(spark)  # unique on this machine, where application ids are not
    cluster = SparkCluster(spark, n_workers=1, progress=False)
    try:
        client = Client(cluster)
        (w,) = client.scheduler_info()["workers"].values()
        psutil.Process(executor_jvm(app_id, w["spark"]["executor_id"])).kill()
        # Spark runs the task again on an executor (dynamic allocation adds one): the
        # worker comes back under its attempt's name; the cluster relaunches nothing
        assert wait_until(lambda: [x["name"] for x in client.scheduler_info()["workers"].values()] == ["spark-0-a1"], 120), (
            client.scheduler_info()["workers"], cluster.get_logs()["Cluster"])  # fmt: skip
        assert parts_of(cluster).relaunches == 0 and len(parts_of(cluster).gangs) == 1
        assert client.submit(sum, [1, 1]).result() == 2
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)
