"""spark-dask benchmarks: start-up, teardown, steady state, footprint, growth.

    python -m benchmarks [--master M]... [--option KEY=VALUE]... [--reps 3] [--sizes 2,4,8]
                         [--no-ray] [--no-steady] [--quick] [--json PATH] [--plot-dir DIR]
    python -m benchmarks --plot JSON [--plot-dir DIR]      # redraw the plots of a run

SVG plots (``benchmarks/plots.py``): start-up and teardown against the floor and
Ray-on-Spark, per master; hand-off throughput when measured.

Prints tables and writes JSON. Every figure is the median of ``--reps`` runs, with its
spread (minimum-maximum); every ratio compares figures measured in the same run, on the
same machine, interleaved (a spark-dask start, then its floor, then the next start).

Configurations: each ``--master`` (default: ``local-cluster[2,1,1024]`` and
``local-cluster[2,4,1024]``) is measured with spark-dask's defaults (TLS, scheduler
dashboard, nannies, progress output) plus the ``--option`` values given (passed to
``SparkCluster``, e.g. ``--option tls=False``). ``--quick`` (what CI runs): N = 2, no
steady state, no Ray-on-Spark.

``--master hosts:WxC`` (e.g. ``hosts:2x4``): the multi-host Spark standalone cluster of
``tests/support/hosts.py`` (network namespaces, root only), W worker hosts of C cores, the Spark
driver and the Dask scheduler on its driver host: cold and warm start-up at N = 2 and 4
against the same floors (the worker floor across the hosts), teardown, and the hand-off
at 1 GB across the hosts on a bare and a shaped link (``benchmarks/multihost.py``).

Floors, measured here too:
- stage floor: an empty barrier stage of N tasks, submit -> every task has run (the
  cheapest way to get N barrier tasks running: no ``BarrierTaskContext.barrier()`` call,
  which Spark answers by polling once a second; the stage with that call is reported
  beside it, as ``stage + barrier()``);
- worker floor: N bare ``dask worker`` processes (with a nanny, no worker dashboard)
  started by hand at once, to registration with a local scheduler;
- start-up floor = stage floor + worker floor;
- teardown floor: cancel of a running empty barrier stage -> no active Spark job.

Steady state: the same workloads on a spark-dask cluster (TLS, its default) and on a
``LocalCluster`` with the same workers (2 x 1 thread, 4 GiB) and TLS; a TCP LocalCluster
beside them shows what TLS itself costs. Each workload is sized at the start so that
one run takes at least 10 s on the TLS LocalCluster; runs are interleaved.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import math
import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Ray-on-Spark runs the `ray` script found on PATH, on the driver and in the executors.
_BIN = os.path.dirname(sys.executable)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")

import psutil  # noqa: E402

from benchmarks import multihost  # noqa: E402
from benchmarks.machine import machine_facts  # noqa: E402
from benchmarks.measure import (  # noqa: E402
    active_jobs,
    median,
    new_spark,
    ours,
    ship_by_value,
    slots,
    spread,
    stage_floor,
    stop_spark,
    teardown_floor,
    wait_idle,
    warm_entry,
    worker_floor,
)
from benchmarks.plots import write_plots  # noqa: E402

MASTERS = ["local-cluster[2,1,1024]", "local-cluster[2,4,1024]"]
TARGETS = {
    "start": 1.0,  # warm start-up / floor, N = 2 and 4
    "growth": 1.1,  # warm start-up / floor, N = 8
    "close_2": 0.15,  # seconds, N = 2
    "close_8": 0.5,  # seconds, N = 8
    "steady": 0.97,  # LocalCluster time / spark-dask time
    "ray_cold": 10.0,  # Ray-on-Spark setup / spark-dask start, both in a fresh application
    "ray_warm": 25.0,  # Ray-on-Spark setup / spark-dask start, both in a warm application
}


def parse_options(items: list[str]) -> dict:
    """``["tls=False", "memory_limit=4GiB"]`` -> ``{"tls": False, "memory_limit": "4GiB"}``."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--option {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key.strip()] = value
    return out


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
    """Workloads of ``k`` units each: many small tasks, a shuffle, an array reduction.
    A unit takes about a second on 2 one-thread workers; ``k`` is set so that a run
    takes at least 10 s on the TLS LocalCluster (checked with a run of that size)."""
    import dask
    import dask.array as da
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    def tiny(client, k):
        n = 500 * k
        futs = client.map(lambda x: x + 1, range(n), pure=False)
        assert sum(client.gather(futs)) == sum(range(1, n + 1))

    def shuffle(client, k):
        rng = np.random.default_rng(0)
        rows = 400_000 * k
        pdf = pd.DataFrame({"k": rng.integers(0, 1000, rows), "x": rng.random(rows)})
        ddf = dd.from_pandas(pdf, npartitions=8 * k)
        with dask.config.set({"dataframe.shuffle.method": "tasks"}):
            out = ddf.shuffle("k").groupby("k").x.mean().compute()
        assert len(out) == 1000

    def array(client, k):
        side = int(4000 * math.sqrt(k)) // 500 * 500
        x = da.random.default_rng(0).random((side, side), chunks=(500, 500))
        assert float((x + x.T).mean(axis=0).sum().compute()) > 0

    return {"many small tasks": tiny, "dataframe shuffle + groupby": shuffle, "array reduction": array}


def steady_state(spark, reps: int, options: dict, minimum: float = 10.0) -> dict:
    """Each workload on spark-dask and LocalCluster (TLS and TCP), runs interleaved."""
    from distributed import Client, LocalCluster
    from distributed.security import Security

    import spark_dask

    common = {"n_workers": 2, "threads_per_worker": 1, "memory_limit": "4GiB"}
    quiet = io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.redirect_stdout(quiet))
        clients = {}
        # one spark-dask cluster (a second would not find free slots for its gang)
        clients["spark-dask TLS"] = stack.enter_context(spark_dask.start(spark, **{**options, **common, "tls": True}))
        for name, security in (("LocalCluster TLS", Security.temporary()), ("LocalCluster TCP", None)):
            lc = stack.enter_context(
                LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="4GiB", processes=True,
                             dashboard_address=":0", security=security, protocol="tls" if security else "tcp")
            )  # fmt: skip
            clients[name] = stack.enter_context(Client(lc, security=security))
        out: dict = {}
        for wname, fn in workloads().items():
            base = clients["LocalCluster TLS"]
            fn(base, 1)  # warm-up
            t0 = time.perf_counter()
            fn(base, 1)
            unit = time.perf_counter() - t0
            k = max(1, math.ceil(minimum * 1.1 / max(unit, 1e-3)))
            # A unit is not exactly a k-th of a run (fixed costs, the array's rounding):
            # check the size once and grow it until a run takes the minimum.
            for _ in range(3):
                t0 = time.perf_counter()
                fn(base, k)
                took = time.perf_counter() - t0
                if took >= minimum:
                    break
                k = max(k + 1, math.ceil(k * minimum * 1.1 / max(took, 1e-3)))
            for c in clients.values():
                fn(c, 1)  # warm-up of each cluster
            runs: dict = {name: [] for name in clients}
            for _ in range(reps):
                for name, c in clients.items():  # interleaved: drift hits every cluster alike
                    t0 = time.perf_counter()
                    fn(c, k)
                    runs[name].append(time.perf_counter() - t0)
            out[wname] = {"units": k, "runs": runs}
            print(f"  steady: {wname} done (k={k})", file=sys.stderr)
    return out


def driver_footprint(spark, options: dict) -> int:
    """RSS growth of the driver process while a 2-worker cluster runs (scheduler side)."""
    import gc

    import spark_dask

    me = psutil.Process()
    gc.collect()
    before = me.memory_info().rss
    with contextlib.redirect_stdout(io.StringIO()), spark_dask.start(spark, n_workers=2, **options):
        gc.collect()
        during = me.memory_info().rss
    return during - before


# ------------------------------------------------------------------------------ one master
def warm_sizes(spark, sizes: list[int], reps: int, options: dict, note=None) -> dict:
    """Warm start-up and teardown per N of ``sizes`` in ``spark``'s application (one
    whose executors' Python workers have run a cluster already): ``reps`` interleaved
    rounds (a spark-dask start and close, the empty stage, the stage with ``barrier()``,
    each on an idle application), then ``reps`` teardown floors. ``note``: called with
    a line of progress. ``{N: the runs}``."""
    warm = {}
    for n in sizes:
        runs, stage, stage_b, close_floor = [], [], [], []
        for _ in range(reps):  # interleaved, each on an idle application
            wait_idle(spark)
            runs.append(ours(spark, n, options))
            wait_idle(spark)
            stage.append(stage_floor(spark, n))
            wait_idle(spark)
            stage_b.append(stage_floor(spark, n, barrier_call=True))
        for _ in range(reps):  # after the starts: cancelled tasks hold slots a while
            wait_idle(spark)
            close_floor.append(teardown_floor(spark, n))
        wait_idle(spark)
        warm[n] = warm_entry(runs, stage, stage_b, close_floor)
        if note is not None:
            note(f"warm n={n} done")
    return warm


def bench_master(master: str, sizes: list[int], reps: int, options: dict, ray: bool, t_all: float) -> dict:
    def note(what):
        print(f"{master}: {what} ({time.perf_counter() - t_all:.0f}s)", file=sys.stderr)

    R: dict = {"master": master}
    # Cold: the first cluster (or the first empty stage) of a fresh Spark application.
    cold_ours, cold_stage = [], []
    for _ in range(reps):
        spark = new_spark(master)
        cold_ours.append(ours(spark, 2, options))
        stop_spark(spark)
        spark = new_spark(master)
        cold_stage.append(stage_floor(spark, 2))
        stop_spark(spark)
    R["cold"] = {
        "n": 2,
        "start_runs": [r["start"] for r in cold_ours],
        "close_runs": [r["close"] for r in cold_ours],
        "stage_floor_runs": cold_stage,
    }
    note("cold done")

    # Warm: one application; its executors' Python workers already started.
    spark = new_spark(master)
    try:
        ours(spark, 2, options)
        wait_idle(spark)
        stage_floor(spark, 2)
        R["warm"] = warm_sizes(spark, [n for n in sizes if n <= slots(master)], reps, options, note)
        wait_idle(spark)
        R["driver_rss_mb"] = driver_footprint(spark, options) / 2**20
        R["ray"] = None
        if ray:
            try:
                wait_idle(spark)
                ray_runs = [ray_on_spark(spark, 2) for _ in range(2)]
                if ray_runs[0] is not None:
                    R["ray"] = {
                        "start_runs": [r["start"] for r in ray_runs],
                        "close_runs": [r["close"] for r in ray_runs],
                    }
            except Exception as e:  # report, do not hide  # noqa: BLE001
                R["ray"] = {"error": f"{type(e).__name__}: {e}"[:300]}
            note("ray done")
    finally:
        stop_spark(spark)
    if ray and R.get("ray") and "start_runs" in R["ray"]:
        # Ray-on-Spark's cold setup: its first start in a fresh application (its Spark job
        # pays the same first-stage costs: executors' Python daemons, task deserialization);
        # after every spark-dask measurement of this master, as the warm-application runs
        ray_cold = []
        try:
            for _ in range(2):
                spark = new_spark(master)
                try:
                    ray_cold.append(ray_on_spark(spark, 2))
                finally:
                    stop_spark(spark)
            R["ray"]["cold_start_runs"] = [r["start"] for r in ray_cold]
        except Exception as e:  # report, do not hide  # noqa: BLE001
            R["ray"]["cold_error"] = f"{type(e).__name__}: {e}"[:300]
        note("ray cold done")
    return R


def finish(R: dict) -> None:
    """Medians and floors from the recorded runs (worker floors measured per N)."""
    for M in R["masters"]:
        floors = M.get("worker_floor") or R["worker_floor"]  # a multi-host master has its own
        colds = list(M["colds"].values()) if "colds" in M else [M["cold"]] if M.get("cold") else []
        for entry in [*colds, *M["warm"].values()]:
            n = entry.get("n") or next(k for k, v in M["warm"].items() if v is entry)
            entry["start"] = median(entry["start_runs"])
            entry["close"] = median(entry["close_runs"])
            if "close_floor_runs" in entry:
                entry["close_floor"] = median(entry["close_floor_runs"])
            entry["stage_floor"] = median(entry["stage_floor_runs"])
            entry["worker_floor"] = median(floors[str(n)])
            entry["floor"] = entry["stage_floor"] + entry["worker_floor"]
            entry["ratio"] = entry["start"] / entry["floor"]
            # per-run ratios for the spread: each start against the floor of its own round
            entry["ratio_runs"] = [
                s / (f + entry["worker_floor"]) for s, f in zip(entry["start_runs"], entry["stage_floor_runs"])
            ]
        if M.get("ray") and "start_runs" in M["ray"]:
            M["ray"]["start"] = median(M["ray"]["start_runs"])
            M["ray"]["close"] = median(M["ray"]["close_runs"])
            if M["ray"].get("cold_start_runs"):
                M["ray"]["cold_start"] = median(M["ray"]["cold_start_runs"])


# ------------------------------------------------------------------------------ main
def main(argv=None) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description="spark-dask benchmarks")
    ap.add_argument(
        "--master",
        action="append",
        default=None,
        help=f"Spark master (repeatable; default: {' and '.join(MASTERS)}); hosts:WxC: the multi-host cluster (root)",
    )
    ap.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="a SparkCluster option (repeatable)"
    )
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sizes", default="2,4,8")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--no-steady", action="store_true")
    ap.add_argument(
        "--quick", action="store_true", help="N = 2 only, no steady state, no Ray-on-Spark, no hand-off (CI)"
    )
    ap.add_argument("--no-handoff", action="store_true", help="leave out the hand-off part (python -m benchmarks)")
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
    masters = args.master or MASTERS
    options = parse_options(args.option)
    sizes = [2] if args.quick else [int(s) for s in args.sizes.split(",")]
    ray = not (args.no_ray or args.quick)
    ship_by_value()
    t_all = time.perf_counter()

    R: dict = {
        "machine": machine_facts(load_before=list(os.getloadavg())),
        "reps": args.reps,
        "options": options,
        "targets": TARGETS,
    }
    local = [m for m in masters if not multihost.parse(m)]
    if local:
        R["worker_floor"] = {str(n): [worker_floor(n) for _ in range(args.reps)] for n in sorted(set(sizes) | {2})}
        print(f"worker floors done ({time.perf_counter() - t_all:.0f}s)", file=sys.stderr)
    R["masters"] = [
        multihost.bench(m, args.reps, options, args.quick, not args.no_handoff, t_all) if multihost.parse(m)
        else bench_master(m, sizes, args.reps, options, ray, t_all)
        for m in masters
    ]  # fmt: skip
    R["steady"] = None
    if local and not (args.no_steady or args.quick):
        spark = new_spark(local[-1])
        try:
            R["steady"] = {"master": local[-1], "workloads": steady_state(spark, args.reps, options)}
        finally:
            stop_spark(spark)
        print(f"steady done ({time.perf_counter() - t_all:.0f}s)", file=sys.stderr)
    R["machine"]["load_after"] = list(os.getloadavg())
    R["total_seconds"] = time.perf_counter() - t_all
    finish(R)

    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(R, f, indent=2, default=str)
    print(render(R))
    try:
        plots = write_plots(R, args.plot_dir or os.path.dirname(os.path.abspath(args.json)))
        print("plots: " + ", ".join(plots))
    except ImportError as e:  # matplotlib: pip install 'spark-dask[bench]'
        print(f"plots: not drawn ({e})")
    return R


def _mark(ok: bool) -> str:
    return "yes" if ok else "**no**"


def render(R: dict) -> str:
    T = R.get("targets", TARGETS)
    m = R["machine"]
    opts = ", ".join(f"{k}={v!r}" for k, v in R.get("options", {}).items()) or "defaults"
    lines = [
        f"machine: {m['cpus']} CPUs, {m['memory_gib']} GiB, {m['platform']}, Python {m['python']}, "
        f"pyspark {m['pyspark']}, distributed {m['distributed']}; spark-dask options: {opts}; "
        f"median (min-max) of {R['reps']} runs; load average before/after "
        f"{m['load_before'][0]:.2f}/{m['load_after'][0]:.2f}",
        "",
        "| master | start-up | N | spark-dask s | floor s (stage + worker) | stage + barrier() s | ratio (spread) | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for M in R["masters"]:
        for n, c in (M.get("colds") or {"2": M["cold"]}).items():
            lines.append(
                f"| {M['master']} | cold | {n} | {spread(c['start_runs'])} | {c['floor']:.2f} ({c['stage_floor']:.2f} + "
                f"{c['worker_floor']:.2f}) | | {c['ratio']:.2f} ({min(c['ratio_runs']):.2f}-{max(c['ratio_runs']):.2f}) | |"
            )
        for n, w in M["warm"].items():
            target = T["growth"] if int(n) >= 8 else T["start"]
            lines.append(
                f"| {M['master']} | warm | {n} | {spread(w['start_runs'])} | {w['floor']:.2f} ({w['stage_floor']:.2f} + "
                f"{w['worker_floor']:.2f}) | {median(w['stage_barrier_runs']):.2f} | {w['ratio']:.2f} "
                f"({min(w['ratio_runs']):.2f}-{max(w['ratio_runs']):.2f}) | ≤ {target} {_mark(w['ratio'] <= target)} |"
            )
    lines += [
        "",
        "| master | teardown | N | spark-dask s | floor s (cancel empty stage) | target |",
        "|---|---|---|---|---|---|",
    ]
    for M in R["masters"]:
        for n, c in (M.get("colds") or {"2": M["cold"]}).items():
            lines.append(f"| {M['master']} | cold app | {n} | {spread(c['close_runs'])} | | |")
        for n, w in M["warm"].items():
            target = T["close_2"] if int(n) <= 2 else T["close_8"] if int(n) >= 8 else None
            mark = f"≤ {target} s {_mark(w['close'] <= target)}" if target else ""
            lines.append(
                f"| {M['master']} | warm | {n} | {spread(w['close_runs'])} | {spread(w['close_floor_runs'])} | {mark} |"
            )
    for M in R["masters"]:
        lines.append("")  # one paragraph per master in Markdown
        ray = M.get("ray")
        if multihost.parse(M["master"]):
            lines.append(f"{M['master']}: Ray-on-Spark not measured on the multi-host cluster")
        elif ray is None:
            lines.append(
                f"{M['master']}: Ray-on-Spark not measured (--no-ray/--quick, or ray not installed: pip install 'spark-dask[bench]')"
            )
        elif "error" in ray:
            lines.append(f"{M['master']}: Ray-on-Spark failed: {ray['error']}")
        else:
            warm2 = M["warm"][min(M["warm"], key=int)]["start"]
            cold = M["cold"]["start"]
            if "cold_start" in ray:  # cold against cold: both the first start in a fresh application
                ray_cold, cold_text = ray["cold_start"], f"fresh application {spread(ray['cold_start_runs'])} s, "
            else:  # not measured (older runs): the warm application's setup stands in for it
                ray_cold = ray["start"]
                cold_text = f"fresh application not measured ({ray.get('cold_error', 'older run')}), "
            lines.append(
                f"{M['master']}: Ray-on-Spark 2 worker nodes, no dashboard: setup {cold_text}"
                f"warm application {spread(ray['start_runs'])} s, shutdown {spread(ray['close_runs'])} s; "
                f"spark-dask is {ray_cold / cold:.1f}x faster cold "
                f"(target ≥ {T['ray_cold']:.0f}x {_mark(ray_cold / cold >= T['ray_cold'])}), "
                f"{ray['start'] / warm2:.1f}x warm (target ≥ {T['ray_warm']:.0f}x {_mark(ray['start'] / warm2 >= T['ray_warm'])})"
            )
    if R.get("steady"):
        W = R["steady"]["workloads"]
        names = list(next(iter(W.values()))["runs"])
        lines += [
            "",
            f"steady state on {R['steady']['master']}, 2 workers x 1 thread, 4 GiB; seconds, median (min-max)",
            "",
            "| workload | units | " + " | ".join(names) + " | ratio |",
            "|---|---|" + "---|" * (len(names) + 1),
        ]
        for wname, w in W.items():
            r = w["runs"]
            tls = median(r["LocalCluster TLS"]) / median(r["spark-dask TLS"])
            tls_runs = [a / b for a, b in zip(r["LocalCluster TLS"], r["spark-dask TLS"])]
            lines.append(
                f"| {wname} | {w['units']} | "
                + " | ".join(spread(r[n]) for n in names)
                + f" | {tls:.3f} ({min(tls_runs):.2f}-{max(tls_runs):.2f}) {_mark(tls >= T['steady'])} |"
            )
        lines += [  # a blank line first: a line right after a table is read as one more row
            "",
            f"(ratio = LocalCluster TLS time / spark-dask time, per round in brackets; target ≥ {T['steady']})",
        ]
    lines += [
        "",
        "| master | N | launcher USS MB | launcher RSS MB | scheduler s | submit → all connected s |",
        "|---|---|---|---|---|---|",
    ]
    for M in R["masters"]:
        for n, w in M["warm"].items():
            lines.append(
                f"| {M['master']} | {n} | {w['launcher_uss_mb']:.0f} | {w['launcher_rss_mb']:.0f} | "
                f"{spread(w['scheduler_runs'])} | {spread(w['workers_runs'])} |"
            )
    # after the table, each its own paragraph (a Markdown table goes on to the next blank line)
    for M in R["masters"]:
        if "driver_rss_mb" in M:
            lines += ["", f"driver RSS growth with a 2-worker cluster on {M['master']}: {M['driver_rss_mb']:.0f} MB"]
    for M in R["masters"]:
        if M.get("hosts"):
            lines += ["", multihost.render(M)]
    lines += ["", f"total benchmark time: {R['total_seconds']:.0f} s"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
