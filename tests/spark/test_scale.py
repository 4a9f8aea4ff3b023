"""scale() and adapt() on a real local-cluster[2,1,1024] application: gangs added into
free task slots, workers retired with their data moved, slots given back to Spark."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

import dask
import psutil
import pytest
from distributed import Client, wait

import spark_dask
from spark_dask import SparkCluster
from tests.support.parts import parts_of
from tests.support.paths import ROOT
from tests.support.processes import dask_processes, driver_url, executor_jvm, wait_until
from tests.support.spark import active_jobs, assert_no_leftovers, make_spark, stop_spark


class _Records(logging.Handler):
    """The messages of the log records it is handed."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


def _make_slow(seconds: float):
    # A closure, so Dask pickles it by value (the tests package is not on the workers).
    def slow(x):
        time.sleep(seconds)
        return x * 2

    return slow


def _names(cluster) -> list[str]:
    return sorted(w["name"] for w in cluster.scheduler_info["workers"].values())


def _spark_count(spark, timeout: float) -> int | None:
    """A one-task Spark job; its result, or None (cancelled) if it got no slot in time."""
    sc = spark.sparkContext
    group = f"probe-{time.monotonic_ns()}"
    out: dict = {}

    def run():
        sc.setJobGroup(group, "a Spark job beside the Dask cluster", interruptOnCancel=True)
        try:
            out["n"] = sc.parallelize(range(10), 1).count()
        except Exception as e:  # cancelled  # noqa: BLE001
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        sc.cancelJobGroup(group)
        t.join(30)
    return out.get("n")


@pytest.mark.core
def test_scale_up_and_down_within_the_slots(spark):
    cluster = SparkCluster(spark, n_workers=1, progress=False)
    try:
        client = Client(cluster)
        assert _names(cluster) == ["spark-0"]
        assert _spark_count(spark, 20) == 10  # one slot of two is free for Spark

        t0 = time.monotonic()
        cluster.scale(2)
        client.wait_for_workers(2, timeout=60)
        up = time.monotonic() - t0
        assert _names(cluster) == ["spark-0", "spark-1"]  # a new gang, the next task number
        assert len(parts_of(cluster).gangs) == 2 and parts_of(cluster).gangs[1].tag in cluster.gang_tags
        assert parts_of(cluster).gangs[1].status == "running" and parts_of(cluster).gangs[1].reason == "scale"
        futures = client.map(_make_slow(0.05), range(40))
        assert client.gather(futures) == [2 * i for i in range(40)]
        assert len(set(client.run(os.getpid).values())) == 2

        # the widget and the logs show a section per gang
        log = cluster.get_logs(scheduler=False, workers=False)["Spark tasks"]
        assert f"Spark barrier stage {cluster.tag}: running" in log
        assert f"Spark barrier stage {parts_of(cluster).gangs[1].tag} (scale): running" in log
        assert "task 1 on executor" in log
        page = cluster._repr_html_()
        assert parts_of(cluster).gangs[1].tag in page and "Gang" in page

        t0 = time.monotonic()
        heard = _Records()
        logging.getLogger("distributed.scheduler").addHandler(heard)
        try:
            cluster.scale(1)
            assert wait_until(lambda: len(cluster.scheduler_info["workers"]) == 1, 30)
            (survivor,) = _names(cluster)
            assert wait_until(lambda: sum(not g.done for g in parts_of(cluster).gangs) == 1, 30)  # a task returned
            time.sleep(2)  # a heartbeat of the retired worker would have come by now
        finally:
            logging.getLogger("distributed.scheduler").removeHandler(heard)
        # the retired worker is forgotten when its connection closes, not before its
        # last heartbeat (issue 24: "Received heartbeat from unregistered worker")
        assert not [m for m in heard.messages if "unregistered worker" in m], heard.messages
        assert "no executor known" not in cluster.get_logs(scheduler=False, workers=False)["Spark tasks"]
        down = time.monotonic() - t0
        t1 = time.monotonic()
        assert _spark_count(spark, 20) == 10  # the freed slot serves Spark jobs again
        spark_job = time.monotonic() - t1
        assert client.submit(sum, [1, 2, 3]).result() == 6
        assert any(g.status == "ended: its workers were retired" for g in parts_of(cluster).gangs)
        print(f"\nscale 1->2: {up:.2f}s; 2->1: {down:.2f}s; Spark job on the freed slot {spark_job:.2f}s")
        assert up < 30 and down < 30  # not Spark's ten minutes of slot retries

        # beyond the slots: grows as far as they allow, and says so
        with pytest.warns(UserWarning, match=r"scale\(5\): the Spark application has task slots for 1 more") as said:
            cluster.scale(5)
        # issued from this thread, pointing at the scale() line above (not into spark_dask)
        assert [w.filename for w in said if "scale(5)" in str(w.message)] == [__file__]
        client.wait_for_workers(2, timeout=60)
        assert len(cluster.scheduler_info["workers"]) == 2
        assert _names(cluster) == sorted([survivor, "spark-2"])  # the next number: names never repeat
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)
    assert len(cluster.task_rows) == 3 and all(r["status"] == "ok" for r in cluster.task_rows)


def test_scale_down_moves_the_data_first(spark):
    cluster = SparkCluster(spark, n_workers=2, progress=False)
    try:
        client = Client(cluster)
        futures = client.map(lambda i: bytes(100_000) + i.to_bytes(4, "little"), range(50), pure=False)
        wait(futures)
        held = {addr: len(keys) for addr, keys in client.has_what().items()}
        assert all(held.values()), held  # both workers hold results
        one = min(w["memory_limit"] for w in cluster.scheduler_info["workers"].values())
        cluster.scale(memory=one)  # the Cluster contract: enough workers for that memory, 1
        assert wait_until(lambda: len(cluster.scheduler_info["workers"]) == 1, 30)
        (survivor,) = client.has_what()
        assert len(client.has_what()[survivor]) == 50  # every result moved to the survivor
        results = client.gather(futures)
        assert [r[-4:] for r in results] == [i.to_bytes(4, "little") for i in range(50)]
        assert not any(f.status == "lost" for f in futures)
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)


def test_adapt_grows_under_load_and_shrinks_when_idle(spark):
    cluster = SparkCluster(spark, n_workers=1, progress=False)
    try:
        client = Client(cluster)
        adaptive = cluster.adapt(minimum=1, maximum=2, interval="300ms", wait_count=3)
        assert adaptive.maximum == 2
        futures = client.map(_make_slow(0.3), range(60), pure=False)
        assert wait_until(lambda: len(cluster.scheduler_info["workers"]) == 2, 60), cluster.get_logs()["Cluster"]
        assert sum(client.gather(futures)) == 2 * sum(range(60))
        assert wait_until(lambda: len(cluster.scheduler_info["workers"]) == 1, 60)
        assert wait_until(lambda: sum(not g.done for g in parts_of(cluster).gangs) == 1, 30)
        assert _spark_count(spark, 20) == 10  # the retired worker's slot is Spark's again
        assert {"up", "down"} <= {entry["status"] for _, entry in adaptive.log}

        # beyond what the application holds: bounded, with a warning
        with pytest.warns(UserWarning, match=r"adapt\(maximum=10\): the Spark application holds at most 2"):
            assert cluster.adapt(minimum=0, maximum=10).maximum == 2
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)


def test_lost_executor_relaunches_only_its_gang(spark):
    """Last in this module: it kills an executor of the module's application."""
    app_id = driver_url(spark)  # unique on this machine, where application ids are not
    cluster = SparkCluster(spark, n_workers=1, progress=False)
    try:
        client = Client(cluster)
        (w,) = client.scheduler_info()["workers"].values()
        assert w["nthreads"] == 1  # a one-core executor's worker
        cluster.scale(cores=2)  # the Cluster contract: enough workers for 2 threads, 2
        client.wait_for_workers(2, timeout=60)
        info = client.scheduler_info()["workers"]
        first = next(a for a, w in info.items() if w["spark"]["gang"] == 0)
        second = next(w for w in info.values() if w["spark"]["gang"] == 1)
        psutil.Process(executor_jvm(app_id, second["spark"]["executor_id"])).kill()
        assert wait_until(lambda: parts_of(cluster).relaunches == 1, 60), cluster.get_logs()["Cluster"]
        assert wait_until(lambda: len(client.scheduler_info()["workers"]) == 2, 120), cluster.get_logs()["Cluster"]
        workers = client.scheduler_info()["workers"]
        assert first in workers  # the other gang's worker was not touched
        assert sorted(w["name"] for w in workers.values()) == ["spark-0", "spark-2"]  # a new name
        assert [g.reason for g in parts_of(cluster).gangs] == ["start", "scale", "relaunch"]
        assert parts_of(cluster).gangs[1].status.startswith("failed") and not parts_of(cluster).gangs[0].done
        assert wait_until(lambda: cluster.gang_status == "running", 30)
        assert client.submit(sum, [1, 2]).result() == 3
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)
    assert not dask_processes(spark=spark) and wait_until(lambda: not active_jobs(spark))


JOINER = """
import sys, spark_dask
handle = spark_dask.SparkCluster.from_name(sys.argv[1])
client = handle.get_client()
print(client.submit(sum, [1, 2, 3]).result(timeout=60), len(handle.scheduler_info["workers"]))
client.close()
handle.disconnect()
"""


def test_two_named_clusters_and_one_closes_itself_when_idle(spark, tmp_path):
    """Two named clusters at once, each found by name from another process; the one
    with ``idle_timeout`` keeps running through a task longer than the timeout, then
    closes when nothing happens for that long, says so, and a Spark job gets its slot;
    the other runs on."""
    records = _Records()
    logging.getLogger("spark_dask").addHandler(records)
    env = dict(os.environ, DASK_SPARK_DASK__STATE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    with dask.config.set({"spark-dask.state-dir": str(tmp_path)}):
        kept = SparkCluster(spark, name="kept", n_workers=1, progress=False)
        try:
            shy = SparkCluster(spark, name="shy", n_workers=1, idle_timeout=4, progress=False, quiet=True)
            try:
                assert [c["name"] for c in spark_dask.list_clusters()] == ["kept", "shy"]
                with Client(shy) as client:
                    # A task no worker can run waits (unrunnable): work, by the idle rule, while
                    # the joiners start. A joiner's Python takes seconds to import before it
                    # connects, and the one for "kept" comes first: without the waiting task
                    # "shy" was idle for its 4s meanwhile (and closed) on a busy machine.
                    waiting = client.submit(sum, [1], resources={"nothing-has-this": 1}, pure=False)
                    for name in ("kept", "shy"):  # found by name from another process (it joins and leaves)
                        out = subprocess.run([sys.executable, "-c", JOINER, name], env=env, capture_output=True,
                                             text=True, timeout=120)  # fmt: skip
                        assert out.stdout.split() == ["6", "1"], out.stderr[-2000:]
                    assert shy.status.name == "running"
                    client.cancel(waiting)
                    assert client.submit(_make_slow(6), 1).result(timeout=60) == 2  # busy beyond the timeout
                    assert shy.status.name == "running"
                    assert _spark_count(spark, 2) is None  # both slots are the clusters'
                assert wait_until(lambda: shy.status.name == "closed", timeout=60), shy.get_logs()["Cluster"]
                assert _spark_count(spark, 30) == 10  # its slot serves Spark again
                assert [c["name"] for c in spark_dask.list_clusters()] == ["kept"]
                assert kept.status.name == "running" and len(kept.scheduler_info["workers"]) == 1
            finally:
                logging.getLogger("spark_dask").removeHandler(records)
                shy.close()  # closed already: ends its event loop thread
        finally:
            kept.close()
    said = [m for m in records.messages if m.startswith("spark-dask: closing cluster")]
    assert said == ["spark-dask: closing cluster 'shy': no Dask tasks or client activity for 4s (idle_timeout); "
                    "its Spark tasks end and their task slots return to Spark"]  # fmt: skip
    assert "spark-dask: cluster 'shy' closed after being idle (idle_timeout) in " in str(shy.get_logs()["Cluster"])
    assert not shy._loop_runner.is_started()
    assert_no_leftovers(spark, shy)
    assert_no_leftovers(spark, kept)


@pytest.fixture
def wide_spark():
    """local-cluster[2,16,1024]: 32 task slots on two executors (an application of its
    own: it ends the shared one, which the next module starts again)."""
    s = make_spark("local-cluster[2,16,1024]")
    yield s
    stop_spark(s)


def test_thirty_two_workers_start_compute_and_close(wide_spark):
    """Issue 57: 32 Dask workers (one thread, the smallest memory limit each) in one
    barrier stage, all connected, a computation spread over every one of them, and
    nothing left after close: no worker process, no Spark job, no port."""
    cluster = SparkCluster(wide_spark, n_workers=32, threads_per_worker=1, memory_limit="256MiB", progress=False,
                           quiet=True)  # fmt: skip
    try:
        with Client(cluster) as client:
            workers = client.scheduler_info()["workers"]
            assert len(workers) == 32 and {w["nthreads"] for w in workers.values()} == {1}
            assert len({w["name"] for w in workers.values()}) == 32
            futures = client.map(_make_slow(0.2), range(128))
            assert client.gather(futures) == [2 * x for x in range(128)]
            ran = {ws for ws in client.who_has(futures).values() for ws in ws}
            assert len(ran) == 32, len(ran)  # spread over every worker
        assert len(dask_processes(cluster.tag)) >= 32
    finally:
        cluster.close()
    assert_no_leftovers(wide_spark, cluster)
