"""``gpu_mode="shared"`` with several GPU executors on one host (fake GPUs).

The usual shape on YARN and standalone clusters (Spark RAPIDS: one GPU per executor,
8 executors on an 8-GPU node), where Databricks has one executor per host. Here
``local-cluster[1,n,2048]`` with ``spark.executor.cores`` = GPUs per executor: one
Spark Worker, two executors on one host. The Worker discovers the host's GPUs and hands each of its
executors others (0-1 and 2-3, or 0 and 1), as Spark's standalone Worker does with
real ones: the tasks' host cannot tell the executors apart, their ids can.

- whole-GPU Spark tasks (the gang holds no GPU) and half-GPU ones (each gang task holds
  a share), one and two GPUs per executor: one Dask worker per GPU, each on a GPU of
  its own executor, no GPU twice; a scale-down and back up keeps it so (the later
  gang's tasks take the free GPUs of their own executors);
- two Spark Workers on one host that each discover the same GPUs (what the plain
  stand-in script of ``tests.support.gpus`` does): Spark hands both executors the same
  addresses, which on one host name the same devices; the cluster puts no second
  worker on one and says why.
"""

from __future__ import annotations

import os

import pytest

import spark_dask
from spark_dask import SparkDaskError
from spark_dask.spark.session import executor_ids
from tests.support.gpus import gpu_conf
from tests.support.processes import dask_processes, wait_until
from tests.support.spark import active_jobs, assert_no_leftovers, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(240)]

EXECUTORS = 2


@pytest.fixture(
    scope="module",
    params=[("1", 1), ("1", 2), ("0.5", 1), ("0.5", 2)],
    ids=["whole-1gpu", "whole-2gpus", "half-1gpu", "half-2gpus"],
)
def spark(request):
    amount, per_executor = request.param
    # as many cores as GPUs per executor: Spark places the CPU-only tasks of a later gang
    # by cores, so each lands where a GPU is free (with more cores it may not: the
    # "no free GPU" entry of docs/troubleshooting.md)
    conf = gpu_conf(
        EXECUTORS * per_executor,
        amount,
        **{"spark.executor.resource.gpu.amount": str(per_executor), "spark.executor.cores": str(per_executor)},
    )
    s = make_spark(f"local-cluster[1,{EXECUTORS * per_executor},2048]", **conf)
    assert wait_until(lambda: len(executor_ids(s.sparkContext)) == EXECUTORS, 60)
    s.per_executor = per_executor
    yield s
    stop_spark(s)


def registered_gpus(spark) -> dict[str, list[str]]:
    """``{executor id: the GPU addresses it registered with}``, from Spark's status store."""
    executors = spark.sparkContext._jsc.sc().statusStore().executorList(True)
    out = {}
    for i in range(executors.size()):
        e = executors.apply(i)
        if e.id() != "driver" and e.resources().contains("gpu"):
            out[str(e.id())] = [str(a) for a in e.resources().apply("gpu").addresses()]
    return out


def workers_gpus(client) -> list[tuple[str, str, str]]:
    """``(executor id, CUDA_VISIBLE_DEVICES, name)`` of every worker."""
    seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
    info = client.scheduler_info()["workers"]
    return sorted((str(info[a]["spark"]["executor_id"]), gpu, info[a]["name"]) for a, gpu in seen.items())


def assert_one_worker_per_gpu(client, registered: dict[str, list[str]]) -> None:
    workers = workers_gpus(client)
    gpus = [gpu for _, gpu, _ in workers]
    assert sorted(gpus) == sorted(g for gs in registered.values() for g in gs), workers  # each GPU once
    for executor, gpu, name in workers:
        assert gpu in registered[executor], workers  # on a GPU of its own executor
        assert name.endswith("-gpu" + gpu)


# First: a session of its own, before the module's (one JVM at a time).
def test_executors_given_the_same_gpus_never_share_one():
    # two Spark Workers on one host, each discovering GPUs 0 and 1: both executors
    # register 0 and 1, which on one host are the same two devices
    s = make_spark("local-cluster[2,2,1024]", **gpu_conf(2, "1"))
    try:
        assert wait_until(lambda: len(executor_ids(s.sparkContext)) == 2, 60)
        assert sorted(registered_gpus(s).values()) == [["0", "1"], ["0", "1"]]
        with pytest.raises(
            SparkDaskError, match=r"several executors of this host registered the same GPUs \['0', '1'\]"
        ):
            spark_dask.start(s, worker="cpu", gpu_mode="shared", progress=False, quiet=True)
        assert wait_until(lambda: not active_jobs(s), 30), active_jobs(s)
        assert wait_until(lambda: not dask_processes(spark=s), 30)
    finally:
        stop_spark(s)


def test_each_executor_of_a_host_gets_its_own_gpus(spark):
    registered = registered_gpus(spark)
    assert len(registered) == EXECUTORS and all(len(g) == spark.per_executor for g in registered.values())
    everything = [g for gs in registered.values() for g in gs]
    assert len(set(everything)) == len(everything), registered  # the Worker split its GPUs
    total = EXECUTORS * spark.per_executor
    cluster = spark_dask.SparkCluster(spark, worker="cpu", gpu_mode="shared", progress=False, quiet=True)
    try:
        client = cluster.get_client()
        assert cluster.gang_plan.gpu_mode == "shared" and cluster.gang_plan.n_workers == total
        client.wait_for_workers(total, timeout=60)
        assert_one_worker_per_gpu(client, registered)

        # a later gang's tasks take the GPUs their own executors have free
        cluster.scale(1)
        assert wait_until(lambda: len(client.scheduler_info()["workers"]) == 1, 30)
        cluster.scale(total)
        client.wait_for_workers(total, timeout=60)
        assert_one_worker_per_gpu(client, registered)
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)
