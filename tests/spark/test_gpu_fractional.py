"""Fractional ``spark.task.resource.gpu.amount`` with ``gpu_mode="exclusive"``: several
tasks may be given one GPU, yet each worker must hold its own.

local-cluster[1,2,1024] with two fake GPUs, 0.5 GPU per task, and an executor whose
``CUDA_VISIBLE_DEVICES`` is already "5,7" (Spark's addresses 0 and 1 are indices into it).
The default for fractional amounts, sharing the GPUs with Spark's tasks, is tested in
tests/spark/test_gpu_shared.py.
"""

from __future__ import annotations

import os

import pytest

import spark_dask
from spark_dask import SparkDaskError
from tests.support.gpus import gpu_conf
from tests.support.processes import dask_processes, wait_until
from tests.support.spark import active_jobs, assert_no_leftovers, make_spark, needs_spark4, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def spark():
    conf = gpu_conf(2, "0.5", **{"spark.executorEnv.CUDA_VISIBLE_DEVICES": "5,7"})
    s = make_spark("local-cluster[1,2,1024]", **conf)
    yield s
    stop_spark(s)


@needs_spark4  # on 3.5: tests/spark/test_spark_versions.py
def test_whole_gpu_per_task_gives_one_worker_per_physical_gpu(spark):
    with spark_dask.start(spark, worker="cpu", gpu_mode="exclusive") as client:
        gang = client.cluster.gang_plan
        assert gang.uses_profile and gang.task_gpus == 1.0  # stage-level profile: whole GPUs
        seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        assert sorted(seen.values()) == ["5", "7"]  # mapped through the executor's devices
        cluster = client.cluster
    assert_no_leftovers(spark, cluster)


def test_shared_gpus_never_get_two_workers(spark):
    # Without the profile, Spark gives both 0.5-GPU tasks the same address: the tasks
    # agree (allGather) that the GPU gets one worker, and report the shortfall at once.
    with pytest.raises(SparkDaskError, match="the same GPU") as e:
        spark_dask.start(spark, worker="cpu", gpu_mode="exclusive", task_profile=False, n_workers=2)
    assert "n_workers=1" in str(e.value)
    assert wait_until(lambda: not active_jobs(spark))
    assert not dask_processes(spark=spark)


def test_one_worker_on_a_shared_gpu_without_profile(spark):
    with spark_dask.start(spark, worker="cpu", gpu_mode="exclusive", task_profile=False, n_workers=1) as client:
        seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        assert list(seen.values()) in (["5"], ["7"])
        cluster = client.cluster
    assert_no_leftovers(spark, cluster)
