"""What spark-dask costs as the cluster grows: 2 to 64 workers on one machine.

    python -m benchmarks scale [--sizes 2,4,8,16,32,64] [--parts startup,idle,drain,handoff,cold,hosts]
                               [--preload] [--cold-rounds 1]
                               [--reps 2] [--worker cpu|cuda] [--idle-seconds 20] [--handoff-at 2,64]
                               [--hosts 2,8] [--executor-memory 2048] [--json PATH]
    python -m benchmarks scale --plot JSON [--plot-dir DIR]     # redraw the plot of a run
    python -m benchmarks scale --trees a22f942,292caaa,. [--reps 5]   # one start-up, three trees

**The bed** (one Spark application per size N, :func:`bed`): ``local-cluster[E,10,M]``,
E = ceil(N / 8) executors, each with 8 stand-in GPUs (Spark's discovery-script mechanism,
``tests/support/gpus.py``, as on a p4d/A100 node), 10 cores (8 for the workers, 2 left to
Spark's own tasks), ``spark.task.resource.gpu.amount=1`` (the Databricks default) and
M MiB (``--executor-memory``); C1-only, serial-GC executor JVMs. spark-dask runs one
worker per GPU: ``--worker cpu`` (default; a plain worker pinned to its GPU, its nanny
forked from the task: the cheapest worker there is, only our overhead counts) or
``--worker cuda`` (the stand-in ``dask cuda worker`` of the tests, a new interpreter each).
The workers of the bed and of the floors alike run without distributed's profiler and with
slower system and memory monitors (:data:`LEAN_WORKERS`). From N = 32 the start-up limits (``timeout``, ``death-timeout``, ``connect-timeout``) are
longer (:func:`bed_limits`): all N workers start on this one machine.

**Per size, in one application** (``--parts`` picks, default all):

- ``startup``: warm start-up (``SparkCluster(n_workers=N)`` -> N workers connected)
  against an empty N-task barrier stage and against the *naive floor*: N bare ``dask
  worker --nanny`` processes spawned by hand at once, to registration with a bare
  ``Scheduler`` (up to ``--naive-max``: on 2 cores it costs about N times a worker's
  imports); rounds interleaved (start, stage, naive). Teardown (``close()`` -> no
  Dask process, no Spark job) against the cancel of a running empty stage.
- ``idle``: with N workers running, over ``--idle-seconds``: the driver's CPU (its Python
  process, and its JVM, % of one core), the Python process's threads, and py4j calls
  per second; each beside the same application idle without a cluster. py4j calls are
  counted by wrapping py4j's ``send_command`` in this process (:class:`Py4jCounter`, an
  instrument of the benchmark, not of spark-dask). The driver's RSS growth with the
  cluster up (the scheduler's memory) and the scheduler's own count of its state.
- ``drain`` (two executors or more, N > 8), on the ``idle`` part's cluster (a worker per
  GPU): one executor (8 workers, 16 MiB scattered to each) decommissioned: event -> the
  drain ended, and -> N workers again (Spark starts a new executor).
- ``handoff``: ``to_dask`` and ``to_spark`` of 1 GB (``--handoff-gb``) over N workers,
  against Spark computing the same data into a noop sink (``benchmarks/handoff.py``); at
  every size, or at those of ``--handoff-at``. On a cluster in ``gpu_mode="shared"``
  started in the ``idle`` one's place, after the drain (its tasks hold no GPU, so Spark's
  GPU tasks run beside it on the spare cores; with the default, whole-GPU workers take
  every GPU of a full executor and Spark's jobs wait). Spark places such CPU-only barrier
  tasks by cores, so more than 8 can land on an executor of 8 GPUs (and fail: no free
  GPU): the drain, which needs a worker per GPU, runs before it.
- ``cold`` (in applications of its own, :mod:`benchmarks.scale_cold`): the first start in
  a fresh application, and the first after a plain Python job, with Spark's own Python
  daemon and with the preloading one (:mod:`spark_dask.spark.daemon`), beside a warm
  start and what the preload costs Spark's own first job and the executors' memory
  (``--cold-rounds``). ``--preload`` runs every other part with the preloading daemon
  (the drain's relaunch on a new executor among them).
- ``hosts`` (once, not per size): the multi-host bed (``tests/support/hosts.py``, root), 2
  and 8 worker hosts (``--hosts``), 2 cores and 2 stand-in GPUs each, a worker per GPU;
  one worker host killed and a fresh one started in its place (``benchmarks/scale_hosts.py``).

``--trees A,B,.``: the warm start-up of 2 workers on 2 hosts (``hosts:2x4``, the figure of
"Many hosts") against the empty 2-task barrier stage, for several source trees in one
run on one bed: each commit's tree extracted with ``git archive`` (nothing checked out),
its driver and executors importing it first (``PYTHONPATH``); ``.`` is the working tree.

Prints a table per measure with the ratios measured in the same run and the machine's
load, writes JSON (``--json``, default ``benchmarks/results/scale.json``) and the plot
beside it, named after it (``scale.png``; ``--plot-dir``: elsewhere).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import io
import json
import math
import os
import sys
import sysconfig
import time

import dask.config
import psutil

from benchmarks import measure, scale_cold, scale_hosts, scale_trees
from benchmarks.machine import machine_facts
from benchmarks.measure import fmt, table

SIZES = (2, 4, 8, 16, 32, 64)
PARTS = ("startup", "idle", "drain", "handoff", "cold", "hosts")
GPUS = 8  # stand-in GPUs per executor, as on a p4d / A100 node
# The bed's workers register and heartbeat and little else, ours and the floors' alike:
# distributed's statistical profiler samples each worker's stack every 10 ms, and with
# its system and memory monitors it kept 64 idle workers and their nannies at ~2 % of a
# core each: 1.4 of this machine's 2 cores, and the driver's scheduler starved (every
# heartbeat timed out after 30 s, for minutes: docs/benchmarks.md, the fourth pass).
LEAN_WORKERS = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "2s",
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
}
SPARE_CORES = 2  # cores of each executor left to Spark's own tasks (the hand-off's jobs)
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


# ------------------------------------------------------------------ pure: arguments, tables
def parse_sizes(text: str) -> list[int]:
    """``"2,4,8"`` -> ``[2, 4, 8]`` (sorted, unique, each >= 1).

    >>> parse_sizes("8,2, 4,8")
    [2, 4, 8]
    """
    try:
        sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise SystemExit(f"--sizes {text!r}: expected numbers separated by commas") from None
    if not sizes or sizes[0] < 1:
        raise SystemExit(f"--sizes {text!r}: expected numbers >= 1")
    return sizes


def parse_parts(text: str) -> list[str]:
    """``"idle,startup"`` -> the parts in their order of :data:`PARTS`.

    >>> parse_parts("hosts,idle")
    ['idle', 'hosts']
    """
    asked = {p.strip() for p in text.split(",") if p.strip()}
    unknown = asked - set(PARTS)
    if unknown:
        raise SystemExit(f"--parts: no such part {sorted(unknown)} (parts: {', '.join(PARTS)})")
    return [p for p in PARTS if p in asked]


def bed(n: int, executor_memory: int) -> tuple[str, int]:
    """The local-cluster master for ``n`` workers (8 GPUs per executor) and its executors.

    >>> bed(2, 512), bed(64, 512), bed(65, 600)
    (('local-cluster[1,10,512]', 1), ('local-cluster[8,10,512]', 8), ('local-cluster[9,10,600]', 9))
    """
    executors = max(1, math.ceil(n / GPUS))
    return f"local-cluster[{executors},{GPUS + SPARE_CORES},{executor_memory}]", executors


def ratio_row(values: dict, base: str) -> dict:
    """Each value over ``values[base]`` (None where a value or the base is missing).

    >>> ratio_row({"ours": 3.0, "stage": 1.5, "naive": None}, "stage")
    {'ours': 2.0, 'stage': 1.0, 'naive': None}
    """
    b = values.get(base)
    return {k: (v / b if v is not None and b else None) for k, v in values.items()}


def growth(by_n: dict, key: str) -> float | None:
    """How ``key`` grows with N between the smallest and the largest size: the exponent
    ``k`` of ``value ~ N**k`` through those two points (1 = linear, 0 = flat).

    >>> round(growth({2: {"t": 1.0}, 8: {"t": 4.0}}, "t"), 2)
    1.0
    >>> growth({2: {"t": 1.0}}, "t") is None
    True
    """
    pts = [(int(n), e.get(key)) for n, e in by_n.items() if e.get(key)]
    if len(pts) < 2:
        return None
    (n0, v0), (n1, v1) = min(pts), max(pts)
    return math.log(v1 / v0) / math.log(n1 / n0) if n1 != n0 and v0 > 0 and v1 > 0 else None


def extrapolate(by_n: dict, key: str, to: int = 256) -> float | None:
    """``key`` at N = ``to`` along the power law through the two largest sizes measured
    (their local slope: the trend where it matters).

    >>> extrapolate({16: {"t": 2.0}, 32: {"t": 4.0}, 64: {"t": 8.0}}, "t")
    32.0
    """
    pts = sorted((int(n), e.get(key)) for n, e in by_n.items() if e.get(key))
    if len(pts) < 2:
        return None
    (n0, v0), (n1, v1) = pts[-2:]
    if v0 <= 0 or v1 <= 0:
        return None
    k = math.log(v1 / v0) / math.log(n1 / n0)
    return v1 * (to / n1) ** k


# ------------------------------------------------------------------ instruments
class Py4jCounter:
    """Counts the py4j calls this process makes (every ``send_command`` of py4j's
    connections, both the pinned-thread client-server mode PySpark uses and the classic
    gateway): an instrument of the benchmark, installed once, counting from then on."""

    count = 0
    callers: collections.Counter = collections.Counter()  # by the first caller outside py4j and pyspark
    _installed = False

    @classmethod
    def install(cls) -> None:
        if cls._installed:
            return
        from py4j import clientserver, java_gateway

        for klass in (clientserver.ClientServerConnection, java_gateway.GatewayConnection):
            original = klass.send_command

            def counted(self, command, *a, _original=original, **kw):
                cls.count += 1
                cls.callers[caller()] += 1
                return _original(self, command, *a, **kw)

            klass.send_command = counted
        cls._installed = True


STDLIB = sysconfig.get_paths()["stdlib"]


def skipped(path: str) -> bool:
    """Whether a frame of ``path`` is py4j's, pyspark's or the standard library's."""
    return "py4j" in path or "pyspark" in path or path.startswith(("<frozen", STDLIB))


def caller() -> str:
    """``dir/module.py:function`` of the innermost frame outside py4j, pyspark and the
    standard library (``threads of pyspark`` where there is none: PySpark's own threads)."""
    f = sys._getframe(2)
    while f is not None and skipped(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return "threads of pyspark"
    path = f.f_code.co_filename
    return f"{os.path.basename(os.path.dirname(path))}/{os.path.basename(path)}:{f.f_code.co_name}"


def driver_jvm():
    """The driver's JVM (the gateway's process), or None."""
    from pyspark import SparkContext

    gw = SparkContext._gateway
    with contextlib.suppress(AttributeError, psutil.Error):
        return psutil.Process(gw.proc.pid)
    return None


def sample_idle(seconds: float) -> dict:
    """The driver over ``seconds`` of doing nothing: its Python's and its JVM's CPU (% of
    one core), the Python's threads, py4j calls per second."""
    me, jvm = psutil.Process(), driver_jvm()
    py0, jv0, calls0 = me.cpu_times(), jvm.cpu_times() if jvm else None, Py4jCounter.count
    by0 = collections.Counter(Py4jCounter.callers)
    t0 = time.monotonic()
    time.sleep(seconds)  # the measurement window itself, not a wait for something
    dt = time.monotonic() - t0
    py1, jv1 = me.cpu_times(), jvm.cpu_times() if jvm else None
    out = {
        "py_cpu_pct": 100 * ((py1.user + py1.system) - (py0.user + py0.system)) / dt,
        "threads": me.num_threads(),
        "py4j_per_s": (Py4jCounter.count - calls0) / dt,
        "py4j_callers": {k: round(v / dt, 2) for k, v in (Py4jCounter.callers - by0).most_common(6)},
    }
    if jvm:
        out["jvm_cpu_pct"] = 100 * ((jv1.user + jv1.system) - (jv0.user + jv0.system)) / dt
    return out


def rss_now() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


def scheduler_sizes(scheduler) -> dict:
    """The scheduler's own state: workers, clients, tasks, plugins, its handlers'
    periodic callbacks."""
    return {
        "workers": len(scheduler.workers),
        "tasks": len(scheduler.tasks),
        "plugins": len(scheduler.plugins),
        "periodic_callbacks": len(scheduler.periodic_callbacks),
    }


def executor_memory_mb(app_id: str) -> list[float]:
    """RSS (MiB) of each executor JVM of application ``app_id`` on this machine."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmd and app_id in cmd:
            with contextlib.suppress(psutil.Error):
                out.append(p.memory_info().rss / 2**20)
    return out


def workers_memory_mb(tag: str) -> dict:
    """USS and RSS (MiB, medians) of the cluster's worker processes (nannies and workers)."""
    uss, rss = [], []
    for p in measure.gang_processes(tag):
        with contextlib.suppress(psutil.Error):
            info = p.memory_full_info()
            uss.append(info.uss / 2**20)
            rss.append(info.rss / 2**20)
    return {"processes": len(uss), "uss_mb": measure.median(uss), "rss_mb": measure.median(rss),
            "uss_total_mb": sum(uss)}  # fmt: skip


# ------------------------------------------------------------------ one application per N
def spark_conf(args) -> dict:
    """The bed's confs: stand-in GPUs, small quick executors, decommissioning on."""
    from tests.support.cds import QUICK_JVM
    from tests.support.gpus import fake_dask_cuda, gpu_conf

    conf = gpu_conf(GPUS, "1", **{
        "spark.worker.resource.gpu.discoveryScript": gpu_script(),
        "spark.executor.memory": f"{args.executor_memory}m",
        "spark.executor.extraJavaOptions": QUICK_JVM,
        "spark.driver.memory": "2g",
        "spark.driver.maxResultSize": "0",
        "spark.decommission.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    })  # fmt: skip
    if args.preload:
        conf.update(scale_cold.WAYS["spark_dask.spark.daemon"])
    if args.worker == "cuda":
        import atexit
        import pathlib
        import shutil
        import tempfile

        root = tempfile.mkdtemp(prefix="scale-cuda-")
        atexit.register(shutil.rmtree, root, True)
        conf["spark.executorEnv.PYTHONPATH"] = fake_dask_cuda(pathlib.Path(root))["path"]
    return conf


GPU_SCRIPT = """#!/usr/bin/env bash
# stand-in GPUs for local-cluster: each Spark Worker (all on this one host) its own 8
exec 9>>"{dir}/lock" && flock 9
n=$(cat "{dir}/count" 2>/dev/null || echo 0)
echo $((n + 1)) > "{dir}/count"
echo "{{\\"name\\": \\"gpu\\", \\"addresses\\": [\\"$(seq -s '","' $((n * {k})) $((n * {k} + {k} - 1)))\\"]}}"
"""


def gpu_script() -> str:
    """A GPU discovery script (Spark's mechanism, as ``tests/support/gpus.py``) that gives
    each Spark Worker of a local-cluster other addresses (0-7, 8-15, ...): their executors
    share one host, where a GPU address names one device; with the same addresses on each,
    two executors' workers would claim the same GPU."""
    import atexit
    import shutil
    import stat
    import tempfile

    d = tempfile.mkdtemp(prefix="scale-gpus-")
    atexit.register(shutil.rmtree, d, True)  # Spark Workers run it until the session stops
    path = os.path.join(d, "gpus.sh")
    with open(path, "w") as f:
        f.write(GPU_SCRIPT.format(dir=d, k=GPUS))
    os.chmod(path, stat.S_IRWXU)
    return path


def cluster_options(args) -> dict:
    from tests.support.gpus import FAKE_CUDA_ENV

    opts = {"worker": args.worker, "progress": False, "quiet": True, "env": dict(LEAN_WORKERS)}
    if args.worker == "cuda":
        opts["env"].update(FAKE_CUDA_ENV)
    return opts


def startup_part(spark, n: int, reps: int, options: dict, note, naive: bool = True) -> dict:
    """Warm start-up and teardown of N workers, each round interleaved with its floors."""
    measure.ours(spark, n, options)  # the warm-up: the executors' Python workers, imports
    measure.wait_idle(spark)
    measure.stage_floor(spark, n)
    out: dict = {"start": [], "close": [], "close_cpu": [], "close_driver_cpu": [], "stage": [], "naive": [],
                 "close_floor": [], "timings": []}  # fmt: skip
    for i in range(reps):
        measure.wait_idle(spark)
        r = measure.ours(spark, n, options)
        out["start"].append(r["start"])
        out["close"].append(r["close"])
        out["close_cpu"].append(r["close_cpu_s"])  # the machine's busy core-seconds during the close
        out["close_driver_cpu"].append(r["close_driver_cpu_s"])  # the driver's Python's share of them
        out["timings"].append(r["timings"])
        measure.wait_idle(spark)
        out["stage"].append(measure.stage_floor(spark, n))
        if naive:
            out["naive"].append(measure.worker_floor(n, env=LEAN_WORKERS))
        note(f"N={n} round {i + 1}: start {r['start']:.2f} s, stage {out['stage'][-1]:.2f} s, "
             f"naive {out['naive'][-1] if naive else '-'} s, close {r['close']:.2f} s")  # fmt: skip
    for _ in range(reps):
        measure.wait_idle(spark)
        out["close_floor"].append(measure.teardown_floor(spark, n))
    return out


def idle_part(spark, n: int, seconds: float, options: dict, floor: bool = True):
    """The driver idle without a cluster, distributed's own floor (a bare scheduler with
    N bare workers: :func:`measure.idle_floor`, where ``floor``), then the driver with N
    workers running; the cluster is returned running (the next parts use it)."""
    from spark_dask import SparkCluster

    measure.wait_idle(spark)
    out = {"without": sample_idle(seconds)}
    if floor:
        out["floor"] = measure.idle_floor(n, seconds, env=LEAN_WORKERS)
    rss0 = rss_now()
    cluster = SparkCluster(spark, n_workers=n, **options)
    time.sleep(2.0)  # excluded from the window: the start's own after-work (first heartbeats)
    out["with"] = sample_idle(seconds)
    out["rss_growth_mb"] = (rss_now() - rss0) / 2**20
    out["scheduler"] = scheduler_sizes(cluster.scheduler)
    out["workers_memory"] = workers_memory_mb(cluster.tag)
    out["executor_rss_mb"] = executor_memory_mb(spark.sparkContext.applicationId)
    return out, cluster


def _wait(predicate, timeout: float) -> float | None:
    """Seconds until ``predicate()`` holds, polled every 20 ms; None after ``timeout``."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            return None
        time.sleep(0.02)
    return time.monotonic() - t0


def drain_part(spark, cluster, n: int) -> dict:
    """One executor's 8 workers drained (16 MiB scattered to each): event -> drained,
    event -> N workers again."""
    from distributed import Client

    from tests.support.parts import parts_of
    from tests.support.spark import decommission_executor

    block = 16 << 20
    with Client(cluster) as client:
        info = client.scheduler_info()["workers"]
        executor = sorted({w["spark"]["executor_id"] for w in info.values()})[0]
        victims = [a for a, w in info.items() if w["spark"]["executor_id"] == executor]
        data = [client.scatter(b"%d:" % i + bytes(block), workers=[a]) for i, a in enumerate(victims)]
        before = len(parts_of(cluster).drains)
        t0 = time.monotonic()
        decommission_executor(spark, executor, "scale benchmark")
        drained = _wait(lambda: len(parts_of(cluster).drains) > before, 120)
        full = _wait(lambda: len(cluster.scheduler.workers) == n and not set(victims) & set(cluster.scheduler.workers),
                     240)  # fmt: skip
        back = None if full is None else time.monotonic() - t0
        tasks = cluster.scheduler.tasks
        kept = sum(1 for f in data if f.key in tasks and tasks[f.key].state == "memory")
        d = parts_of(cluster).drains[before] if drained is not None else {}
        return {"executor": executor, "workers": len(victims), "drained_s": drained, "full_s": back,
                "drain_s": d.get("seconds"), "moved_mb": d.get("bytes", 0) / 2**20, "kept": kept, "of": len(data)}  # fmt: skip


def handoff_part(spark, cluster, gb: float) -> dict:
    """``to_dask`` and ``to_spark`` of ``gb`` over the cluster's workers, against Spark
    computing the data into a noop sink (``benchmarks/handoff.py``'s steps)."""
    import shutil
    import tempfile

    from distributed import Client

    from benchmarks import handoff

    tmp = tempfile.mkdtemp(prefix="scale-handoff-")
    out = {}
    try:
        with Client(cluster) as client:
            _, todo = handoff.steps(spark, client, gb, 0.0, tmp)
            for direction, method, fn, after in todo:
                if fn is not None and method in ("spark_only", "spark_dask"):
                    out[f"{direction}:{method}"] = handoff.measure(fn, spark, cluster.tag)["seconds"]
                    if after is not None:
                        after()
                elif fn is None and after is not None:
                    after()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def shared(cluster, spark, n: int, options: dict):
    """``cluster`` closed and a cluster of N workers in ``gpu_mode="shared"`` started
    instead: its tasks hold no GPU (a CPU-only task profile), so Spark's own GPU tasks
    (the hand-off's jobs) run on the executors' spare cores beside it."""
    from spark_dask import SparkCluster

    with contextlib.redirect_stdout(io.StringIO()):
        cluster.close()
    measure.wait_idle(spark)
    return SparkCluster(spark, n_workers=n, gpu_mode="shared", **options)


def reported(part, *args) -> dict:
    """``part(*args)``, or ``{"error": ...}`` when it raised: the run reports a failed
    part and goes on with the others (the start-up figures are kept)."""
    try:
        return part(*args)
    except Exception as e:  # noqa: BLE001  (reported in the table, not hidden)
        return {"error": f"{type(e).__name__}: {e}"[:500]}


def idle_and_cluster(spark, n: int, args, options: dict) -> dict:
    """:func:`idle_part`'s figures and its running cluster, as one dict."""
    idle, cluster = idle_part(spark, n, args.idle_seconds, options, n <= args.naive_max)
    return {"idle": idle, "cluster": cluster}


def bed_limits(n: int) -> dict:
    """The start-up limits on the bed: the defaults where they hold, longer for large N,
    where all N workers start on this one machine (on 2 cores 64 workers ran at a load
    of 100: a worker waited 55 s for its TLS handshake and gave up at the 60 s
    ``death-timeout``). Limits only: a start that fits them takes as long with either.

    >>> bed_limits(8), bed_limits(64)["spark-dask.timeout"]
    ({}, '380s')
    """
    if n < 32:
        return {}
    limit = f"{60 + 5 * n}s"  # as measure.idle_floor's wait for N bare workers
    return {"spark-dask.timeout": limit, "spark-dask.death-timeout": limit, "spark-dask.connect-timeout": "60s"}


def one_size(n: int, args, note) -> dict:
    """Every part but ``hosts`` for N workers, in one application of their own bed."""
    with dask.config.set(bed_limits(n)):
        return _one_size(n, args, note)


def cold_size(n: int, args, note) -> dict:
    """The cold part for N workers (:mod:`benchmarks.scale_cold`: its own applications)."""
    master, _ = bed(n, args.executor_memory)
    conf = spark_conf(argparse.Namespace(**{**vars(args), "preload": False}))
    with dask.config.set(bed_limits(n)):
        return {"master": master, "load_before": os.getloadavg()[0],
                **reported(scale_cold.cold, n, master, conf, cluster_options(args), args.cold_rounds, note),
                "load_after": os.getloadavg()[0]}  # fmt: skip


def _one_size(n: int, args, note) -> dict:
    master, executors = bed(n, args.executor_memory)
    spark = measure.new_spark(master, **spark_conf(args))
    options = cluster_options(args)
    R: dict = {"n": n, "master": master, "executors": executors, "load_before": os.getloadavg()[0]}
    try:
        if "startup" in args.parts:
            R["startup"] = reported(startup_part, spark, n, args.reps, options, note, n <= args.naive_max)
        got = {}
        if {"idle", "drain", "handoff"} & set(args.parts):  # one cluster for these parts
            got = reported(idle_and_cluster, spark, n, args, options)
            if "error" in got:  # reported in the table; the application is stopped below
                R.update({part: got for part in {"idle", "drain", "handoff"} & set(args.parts)})
        if "cluster" in got:
            idle, cluster = got["idle"], got["cluster"]
            try:
                R["idle"] = idle
                note(f"N={n} idle: {json.dumps(idle['with'])}; without a cluster: {json.dumps(idle['without'])}; "
                     f"distributed's floor: {json.dumps(idle.get('floor'))}")  # fmt: skip
                if "drain" in args.parts and executors > 1:  # on the same cluster: a worker per GPU
                    R["drain"] = reported(drain_part, spark, cluster, n)
                    note(f"N={n} drain: {R['drain']}")
                if "handoff" in args.parts and (args.handoff_at is None or n in args.handoff_at):
                    # with Spark's tasks beside the workers: a cluster in gpu_mode="shared"
                    got = reported(lambda: {"cluster": shared(cluster, spark, n, options)})
                    if "error" in got:
                        R["handoff"] = got
                    else:
                        cluster = got["cluster"]
                        R["handoff"] = reported(handoff_part, spark, cluster, args.handoff_gb)
                    note(f"N={n} hand-off: {R['handoff']}")
            finally:
                t0 = time.perf_counter()
                with contextlib.redirect_stdout(io.StringIO()):
                    cluster.close()
                R["close_after_parts"] = time.perf_counter() - t0
    finally:
        measure.stop_spark(spark)
    R["load_after"] = os.getloadavg()[0]
    return R


# ------------------------------------------------------------------ tables
def summarize(sizes: list[dict]) -> dict:
    """Per N, the flat figures the tables, the plot and the extrapolation use (medians)."""
    med = measure.median
    by_n: dict = {}
    for S in sizes:
        f = by_n[str(S["n"])] = {}
        s = S.get("startup")
        if s and "error" not in s:
            f.update(start=med(s["start"]), stage=med(s["stage"]), close=med(s["close"]),
                     close_floor=med(s["close_floor"]))  # fmt: skip
            f["vs_stage"] = f["start"] / f["stage"]
            if s["naive"]:  # not measured above --naive-max
                f["naive"] = med(s["naive"])
                f["vs_naive"] = f["start"] / f["naive"]
                f["naive_vs_stage"] = f["naive"] / f["stage"]
        idle = S.get("idle")
        if idle and "error" not in idle:
            for when in ("without", "with"):
                for k, v in idle[when].items():
                    if not isinstance(v, dict):
                        f[f"{k}_{when}"] = v
            if "py_cpu_pct" in idle.get("floor", {}):
                f["py_cpu_pct_floor"] = idle["floor"]["py_cpu_pct"]
            f["rss_growth_mb"] = idle["rss_growth_mb"]
            f["worker_uss_mb"] = idle["workers_memory"]["uss_mb"]
            f["executor_rss_mb"] = med(idle["executor_rss_mb"])
        if S.get("drain") and "error" not in S["drain"]:
            f["drained_s"], f["drain_full_s"] = S["drain"]["drained_s"], S["drain"]["full_s"]
        if S.get("handoff") and "error" not in S["handoff"]:
            h = S["handoff"]
            f["spark_only_s"] = h.get("to_dask:spark_only")
            f["to_dask_s"] = h.get("to_dask:spark_dask")
            f["to_spark_s"] = h.get("to_spark:spark_dask")
    return by_n


def render(R: dict) -> str:
    """The run's tables (Markdown), the machine and its load first."""
    m, by_n = R["machine"], R["by_n"]
    lines = [f"machine: {m['cpus']} CPUs, {m['memory_gib']} GiB, {m['platform']}, Python {m['python']}, pyspark "
             f"{m['pyspark']}, distributed {m['distributed']}; worker={R['worker']}, {R['reps']} round(s) per N, "
             f"medians; load average (1 min) before/after each N: "
             + ", ".join(f"N={S['n']} {S['load_before']:.1f}/{S['load_after']:.1f}" for S in R["sizes"]), ""]  # fmt: skip
    keys = ("start", "stage", "naive", "vs_stage", "vs_naive", "naive_vs_stage", "close", "close_floor")
    rows = [[n, R["masters"][n], *(fmt(f.get(k)) for k in keys)] for n, f in by_n.items() if "start" in f]
    lines += [] if not rows else table(["N", "bed", "start-up s", "empty stage s", "naive floor s", "÷ stage", "÷ naive",
                    "naive ÷ stage", "teardown s", "cancel stage s"], rows)  # fmt: skip
    if any("py_cpu_pct_with" in f for f in by_n.values()):
        rows = [[n, f"{fmt(f.get('py_cpu_pct_with'), 1)} ({fmt(f.get('py_cpu_pct_without'), 1)})",
                 fmt(f.get("py_cpu_pct_floor"), 1),
                 f"{fmt(f.get('jvm_cpu_pct_with'), 1)} ({fmt(f.get('jvm_cpu_pct_without'), 1)})",
                 f"{fmt(f.get('threads_with'), 0)} ({fmt(f.get('threads_without'), 0)})",
                 f"{fmt(f.get('py4j_per_s_with'), 1)} ({fmt(f.get('py4j_per_s_without'), 1)})",
                 fmt(f.get("rss_growth_mb"), 0), fmt(f.get("worker_uss_mb"), 0), fmt(f.get("executor_rss_mb"), 0)]
                for n, f in by_n.items() if "py_cpu_pct_with" in f]  # fmt: skip
        lines += ["", f"driver idle over {R['idle_seconds']:g} s with N workers running (in brackets: the same "
                  "application without a cluster; distributed's floor: a bare scheduler in the benchmark's "
                  "process with N bare workers, TLS, idle as long)", ""]  # fmt: skip
        lines += table(["N", "Python CPU %", "distributed's floor %", "JVM CPU %", "Python threads", "py4j calls/s", "driver RSS growth MB",
                        "worker process USS MB", "executor JVM RSS MB"], rows)  # fmt: skip
    rows = [[n, fmt(f.get("drained_s")), fmt(f.get("drain_full_s"))] for n, f in by_n.items() if "drained_s" in f]
    if rows:
        lines += ["", "one executor of 8 workers decommissioned (16 MiB on each), seconds from the event", ""]
        lines += table(["N", "drained", "N workers again"], rows)
    rows = [[n, fmt(f.get("spark_only_s")), fmt(f.get("to_dask_s")), fmt(f.get("to_spark_s")),
             fmt(f["to_dask_s"] / f["spark_only_s"] if f.get("to_dask_s") and f.get("spark_only_s") else None)]
            for n, f in by_n.items() if "to_dask_s" in f]  # fmt: skip
    if rows:
        lines += ["", f"hand-off of {R['handoff_gb']:g} GB over N workers, seconds", ""]
        lines += table(["N", "Spark alone (noop sink)", "to_dask", "to_spark", "to_dask ÷ Spark alone"], rows)
    if R.get("cold"):
        lines += ["", "cold starts: each way in fresh applications (medians; load average before/after each N: "
                  + ", ".join(f"N={n} {C['load_before']:.1f}/{C['load_after']:.1f}" for n, C in R["cold"].items())
                  + ")", ""]  # fmt: skip
        lines += scale_cold.render(R["cold"])
    if R.get("hosts"):
        lines += ["", render_hosts(R["hosts"])]
    for S in R["sizes"]:
        for part in ("startup", "idle", "drain", "handoff"):
            if "error" in (S.get(part) or {}):
                lines += ["", f"N={S['n']}: the {part} part failed: {S[part]['error']}"]
        floor = (S.get("idle") or {}).get("floor") or {}
        if "error" in floor:
            lines += ["", f"N={S['n']}: distributed's idle floor failed: {floor['error']}"]
    keys = [k for k in ("start", "stage", "naive", "close", "py_cpu_pct_with", "py4j_per_s_with", "threads_with",
                        "rss_growth_mb", "drain_full_s", "to_dask_s") if any(k in f for f in by_n.values())]  # fmt: skip
    rows = [[k, fmt(growth(by_n, k)), fmt(extrapolate(by_n, k))] for k in keys]
    if not rows:
        return "\n".join(lines)
    lines += ["", "growth with N (exponent k of value ~ N^k, smallest to largest N) and the value at N = 256 "
              "along the slope of the two largest sizes", ""]  # fmt: skip
    lines += table(["measure", "k", "at N = 256"], rows)
    return "\n".join(lines)


def render_hosts(H: dict) -> str:
    """The lost-host table (and why a bed failed, if one did)."""
    rows = []
    for key, e in H["runs"].items():
        w = key.split()[0]  # "8 isolated"; runs before the two modes: "8" (one barrier stage)
        mode = "one barrier stage" if e.get("barrier", True) else "a Spark job per worker"
        after = e["dask_back_s"] - e["spark_back_s"] if e.get("dask_back_s") and e.get("spark_back_s") else None
        rows.append([w, mode, str(e["workers"]), fmt(e.get("replace_s")), fmt(e.get("spark_back_s")),
                     fmt(e.get("dask_back_s")), fmt(after), fmt(e.get("start_s")),
                     fmt(after / e["start_s"] if after and e.get("start_s") else None)])  # fmt: skip
    lines = [f"a worker host lost (every process killed) and a fresh one started in its place; {H['cores']} cores "
             "and as many stand-in GPUs per host, a Dask worker per GPU; seconds from the kill", ""]  # fmt: skip
    lines += table(["worker hosts", "workers run as", "Dask workers", "new host up", "Spark's executors back", "Dask cluster full again",
                    "Dask after Spark", "warm start-up of as many", "after Spark ÷ start-up"], rows)  # fmt: skip
    if H.get("error"):
        lines += ["", f"the lost-host part failed: {H['error']}"]
    return "\n".join(lines)


# ------------------------------------------------------------------ the run
def arguments(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks scale", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=parse_sizes, default=list(SIZES), help="N, comma-separated (2,4,8,16,32,64)")
    ap.add_argument("--parts", type=parse_parts, default=list(PARTS), help=f"of {','.join(PARTS)}")
    ap.add_argument("--reps", type=int, default=2, help="start-up rounds per N")
    ap.add_argument("--worker", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--executor-memory", type=int, default=2048, help="MiB per executor (local-cluster's M)")
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--handoff-gb", type=float, default=1.0)
    ap.add_argument(
        "--naive-max", type=int, default=64, help="the naive floor only up to this N (its cost: N x 2 interpreters)"
    )
    ap.add_argument("--handoff-at", type=parse_sizes, default=None, help="the sizes with a hand-off (default: all)")
    ap.add_argument("--hosts", type=parse_sizes, default=[2, 8], help="worker hosts of the lost-host part")
    ap.add_argument("--preload", action="store_true", help="every part but cold: the preloading Python daemon")
    ap.add_argument("--cold-rounds", type=int, default=1, help="rounds of the cold part (each: 4 applications)")
    ap.add_argument("--trees", default=None, help="commits (and . for the working tree): warm start on hosts:2x4")
    ap.add_argument("--json", default=os.path.join(RESULTS, "scale.json"))
    ap.add_argument("--plot", metavar="JSON", default=None, help="only redraw the plot of this run's JSON")
    ap.add_argument("--plot-dir", default=None, help="where scale.png goes (default: next to --json)")
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    args = arguments(argv)
    if args.plot:
        with open(args.plot) as f:
            R = json.load(f)
        print(f"wrote {plot(R, args.plot_dir or os.path.dirname(os.path.abspath(args.plot)), args.plot)}")
        return R
    if args.trees:
        return scale_trees.main(args)
    t_all = time.perf_counter()

    def note(what):
        print(f"scale: {what} ({time.perf_counter() - t_all:.0f} s, load {os.getloadavg()[0]:.1f})", file=sys.stderr)

    import logging

    logging.getLogger("distributed").setLevel(logging.ERROR)
    measure.ship_by_value()
    Py4jCounter.install()
    R: dict = {"machine": machine_facts(load_before=list(os.getloadavg())), "worker": args.worker, "reps": args.reps,
               "idle_seconds": args.idle_seconds, "handoff_gb": args.handoff_gb, "parts": args.parts,
               "sizes": [], "masters": {}}  # fmt: skip
    for n in args.sizes if set(args.parts) - {"hosts", "cold"} else []:
        R["sizes"].append(one_size(n, args, note))
        R["masters"][str(n)] = R["sizes"][-1]["master"]
        note(f"N={n} done")
    for n in args.sizes if "cold" in args.parts else []:
        R.setdefault("cold", {})[str(n)] = cold_size(n, args, note)
    if "hosts" in args.parts:
        R["hosts"] = scale_hosts.lost_host(args.hosts, note)
    R["machine"]["load_after"] = list(os.getloadavg())
    R["by_n"] = summarize(R["sizes"])
    R["total_seconds"] = time.perf_counter() - t_all
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(R, f, indent=1, default=str)
    print(render(R))
    try:
        print(f"plot: {plot(R, args.plot_dir or os.path.dirname(os.path.abspath(args.json)), args.json)}")
    except ImportError as e:  # matplotlib: pip install 'spark-dask[bench]'
        print(f"plot: not drawn ({e})")
    return R


def plot(R: dict, directory: str, json_path: str) -> str:
    """The run's plot, named after its JSON (``scale.json`` -> ``scale.png``), in ``directory``."""
    from benchmarks.plots import scale

    name = os.path.splitext(os.path.basename(json_path))[0] + ".png"
    return scale(R, os.path.join(directory, name))


if __name__ == "__main__":
    main()
