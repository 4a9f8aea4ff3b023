"""spark-dask's start-up on Spark on YARN, against Spark's own floors there (issue 71).

    python -m benchmarks yarn [--nodemanagers 2] [--executors 2] [--cores 2] [--reps 3]
                              [--sizes 2,4] [--cold-reps 2] [--no-local] [--json PATH]

A YARN on this machine (:class:`tests.support.yarn.YarnBed`: a ResourceManager and
``--nodemanagers`` NodeManagers from the cached Hadoop 3.3.4 jars, ``python -m
tests.support.jars fetch yarn-3.3``) in a temporary directory, and client-mode Spark
applications on it: ``--executors`` executors of ``--cores`` cores in YARN containers,
the driver (and with it the Dask scheduler) in this process. With
``benchmarks/measure.py``'s measurements and ``benchmarks/run.py``'s rounds:

- application start: SparkSession creation -> every executor registered (YARN's
  application master, the containers, the executors' JVMs), for every application
  made; the first one also launches the driver's JVM. Spark's and YARN's cost, not
  spark-dask's: context;
- cold (``--cold-reps`` rounds, 0: none): spark-dask's first start of N workers in a
  fresh application, against the first empty barrier stage of N tasks in another fresh
  application (N: the smallest size);
- warm, in one application (its first cluster of the largest size started and closed
  unmeasured: every slot's Python worker exists): per N of ``--sizes`` that fits the
  slots (executors x cores), ``--reps`` interleaved rounds of a start (start -> all N
  workers connected) and close, the empty barrier stage, the stage with ``barrier()``;
  then the teardown floor (cancel of a running empty barrier stage);
- the worker floor: N bare ``dask worker`` processes to registration (no Spark);
- the same on ``local-cluster[E,C,1024]`` (the same slots) after the YARN part, as the
  comparison (``--no-local``: not).

Ratios compare figures of the same run: start / (stage floor + worker floor), as in
``python -m benchmarks``. Between applications the run waits until YARN runs none; the
processes still running in the bed's directory after the last one are reported
(``left_in_containers``). The bed is stopped at the end, also on an error, Ctrl-C or
SIGTERM (``timeout``): no daemon, no container process left.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import warnings

import psutil

from benchmarks.machine import machine_facts
from benchmarks.measure import (
    new_spark,
    ours,
    ship_by_value,
    spread,
    stage_floor,
    stop_spark,
    table,
    wait_idle,
    worker_floor,
)
from benchmarks.run import finish, warm_sizes
from spark_dask.commands.run import environment

MAX_CORES = 4  # the bed's yarn.scheduler.maximum-allocation-vcores


# ------------------------------------------------------------------------------ arguments
def parse_sizes(text: str) -> list[int]:
    """``"4,2,4"`` -> ``[2, 4]``.

    >>> parse_sizes("4,2,4")
    [2, 4]
    """
    try:
        sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers, e.g. 2,4") from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: sizes must be >= 1")
    return sizes


def positive(text: str) -> int:
    """A count of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be >= 1")
    return value


def arguments(argv=None) -> argparse.Namespace:
    """The command line; ``sizes`` only those that fit the slots (executors x cores),
    ``left_out`` the others."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks yarn", description=__doc__.splitlines()[0])
    ap.add_argument("--nodemanagers", type=positive, default=2)
    ap.add_argument("--executors", type=positive, default=2)
    ap.add_argument("--cores", type=positive, default=2, help=f"per executor, at most {MAX_CORES}")
    ap.add_argument("--reps", type=positive, default=3)
    ap.add_argument("--sizes", type=parse_sizes, default=[2, 4], help="N, comma-separated")
    ap.add_argument("--cold-reps", type=int, default=2, help="rounds of the cold part (2 applications each; 0: none)")
    ap.add_argument("--no-local", action="store_true", help="no local-cluster comparison")
    ap.add_argument("--json", default=None, help="write the run's figures there")
    args = ap.parse_args(argv)
    if args.cores > MAX_CORES:
        ap.error(f"--cores {args.cores}: the bed's containers have at most {MAX_CORES} vcores")
    if args.cold_reps < 0:
        ap.error("--cold-reps must be >= 0")
    slots = args.executors * args.cores
    args.left_out = [n for n in args.sizes if n > slots]
    args.sizes = [n for n in args.sizes if n <= slots]
    if not args.sizes:
        ap.error(f"no size fits {args.executors} executors x {args.cores} cores")
    return args


# ------------------------------------------------------------------------------ the bed
@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM (``timeout``'s) raises KeyboardInterrupt in the block, so that every
    ``finally`` runs: the bed's daemons run in sessions of their own and would outlive
    this process."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def yarn_jars() -> list[str]:
    """The bed's jars, Java and Hadoop 3.3.4's client jars, or SystemExit saying what
    is missing."""
    from tests.support import jars
    from tests.support.yarn import JARS_GROUP, unavailable

    missing = [p for p in jars.paths(JARS_GROUP) if not os.path.exists(p)]
    if missing:
        raise SystemExit(f"{missing} missing: python -m tests.support.jars fetch {JARS_GROUP}")
    reason = unavailable()
    if reason:
        raise SystemExit(reason)
    return jars.paths(JARS_GROUP)


@contextlib.contextmanager
def yarn_bed(nodemanagers: int, report: dict):
    """A YarnBed in a temporary directory, ``HADOOP_CONF_DIR`` set to its clients'
    configuration for the block (the driver's JVM must start in it); stopped after it
    whatever happens, the daemons it had to kill and the processes left after the stop
    in ``report``."""
    from tests.support.yarn import YarnBed, processes_under

    found = yarn_jars()
    with tempfile.TemporaryDirectory(prefix="spark-dask-yarn-bench-") as directory:
        bed = YarnBed.start(directory, nodemanagers=nodemanagers, jars=found)
        try:
            with environment(HADOOP_CONF_DIR=bed.conf_dir):
                yield bed
        finally:
            report["daemons_killed"] = bed.stop()
            report["left_after_stop"] = [p.pid for p in processes_under(directory)]


def wait_yarn_idle(bed, timeout: float = 60) -> None:
    """Until the RM runs no application and holds no container (a stopped application's
    containers end after it)."""
    deadline = time.monotonic() + timeout
    while True:
        m = bed.metrics()
        if not m.get("appsRunning") and not m.get("containersAllocated"):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"YARN still runs {m.get('appsRunning')} application(s), "
                f"{m.get('containersAllocated')} container(s) {timeout} s after the last one stopped"
            )
        time.sleep(0.1)


def container_processes(bed) -> list[str]:
    """The processes running in the bed's directory besides its daemons (containers'
    processes): ``pid command`` each."""

    from tests.support.yarn import processes_under

    daemons = {d.process.pid for d in [bed.rm, *bed.nms] if d is not None}
    out = []
    for p in processes_under(bed.directory):
        if p.pid in daemons:
            continue
        with contextlib.suppress(psutil.Error):
            out.append(f"{p.pid} {' '.join(p.cmdline()[:4])}"[:200])
    return out


def yarn_conf(bed, executors: int, cores: int) -> dict[str, str]:
    """The bed's client-mode settings (its master apart; Spark's staging files under the
    bed's directory)."""
    conf = bed.spark_conf(executors=executors, cores=cores)
    conf.pop("spark.master")
    return conf


# ------------------------------------------------------------------------------ measuring
def application(master: str, conf: dict, executors: int) -> tuple:
    """A fresh SparkSession: (the session, seconds from its creation to every executor
    registered)."""
    from spark_dask.spark.session import executor_ids

    t0 = time.perf_counter()
    spark = new_spark(master, **conf)
    seconds = time.perf_counter() - t0
    got = len(executor_ids(spark.sparkContext))
    if got < executors:
        stop_spark(spark)
        raise RuntimeError(f"{master}: {got} of {executors} executors registered after {seconds:.0f} s")
    return spark, seconds


def cold_part(master: str, conf: dict, executors: int, n: int, reps: int, between) -> tuple[dict, list[float]]:
    """``reps`` rounds of two fresh applications: spark-dask's first start of ``n``
    workers (and its close) in one, the first empty barrier stage of ``n`` tasks in the
    other (``between()`` after each application). The cold entry and the application
    starts."""
    entry: dict = {"n": n, "start_runs": [], "close_runs": [], "stage_floor_runs": []}
    starts = []
    for _ in range(reps):
        for first in ("spark-dask", "stage"):
            spark, seconds = application(master, conf, executors)
            starts.append(seconds)
            try:
                if first == "spark-dask":
                    r = ours(spark, n, {})
                    entry["start_runs"].append(r["start"])
                    entry["close_runs"].append(r["close"])
                else:
                    entry["stage_floor_runs"].append(stage_floor(spark, n))
            finally:
                stop_spark(spark)
                between()
    return entry, starts


def warm_part(master: str, conf: dict, executors: int, sizes: list[int], reps: int, between, note) -> tuple:
    """One application: a first cluster of the largest size and an empty stage
    (unmeasured), then ``run.warm_sizes``'s rounds. (the warm entries, the application
    start)."""
    spark, seconds = application(master, conf, executors)
    try:
        ours(spark, sizes[-1], {})
        wait_idle(spark)
        stage_floor(spark, sizes[-1])
        return warm_sizes(spark, sizes, reps, {}, note), seconds
    finally:
        stop_spark(spark)
        between()


def bench(master: str, conf: dict, args, between, note) -> dict:
    """Cold (unless ``--cold-reps 0``) and warm on one master: its entry as
    ``run.finish`` reads it, with every application start."""
    M: dict = {"master": master, "ray": None}
    starts: list[float] = []
    if args.cold_reps:
        M["cold"], starts = cold_part(master, conf, args.executors, args.sizes[0], args.cold_reps, between)
        note(f"{master}: cold done")
    M["warm"], warm_start = warm_part(master, conf, args.executors, args.sizes, args.reps, between,
                                      lambda what: note(f"{master}: {what}"))  # fmt: skip
    M["app_start_runs"] = [*starts, warm_start]
    return M


# ------------------------------------------------------------------------------ main
def main(argv=None) -> dict:
    warnings.filterwarnings("ignore")
    args = arguments(argv)
    ship_by_value()
    t_all = time.perf_counter()

    def note(what):
        print(f"yarn bench: {what} ({time.perf_counter() - t_all:.0f}s)", file=sys.stderr)

    R: dict = {
        "machine": machine_facts(load_before=list(os.getloadavg())),
        "reps": args.reps,
        "cold_reps": args.cold_reps,
        "sizes_left_out": args.left_out,
        "yarn": {
            "hadoop": "3.3.4",
            "nodemanagers": args.nodemanagers,
            "executors": args.executors,
            "cores": args.cores,
            "deploy_mode": "client",
        },
    }
    with sigterm_as_interrupt():
        R["worker_floor"] = {str(n): [worker_floor(n) for _ in range(args.reps)] for n in args.sizes}
        note("worker floors done")
        with yarn_bed(args.nodemanagers, R["yarn"]) as bed:
            note(f"bed up ({bed.directory})")
            conf = yarn_conf(bed, args.executors, args.cores)
            R["masters"] = [bench("yarn", conf, args, lambda: wait_yarn_idle(bed), note)]
            R["masters"][0]["first_with_driver_jvm"] = True
            R["yarn"]["left_in_containers"] = container_processes(bed)
        note("bed down")
        if not args.no_local:
            from tests.support.spark import fresh_jvm

            fresh_jvm()  # the YARN sessions' confs are the old JVM's system properties
            local = f"local-cluster[{args.executors},{args.cores},1024]"
            R["masters"].append(bench(local, {}, args, lambda: None, note))
            R["masters"][-1]["first_with_driver_jvm"] = True
    R["machine"]["load_after"] = list(os.getloadavg())
    R["total_seconds"] = time.perf_counter() - t_all
    finish(R)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(R, f, indent=2, default=str)
    print(render(R))
    return R


# ------------------------------------------------------------------------------ the tables
def app_start_row(M: dict) -> list[str]:
    """A master's application starts: the first (with the driver's JVM, when it
    launched it) apart from the rest.

    >>> app_start_row({"master": "yarn", "app_start_runs": [9.0, 5.0, 6.0, 7.0], "first_with_driver_jvm": True})
    ['yarn', '9.00', '6.00 (5.00-7.00)', '4']
    >>> app_start_row({"master": "local", "app_start_runs": [3.0]})
    ['local', '', '3.00 (3.00-3.00)', '1']
    """
    runs = M["app_start_runs"]
    first, rest = (runs[:1], runs[1:]) if M.get("first_with_driver_jvm") else ([], runs)
    return [M["master"], f"{first[0]:.2f}" if first else "", spread(rest), str(len(runs))]


def startup_rows(M: dict) -> list[list[str]]:
    """Cold and warm start-up rows of a master ``run.finish`` has summed up."""
    rows = []
    entries = ([("cold", M["cold"]["n"], M["cold"])] if M.get("cold") else []) + [
        ("warm", n, w) for n, w in M["warm"].items()
    ]
    for kind, n, e in entries:
        barrier = spread(e["stage_barrier_runs"]) if "stage_barrier_runs" in e else ""
        rows.append([M["master"], kind, str(n), spread(e["start_runs"]),
                     f"{e['floor']:.2f} ({e['stage_floor']:.2f} + {e['worker_floor']:.2f})",
                     spread(e["stage_floor_runs"]), barrier,
                     f"{e['ratio']:.2f} ({min(e['ratio_runs']):.2f}-{max(e['ratio_runs']):.2f})"])  # fmt: skip
    return rows


def teardown_rows(M: dict) -> list[list[str]]:
    """Cold and warm teardown rows, the warm ones with their floor."""
    rows = (
        [[M["master"], "cold app", str(M["cold"]["n"]), spread(M["cold"]["close_runs"]), ""]] if M.get("cold") else []
    )
    rows += [[M["master"], "warm", str(n), spread(w["close_runs"]), spread(w["close_floor_runs"])]
             for n, w in M["warm"].items()]  # fmt: skip
    return rows


def timing_rows(M: dict) -> list[list[str]]:
    """spark-dask's own marks of its warm starts: the scheduler up, submit -> all
    connected; what a task process running workers holds."""
    return [[M["master"], str(n), spread(w["scheduler_runs"]), spread(w["workers_runs"]), f"{w['launcher_uss_mb']:.0f}"]
            for n, w in M["warm"].items()]  # fmt: skip


APP_HEAD = ["master", "application start: first s (with the driver JVM)", "then s", "applications"]
START_HEAD = ["master", "start-up", "N", "spark-dask s", "floor s (stage + worker)", "stage floor s",
              "stage + barrier() s", "ratio (spread)"]  # fmt: skip
TEARDOWN_HEAD = ["master", "teardown", "N", "spark-dask s", "floor s (cancel empty stage)"]
TIMING_HEAD = ["master", "N", "scheduler s", "submit → all connected s", "launcher USS MB"]


def render(R: dict) -> str:
    """The run's tables (Markdown), from its JSON after ``run.finish``."""
    m, y, masters = R["machine"], R["yarn"], R["masters"]
    lines = [
        f"machine: {m['cpus']} CPUs, {m['memory_gib']} GiB, {m['platform']}, Python {m['python']}, "
        f"pyspark {m['pyspark']}, distributed {m['distributed']}; YARN (Hadoop {y['hadoop']}): "
        f"{y['nodemanagers']} NodeManagers, {y['executors']} executors x {y['cores']} cores, {y['deploy_mode']} mode; "
        f"median (min-max) of {R['reps']} runs (cold: {R['cold_reps']} fresh applications each); "
        f"load average before/after {m['load_before'][0]:.2f}/{m['load_after'][0]:.2f}",
    ]
    for head, rows in ((APP_HEAD, [app_start_row(M) for M in masters]),
                       (START_HEAD, [r for M in masters for r in startup_rows(M)]),
                       (TEARDOWN_HEAD, [r for M in masters for r in teardown_rows(M)]),
                       (TIMING_HEAD, [r for M in masters for r in timing_rows(M)])):  # fmt: skip
        lines += ["", *table(head, rows)]
    if R.get("sizes_left_out"):
        lines += ["", f"sizes left out (more than {y['executors']} x {y['cores']} slots): {R['sizes_left_out']}"]
    left = y.get("left_in_containers") or []
    lines += ["", f"container processes left after the last application: {'; '.join(left) if left else 'none'}; "
              f"daemons killed at the stop: {y.get('daemons_killed') or 'none'}; "
              f"processes left after it: {y.get('left_after_stop') or 'none'}"]  # fmt: skip
    lines += ["", f"total benchmark time: {R['total_seconds']:.0f} s"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
