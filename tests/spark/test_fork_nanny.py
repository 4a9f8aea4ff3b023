"""The CPU worker's nanny forked from the Spark task's own Python process.

A nanny started as ``python -m distributed.cli.dask_worker`` pays an interpreter start
and an import of distributed; forked from the task (where Spark reuses the Python
worker, distributed is imported already) it pays neither. These tests run real Spark
(``local-cluster[2,1,1024]``), real nannies and workers: what runs, under which name,
with which environment and logging, and that nothing is left after close.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import dask
import psutil
import pytest

import spark_dask
from tests.support.processes import dask_processes
from tests.support.spark import assert_no_leftovers

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(240)]


def _tails(cluster) -> list[str]:
    return [w["log_tail"] for r in cluster.task_rows for w in r["workers"]]


def test_nannies_are_forked_from_the_task_and_behave_as_started_ones(spark):
    def config_value():  # a closure: pickled by value, the workers cannot import this module
        import dask as _dask

        return _dask.config.get("spark-dask-test.mark", None)

    with spark_dask.start(spark, n_workers=2, env={"DASK_SPARK_DASK_TEST__MARK": "forked"}) as client:
        cluster = client.cluster
        # the worker's parent is its nanny; the nanny's parent is the Spark task's Python
        nannies = {psutil.Process(pid) for pid in client.run(os.getppid).values()}
        assert len(nannies) == 2
        for nanny in nannies:
            assert "pyspark.daemon" in " ".join(nanny.cmdline()), nanny.cmdline()
            assert nanny.name() == "dask-nanny"
            assert nanny.parent().pid not in {n.pid for n in nannies}
            assert os.getpgid(nanny.pid) == nanny.pid  # its own process group, killed as one
        names = {psutil.Process(pid).name() for pid in client.run(os.getpid).values()}
        assert names == {"dask-worker"}
        # the environment of `env` reaches dask.config as in a new process
        assert set(client.run(config_value).values()) == {"forked"}
        assert set(client.run(lambda: os.environ.get("DASK_SPARK_DASK_TEST__MARK")).values()) == {"forked"}
        # the helper that finds a cluster's processes sees the forked ones (by their
        # working directory: their /proc environ is the task's)
        found = {p.pid for p in dask_processes(cluster.tag)}
        assert {n.pid for n in nannies} <= found and len(found) == 4
        assert client.submit(lambda x: x + 1, 1).result() == 2

    assert_no_leftovers(spark, cluster)
    rows = cluster.task_rows
    assert [r["forked"] for r in rows] == [[True], [True]]
    assert all(w["exit_code"] == 0 for r in rows for w in r["workers"])
    for tail in _tails(cluster):
        # the log set up once (no handler added twice by the fork), the fast close taken
        assert tail.count("Start Nanny at") == 1, tail
        assert "closed." in tail and "End worker" not in tail, tail


def test_a_logging_level_in_env_reaches_the_forked_nanny(spark):
    with spark_dask.start(spark, n_workers=1, env={"DASK_LOGGING__DISTRIBUTED": "debug"}) as client:
        assert client.submit(lambda: 1).result() == 1
        cluster = client.cluster
    (row,) = cluster.task_rows
    assert row["forked"] == [True]
    (tail,) = _tails(cluster)
    assert " - DEBUG - " in tail, tail
    lines = [line for line in tail.splitlines() if line.strip()]
    assert len(lines) == len(set(lines)), tail  # no line written twice
    assert_no_leftovers(spark, cluster)


def test_with_fork_nanny_off_the_task_starts_a_new_python(spark):
    with dask.config.set({"spark-dask.fork-nanny": False}), spark_dask.start(spark, n_workers=2) as client:
        cluster = client.cluster
        nannies = [psutil.Process(pid) for pid in client.run(os.getppid).values()]
        for nanny in nannies:
            assert "distributed.cli.dask_worker" in nanny.cmdline(), nanny.cmdline()
        assert len(dask_processes(cluster.tag)) == 4
    assert [r["forked"] for r in cluster.task_rows] == [[False], [False]]
    assert_no_leftovers(spark, cluster)


def test_a_killed_task_takes_its_forked_nanny_and_worker_along(spark):
    client = spark_dask.start(spark, n_workers=2)
    cluster = client.cluster
    try:
        pids = set(client.run(os.getpid).values()) | set(client.run(os.getppid).values())
        # the heap shared with the task was frozen before the fork (gc.freeze): the nanny's
        # and the worker's full collections leave those pages alone, uncopied
        frozen = [*client.run(gc.get_freeze_count, nanny=True).values(), *client.run(gc.get_freeze_count).values()]
        assert len(frozen) == 4 and min(frozen) > 10_000, frozen
        tasks = {psutil.Process(pid).parent().pid for pid in client.run(os.getppid).values()}
        psutil.Process(next(iter(tasks))).kill()  # what Spark does to a killed task's Python worker
        gone, alive = psutil.wait_procs([psutil.Process(p) for p in pids], timeout=30)
        # the killed task's nanny and worker die with it (parent-death signal, watchdog)
        assert len(gone) >= 2, [p.pid for p in alive]
    finally:
        client.close()
        cluster.close()
    assert_no_leftovers(spark, cluster)


def test_a_task_process_with_another_python_thread_does_not_fork():
    # numpy's OpenBLAS threads (native) do not count: OpenBLAS stops them around a fork
    code = textwrap.dedent(
        """
        import threading, time
        import numpy
        from spark_dask.executor.processes import can_fork
        print(can_fork())
        threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
        print(can_fork())
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout.split() == ["True", "False"], out.stderr
