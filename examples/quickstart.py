"""Quick start: a Dask cluster inside a local Spark application, used and torn down.

    python examples/quickstart.py [--master local-cluster[2,2,1024]]

Two executors of two cores: the Dask cluster's one worker takes both cores of one
executor (its Spark task asks for ``cores // 2 + 1`` CPUs), the other executor stays
free for Spark jobs, such as the one that moves a Spark DataFrame to Dask (``to_dask``).

On Databricks, skip the SparkSession set-up: ``spark`` is already there.
"""

import argparse
import os
import sys
import time
import warnings

# Executors start Python workers with PYSPARK_PYTHON: use this interpreter, which has
# dask and distributed installed (on a real cluster, install them on every node).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
from pyspark.sql import SparkSession

import spark_dask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local-cluster[2,2,1024]")
    args = parser.parse_args()

    # pyspark 4.x warns once (a FutureWarning) that it "does not yet fully support pandas
    # >= 3.0.0" when the session starts; pandas is not used through Spark here, so that
    # one warning is off (pyspark itself requires pandas >= 2.2, with no upper bound)
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    spark = (
        SparkSession.builder.master(args.master)
        .appName("spark-dask quickstart")
        # Spark's console progress bar (spark.ui.showConsoleProgress) would show the Dask
        # cluster's barrier stage, which runs as long as the cluster, as "[Stage 0:> (0 + 1) / 1]"
        # in front of every later line: Spark cannot leave one stage out of it, so it is off.
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        t0 = time.perf_counter()
        # one worker: it holds one executor's cores, the other executor runs Spark jobs
        with spark_dask.start(spark, n_workers=1) as client:
            print(f"cluster ready in {time.perf_counter() - t0:.1f}s: {client.cluster}")
            print(f"dashboard: {client.dashboard_link}")
            for w in client.scheduler_info()["workers"].values():
                print(
                    f"  {w['name']:>10} on Spark executor {w['spark']['executor_id']}: "
                    f"{w['nthreads']} threads, {w['memory_limit'] / 2**30:.1f} GiB"
                )

            pdf = pd.DataFrame({"k": np.arange(100_000) % 10, "x": np.arange(100_000, dtype=float)})
            ddf = dd.from_pandas(pdf, npartitions=8)
            means = ddf.groupby("k").x.mean().compute().sort_index()
            assert np.allclose(means.values, pdf.groupby("k").x.mean().sort_index().values)
            print("groupby mean per k:", means.round(1).tolist())

            x = da.random.default_rng(0).random((4000, 1000), chunks=(500, 1000))
            print("array mean:", round(float(x.mean().compute()), 4))

            # a Spark DataFrame to Dask: a Spark job on the free executor writes Arrow
            # files that the Dask worker loads (nothing goes through the driver)
            sdf = spark.range(100_000).selectExpr("id % 10 AS k", "CAST(id AS DOUBLE) AS x")
            from_spark = spark_dask.to_dask(sdf)
            total = from_spark.x.sum().compute()
            assert total == sum(range(100_000))
            print(f"to_dask: {len(from_spark)} rows in {from_spark.npartitions} partitions, sum of x {total:.0f}")
            # ... and Spark still runs its own jobs next to the Dask cluster
            print("Spark count next to Dask:", spark.range(1000).filter("id % 2 = 0").count())
            t1 = time.perf_counter()
        print(
            f"cluster closed in {time.perf_counter() - t1:.2f}s; Spark jobs still active: "
            f"{list(spark.sparkContext.statusTracker().getActiveJobsIds())}"
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
