"""Faults, leaks, busy slots and security on a real local-cluster[2,1,1024] application."""

from __future__ import annotations

import os
import re
import signal
import stat
import sys
import textwrap
import threading
import time

import psutil
import pytest
from distributed import Client
from distributed.security import Security

import spark_dask
from spark_dask import PlanError, SparkCluster, SparkDaskError
from tests.support.parts import parts_of
from tests.support.processes import dask_processes, driver_url, executor_jvms, wait_until
from tests.support.spark import active_jobs, assert_no_leftovers

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


def _make_slow_inc():
    # A closure, so Dask pickles it by value: the tests package is not importable on
    # the workers, which run in Spark executors.
    def slow_inc(x):
        time.sleep(0.2)
        return x + 1

    return slow_inc


slow_inc = _make_slow_inc()


def test_killed_worker_is_restarted_and_the_result_is_right(spark):
    with spark_dask.start(spark) as client:
        cluster = client.cluster
        futures = client.map(slow_inc, range(40))
        victim_addr, victim_pid = next(iter(client.run(os.getpid).items()))
        time.sleep(0.5)
        os.kill(victim_pid, signal.SIGKILL)
        assert sum(client.gather(futures)) == sum(range(1, 41))
        assert wait_until(lambda: victim_addr not in client.scheduler_info()["workers"], 30)
        client.wait_for_workers(2, timeout=60)
        assert victim_pid not in client.run(os.getpid).values()
        assert active_jobs(spark)  # the barrier stage did not fail
        assert parts_of(cluster).relaunches == 0 and cluster.gang_status == "running"
    assert_no_leftovers(spark, cluster)


def test_lost_executor_gang_is_relaunched_and_the_computation_completes(spark):
    app_id = driver_url(spark)  # unique on this machine, where application ids are not
    with spark_dask.start(spark, progress=False) as client:
        cluster = client.cluster
        futures = client.map(slow_inc, range(60), pure=False)
        time.sleep(1.0)
        jvm = executor_jvms(app_id)[0]
        t0 = time.monotonic()
        jvm.kill()
        assert wait_until(lambda: parts_of(cluster).relaunches == 1, 60), cluster.get_logs()["Cluster"]
        noticed = time.monotonic() - t0
        assert sum(client.gather(futures)) == sum(range(1, 61))
        assert wait_until(lambda: cluster.gang_status == "running", 120), cluster.gang_status
        recovered = time.monotonic() - t0
        assert len(client.scheduler_info()["workers"]) == 2
        log = cluster.get_logs()["Cluster"]
        assert "2 Dask workers lost" in log and "(relaunch 1 of 3)" in log
        assert "the cluster is back to full size: all 2 Dask workers are connected" in log, log
        print(f"executor lost: noticed in {noticed:.1f}s, full size again in {recovered:.1f}s")
    assert_no_leftovers(spark, cluster)


def test_start_close_cycles_do_not_leak(spark):
    me = psutil.Process()

    def snapshot():
        return {
            "threads": threading.active_count(),
            "fds": me.num_fds(),
            "children": len(me.children(recursive=True)),
            "jobs": len(active_jobs(spark)),
        }

    figures = []
    for i in range(20):
        with spark_dask.start(spark, n_workers=2, progress=False) as client:
            assert client.submit(slow_inc, i).result() == i + 1
        assert wait_until(lambda: not active_jobs(spark), 10)
        figures.append(snapshot())
    first, last = figures[0], figures[-1]
    print("after cycle 1:", first, "after cycle 20:", last)
    assert last["threads"] <= first["threads"] + 2, figures
    assert last["fds"] <= first["fds"] + 10, figures
    assert last["children"] <= first["children"], figures
    assert last["jobs"] == 0
    assert not dask_processes(spark=spark)


def test_a_worker_that_never_connects_is_named_at_the_timeout(spark, tmp_path):
    """Issue 57: 63 of 64 workers connected at load 108 and the timeout's error named
    none. The worker of task 1 stalls in its preload (never registers, its task runs on):
    the error names that task and where its whole log is kept, and the log is there."""
    (tmp_path / "stall_one.py").write_text(
        textwrap.dedent("""
        import sys, time
        def dask_setup(server):
            from distributed import Worker
            if isinstance(server, Worker) and str(server.name) == "spark-1":
                print("stall_one: the worker of task 1 stalls", file=sys.stderr, flush=True)
                time.sleep(120)
    """)
    )
    logs = tmp_path / "logs"
    with pytest.raises(spark_dask.ClusterTimeoutError) as raised:
        spark_dask.start(spark, n_workers=2, timeout="12s", progress=False, log_directory=str(logs),
                         env={"PYTHONPATH": str(tmp_path)}, worker_options={"preload": "stall_one"})  # fmt: skip
    text = str(raised.value)
    assert "only 1 of 2 Dask workers connected" in text, text
    assert "Workers of Spark task 1 (names spark-1...) did not connect: its executor's log says why" in text, text
    kept = re.search(r"workers' own logs are in (\S+)/workers once its task ends", text)
    assert kept and kept.group(1).startswith(str(logs)), text
    log = os.path.join(kept.group(1), "workers", "spark-1.log")
    assert wait_until(lambda: os.path.exists(log), 30), os.listdir(kept.group(1))
    with open(log) as f:
        assert "the worker of task 1 stalls" in f.read()
    assert wait_until(lambda: not active_jobs(spark), 30) and not dask_processes(spark=spark)


@pytest.mark.core
def test_busy_slots_fail_fast_and_name_the_holder(spark):
    with spark_dask.start(spark, n_workers=2, progress=False) as holder:
        t0 = time.monotonic()
        with pytest.raises(SparkDaskError, match="got no free task slots") as e:
            spark_dask.start(spark, n_workers=1, progress=False)
        assert time.monotonic() - t0 < 45
        assert "running tasks" in str(e.value)
        assert holder.submit(slow_inc, 1).result() == 2  # the first cluster is unharmed
        assert len(active_jobs(spark)) == 1
    assert wait_until(lambda: not active_jobs(spark))


@pytest.mark.core
def test_key_material_is_private_and_removed(spark):
    with spark_dask.start(spark, n_workers=1, progress=False) as client:
        (w,) = client.scheduler_info()["workers"].values()
        workdir = w["local_directory"]
        while not os.path.exists(os.path.join(workdir, "key.pem")):
            assert workdir != os.path.dirname(workdir), "no key material found above the worker"
            workdir = os.path.dirname(workdir)
        assert stat.S_IMODE(os.stat(workdir).st_mode) == 0o700
        for name in ("key.pem", "cert.pem", "ca.pem"):
            assert stat.S_IMODE(os.stat(os.path.join(workdir, name)).st_mode) == 0o600
        cluster = client.cluster
    assert_no_leftovers(spark, cluster)
    assert not os.path.exists(workdir)


@pytest.mark.core
def test_strangers_are_refused(spark):
    with spark_dask.start(spark, n_workers=1, progress=False) as client:
        address = client.scheduler.address
        # a client with other credentials (another CA) cannot connect
        with pytest.raises(Exception):  # noqa: B017
            Client(address, security=Security.temporary(), timeout="3s")
        # nor can a worker without credentials
        import subprocess

        proc = subprocess.run(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--death-timeout", "3",
             "--no-nanny", "--no-dashboard"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode != 0
        assert len(client.scheduler_info()["workers"]) == 1


@pytest.mark.core
def test_require_encryption_refuses_unencrypted_spark(spark):
    with pytest.raises(PlanError, match="spark.network.crypto.enabled=true"):
        spark_dask.start(spark, require_encryption=True)
    assert not active_jobs(spark)


@pytest.mark.core
@pytest.mark.parametrize("kwargs,match", [
    ({"threads_per_worker": 4}, "exceeds the 1 cores"),
    ({"relaunch_attempts": -1}, "relaunch_attempts"),
])  # fmt: skip
def test_more_bad_input(spark, kwargs, match):
    with pytest.raises(PlanError, match=match):
        spark_dask.start(spark, **kwargs)
    assert not active_jobs(spark)


@pytest.mark.core
def test_memory_limit_beyond_the_host_fails_before_submitting(spark):
    # local-cluster: the executors run on this host, so the driver checks it at once
    # (on other masters each task checks its own host)
    tracker = spark.sparkContext.statusTracker()
    stages_before = set(tracker.getActiveStageIds())
    with pytest.raises(PlanError, match=r"memory_limit=931 GiB per worker exceeds the [\d.]+ GiB of memory") as e:
        spark_dask.start(spark, memory_limit="1TB", progress=False)
    assert "SQLSTATE" not in str(e.value) and "bytes" not in str(e.value)
    assert not active_jobs(spark) and set(tracker.getActiveStageIds()) == stages_before
    assert not dask_processes(spark=spark)


DRIVER = textwrap.dedent(
    """
    import os, sys, time
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    import spark_dask
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    client = spark_dask.start(spark, progress=False)
    print("TAG", client.cluster.tag, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.core
@pytest.mark.timeout(300)
def test_killed_driver_leaves_no_worker_behind(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        tag = None
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("TAG "):
                tag = line.split()[1]
                break
        assert tag, "the driver did not start its cluster"
        assert wait_until(lambda: len(dask_processes(tag)) >= 2, 30)
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        assert wait_until(lambda: not dask_processes(tag), 60), [p.info for p in dask_processes(tag)]
        print(f"driver killed: every worker process gone in {time.monotonic() - t0:.1f}s")
    finally:
        with __import__("contextlib").suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        # the driver's JVM and executors exit once their parent is gone
        wait_until(
            lambda: (
                not [p for p in psutil.process_iter(["cmdline"]) if "driver.py" in " ".join(p.info["cmdline"] or [])]
            ),
            30,
        )


EXITING = textwrap.dedent(
    """
    import os, sys
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    import spark_dask
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import atexit
    # registered before spark-dask's own hook, so it runs after it (last in, first out)
    atexit.register(lambda: print("STATUS", cluster.status.name, flush=True))
    cluster = spark_dask.SparkCluster(spark, progress=False)
    print("TAG", cluster.tag, flush=True)
    # no close(), no spark.stop(): the interpreter exits, atexit must clean up
    """
)


@pytest.mark.core
@pytest.mark.timeout(300)
def test_interpreter_exit_closes_the_cluster(tmp_path):
    import subprocess

    script = tmp_path / "exiting.py"
    script.write_text(EXITING)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    tag = next(line.split()[1] for line in proc.stdout.splitlines() if line.startswith("TAG "))
    assert "STATUS closed" in proc.stdout  # closed by spark-dask's atexit hook
    assert wait_until(lambda: not dask_processes(tag), 30), [p.info for p in dask_processes(tag)]


@pytest.mark.core
def test_start_on_a_stopped_session_is_refused(spark):
    """Last in this module: it stops the module's SparkSession."""
    spark.stop()
    t0 = time.monotonic()
    with pytest.raises(PlanError, match="SparkSession is stopped"):
        SparkCluster(spark)
    assert time.monotonic() - t0 < 5
