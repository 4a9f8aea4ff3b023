"""Executors whose ``distributed`` differs from the driver's, for real.

The executors' Python gets a directory on its ``PYTHONPATH`` (``spark.executorEnv.PYTHONPATH``,
which PySpark's PythonWorkerFactory puts after Spark's own entries and before
site-packages) holding nothing but a ``distributed-<version>.dist-info``: the code is
the real distributed, ``importlib.metadata.version("distributed")`` says <version>.

local-cluster[1,1,1024], its own Spark application.
"""

from __future__ import annotations

import shutil
import time
import warnings

import distributed
import pytest

import spark_dask
from spark_dask import SparkDaskError
from tests.support.processes import dask_processes, wait_until
from tests.support.spark import active_jobs, assert_no_leftovers, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

DRIVER = distributed.__version__
YEAR, MONTH = (int(p) for p in DRIVER.split(".")[:2])
OTHER_RELEASE = f"{YEAR}.{MONTH - 1}.1" if MONTH > 1 else f"{YEAR - 1}.12.1"
OTHER_PATCH = f"{YEAR}.{MONTH}.99"


@pytest.fixture(scope="module")
def fake_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fake-distributed-version")


def fake_version(directory, version: str | None) -> None:
    """Make the executors' ``distributed`` report ``version`` (None: the real one)."""
    for old in directory.glob("distributed-*.dist-info"):
        shutil.rmtree(old)
    if version:
        info = directory / f"distributed-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: distributed\nVersion: {version}\n")


@pytest.fixture(scope="module")
def spark(fake_dir):
    s = make_spark(
        "local-cluster[1,1,1024]",
        **{"spark.executorEnv.PYTHONPATH": str(fake_dir), "spark.python.worker.reuse": "false"},
    )
    yield s
    stop_spark(s)


def _executor_version(spark) -> str:
    def probe(_):
        import importlib.metadata

        yield importlib.metadata.version("distributed")

    return spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()[0]


def test_the_fake_reaches_the_executors(spark, fake_dir):
    fake_version(fake_dir, OTHER_PATCH)
    try:
        assert _executor_version(spark) == OTHER_PATCH
    finally:
        fake_version(fake_dir, None)
    assert _executor_version(spark) == DRIVER


def test_another_release_is_refused_before_any_worker_starts(spark, fake_dir):
    fake_version(fake_dir, OTHER_RELEASE)
    try:
        t0 = time.monotonic()
        with pytest.raises(SparkDaskError) as e:
            spark_dask.start(spark, progress=False)
        took = time.monotonic() - t0
    finally:
        fake_version(fake_dir, None)
    msg = str(e.value)
    assert f"has distributed {OTHER_RELEASE}, but the driver" in msg and f"has {DRIVER}" in msg
    assert "executor 0 (host" in msg  # which executor
    assert f"%pip install distributed=={DRIVER}" in msg  # how to fix it
    assert took < 60, took
    assert wait_until(lambda: not active_jobs(spark))
    assert not dask_processes(spark=spark)


def test_a_patch_level_difference_starts_and_warns_naming_the_executor(spark, fake_dir):
    fake_version(fake_dir, OTHER_PATCH)
    try:
        with pytest.warns(UserWarning) as record:
            client = spark_dask.start(spark, progress=False)
        with client:
            cluster = client.cluster
            assert client.submit(lambda: 41 + 1).result() == 42
            (w,) = client.scheduler_info()["workers"].values()
            assert any(OTHER_PATCH in m for m in w["spark"]["warnings"])
            log = cluster.get_logs(scheduler=False, workers=False)["Cluster"]
    finally:
        fake_version(fake_dir, None)
    ours = [str(r.message) for r in record if str(r.message).startswith("spark-dask:")]
    # besides the version, the start says that one one-core executor leaves Spark no slot
    hog = [m for m in ours if "every task slot Spark jobs can use" in m]
    ours = [m for m in ours if m not in hog]
    assert len(hog) == 1 and len(ours) == 1, [str(r.message) for r in record]
    assert f"has distributed {OTHER_PATCH}, the driver (Dask scheduler) has {DRIVER}" in ours[0]
    assert "executor 0 (host" in ours[0] and f"distributed=={DRIVER}" in ours[0]
    assert OTHER_PATCH in log
    notes = [n for row in cluster.task_rows for n in row.get("notes", [])]
    assert any("only the patch level differs" in n for n in notes)
    assert_no_leftovers(spark, cluster)


def test_same_version_no_warning(spark):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with spark_dask.start(spark, progress=False) as client:
            assert not client.scheduler_info()["workers"].popitem()[1]["spark"]["warnings"]
    assert not [r for r in record if "distributed" in str(r.message) and "spark-dask" in str(r.message)]
