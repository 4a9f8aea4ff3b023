"""The dask-cuda path end to end on fake GPUs, with a stand-in for ``dask cuda worker``.

dask-cuda needs a GPU, so the executors here get a small stand-in: a ``dask_cuda``
package whose ``dask cuda worker`` (a ``dask_cli`` entry point, found by
``python -m dask`` as the real one is) records its command line and runs a plain
Dask worker, failing as dask-cuda does when an RMM pool is asked for without
``rmm``; a ``pynvml`` that reports 30 GiB free of 40 GiB; and an ``rmm`` that can be
taken away (all three: ``tests/support/gpus.py``). Everything of spark-dask runs for
real: Spark's GPU scheduling, the task, the command line, the environment, the
warnings that reach the driver.

What this cannot show is dask-cuda itself: ``python -m tools.gpu_check`` on a
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
from tests.support.spark import active_jobs, assert_no_leftovers, executor_python_path, make_spark, stop_spark

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
    from spark_dask.gangs import gang as gang_module

    def no_launch(*args, **kwargs):  # pragma: no cover - the point is that it is not called
        raise AssertionError("a Spark job was submitted")

    monkeypatch.setattr(gang_module, "GangLauncher", no_launch)
    t0 = time.monotonic()
    with pytest.raises(PlanError, match=r"`dask cuda worker` .* has no option --nanny"):
        spark_dask.start(spark, progress=False, worker_options={"nanny": False})
    assert time.monotonic() - t0 < 5
    assert not active_jobs(spark)


def _dist_info(directory, name: str, version: str) -> None:
    info = directory / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_the_doctor_names_a_broken_cudf_and_an_nvjitlink_newer_than_the_driver(spark, tmp_path):
    """``spark-dask doctor`` on this application's fake GPUs (here, to need no application
    of its own): a cudf wheel whose library does not load, an nvJitLink of CUDA 12.9
    beside the (fake) driver's CUDA 12.4, CuPy not installed."""
    (tmp_path / "cudf").mkdir()
    (tmp_path / "cudf" / "__init__.py").write_text(
        'raise ImportError("libcudf.so: cannot open shared object file: No such file or directory")\n'
    )
    _dist_info(tmp_path, "cudf-cu12", "26.8.0")
    _dist_info(tmp_path, "nvidia-nvjitlink-cu12", "12.9.86")
    with executor_python_path(spark, tmp_path):
        found = spark_dask.doctor(spark)
    assert not found.ready
    problems = sorted(f.text for f in found.findings if f.problem)
    assert problems == [
        "nvJitLink 12.9.86 is newer than the driver's CUDA 12.4: cudf and CuPy fail to compile kernels",
        "the GPU executors' cudf is installed but does not import (ImportError: libcudf.so: cannot open shared "
        "object file: No such file or directory)",
    ]
    warnings_ = [f.text for f in found.findings if not f.problem]
    assert "the GPU executors' cupy is not installed: dask-cudf and RAPIDS work need it" in warnings_
    assert "pip install cupy-cuda12x on every executor" in [f.fix for f in found.findings]
    (host,) = found.hosts.values()
    gpu = host["gpu"]
    assert gpu["nvml"] == {"gpus": ["Fake GPU", "Fake GPU"], "cuda_driver": "12.4"}
    assert gpu["versions"]["dask_cuda"] == "26.8.0" and gpu["import_errors"]["dask_cuda"] is None
    assert gpu["spark_gpus"] == ["0", "1"]  # one task per GPU slot, both on the one executor
    assert found.spark["gpu_mode_auto"] == "exclusive"

    (tmp_path / "cudf" / "__init__.py").unlink()  # no cudf at all: dask-cuda workers start, dask-cudf would not
    (tmp_path / "cudf").rmdir()
    for info in tmp_path.glob("cudf_cu12-*.dist-info"):
        (info / "METADATA").unlink()
        info.rmdir()
    with executor_python_path(spark, tmp_path):
        again = spark_dask.doctor(spark)
    (cudf,) = [f for f in again.findings if f.text.startswith("the GPU executors' cudf")]
    assert (
        not cudf.problem and cudf.text == "the GPU executors' cudf is not installed: dask-cudf and RAPIDS work need it"
    )
    assert cudf.fix == "pip install cudf-cu12 dask-cudf-cu12 on every executor"
    print("\n" + found.render())
    assert "gpu_mode='auto' picks exclusive" in found.render()
    assert not active_jobs(spark)
