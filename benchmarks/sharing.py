"""Clusters shared by name and idle shutdown, timed on a local-cluster master.

    .venv/bin/python -m benchmarks.sharing [--runs 5] [--master "local-cluster[2,1,1024]"]

One cluster named ``bench-shared`` with two workers; then ``runs`` times, each in a new
Python process of its own (as another notebook on the driver would be):

* ``from_name``: ``SparkCluster.from_name("bench-shared")`` until the handle is
  connected (the entry read, the scheduler reached with the cluster's credentials);
* ``first result``: then ``get_client()`` and one ``submit(...).result()``.

Then ``runs`` clusters with ``idle_timeout`` (4 s): from their last activity (the
client's close) until ``status`` is closed (``idle -> closed``, less the timeout) and
until a one-task Spark job submitted then has finished (``idle -> Spark job``: the slots
serve Spark again, the job's own run included). Prints the median (and min-max); a JSON
line at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.measure import new_spark

IDLE = 4.0
JOINER = """
import json, sys, time
t0 = time.monotonic()
import spark_dask
t_import = time.monotonic()
handle = spark_dask.SparkCluster.from_name(sys.argv[1])
t_handle = time.monotonic()
client = handle.get_client()
assert client.submit(sum, [1, 2]).result(timeout=60) == 3
t_result = time.monotonic()
client.close()
handle.disconnect()
print(json.dumps({"from_name": t_handle - t_import, "first result": t_result - t_import}))
"""


def _span(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.0f} ms  ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def joins(spark, runs: int) -> dict[str, list[float]]:
    """``runs`` processes join the named cluster; their timings."""
    import spark_dask

    out: dict[str, list[float]] = {"from_name": [], "first result": []}
    with spark_dask.SparkCluster(spark, name="bench-shared", n_workers=2, progress=False):
        for _ in range(runs):
            done = subprocess.run([sys.executable, "-c", JOINER, "bench-shared"], capture_output=True, text=True,
                                  timeout=120, check=True)  # fmt: skip
            for key, value in json.loads(done.stdout.strip().splitlines()[-1]).items():
                out[key].append(value)
    return out


def idle_closes(spark, runs: int) -> dict[str, list[float]]:
    """``runs`` clusters closed by ``idle_timeout``: seconds past the timeout until
    closed and until a one-task Spark job ran."""
    from distributed import Client

    import spark_dask

    out: dict[str, list[float]] = {"idle -> closed": [], "idle -> Spark job": []}
    for _ in range(runs):
        cluster = spark_dask.SparkCluster(spark, n_workers=2, idle_timeout=IDLE, progress=False, quiet=True)
        try:
            with Client(cluster) as client:
                client.submit(sum, [1]).result(timeout=60)
            t_idle = time.monotonic()  # the client left: the last activity
            while cluster.status.name != "closed":
                if time.monotonic() - t_idle > 120:
                    raise TimeoutError("the idle cluster did not close")
                time.sleep(0.01)
            out["idle -> closed"].append(time.monotonic() - t_idle - IDLE)
            assert spark.sparkContext.parallelize(range(4), 1).count() == 4
            out["idle -> Spark job"].append(time.monotonic() - t_idle - IDLE)
        finally:
            cluster.close()
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--master", default="local-cluster[2,1,1024]")
    args = parser.parse_args(argv)
    spark = new_spark(args.master)  # benchmarks.run's session (PYSPARK_PYTHON, no UI, executors up)
    try:
        results = {**joins(spark, args.runs), **idle_closes(spark, args.runs)}
    finally:
        spark.stop()
    print(f"\nshared clusters and idle shutdown, {args.master}, {args.runs} runs, load {os.getloadavg()[0]:.1f}")
    print(f"{'':44} {'median':>10}  (min-max)")
    for key, values in results.items():
        label = key if "idle" not in key else f"{key} (past the {IDLE:g} s timeout)"
        print(f"{label:44} {_span(values)}")
    print(json.dumps({"master": args.master, "runs": args.runs, **results}))


if __name__ == "__main__":
    main()
