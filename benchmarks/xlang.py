"""Tasks per second through a Node.js worker against a Python worker, on a spark-dask
cluster of a local-cluster master.

    .venv/bin/python -m benchmarks.xlang [--tasks 1000] [--runs 3] [--master "local-cluster[1,1,1024]"]

One cluster with one Python worker (in its Spark task, one thread) and one Node.js
worker (``examples/workers/node/worker.mjs --nthreads 1``, on the driver, joined from
``write_connection()``). Each run times ``tasks`` independent tiny tasks (adding two
numbers) from submission until every result is back in the client:

* ``python, client.map``: ordinary Dask tasks (``operator.add``), the baseline;
* ``python, xlang graph``: the same as a cross-language graph of ``python`` tasks
  (``xlang.submit_graph``), on the Python worker;
* ``node, xlang graph``: a graph of ``node`` ``add`` tasks from the Python client, on
  the Node.js worker;
* ``node client -> node``: that graph sent by ``examples/clients/node/submit.mjs``
  (``xlang_submit`` then ``xlang_gather``), the whole process timed (Node.js start
  included).

Prints the median tasks per second (and min-max) and each row's ratio to the baseline,
measured in the same run; a JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from benchmarks.measure import new_spark

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "examples", "workers", "node", "worker.mjs")
SUBMIT = os.path.join(ROOT, "examples", "clients", "node", "submit.mjs")


def timed(run) -> float:
    t0 = time.monotonic()
    run()
    return time.monotonic() - t0


def rows(client, directory: str, n: int, run_id: int) -> dict[str, float]:
    """Seconds per row for ``n`` tasks (fresh keys each run)."""
    from spark_dask import xlang

    def plain():
        client.gather(client.map(operator.add, range(n), [run_id] * n, pure=False))

    def graph(language, function):
        keys = {f"{language}-{run_id}-{i}": [language, function, i, run_id] for i in range(n)}
        return lambda: client.gather(list(xlang.submit_graph(client, keys).values()))

    node_graph = {f"c-{run_id}-{i}": ["node", "add", i, run_id] for i in range(n)}

    def node_client():
        subprocess.run([shutil.which("node"), SUBMIT, directory, json.dumps(node_graph)], check=True,
                       capture_output=True, timeout=600)  # fmt: skip

    return {
        "python, client.map": timed(plain),
        "python, xlang graph": timed(graph("python", "operator.add")),
        "node, xlang graph": timed(graph("node", "add")),
        "node client -> node": timed(node_client),
    }


def measure(spark, n: int, runs: int) -> dict[str, list[float]]:
    import spark_dask

    out: dict[str, list[float]] = {}
    directory = tempfile.mkdtemp(prefix="bench-xlang-")
    with spark_dask.SparkCluster(spark, n_workers=1, threads_per_worker=1, progress=False) as cluster:
        cluster.write_connection(directory)
        with open(os.path.join(directory, "node.log"), "wb") as log:
            node = subprocess.Popen([shutil.which("node"), WORKER, directory, "--nthreads", "1", "--name", "node-bench"],
                                    stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            client = cluster.get_client()
            deadline = time.monotonic() + 60
            while client.sync(client.scheduler.xlang_workers).get("node") != 1:
                if time.monotonic() > deadline or node.poll() is not None:
                    raise RuntimeError("the Node.js worker did not join; see " + os.path.join(directory, "node.log"))
                time.sleep(0.1)
            rows(client, directory, 20, 0)  # warm-up: imports, connections
            for run_id in range(1, runs + 1):
                for key, seconds in rows(client, directory, n, run_id).items():
                    out.setdefault(key, []).append(n / seconds)
            client.close()
        finally:
            node.kill()
            node.wait(10)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local-cluster[1,1,1024]")
    args = parser.parse_args(argv)
    spark = new_spark(args.master)  # benchmarks.run's session (PYSPARK_PYTHON, no UI, executors up)
    try:
        results = measure(spark, args.tasks, args.runs)
    finally:
        spark.stop()
    base = statistics.median(results["python, client.map"])
    print(f"\n{args.tasks} tiny tasks, {args.master}, {args.runs} runs, load {os.getloadavg()[0]:.1f}")
    print(f"{'':28} {'tasks/s median':>15}  (min-max)   vs client.map")
    for key, values in results.items():
        median = statistics.median(values)
        print(f"{key:28} {median:15.0f}  ({min(values):.0f}-{max(values):.0f})   {median / base:.2f}x")
    print(json.dumps({"master": args.master, "tasks": args.tasks, "runs": args.runs, **results}))


if __name__ == "__main__":
    main()
