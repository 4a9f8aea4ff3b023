"""Both engines on one cluster: Spark prepares the data, Dask trains XGBoost on it.

1. Spark SQL / DataFrame builds a feature table and writes it as Parquet.
2. spark-dask starts Dask workers inside the same Spark application.
3. Dask reads the Parquet (dask-cudf on GPU workers, pandas otherwise) and trains a
   model with XGBoost's Dask interface (``xgboost.dask``), one XGBoost worker per
   Dask worker.

    python examples/spark_dask_xgboost.py [--master local-cluster[2,1,1024]] [--rows 200000]

On Databricks: ``spark`` exists; write to a Unity Catalog volume that both engines see,
e.g. ``--path /Volumes/<catalog>/<schema>/<volume>/features`` (Spark writes
``dbfs:``-less paths under ``/Volumes`` too). On GPU clusters install ``xgboost`` (not
``xgboost-cpu``) and ``spark-dask[cuda]``: the workers are dask-cuda workers, the data is
read with dask-cudf and XGBoost trains with ``device="cuda"``.
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local runs: executors' Python

import dask.dataframe as dd  # noqa: E402
import numpy as np  # noqa: E402
import xgboost.dask  # noqa: E402
import xgboost as xgb  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

import spark_dask  # noqa: E402


def prepare_with_spark(spark, path: str, rows: int) -> None:
    """Spark: a feature table from SQL, written as Parquet."""
    spark.range(rows).createOrReplaceTempView("ids")
    df = spark.sql(
        """
        SELECT id,
               rand(1) AS f0, rand(2) AS f1, rand(3) AS f2, rand(4) AS f3,
               CAST(id % 3 AS DOUBLE) AS f4
        FROM ids
        """
    )
    df = df.withColumn("y", 3 * df.f0 - 2 * df.f1 + df.f2 * df.f3 + 0.5 * df.f4)
    df.repartition(8).write.mode("overwrite").parquet(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local-cluster[2,1,1024]")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--path", default=None, help="Parquet directory both engines can read")
    args = parser.parse_args()
    # without --path: a scratch directory, removed at the end
    scratch = None if args.path else tempfile.TemporaryDirectory(prefix="spark-dask-xgb-")
    path = args.path or os.path.join(scratch.name, "features")

    spark = SparkSession.getActiveSession() or (
        SparkSession.builder.master(args.master)
        .appName("spark-dask + XGBoost")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        t0 = time.perf_counter()
        prepare_with_spark(spark, path, args.rows)
        print(f"spark wrote {args.rows} rows to {path} in {time.perf_counter() - t0:.1f}s")

        with spark_dask.start(spark) as client:
            gpu = client.cluster.gang.kind == "cuda"
            if gpu:
                import dask_cudf

                ddf = dask_cudf.read_parquet(path)
            else:
                ddf = dd.read_parquet(path)
            features = [c for c in ddf.columns if c.startswith("f")]
            train, test = ddf.random_split([0.8, 0.2], random_state=0)
            dtrain = xgb.dask.DaskDMatrix(client, train[features], train["y"])
            dtest = xgb.dask.DaskDMatrix(client, test[features], test["y"])
            params = {
                "objective": "reg:squarederror",
                "tree_method": "hist",
                "device": "cuda" if gpu else "cpu",
                "max_depth": 6,
                "eta": 0.3,
            }
            out = xgb.dask.train(
                client, params, dtrain, num_boost_round=30, evals=[(dtest, "test")], verbose_eval=False
            )
            rmse = out["history"]["test"]["rmse"][-1]
            pred = xgb.dask.predict(client, out["booster"], dtest).compute()
            print(f"xgboost on {len(client.scheduler_info()['workers'])} Dask workers: "
                  f"test rmse {rmse:.4f}, {len(pred)} predictions")
            assert rmse < 0.2 * float(np.std(test["y"].compute())) + 0.05, rmse
        print("done; Spark jobs still active:", list(spark.sparkContext.statusTracker().getActiveJobsIds()))
    finally:
        if not os.environ.get("DATABRICKS_RUNTIME_VERSION"):
            spark.stop()
        if scratch is not None:
            scratch.cleanup()


if __name__ == "__main__":
    main()
