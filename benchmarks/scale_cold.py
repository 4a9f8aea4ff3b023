"""Cold starts, with and without the preloading Python daemon (``--parts cold``).

Every other part of ``python -m benchmarks scale`` measures warm starts: the executors'
Python workers have run a cluster's tasks before. A user's first ``start()`` in an
application is cold: each gang task runs in a new Python worker, which imports
distributed. :mod:`spark_dask.spark.daemon`, named in ``spark.python.daemon.module``,
imports it once per executor, in the daemon that forks the Python workers.

Per N, first one unmeasured cluster of one worker in an application of its own (the
driver's own first imports, its scheduler's and dashboard's, are no cold start of the
executors and would count against whichever way ran first); then for each way
(``pyspark.daemon``, Spark's own, and ``spark_dask.spark.daemon``), alternating, each in
fresh applications of the scale bed:

- *first start*: the application's first ``start()`` of N workers, nothing run before
  (the Python daemon itself starts in it), then an empty N-task barrier stage, then a
  warm start (the cold start's Python workers reused);
- *after a job*: a plain Python job of N tasks first (what the preload costs Spark's
  own first job: the daemon's start and N new Python workers), the same job again
  (warm), the daemon's memory and the Python workers', then the cluster's first start
  (Python workers that exist but have not imported distributed: a notebook that read
  its data with Spark first).
"""

from __future__ import annotations

import contextlib
import io

import psutil

from benchmarks import measure
from benchmarks.measure import fmt, table

WAYS = {"pyspark.daemon": {}, "spark_dask.spark.daemon": {"spark.python.daemon.module": "spark_dask.spark.daemon"}}


def daemons(app_id: str) -> list[psutil.Process]:
    """The Python daemons of this application's executors: children of its executor JVMs
    (the Python workers, forked from a daemon, show the daemon's command line too)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        module = cmd[cmd.index("-m") + 1] if "-m" in cmd[:-1] else ""
        if not module.endswith("daemon"):
            continue
        with contextlib.suppress(psutil.Error):
            parent = p.parent()
            if parent is not None and parent.name() == "java" and app_id in " ".join(parent.cmdline()):
                out.append(p)
    return out


def memory(app_id: str) -> dict:
    """RSS and USS (MiB) of the daemons and of their Python workers (medians)."""
    mib = 2**20
    d_rss, d_uss, w_uss = [], [], []
    for d in daemons(app_id):
        with contextlib.suppress(psutil.Error):
            info = d.memory_full_info()
            d_rss.append(info.rss / mib)
            d_uss.append(info.uss / mib)
            w_uss += [c.memory_full_info().uss / mib for c in d.children()]
    return {"daemons": len(d_rss), "daemon_rss_mb": measure.median(d_rss), "daemon_uss_mb": measure.median(d_uss),
            "python_workers": len(w_uss), "python_worker_uss_mb": measure.median(w_uss)}  # fmt: skip


def first_start(n: int, master: str, conf: dict, options: dict) -> dict:
    """A fresh application's first start, an empty stage, a warm start."""
    spark = measure.new_spark(master, **conf)
    try:
        first = measure.ours(spark, n, options)
        measure.wait_idle(spark)
        stage = measure.stage_floor(spark, n)
        measure.wait_idle(spark)
        warm = measure.ours(spark, n, options)
        return {"first_start": first["start"], "stage": stage, "warm_start": warm["start"],
                "first_close": first["close"], "warm_close": warm["close"]}  # fmt: skip
    finally:
        measure.stop_spark(spark)


def after_job(n: int, master: str, conf: dict, options: dict) -> dict:
    """A fresh application's first plain job, again, memory, then the first start."""
    spark = measure.new_spark(master, **conf)
    try:
        out = {"first_job": measure.plain_job(spark, n), "job_again": measure.plain_job(spark, n)}
        out.update(memory(spark.sparkContext.applicationId))
        measure.wait_idle(spark)
        out["start_after_job"] = measure.ours(spark, n, options)["start"]
        return out
    finally:
        measure.stop_spark(spark)


def warm_driver(master: str, conf: dict, options: dict) -> None:
    """One cluster of one worker in an application of its own, unmeasured: the driver's
    own first imports (the scheduler, its dashboard) are not a cold start of the
    executors, and would count against whichever way ran first."""
    spark = measure.new_spark(master, **conf)
    try:
        measure.ours(spark, 1, options)
    finally:
        measure.stop_spark(spark)


def cold(n: int, master: str, conf: dict, options: dict, rounds: int, note) -> dict:
    """Both ways, ``rounds`` times each, alternating; lists per figure and way."""
    out: dict = {way: {} for way in WAYS}
    with contextlib.redirect_stdout(io.StringIO()):
        warm_driver(master, conf, options)
    for r in range(rounds):
        for way, extra in WAYS.items():
            with contextlib.redirect_stdout(io.StringIO()):
                got = {**first_start(n, master, {**conf, **extra}, options),
                       **after_job(n, master, {**conf, **extra}, options)}  # fmt: skip
            for k, v in got.items():
                out[way].setdefault(k, []).append(v)
            note(f"N={n} cold, {way}, round {r + 1}: first start {got['first_start']:.2f} s, warm "
                 f"{got['warm_start']:.2f} s, after a job {got['start_after_job']:.2f} s, first job "
                 f"{got['first_job']:.2f} s")  # fmt: skip
    return out


def render(cold_by_n: dict) -> list[str]:
    """The cold part's table (Markdown lines): medians per N and way."""
    med = measure.median
    rows = []
    for n, C in cold_by_n.items():
        if "error" in C:
            rows.append([n, "-", C["error"]] + [""] * 8)
            continue
        for way in WAYS:
            f = C[way]
            rows.append([n, way] + [fmt(med(f[k])) for k in (
                "first_start", "start_after_job", "warm_start", "stage", "first_job", "job_again")] +
                [fmt(med(f[k]), 0) for k in ("daemon_rss_mb", "daemon_uss_mb", "python_worker_uss_mb")])  # fmt: skip
    head = ["N", "Python daemon", "first start s", "first start after a job s", "warm start s", "empty stage s",
            "first plain job s", "plain job again s", "daemon RSS MB", "daemon USS MB", "Python worker USS MB"]  # fmt: skip
    return table(head, rows)
