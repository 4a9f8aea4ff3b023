"""Spark's own GPU tasks keep running beside the Dask workers (fake GPUs).

local-cluster[1,4,1024]: one executor with four cores and two fake GPUs, whose
``CUDA_VISIBLE_DEVICES`` is "5,7" (Spark's addresses 0 and 1 are indices into it).

- half a GPU per Spark task (the RAPIDS Accelerator's way): the gang's two tasks are
  ordinary Spark GPU tasks (Spark gives both a share of GPU 0), the workers still take
  one physical GPU each, and a Spark job of GPU-share tasks runs while the cluster does;
- one whole GPU per Spark task (the Databricks default): ``gpu_mode="shared"`` holds no
  GPU at all in Spark (a CPU-only task profile), so whole-GPU Spark tasks still run;
- ``gpu_mode="exclusive"`` holds the GPUs whole: said at start, and Spark's GPU tasks wait.
"""

from __future__ import annotations

import os
import threading
import time
import warnings

import pytest

import spark_dask
from spark_dask import SparkDaskError
from spark_dask.spark.compat import spark_version
from tests.support.gpus import gpu_conf
from tests.support.processes import wait_until
from tests.support.spark import active_jobs, assert_no_leftovers, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(240)]


@pytest.fixture(scope="module", params=["0.5", "1"], ids=["half-gpu-tasks", "whole-gpu-tasks"])
def spark(request):
    conf = gpu_conf(2, request.param, **{"spark.executorEnv.CUDA_VISIBLE_DEVICES": "5,7"})
    s = make_spark("local-cluster[1,4,1024]", **conf)
    s.task_gpus = float(request.param)
    yield s
    stop_spark(s)


def _make_gpu_task(pause: float):
    def gpu_task(_):
        from pyspark import TaskContext

        time.sleep(pause)
        yield ",".join(TaskContext.get().resources()["gpu"].addresses)

    return gpu_task


def spark_gpu_job(spark, n: int, timeout: float) -> list | None:
    """Run a Spark job of ``n`` tasks that each hold Spark's task GPU amount; its result,
    or None (and the job cancelled) when it did not finish within ``timeout``."""
    sc = spark.sparkContext
    group = f"gpu-job-{time.monotonic_ns()}"
    result: dict = {}

    def run():
        sc.setJobGroup(group, "spark GPU tasks beside the Dask cluster", interruptOnCancel=True)
        try:
            result["rows"] = sc.parallelize(range(n), n).mapPartitions(_make_gpu_task(0.3)).collect()
        except Exception as e:  # cancelled  # noqa: BLE001
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        sc.cancelJobGroup(group)
        thread.join(30)
        return None
    return result.get("rows")


def test_spark_gpu_tasks_run_beside_the_workers(spark):
    # auto shares for half-GPU tasks; with whole-GPU tasks it shares when the RAPIDS SQL
    # plugin is on (tests/spark/test_rapids_plugin.py, with the real plugin), so ask for it
    mode = {} if spark.task_gpus < 1 else {"gpu_mode": "shared"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = spark_dask.start(spark, worker="cpu", progress=False, **mode)
    with client:
        cluster = client.cluster
        gang = cluster.gang_plan
        assert gang.gpu_mode == "shared" and gang.n_workers == 2
        info = cluster.spark_info()
        assert info["GPU mode"] == "shared (beside Spark's GPU tasks)"
        if spark.task_gpus == 1:
            assert gang.uses_profile and gang.task_gpus is None  # CPUs only, no GPU held
            assert info["task request"] == "cpus=1, no GPU"
        else:
            assert not gang.uses_profile  # ordinary half-GPU tasks
            assert info["task request"] == "cpus=1, gpu=0.5 (default profile)"
        assert not [w for w in caught if "every task slot" in str(w.message)]

        # each Dask worker has its own physical GPU, whatever share Spark gave its task
        seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        assert sorted(seen.values()) == ["5", "7"]
        for w in client.scheduler_info()["workers"].values():
            assert w["name"].endswith("-gpu" + w["spark"]["gpu"])

        # Spark's GPU tasks run while the cluster does
        rows = spark_gpu_job(spark, 4, timeout=60)
        assert rows is not None and len(rows) == 4
        assert all(r in ("0", "1") for r in rows)
        assert len(client.scheduler_info()["workers"]) == 2  # the gang was not disturbed
    assert_no_leftovers(spark, cluster)


def test_scaling_shared_gpu_workers_one_per_gpu(spark):
    # the gang's tasks all hold the same kind of GPU share (or none): which physical GPU
    # a later gang's worker takes is settled by the tasks' GPU claims
    mode = {} if spark.task_gpus < 1 else {"gpu_mode": "shared"}
    cluster = spark_dask.SparkCluster(spark, worker="cpu", n_workers=1, progress=False, **mode)
    try:
        from distributed import Client

        client = Client(cluster)
        assert cluster.gang_plan.gpu_mode == "shared"
        with pytest.warns(UserWarning, match=r"scale\(3\): .*slots for 1 more.*one Dask worker per GPU"):
            cluster.scale(3)
        client.wait_for_workers(2, timeout=60)
        seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        assert sorted(seen.values()) == ["5", "7"]  # two workers, two GPUs
        rows = spark_gpu_job(spark, 2, timeout=60)  # Spark's own GPU tasks still run
        assert rows is not None and len(rows) == 2
        cluster.scale(1)
        assert wait_until(lambda: len(client.scheduler_info()["workers"]) == 1, 30)
        cluster.scale(2)
        client.wait_for_workers(2, timeout=60)
        assert sorted(client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES")).values()) == ["5", "7"]
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)


def test_exclusive_mode_holds_the_gpus_and_says_so(spark):
    if spark.task_gpus < 1 and spark_version(spark) < (4, 0):
        # Spark 3.5 cannot give a whole GPU to a task over a fractional default amount
        # (SPARK-45527): without a task profile both tasks get GPU 0, said at once
        with pytest.raises(SparkDaskError, match="same GPU"):
            spark_dask.start(spark, worker="cpu", gpu_mode="exclusive", progress=False)
        assert wait_until(lambda: not active_jobs(spark))
        return
    with pytest.warns(UserWarning, match="every task slot Spark jobs can use") as record:
        client = spark_dask.start(spark, worker="cpu", gpu_mode="exclusive", progress=False)
    assert any("gpu_mode='shared'" in str(w.message) for w in record)
    with client:
        cluster = client.cluster
        assert cluster.gang_plan.gpu_mode == "exclusive"
        seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        assert sorted(seen.values()) == ["5", "7"]
        assert spark_gpu_job(spark, 2, timeout=8) is None  # waits for the GPUs the gang holds
        assert wait_until(lambda: len(active_jobs(spark)) == 1, 30)  # only the gang is left
    assert_no_leftovers(spark, cluster)
