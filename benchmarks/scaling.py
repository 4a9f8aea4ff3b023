"""Time to scale a SparkCluster up and down on local-cluster masters.

    .venv/bin/python -m benchmarks.scaling [--runs 5] [--masters "local-cluster[2,1,1024]" ...]

For each master: a cluster of one worker, then ``runs`` rounds of

* up: ``scale(2)`` until the new worker is running in the scheduler (a new gang: one
  Spark barrier task, its nanny and worker process);
* down: ``scale(1)`` until the retired worker has left the scheduler (``left``), until
  its Spark task has returned its slot (``slot``: the gang's Spark job ended), and until
  a one-task Spark job submitted then has finished (``spark job``: the slot serves
  Spark again, the job's own run included).

Then ``close()`` of the cluster with its 2 workers in 2 gangs, and of clusters started with
2 workers in one gang (``runs`` times). Prints the median (and min-max) of each and the
machine's load; a JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings

from tests.support.parts import parts_of


def _wait(predicate, timeout: float = 120.0, interval: float = 0.01) -> float:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("timed out")
        time.sleep(interval)
    return time.monotonic() - t0


def measure(master: str, runs: int) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from benchmarks.measure import new_spark, stop_spark
    from spark_dask import SparkCluster

    spark = new_spark(master)
    out: dict = {"up": [], "left": [], "slot": [], "spark job": []}
    try:
        warnings.simplefilter("ignore")
        cluster = SparkCluster(spark, n_workers=1, progress=False)
        sc = spark.sparkContext
        sc.parallelize(range(2), 1).count()  # a Python worker for the probe jobs, warm
        try:

            def running(n):
                return sum(ws.status.name == "running" for ws in cluster.scheduler.workers.values()) == n

            for _ in range(runs):
                t0 = time.monotonic()
                cluster.scale(2)
                _wait(lambda: running(2))
                out["up"].append(time.monotonic() - t0)
                gang = parts_of(cluster).pools["default"].live()
                t0 = time.monotonic()
                cluster.scale(1)
                _wait(lambda: len(cluster.scheduler.workers) == 1)
                out["left"].append(time.monotonic() - t0)
                _wait(lambda: sum(not g.done for g in gang) == 1)  # noqa: B023
                out["slot"].append(time.monotonic() - t0)
                sc.parallelize(range(2), 1).count()
                out["spark job"].append(time.monotonic() - t0)
            cluster.scale(2)
            _wait(lambda: running(2))
            t0 = time.monotonic()
        finally:
            cluster.close()
        out["close (2 gangs)"] = [time.monotonic() - t0]
        out["close (1 gang of 2)"] = []
        for _ in range(runs):
            cluster = SparkCluster(spark, n_workers=2, progress=False)
            t0 = time.monotonic()
            cluster.close()
            out["close (1 gang of 2)"].append(time.monotonic() - t0)
    finally:
        stop_spark(spark)
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--masters", nargs="*", default=["local-cluster[2,1,1024]", "local-cluster[2,4,1024]"])
    args = parser.parse_args(argv)
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at start"}
    for master in args.masters:
        figures = measure(master, args.runs)
        result[master] = {k: round(statistics.median(v), 2) for k, v in figures.items()}
        print(f"{master} ({args.runs} runs; median, min-max in s):")
        for k, v in figures.items():
            print(f"  {k:>16}: {statistics.median(v):5.2f}  ({min(v):.2f}-{max(v):.2f})")
    result["load at end"] = round(os.getloadavg()[0], 1)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
