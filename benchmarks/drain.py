"""A decommissioned executor drained, against the same executor killed, on a
local-cluster master (``spark.decommission.enabled``).

    .venv/bin/python -m benchmarks.drain [--sizes 128MiB 512MiB] [--master "local-cluster[2,2,2048]"]

For each size: a cluster of two Dask workers (one barrier stage, a task per executor),
``size`` of results scattered to each worker (16 MiB each; scattered, so that nothing
lost can be recomputed: a result is kept or it is gone). Then the executor of the first
worker is either

* **drained**: decommissioned from the driver (``decommissionExecutor``, where a standalone
  Master's worker decommission and SIGPWR to the executor end), or
* **killed**: its JVM SIGKILLed (a reclaim without notice, or without decommissioning).

Measured: seconds from the event until the drain ended (``drained``: retired, data
moved) or until the cluster noticed (``noticed``: a worker left), the bytes Dask moved,
the results kept of both workers' (``kept``), whether the other worker's process ran on,
relaunches spent, and the seconds until both workers ran again (``full``: Spark's master
starts a new executor). Prints a table; a JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time
import warnings

from dask.utils import format_bytes, parse_bytes

from tests.support.parts import parts_of
from tests.support.processes import driver_url, executor_jvm
from tests.support.spark import decommission_executor

BLOCK = 16 << 20


def _wait(predicate, timeout: float = 120.0, interval: float = 0.02) -> float | None:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            return None
        time.sleep(interval)
    return time.monotonic() - t0


def one(spark, size: int, way: str) -> dict:
    """One cluster, ``size`` bytes on each worker, its first worker's executor drained or killed."""
    from distributed import Client

    from spark_dask import SparkCluster

    executors = spark.sparkContext._jsc.sc().getExecutorIds().size()
    _wait(lambda: spark.sparkContext._jsc.sc().getExecutorIds().size() >= executors, 90)
    cluster = SparkCluster(spark, n_workers=2, memory_limit="4GiB", progress=False, quiet=True)
    client = Client(cluster)
    try:
        victim, survivor = sorted(client.ncores())
        data = {
            a: client.scatter([b"%d-%d:" % (w, i) + bytes(BLOCK) for i in range(size // BLOCK)], workers=[a])
            for w, a in enumerate((victim, survivor))
        }
        executor = client.scheduler_info()["workers"][victim]["spark"]["executor_id"]
        pid = client.run(os.getpid, workers=[survivor])[survivor]
        if way == "drained":
            decommission_executor(spark, executor, "benchmark")
            settled = _wait(lambda: parts_of(cluster).drains, 60)
        else:
            os.kill(executor_jvm(driver_url(spark), executor), signal.SIGKILL)
            settled = _wait(lambda: victim not in cluster.scheduler.workers, 60)
        full = _wait(lambda: len(cluster.scheduler.workers) == 2 and victim not in cluster.scheduler.workers, 120)
        tasks = cluster.scheduler.tasks
        kept = sum(1 for fs in data.values() for f in fs if f.key in tasks and tasks[f.key].state == "memory")
        alive = client.run(os.getpid).get(survivor) == pid
        drains = parts_of(cluster).drains
        return {
            "size": size,
            "way": way,
            "settled_s": settled,
            "moved": drains[0]["bytes"] if drains else 0,
            "drain_s": drains[0]["seconds"] if drains else None,
            "kept": kept,
            "of": sum(len(fs) for fs in data.values()),
            "other_ran_on": alive,
            "relaunches": parts_of(cluster).relaunches,
            "full_s": None if full is None else (settled or 0) + full,
        }
    finally:
        client.close()
        cluster.close()


def render(rows: list[dict]) -> str:
    head = "| data per worker | executor | event to settled | drain | moved | results kept | other worker | relaunches | back to 2 workers |"
    out = [head, "|" + "---|" * 9]
    for r in rows:
        settled = "–" if r["settled_s"] is None else f"{r['settled_s']:.2f} s"
        drain = "–" if r["drain_s"] is None else f"{r['drain_s']:.2f} s"
        full = "not within 120 s" if r["full_s"] is None else f"{r['full_s']:.1f} s"
        out.append(
            f"| {format_bytes(r['size'])} | {r['way']} | {settled} | {drain} | {format_bytes(r['moved'])} | "
            f"{r['kept']} of {r['of']} | {'ran on' if r['other_ran_on'] else 'lost'} | {r['relaunches']} | {full} |"
        )
    return "\n".join(out)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["128MiB", "512MiB"])
    parser.add_argument("--master", default="local-cluster[2,2,2048]")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warnings.simplefilter("ignore")
    from benchmarks.measure import new_spark, stop_spark

    spark = new_spark(args.master, **{"spark.decommission.enabled": "true"})
    rows = []
    try:
        for size in (parse_bytes(s) for s in args.sizes):
            for way in ("drained", "killed"):
                rows.append(one(spark, size, way))
    finally:
        stop_spark(spark)
    print(f"\n{args.master}, {platform.machine()}, {os.cpu_count()} CPUs\n")
    print(render(rows))
    print(json.dumps({"master": args.master, "rows": rows}))


if __name__ == "__main__":
    main()
