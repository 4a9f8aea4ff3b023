"""Read a Delta Lake table with Dask (``dask-deltatable``) on a spark-dask cluster.

On Databricks the table is written by Spark (``df.write.format("delta").save(path)``
or a Unity Catalog table) and read by the Dask workers from the same storage. Here,
without Databricks' Delta jars, it is written with the ``deltalake`` package, which
produces the same Delta log format.

    python examples/delta_lake.py [--master local-cluster[2,1,1024]] [--path DIR]

On Databricks, point ``--path`` at the table's location that the workers can read: a
volume path (``/Volumes/<catalog>/<schema>/<volume>/table``) or cloud storage
(``s3://...``, ``abfss://...``, ``gs://...``) with ``storage_options`` for credentials.
"""

import argparse
import os
import sys
import tempfile

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local runs: executors' Python

import dask_deltatable  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

import spark_dask  # noqa: E402


def write_table(path: str) -> pd.DataFrame:
    """Two commits: version 0 (1000 rows), version 1 (500 more rows)."""
    first = pd.DataFrame({"k": np.arange(1000) % 4, "x": np.arange(1000, dtype="float64")})
    second = pd.DataFrame({"k": np.arange(500) % 4, "x": np.ones(500)})
    write_deltalake(path, first, partition_by=["k"])
    write_deltalake(path, second, mode="append", partition_by=["k"])
    return pd.concat([first, second], ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local-cluster[2,1,1024]")
    parser.add_argument("--path", default=None, help="Delta table location (written if absent)")
    args = parser.parse_args()
    # without --path: a scratch directory, removed at the end
    scratch = None if args.path else tempfile.TemporaryDirectory(prefix="spark-dask-delta-")
    path = args.path or os.path.join(scratch.name, "events")
    if not os.path.exists(os.path.join(path, "_delta_log")):
        expected = write_table(path)
    else:
        expected = DeltaTable(path).to_pandas()
    print(f"delta table {path}: version {DeltaTable(path).version()}")

    spark = SparkSession.getActiveSession() or (
        SparkSession.builder.master(args.master)
        .appName("spark-dask delta lake")
        # Spark's console progress bar (spark.ui.showConsoleProgress) would show the Dask
        # cluster's barrier stage, which runs as long as the cluster, as "[Stage 0:> (0 + 2) / 2]"
        # in front of every later line: Spark cannot leave one stage out of it, so it is off.
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with spark_dask.start(spark) as client:
            ddf = dask_deltatable.read_deltalake(path)
            sums = ddf.groupby("k").x.sum().compute().sort_index()
            want = expected.groupby("k").x.sum().sort_index()
            assert np.allclose(sums.values, want.values), (sums, want)
            print(f"latest version: {len(ddf)} rows, sum per k {sums.round(1).tolist()}")
            v0 = dask_deltatable.read_deltalake(path, version=0)
            print(f"version 0 (time travel): {len(v0)} rows")
            assert len(v0) == 1000
            print(f"read by {len(client.scheduler_info()['workers'])} Dask workers")
    finally:
        if not os.environ.get("DATABRICKS_RUNTIME_VERSION"):
            spark.stop()
        if scratch is not None:
            scratch.cleanup()


if __name__ == "__main__":
    main()
