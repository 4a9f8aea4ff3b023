"""GPU pinning with fake GPUs, through Spark's own resource discovery-script mechanism.

local-cluster[1,2,1024]: one executor, two cores, two (fake) GPUs, one GPU per task.
"""

from __future__ import annotations

import os
import time

import pytest
from distributed import Client

import spark_dask
from spark_dask import SparkDaskError
from tests.support.gpus import gpu_conf
from tests.support.parts import parts_of
from tests.support.processes import dask_processes, wait_until
from tests.support.spark import active_jobs, assert_no_leftovers, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def spark():
    s = make_spark("local-cluster[1,2,1024]", **gpu_conf(2, "1"))
    yield s
    stop_spark(s)


def test_one_plain_worker_per_gpu_each_with_its_own_device(spark):
    with spark_dask.start(spark, worker="cpu", threads_per_worker=2) as client:
        cluster = client.cluster
        assert cluster.gang_plan.pinned and cluster.gang_plan.n_workers == 2 and not cluster.gang_plan.uses_profile
        seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        assert sorted(seen.values()) == ["0", "1"]
        # numbered as nvidia-smi / Spark's discovery script number them, not fastest-first
        assert set(client.run(lambda: os.environ.get("CUDA_DEVICE_ORDER")).values()) == {"PCI_BUS_ID"}
        for addr, w in client.scheduler_info()["workers"].items():
            gpu = seen[addr]
            assert w["name"].endswith(f"-gpu{gpu}")
            assert w["spark"]["gpu"] == gpu
            assert w["nthreads"] == 2  # the executor has 2 cores: the override is honoured
    assert_no_leftovers(spark, cluster)


def test_scaling_adds_and_removes_whole_gpu_workers(spark):
    cluster = spark_dask.SparkCluster(spark, worker="cpu", n_workers=1, progress=False)
    try:
        client = Client(cluster)

        def gpus():
            return sorted(client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES")).values())

        (first,) = gpus()
        assert cluster.adapt(maximum=5).maximum == 2  # one worker per GPU
        cluster._adaptive.stop()
        cluster.scale(2)
        client.wait_for_workers(2, timeout=60)
        assert gpus() == ["0", "1"]  # the new worker got the other GPU
        for w in client.scheduler_info()["workers"].values():
            assert w["name"].endswith("-gpu" + w["spark"]["gpu"])
        cluster.scale(1)
        assert wait_until(lambda: len(client.scheduler_info()["workers"]) == 1, 30)
        assert wait_until(lambda: sum(not g.done for g in parts_of(cluster).gangs) == 1, 30)
        (kept,) = gpus()
        cluster.scale(2)  # the freed GPU serves a new worker, under a new name
        client.wait_for_workers(2, timeout=60)
        assert gpus() == ["0", "1"]
        names = sorted(w["name"] for w in client.scheduler_info()["workers"].values())
        assert len(names) == 2 and any(n.startswith("spark-2-gpu") for n in names), names
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)


def test_the_users_cuda_device_order_wins(spark):
    with spark_dask.start(spark, worker="cpu", n_workers=1, env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}) as client:
        assert list(client.run(lambda: os.environ.get("CUDA_DEVICE_ORDER")).values()) == ["FASTEST_FIRST"]
        assert len(client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))) == 1


@pytest.mark.parametrize("worker", ["auto", "cuda"])
def test_cuda_workers_without_dask_cuda_fail_fast_and_clearly(spark, worker):
    try:
        import dask_cuda  # noqa: F401

        pytest.skip("dask-cuda is installed here; this checks the error without it")
    except ImportError:
        pass
    t0 = time.monotonic()
    with pytest.raises(SparkDaskError, match="cannot import dask_cuda") as e:
        spark_dask.start(spark, worker=worker)
    assert "executor" in str(e.value)
    assert time.monotonic() - t0 < 60
    assert wait_until(lambda: not active_jobs(spark))
    assert not dask_processes(spark=spark)
