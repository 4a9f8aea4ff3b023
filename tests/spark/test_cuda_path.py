"""The dask-cuda path end to end on fake GPUs, with a stand-in for ``dask cuda worker``.

dask-cuda needs a GPU, so the executors here get a small stand-in: a ``dask_cuda``
package whose ``dask cuda worker`` (a ``dask_cli`` entry point, found by
``python -m dask`` as the real one is) records its command line and runs a plain
Dask worker, failing as dask-cuda does when an RMM pool is asked for without
``rmm``; a ``pynvml`` that reports 30 GiB free of 40 GiB; and an ``rmm`` that can be
taken away (all three: ``tests/support/gpus.py``). Everything of spark-dask runs for
real: Spark's GPU scheduling, the task, the command line, the environment, the
warnings that reach the driver.

What this cannot show is dask-cuda itself: ``python -m spark_dask.gpu_check`` on a
GPU machine does (docs/rapids.md).

local-cluster[1,2,1024]: one executor, two cores, two fake GPUs, one GPU per task.
"""

from __future__ import annotations

import os
import time
import warnings

import dask
import pytest

import spark_dask
from spark_dask import PlanError, SparkDaskError
from spark_dask.executor import rmm
from tests.support.gpus import FAKE_CUDA_ENV, fake_dask_cuda, gpu_conf, worker_argv, worker_flag
from tests.support.processes import dask_processes, wait_until
from tests.support.spark import active_jobs, assert_no_leftovers, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    return fake_dask_cuda(tmp_path_factory.mktemp("fake-dask-cuda"))


@pytest.fixture(scope="module")
def spark(fake):
    s = make_spark("local-cluster[1,2,1024]", **gpu_conf(2, "1", **{"spark.executorEnv.PYTHONPATH": fake["path"]}))
    yield s
    stop_spark(s)


@pytest.fixture
def without_rmm(fake):
    fake["rmm"].rename(fake["rmm_off"])
    try:
        yield
    finally:
        fake["rmm_off"].rename(fake["rmm"])


def _spark_dask_warnings(record) -> list[str]:
    """spark-dask's warnings other than the one every start on this application gives:
    two whole-GPU workers on an executor with two GPUs leave Spark jobs no slot."""
    found = [str(w.message) for w in record if str(w.message).startswith("spark-dask:")]
    hog = [m for m in found if "every task slot Spark jobs can use" in m]
    assert len(hog) == 1, found
    return [m for m in found if m not in hog]


def test_auto_pool_spill_limit_one_thread_and_pci_order(spark):
    pool = rmm.rmm_pool_size(30 * 2**30, 2**30, 0.95)  # the fake NVML's free memory, the defaults
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        client = spark_dask.start(spark, progress=False, env=FAKE_CUDA_ENV)
    with client:
        cluster = client.cluster
        assert cluster.gang_plan.kind == "cuda" and cluster.gang_plan.n_workers == 2
        argv = worker_argv(client)
        assert sorted(argv) == ["spark-0-gpu0", "spark-1-gpu1"]
        for a in argv.values():
            assert a[:2] == ["cuda", "worker"]
            assert worker_flag(a, "--rmm-pool-size") == str(pool)
            assert worker_flag(a, "--device-memory-limit") == str(int(pool * 0.8))  # not 80 % of the whole GPU
            assert worker_flag(a, "--nthreads") == "1"  # dask-cuda's default, not the task's CPUs
        assert {w["nthreads"] for w in client.scheduler_info()["workers"].values()} == {1}
        env = client.run(lambda: (os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("CUDA_DEVICE_ORDER")))
        assert sorted(env.values()) == [("0", "PCI_BUS_ID"), ("1", "PCI_BUS_ID")]
    assert _spark_dask_warnings(record) == []
    notes = [n for row in cluster.task_rows for n in row.get("notes", [])]
    assert any("of 30.0 GiB free on GPU 0; spills at" in n for n in notes), notes
    assert_no_leftovers(spark, cluster)


def test_the_users_pool_and_threads_win_and_switches_use_the_programs_own_flags(spark):
    options = {"rmm_pool_size": "0.5", "enable_cudf_spill": False}
    with spark_dask.start(
        spark, progress=False, n_workers=1, threads_per_worker=2, worker_options=options, env=FAKE_CUDA_ENV
    ) as client:
        (a,) = worker_argv(client).values()
        assert worker_flag(a, "--rmm-pool-size") == "0.5"
        assert worker_flag(a, "--device-memory-limit") == "0.4"  # a fraction of the GPU stays a fraction
        assert "--disable-cudf-spill" in a and "--no-enable-cudf-spill" not in a
        assert worker_flag(a, "--nthreads") == "2"
        cluster = client.cluster
    with dask.config.set({"spark-dask.rapids.rmm-pool-size": "4GiB"}):
        options = {"device_memory_limit": "1GB"}
        with spark_dask.start(spark, progress=False, n_workers=1, worker_options=options, env=FAKE_CUDA_ENV) as client:
            (a,) = worker_argv(client).values()
            assert worker_flag(a, "--rmm-pool-size") == str(4 * 2**30)
            assert worker_flag(a, "--device-memory-limit") == "1GB"  # the user's limit, once
    assert_no_leftovers(spark, cluster)


def test_configured_pool_without_rmm_starts_without_a_pool_and_warns(spark, without_rmm):
    with dask.config.set({"spark-dask.rapids.rmm-pool-size": "4GiB"}):
        with pytest.warns(UserWarning, match="rmm is not installed") as record:
            client = spark_dask.start(spark, progress=False, env=FAKE_CUDA_ENV)
    with client:
        cluster = client.cluster
        for a in worker_argv(client).values():
            assert "--rmm-pool-size" not in a and "--device-memory-limit" not in a
        facts = [w["spark"] for w in client.scheduler_info()["workers"].values()]
        assert all(any("rmm is not installed" in m for m in f["warnings"]) for f in facts)
        log = cluster.get_logs(scheduler=False, workers=False)["Cluster"]
    found = _spark_dask_warnings(record)
    assert len(found) == 2  # one per worker, each naming its executor and worker
    assert all("executor" in m and "worker spark-" in m and "rmm-pool-size=4294967296" in m for m in found)
    assert "rmm is not installed" in log
    notes = [n for row in cluster.task_rows for n in row.get("notes", [])]
    assert notes and all("rmm pool: none, rmm is not installed" in n for n in notes)
    assert_no_leftovers(spark, cluster)


def test_a_pool_the_user_asked_for_without_rmm_fails_naming_the_executor(spark, without_rmm):
    t0 = time.monotonic()
    with pytest.raises(SparkDaskError) as e:
        spark_dask.start(spark, progress=False, worker_options={"rmm_pool_size": "2GB"}, env=FAKE_CUDA_ENV)
    msg = str(e.value)
    assert "rmm_pool_size need the package rmm" in msg and "executor" in msg and "cannot import rmm" in msg
    assert "RMM pool requested" not in msg  # ours, before any worker started, not the worker's
    assert time.monotonic() - t0 < 60
    assert wait_until(lambda: not active_jobs(spark))
    assert not dask_processes(spark=spark)


def test_dask_worker_options_are_refused_for_dask_cuda_before_submitting(spark, monkeypatch):
    from spark_dask import gang as gang_module

    def no_launch(*args, **kwargs):  # pragma: no cover - the point is that it is not called
        raise AssertionError("a Spark job was submitted")

    monkeypatch.setattr(gang_module, "GangLauncher", no_launch)
    t0 = time.monotonic()
    with pytest.raises(PlanError, match=r"`dask cuda worker` .* has no option --nanny"):
        spark_dask.start(spark, progress=False, worker_options={"nanny": False})
    assert time.monotonic() - t0 < 5
    assert not active_jobs(spark)
