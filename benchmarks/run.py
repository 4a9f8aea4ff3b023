"""spark-dask benchmarks: start-up, teardown, steady state, footprint, growth.

    python -m benchmarks [--reps 3] [--sizes 2,4,8] [--no-ray] [--json PATH] [--plot-dir DIR]
    python -m benchmarks --plot JSON [--plot-dir DIR]      # redraw the plots of a run

Prints a table, writes JSON (each figure's median and, as ``<name>_runs``, every
repetition) and SVG plots (``benchmarks/plots.py``: start-up and teardown against the
floor and Ray-on-Spark, hand-off throughput when measured). Every figure is the median
of ``--reps`` runs; every ratio compares figures measured in the same run, on the same
machine.

Floors, measured here too:
- stage floor: an empty barrier stage of N tasks, submit -> every task running
  (each task passes ``BarrierTaskContext.barrier()`` and returns);
- worker floor: N bare ``dask worker`` processes (with a nanny, as spark-dask starts
  them) started by hand to registration with a local scheduler;
- start-up floor = stage floor + worker floor;
- teardown floor: cancel of a running empty barrier stage -> no active Spark job.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Ray-on-Spark runs the `ray` script found on PATH, on the driver and in the executors.
_BIN = os.path.dirname(sys.executable)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")

import psutil  # noqa: E402

from benchmarks.plots import write_plots  # noqa: E402

MASTER = "local-cluster[2,4,1024]"  # 8 task slots: room for N = 2, 4, 8


# ------------------------------------------------------------------------------ helpers
def new_spark(master: str = MASTER):
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("spark-dask-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PATH", os.environ["PATH"])
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    from spark_dask.session import wait_for_executors

    wait_for_executors(spark, 60)
    return spark


def stop_spark(spark) -> None:
    from pyspark.sql import SparkSession

    spark.stop()
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def active_jobs(spark):
    return list(spark.sparkContext.statusTracker().getActiveJobsIds())


def gang_processes(tag: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            facts = p.environ().get("SPARK_DASK_FACTS", "")
        except (psutil.Error, OSError):
            continue
        if tag in facts:
            out.append(p)
    return out


# ------------------------------------------------------------------------------ floors
def _ship_by_value() -> None:
    """The floor stages' functions live here; executors cannot import this package."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _barrier_task(_it):
    from pyspark import BarrierTaskContext

    BarrierTaskContext.get().barrier()
    yield 1


def stage_floor(spark, n: int) -> float:
    """Submit -> every task of an empty barrier stage running (and returned)."""
    sc = spark.sparkContext
    t0 = time.perf_counter()
    sc.parallelize(range(n), n).barrier().mapPartitions(_barrier_task).collect()
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
        except Exception:
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
        time.sleep(0.01)
    elapsed = time.perf_counter() - t0
    t.join(30)
    return elapsed


def worker_floor(n: int, nanny: bool = True) -> float:
    """N bare `dask worker` processes, started at once, to registration."""
    from distributed import Scheduler

    async def main():
        async with Scheduler(port=0, dashboard=False, host="127.0.0.1") as s:
            cmd = [sys.executable, "-m", "distributed.cli.dask_worker", s.address, "--nthreads", "1",
                   "--no-dashboard", "--nanny" if nanny else "--no-nanny"]  # fmt: skip
            t0 = time.perf_counter()
            procs = [subprocess.Popen(cmd, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL) for _ in range(n)]
            try:
                while len(s.workers) < n:
                    await asyncio.sleep(0.005)
                return time.perf_counter() - t0
            finally:
                for p in procs:
                    p.terminate()
                for p in procs:
                    p.wait(30)

    return asyncio.run(main())


# ------------------------------------------------------------------------------ ours
def ours(spark, n: int, **kw) -> dict:
    """start() -> N workers connected; close() -> no Dask process, no active Spark job."""
    import spark_dask

    t0 = time.perf_counter()
    cluster = spark_dask.SparkCluster(spark, n_workers=n, progress=False, **kw)
    start = time.perf_counter() - t0
    tag = cluster.tag
    footprint = launcher_rss(tag)
    t1 = time.perf_counter()
    cluster.close()
    while gang_processes(tag) or active_jobs(spark):
        time.sleep(0.01)
    close = time.perf_counter() - t1
    return {"start": start, "close": close, "launcher_rss": footprint, "timings": cluster.timings}


def launcher_rss(tag: str) -> list[tuple[int, int]]:
    """(RSS, USS) of each Spark task process that runs workers: what runs in the task
    besides the Dask worker. USS counts only the process's own pages; RSS also counts
    the pages it shares with the PySpark daemon it was forked from."""
    parents = {}
    for p in gang_processes(tag):
        try:
            parent = p.parent()
            if parent is not None and "SPARK_DASK_FACTS" not in parent.environ():
                info = parent.memory_full_info()
                parents[parent.pid] = (info.rss, info.uss)
        except psutil.Error:
            pass
    return list(parents.values())


# ------------------------------------------------------------------------------ ray
def ray_on_spark(spark, n: int) -> dict | None:
    try:
        from ray.util.spark import setup_ray_cluster, shutdown_ray_cluster
    except ImportError:
        return None
    import ray

    t0 = time.perf_counter()
    setup_ray_cluster(
        max_worker_nodes=n,
        num_cpus_worker_node=1,
        num_gpus_worker_node=0,
        head_node_options={"include_dashboard": False},
        collect_log_to_path=None,
    )
    ray.init()
    start = time.perf_counter() - t0
    t1 = time.perf_counter()
    ray.shutdown()
    shutdown_ray_cluster()
    while active_jobs(spark):
        time.sleep(0.05)
    return {"start": start, "close": time.perf_counter() - t1}


# ------------------------------------------------------------------------------ steady state
def workloads():
    import dask
    import dask.array as da
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    def tiny(client):
        futs = client.map(lambda x: x + 1, range(10_000), pure=False)
        assert sum(client.gather(futs)) == sum(range(1, 10_001))

    def shuffle(client):
        rng = np.random.default_rng(0)
        pdf = pd.DataFrame({"k": rng.integers(0, 1000, 400_000), "x": rng.random(400_000)})
        ddf = dd.from_pandas(pdf, npartitions=16)
        with dask.config.set({"dataframe.shuffle.method": "tasks"}):
            ddf.shuffle("k").groupby("k").x.mean().compute()

    def array(client):
        x = da.random.default_rng(0).random((6000, 6000), chunks=(1000, 1000))
        (x + x.T).mean(axis=0).sum().compute()

    return {"10k tiny tasks": tiny, "dataframe shuffle+groupby": shuffle, "array reduction": array}


def time_workloads(client, reps: int) -> dict:
    out = {}
    for name, fn in workloads().items():
        fn(client)  # warm-up
        runs = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn(client)
            runs.append(time.perf_counter() - t0)
        out[name] = median(runs)
    return out


def steady_state(spark, reps: int) -> dict:
    import spark_dask
    from distributed import Client, LocalCluster

    res = {}
    with spark_dask.start(spark, n_workers=2, threads_per_worker=1, memory_limit="4GiB", progress=False) as c:
        res["spark-dask (TLS)"] = time_workloads(c, reps)
    with spark_dask.start(spark, n_workers=2, threads_per_worker=1, memory_limit="4GiB", progress=False,
                          tls=False) as c:  # fmt: skip
        res["spark-dask (TCP)"] = time_workloads(c, reps)
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="4GiB", processes=True,
                      dashboard_address=":0") as lc, Client(lc) as c:  # fmt: skip
        res["LocalCluster (TCP)"] = time_workloads(c, reps)
    return res


def driver_footprint(spark) -> int:
    """RSS growth of the driver process while a 2-worker cluster runs (scheduler side)."""
    import gc

    import spark_dask

    me = psutil.Process()
    gc.collect()
    before = me.memory_info().rss
    with spark_dask.start(spark, n_workers=2, progress=False):
        gc.collect()
        during = me.memory_info().rss
    return during - before


# ------------------------------------------------------------------------------ main
def main(argv=None) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description="spark-dask benchmarks")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sizes", default="2,4,8")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "latest.json"))
    ap.add_argument("--plot-dir", default=None, help="where the SVG plots go (default: next to --json)")
    ap.add_argument("--plot", metavar="JSON", default=None, help="only redraw the plots of this run's JSON")
    args = ap.parse_args(argv)
    if args.plot:
        with open(args.plot) as f:
            R = json.load(f)
        for path in write_plots(R, args.plot_dir or os.path.dirname(os.path.abspath(args.plot))):
            print(f"wrote {path}")
        return R
    sizes = [int(s) for s in args.sizes.split(",")]
    _ship_by_value()
    reps = args.reps
    t_all = time.perf_counter()
    R: dict = {
        "machine": {
            "cpus": psutil.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "reps": reps,
        "master": MASTER,
    }
    import distributed
    import pyspark

    R["machine"]["pyspark"] = pyspark.__version__
    R["machine"]["distributed"] = distributed.__version__

    # Cold: the first cluster (or the first empty stage) of a fresh Spark application.
    cold_ours, cold_stage = [], []
    for _ in range(reps):
        spark = new_spark()
        cold_ours.append(ours(spark, 2))
        stop_spark(spark)
        spark = new_spark()
        cold_stage.append(stage_floor(spark, 2))
        stop_spark(spark)
    R["cold"] = {
        "n": 2,
        "start": median([r["start"] for r in cold_ours]),
        "start_runs": [r["start"] for r in cold_ours],
        "close": median([r["close"] for r in cold_ours]),
        "close_runs": [r["close"] for r in cold_ours],
        "stage_floor": median(cold_stage),
        "worker_floor": median([worker_floor(2) for _ in range(reps)]),
        "worker_floor_no_nanny": median([worker_floor(2, nanny=False) for _ in range(reps)]),
    }
    R["cold"]["floor"] = R["cold"]["stage_floor"] + R["cold"]["worker_floor"]
    print(f"cold done ({time.perf_counter() - t_all:.0f}s)", file=sys.stderr)

    # Warm, growth, teardown floor, footprint, steady state: one application.
    spark = new_spark()
    ours(spark, 2)  # warm the executors' Python workers
    stage_floor(spark, 2)
    warm = {}
    for n in sizes:
        runs = [ours(spark, n) for _ in range(reps)]
        stage = median([stage_floor(spark, n) for _ in range(reps)])
        wf = median([worker_floor(n) for _ in range(reps)])
        warm[n] = {
            "start": median([r["start"] for r in runs]),
            "start_runs": [r["start"] for r in runs],
            "close_runs": [r["close"] for r in runs],
            "scheduler": median([r["timings"]["scheduler"] for r in runs]),
            "workers": median([r["timings"]["workers"] for r in runs]),
            "close": median([r["close"] for r in runs]),
            "close_floor": median([teardown_floor(spark, n) for _ in range(reps)]),
            "stage_floor": stage,
            "worker_floor": wf,
            "floor": stage + wf,
            "launcher_rss_mb": median([median([x[0] for x in r["launcher_rss"]]) / 2**20 for r in runs if r["launcher_rss"]]),
            "launcher_uss_mb": median([median([x[1] for x in r["launcher_rss"]]) / 2**20 for r in runs if r["launcher_rss"]]),
        }
        print(f"warm n={n} done ({time.perf_counter() - t_all:.0f}s)", file=sys.stderr)
    R["warm"] = warm
    R["driver_rss_mb"] = driver_footprint(spark) / 2**20
    R["steady"] = steady_state(spark, reps)
    print(f"steady done ({time.perf_counter() - t_all:.0f}s)", file=sys.stderr)

    R["ray"] = None
    if not args.no_ray:
        try:
            ray_runs = [ray_on_spark(spark, 2) for _ in range(2)]
            if ray_runs[0] is not None:
                R["ray"] = {
                    "start": median([r["start"] for r in ray_runs]),
                    "start_runs": [r["start"] for r in ray_runs],
                    "close": median([r["close"] for r in ray_runs]),
                    "runs": len(ray_runs),
                }
        except Exception as e:  # report, do not hide
            R["ray"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    stop_spark(spark)
    R["total_seconds"] = time.perf_counter() - t_all

    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(R, f, indent=2, default=str)
    print(render(R))
    try:
        plots = write_plots(R, args.plot_dir or os.path.dirname(os.path.abspath(args.json)))
        print("plots: " + ", ".join(plots))
    except ImportError:  # matplotlib: pip install -e '.[bench]'
        print("plots: skipped (pip install matplotlib)")
    return R


def render(R: dict) -> str:
    lines = []
    m = R["machine"]
    lines.append(
        f"machine: {m['cpus']} CPUs, {m['memory_gib']} GiB, {m['platform']}, Python {m['python']}, "
        f"pyspark {m['pyspark']}, distributed {m['distributed']}; {R['master']}; median of {R['reps']} runs"
    )
    lines.append("")
    lines.append("| start-up | N | spark-dask s | floor s (stage + worker) | ratio | target |")
    lines.append("|---|---|---|---|---|---|")
    c = R["cold"]
    lines.append(
        f"| cold | {c['n']} | {c['start']:.2f} | {c['floor']:.2f} ({c['stage_floor']:.2f} + {c['worker_floor']:.2f}) "
        f"| {c['start'] / c['floor']:.2f} | ≤ 1.5 |"
    )
    for n, w in R["warm"].items():
        lines.append(
            f"| warm | {n} | {w['start']:.2f} | {w['floor']:.2f} ({w['stage_floor']:.2f} + {w['worker_floor']:.2f}) "
            f"| {w['start'] / w['floor']:.2f} | ≤ 1.5 |"
        )
    lines.append("")
    lines.append("| teardown | N | spark-dask s | floor s (cancel empty stage) | target |")
    lines.append("|---|---|---|---|---|")
    lines.append(f"| cold app | {c['n']} | {c['close']:.2f} | | ≤ 1 s |")
    for n, w in R["warm"].items():
        lines.append(f"| warm | {n} | {w['close']:.2f} | {w['close_floor']:.2f} | ≤ 1 s |")
    lines.append("")
    ray = R.get("ray")
    if ray is None:
        lines.append("Ray-on-Spark: skipped (ray not installed; pip install 'spark-dask[bench]')")
    elif "error" in ray:
        lines.append(f"Ray-on-Spark: failed: {ray['error']}")
    else:
        ours2 = R["warm"].get(2, R["warm"][min(R["warm"])])["start"]
        lines.append(
            f"Ray-on-Spark (2 worker nodes, no dashboard): setup {ray['start']:.1f} s, shutdown "
            f"{ray['close']:.1f} s (median of {ray['runs']}); spark-dask warm start is "
            f"{ray['start'] / ours2:.1f}x faster (target ≥ 5x)"
        )
    lines.append("")
    lines.append("| steady state (2 workers x 1 thread) | " + " | ".join(R["steady"]) + " | ratio TLS | ratio TCP |")
    lines.append("|---|" + "---|" * (len(R["steady"]) + 2))
    names = list(next(iter(R["steady"].values())))
    base = R["steady"]["LocalCluster (TCP)"]
    for name in names:
        row = [f"{R['steady'][k][name]:.2f} s" for k in R["steady"]]
        lines.append(
            f"| {name} | " + " | ".join(row)
            + f" | {base[name] / R['steady']['spark-dask (TLS)'][name]:.2f} "
            + f"| {base[name] / R['steady']['spark-dask (TCP)'][name]:.2f} |"
        )
    lines.append("(ratio = LocalCluster time / spark-dask time; target ≥ 0.95)")
    lines.append("")
    rss = [w["launcher_rss_mb"] for w in R["warm"].values()]
    uss = [w["launcher_uss_mb"] for w in R["warm"].values()]
    lines.append(
        f"footprint: launcher (Spark task process) {median(uss):.0f} MB own memory (USS) per task, "
        f"{median(rss):.0f} MB RSS with the pages shared with the PySpark daemon (target ≤ 50 MB); "
        f"driver RSS growth with a 2-worker cluster {R['driver_rss_mb']:.0f} MB"
    )
    lines.append("")
    lines.append("| growth N | start s | scheduler s | submit → all connected s |")
    lines.append("|---|---|---|---|")
    for n, w in R["warm"].items():
        lines.append(f"| {n} | {w['start']:.2f} | {w['scheduler']:.2f} | {w['workers']:.2f} |")
    lines.append(f"total benchmark time: {R['total_seconds']:.0f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
