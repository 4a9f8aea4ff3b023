"""Quick start: a Dask cluster inside a local Spark application, used and torn down.

    python examples/quickstart.py [--master local-cluster[2,1,1024]]

On Databricks, skip the SparkSession set-up: ``spark`` is already there.
"""

import argparse
import os
import sys
import time

# Executors start Python workers with PYSPARK_PYTHON: use this interpreter, which has
# dask and distributed installed (on a real cluster, install them on every node).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

import spark_dask  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local-cluster[2,1,1024]")
    args = parser.parse_args()

    spark = (
        SparkSession.builder.master(args.master)
        .appName("spark-dask quickstart")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        t0 = time.perf_counter()
        with spark_dask.start(spark) as client:
            print(f"cluster ready in {time.perf_counter() - t0:.1f}s: {client.cluster}")
            print(f"dashboard: {client.dashboard_link}")
            for addr, w in client.scheduler_info()["workers"].items():
                print(f"  {w['name']:>10} on Spark executor {w['spark']['executor_id']}: "
                      f"{w['nthreads']} threads, {w['memory_limit'] / 2**30:.1f} GiB")

            pdf = pd.DataFrame({"k": np.arange(100_000) % 10, "x": np.arange(100_000, dtype=float)})
            ddf = dd.from_pandas(pdf, npartitions=8)
            means = ddf.groupby("k").x.mean().compute().sort_index()
            assert np.allclose(means.values, pdf.groupby("k").x.mean().sort_index().values)
            print("groupby mean per k:", means.round(1).tolist())

            x = da.random.default_rng(0).random((4000, 1000), chunks=(500, 1000))
            print("array mean:", round(float(x.mean().compute()), 4))
            t1 = time.perf_counter()
        print(f"cluster closed in {time.perf_counter() - t1:.2f}s; Spark jobs still active: "
              f"{list(spark.sparkContext.statusTracker().getActiveJobsIds())}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
