"""The measurements every benchmark shares: a Spark session of its own, the floors
(Spark's own stage, a bare Dask worker, a teardown), spark-dask's start and close with
what they left behind, and the statistics the tables print. ``run.py`` (the start-up and
teardown table) and ``multihost.py`` (the same on the multi-host cluster) both use them.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import statistics
import subprocess
import sys
import time

import psutil

from spark_dask.executor.command import process_cluster
from tests.support.parts import parts_of

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


# ------------------------------------------------------------------------------ helpers
def new_spark(master: str, **conf):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("spark-dask-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PATH", os.environ["PATH"])
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from spark_dask.spark.session import wait_for_executors

    wait_for_executors(spark, 60)
    return spark


def stop_spark(spark) -> None:
    from pyspark.sql import SparkSession

    spark.stop()
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs) -> str:
    """``median (min-max)`` of a list of seconds."""
    if not xs:
        return "-"
    return f"{median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def slots(master: str) -> int:
    m = re.match(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)", master)
    return int(m.group(1)) * int(m.group(2)) if m else 2


def active_jobs(spark):
    return list(spark.sparkContext.statusTracker().getActiveJobsIds())


def wait_idle(spark, timeout: float = 120) -> None:
    """Until no Spark job is active and no executor runs a task: a cancelled stage's
    tasks (the teardown floor) hold their slots a while after the job has ended, and a
    start measured then would wait for them."""
    sc = spark.sparkContext
    tracker = sc._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = sum(e.numRunningTasks() for e in tracker.getExecutorInfos())
        if not busy and not active_jobs(spark):
            return
        time.sleep(0.01)
    raise RuntimeError(f"Spark still runs tasks after {timeout}s")


def gang_processes(tag: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            owner = process_cluster(p.environ(), None) or process_cluster({}, p.cwd())
        except (psutil.Error, OSError):
            continue
        if owner == tag:
            out.append(p)
    return out


# ------------------------------------------------------------------------------ floors
def ship_by_value() -> None:
    """The floor stages' functions live here; executors cannot import this package."""
    from spark_dask.spark.shipping import ship_by_value

    ship_by_value(sys.modules[__name__])


def _empty_task(_it):
    yield 1


def _barrier_task(_it):
    from pyspark import BarrierTaskContext

    BarrierTaskContext.get().barrier()
    yield 1


def stage_floor(spark, n: int, barrier_call: bool = False) -> float:
    """Submit -> every task of an empty barrier stage has run (and returned)."""
    sc = spark.sparkContext
    fn = _barrier_task if barrier_call else _empty_task
    t0 = time.perf_counter()
    sc.parallelize(range(n), n).barrier().mapPartitions(fn).collect()
    return time.perf_counter() - t0


def _pid_task(_it):
    yield os.getpid()


def plain_job(spark, n: int) -> float:
    """Submit -> every task of an N-task Python job (no barrier) has returned."""
    t0 = time.perf_counter()
    spark.sparkContext.parallelize(range(n), n).mapPartitions(_pid_task).collect()
    return time.perf_counter() - t0


def _sleeping_task(_it):
    time.sleep(120)
    yield 1


def teardown_floor(spark, n: int) -> float:
    """Cancel of a running empty barrier stage -> no active Spark job."""
    import threading

    sc = spark.sparkContext
    group = f"bench-floor-{time.monotonic_ns()}"

    def run():
        sc.setJobGroup(group, "bench floor", interruptOnCancel=True)
        try:
            sc.parallelize(range(n), n).barrier().mapPartitions(_sleeping_task).collect()
        except Exception:  # noqa: BLE001
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    tracker = sc.statusTracker()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until all tasks run
        stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
        if any(s and s.numActiveTasks == n for s in stages):
            break
        time.sleep(0.05)
    t0 = time.perf_counter()
    sc.cancelJobGroup(group)
    while active_jobs(spark):
        time.sleep(0.005)
    elapsed = time.perf_counter() - t0
    t.join(30)
    return elapsed


@contextlib.asynccontextmanager
async def bare_workers(address: str, n: int, nanny: bool = True, extra: tuple = (), env: dict | None = None):
    """N bare ``dask worker`` processes (one thread, no dashboard) of the scheduler at
    ``address``, started at once (``env``: added to this process's environment);
    terminated when the block ends."""
    cmd = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
           "--no-dashboard", "--nanny" if nanny else "--no-nanny", *extra]  # fmt: skip
    environ = {**os.environ, **(env or {})}
    procs = [subprocess.Popen(cmd, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=environ) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)


def worker_floor(n: int, nanny: bool = True, env: dict | None = None) -> float:
    """N bare `dask worker` processes, started at once, to registration (``env``: theirs)."""
    import logging

    from distributed import Scheduler

    logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO lines would bury the tables

    async def main():
        async with Scheduler(port=0, dashboard=False, host="127.0.0.1") as s:
            t0 = time.perf_counter()
            async with bare_workers(s.address, n, nanny, env=env):
                while len(s.workers) < n:
                    await asyncio.sleep(0.005)
                return time.perf_counter() - t0

    return asyncio.run(main())


def idle_floor(n: int, seconds: float, settle: float = 2.0, env: dict | None = None) -> dict:
    """distributed's own idle cost at N workers: a bare ``Scheduler`` in this process
    (TLS, as spark-dask's; no dashboard) and N bare ``dask worker --nanny`` processes
    (TLS, one thread), all registered, then ``settle`` seconds (their first heartbeats),
    then this process's CPU over ``seconds`` (% of one core; the measurement window
    itself, not a wait for something). The floor under the idle cluster's figure (``env``:
    the workers')."""
    import logging
    import tempfile

    from distributed import Scheduler
    from distributed.security import Security

    logging.getLogger("distributed").setLevel(logging.WARNING)
    security = Security.temporary()
    me = psutil.Process()

    async def main(pem: str):
        async with Scheduler(port=0, dashboard=False, host="127.0.0.1", protocol="tls", security=security) as s:
            tls = ("--tls-ca-file", pem, "--tls-cert", pem, "--tls-key", pem)
            async with bare_workers(s.address, n, extra=tls, env=env):
                deadline = time.monotonic() + 60 + 5 * n  # N interpreters' imports on a small machine
                while len(s.workers) < n:
                    if time.monotonic() > deadline:
                        return {"error": f"{len(s.workers)} of {n} bare workers registered"}
                    await asyncio.sleep(0.05)
                await asyncio.sleep(settle)
                t0, c0 = time.monotonic(), me.cpu_times()
                await asyncio.sleep(seconds)
                dt, c1 = time.monotonic() - t0, me.cpu_times()
                return {"py_cpu_pct": 100 * ((c1.user + c1.system) - (c0.user + c0.system)) / dt}

    with tempfile.TemporaryDirectory() as d:
        pem = os.path.join(d, "bench.pem")  # the key and its certificate, one file
        with open(pem, "w") as f:
            f.write(security.tls_worker_key + "\n" + security.tls_worker_cert)
        return asyncio.run(main(pem))


# ------------------------------------------------------------------------------ ours
def ours(spark, n: int, options: dict, where: bool = False) -> dict:
    """start() -> N workers connected; close() -> no Dask process, no active Spark job.
    ``where``: also the workers' hosts (asked of the scheduler between the two, untimed)."""
    import spark_dask

    quiet = io.StringIO()  # the progress lines (a default) would interleave with the tables
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        t0 = time.perf_counter()
        cluster = spark_dask.SparkCluster(spark, n_workers=n, **options)
        start = time.perf_counter() - t0
    tag = cluster.tag
    hosts = None
    if where:
        info = cluster.sync(cluster.scheduler_comm.identity)
        hosts = sorted(w["host"] for w in info["workers"].values())
    footprint = launcher_rss(tag)
    # the processes the close must end, listed before it: a scan of the whole process
    # table (each one's environment) every few ms took most of a core at 64 workers,
    # on the 2 cores the closing workers need
    procs = gang_processes(tag)
    me = psutil.Process()
    cpu0, mine0 = psutil.cpu_times(), me.cpu_times()
    t1 = time.perf_counter()
    cluster.close()
    while procs:
        procs = [p for p in procs if running(p)]
        time.sleep(0.002)
    while active_jobs(spark):
        time.sleep(0.002)
    close = time.perf_counter() - t1
    cpu1, mine1 = psutil.cpu_times(), me.cpu_times()
    busy = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)  # the machine's, all processes
    driver = (mine1.user + mine1.system) - (mine0.user + mine0.system)  # this process: the scheduler's part
    left = gang_processes(tag)  # untimed: nothing of the cluster may be left
    if left:
        raise RuntimeError(f"processes of {tag} left after close(): {left}")
    out = {"start": start, "close": close, "close_cpu_s": busy, "close_driver_cpu_s": driver, "launcher_rss": footprint,
           "timings": dict(parts_of(cluster).timings)}  # fmt: skip
    if where:
        out["where"] = hosts
    return out


def warm_entry(starts: list[dict], stage: list, stage_barrier: list, close_floor: list) -> dict:
    """One N's warm runs as the benchmark records them: the spark-dask starts
    (:func:`ours`' results) beside the floors measured between them."""
    rss = [x for r in starts for x in r["launcher_rss"]]
    return {
        "start_runs": [r["start"] for r in starts],
        "close_runs": [r["close"] for r in starts],
        "scheduler_runs": [r["timings"].get("scheduler", float("nan")) for r in starts],
        "workers_runs": [r["timings"].get("workers", float("nan")) for r in starts],
        "stage_floor_runs": stage,
        "stage_barrier_runs": stage_barrier,
        "close_floor_runs": close_floor,
        "launcher_rss_mb": median([x[0] for x in rss]) / 2**20 if rss else float("nan"),
        "launcher_uss_mb": median([x[1] for x in rss]) / 2**20 if rss else float("nan"),
    }


def running(p: psutil.Process) -> bool:
    """Whether ``p`` still runs (a zombie has ended)."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def launcher_rss(tag: str) -> list[tuple[int, int]]:
    """(RSS, USS) of each Spark task process that runs workers: what runs in the task
    besides the Dask worker. USS counts only the process's own pages; RSS also counts
    the pages it shares with the PySpark daemon it was forked from."""
    parents = {}
    procs = gang_processes(tag)
    gang = {p.pid for p in procs}
    for p in procs:
        try:
            parent = p.parent()
            if parent is not None and parent.pid not in gang:
                info = parent.memory_full_info()
                parents[parent.pid] = (info.rss, info.uss)
        except psutil.Error:
            pass
    return list(parents.values())


def fmt(v, digits: int = 2, unit: str = "") -> str:
    """A figure for a table cell; ``-`` for a missing one.

    >>> fmt(1.234), fmt(None), fmt(3, 0, " %")
    ('1.23', '-', '3 %')
    """
    return "-" if v is None else f"{v:.{digits}f}{unit}"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table.

    >>> table(["a", "b"], [["1", "2"]])
    ['| a | b |', '|---|---|', '| 1 | 2 |']
    """
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
