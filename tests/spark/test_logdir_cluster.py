"""Logs that outlive the cluster (``log_directory``) on a real local-cluster[2,1,1024]
application: a killed worker's whole log is kept while the cluster runs on, everything
reads back after ``close()``, and a worker that cannot start leaves its log. The rules
and the files without Spark: tests/unit/test_logdir.py."""

from __future__ import annotations

import os
import signal

import dask
import psutil
import pytest

import spark_dask
from spark_dask import SparkCluster, SparkDaskError
from tests.support.processes import wait_until
from tests.support.spark import assert_no_leftovers

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


def test_logs_outlive_a_killed_worker_and_the_cluster(spark, tmp_path):
    root = tmp_path / "dask-logs"
    name = f"kept-{os.getpid()}"
    # the lost worker is not replaced while the test runs: the first gang's rows are final at close
    with dask.config.set({"spark-dask.lost-worker-grace": "600s"}):
        cluster = SparkCluster(spark, n_workers=2, name=name, log_directory=str(root), quiet=True)
    directory = root / f"{name}-{cluster.id}"
    try:
        assert sorted(os.listdir(directory)) == ["scheduler.log", "workers"]  # made at start
        client = cluster.get_client()
        assert client.submit(sum, [1, 1]).result(timeout=60) == 2  # a builtin: the tests package is not on the workers
        info = client.scheduler_info()["workers"]
        victim_address, survivor_address = sorted(info)
        victim, survivor = info[victim_address]["name"], info[survivor_address]["name"]
        nanny = psutil.Process(client.run(os.getpid)[victim_address]).ppid()
        os.killpg(os.getpgid(nanny), signal.SIGKILL)  # the nanny's process group: the worker ends
        # its Spark task keeps the log when the worker ends, while the cluster runs on
        assert wait_until(lambda: (directory / "workers" / f"{victim}.log").exists(), 60), os.listdir(directory)
        assert not (directory / "workers" / f"{survivor}.log").exists()  # still running
        # the cluster heard of the loss before it closes (a loss while closing is no loss)
        assert wait_until(lambda: "was lost" in cluster.get_logs(scheduler=False, workers=False)["Cluster"], 30)
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)

    logs = cluster.get_logs()
    assert list(logs) == ["Cluster", "Scheduler", *sorted([victim, survivor]), "Spark tasks"], list(logs)
    for worker in (victim, survivor):  # whole logs, from the nanny's start
        assert "Registered to:" in logs[worker] and "Start Nanny" in logs[worker], logs[worker]
    assert f"name: {victim}" in logs["Scheduler"]  # INFO lines, which silence_logs keeps out of the notebook
    assert f"{victim} exit=-9" in logs["Spark tasks"] and f"{survivor} exit=0" in logs["Spark tasks"], logs[
        "Spark tasks"
    ]
    assert f"Dask worker {victim}" in logs["Cluster"] and "was lost" in logs["Cluster"], logs["Cluster"]
    assert logs["Spark tasks"] == (directory / "spark-tasks.log").read_text().rstrip("\n")  # read from the files
    assert list(cluster.get_logs(cluster=False, scheduler=False, workers=[survivor])) == [survivor]


def test_a_worker_that_cannot_start_leaves_its_whole_log(spark, tmp_path):
    with pytest.raises(SparkDaskError, match="exited with code"):
        spark_dask.start(spark, n_workers=1, worker_options={"worker_class": "no_such_module.Worker"},
                         log_directory=str(tmp_path), progress=False, timeout=120)  # fmt: skip
    [directory] = tmp_path.iterdir()
    assert directory.name.startswith("spark-dask-")  # a cluster without a name: its job tag
    assert "No module named 'no_such_module'" in (directory / "workers" / "spark-0.log").read_text()
    assert "Spark barrier stage spark-dask-" in (directory / "spark-tasks.log").read_text()
    assert (directory / "cluster.log").exists()
