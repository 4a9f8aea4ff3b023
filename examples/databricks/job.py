"""The job of the bundle in this directory: Spark SQL prepares, Dask (RAPIDS on GPUs) computes.

Run by ``spark-dask run`` (the bundle's Python wheel task), which starts the Dask cluster
around it; a plain ``Client()`` connects to it. On GPU workers (dask-cuda) the data is
read with dask-cudf; on CPU workers with dask.dataframe.

    spark-dask run [--n-workers N] job.py [--rows 1000000] [--path DIR]

``--path``: a directory both Spark and the Dask workers can read and write (on
Databricks a Unity Catalog volume, ``/Volumes/<catalog>/<schema>/<volume>/...``);
default: a temporary directory (local runs).
"""

import argparse
import os
import sys
import tempfile

import dask.dataframe as dd
from distributed import Client
from pyspark.sql import SparkSession


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--path", default=None)
    args = parser.parse_args()
    scratch = None if args.path else tempfile.TemporaryDirectory(prefix="spark-dask-job-")
    path = os.path.join(args.path or scratch.name, "events")

    spark = SparkSession.builder.getOrCreate()  # the job's session (spark-dask run made or found it)
    spark.range(args.rows).selectExpr("id", "id % 10 AS k", "CAST(id AS DOUBLE) AS x") \
        .write.mode("overwrite").parquet(path)  # fmt: skip
    print(f"spark wrote {args.rows} rows to {path}")

    client = Client()  # spark-dask run: the cluster's address and credentials are in dask.config
    gpu = any(w.get("spark", {}).get("gpu") is not None for w in client.scheduler_info()["workers"].values())
    if gpu:
        import dask_cudf

        ddf = dask_cudf.read_parquet(path)
    else:
        ddf = dd.read_parquet(path)
    sums = ddf.groupby("k").x.sum().compute().sort_index()
    if gpu:
        sums = sums.to_pandas()
    want = {k: float(sum(range(k, args.rows, 10))) for k in range(10)}
    ok = all(abs(sums[k] - want[k]) < 1e-6 * max(want[k], 1) for k in range(10))
    print(
        f"dask ({'GPU' if gpu else 'CPU'} workers: {len(client.scheduler_info()['workers'])}) "
        f"sum of x per k: {'correct' if ok else 'WRONG'}"
    )
    client.close()
    if scratch is not None:
        scratch.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
