"""Both engines on one cluster: Spark prepares the data, Dask trains XGBoost on it,
the predictions go back to Spark.

1. spark-dask starts Dask workers inside the Spark application.
2. Spark SQL builds a feature table; ``spark_dask.to_dask(df)`` hands it to the Dask
   workers on the same machines (Arrow files on the executors' local disks: not through
   the driver, not through storage). pandas partitions on CPU workers, cudf on dask-cuda
   workers.
3. XGBoost's Dask interface (``xgboost.dask``) trains, one XGBoost worker per Dask
   worker; ``spark_dask.to_spark(...)`` brings the predictions back as a Spark DataFrame.

    python examples/spark_dask_xgboost.py [--master local-cluster[2,4,1024]] [--rows 200000]
    python examples/spark_dask_xgboost.py --via-parquet [--path DIR]   # the storage-backed way

``--via-parquet``: Spark writes Parquet first and Dask reads it (before the cluster
starts), for data that must persist anyway. On Databricks write to a Unity Catalog
volume both engines see, e.g. ``--path /Volumes/<catalog>/<schema>/<volume>/features``.

``to_dask`` runs a Spark job while the Dask cluster holds its barrier slots: the
executors need cores beside the gang (here 4-core executors; the gang's tasks take
3 CPUs each). On GPU clusters install ``xgboost`` (not ``xgboost-cpu``) and
``spark-dask[cuda12]``: the workers are dask-cuda workers, ``to_dask`` gives dask-cudf
partitions and XGBoost trains with ``device="cuda"``.
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local runs: executors' Python

import dask.dataframe as dd
import numpy as np
import xgboost as xgb
import xgboost.dask
from pyspark.sql import SparkSession

import spark_dask


def features(spark, rows: int):
    """Spark: a feature table from SQL."""
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
    return df.repartition(8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local-cluster[2,4,1024]")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--via-parquet", action="store_true", help="hand over through Parquet files instead")
    parser.add_argument("--path", default=None, help="Parquet directory both engines can read (--via-parquet)")
    args = parser.parse_args()
    # without --path: a scratch directory, removed at the end
    scratch = None if args.path else tempfile.TemporaryDirectory(prefix="spark-dask-xgb-")
    path = args.path or os.path.join(scratch.name, "features")

    spark = SparkSession.getActiveSession() or (
        SparkSession.builder.master(args.master)
        .appName("spark-dask + XGBoost")
        # Spark's console progress bar (spark.ui.showConsoleProgress) would show the Dask
        # cluster's barrier stage, which runs as long as the cluster, as "[Stage 0:> (0 + 2) / 2]"
        # in front of every later line: Spark cannot leave one stage out of it, so it is off.
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        df = features(spark, args.rows)
        if args.via_parquet:
            t0 = time.perf_counter()
            df.write.mode("overwrite").parquet(path)
            print(f"spark wrote {args.rows} rows to {path} in {time.perf_counter() - t0:.1f}s")

        with spark_dask.start(spark) as client:
            gpu = client.cluster.gang_plan.kind == "cuda"
            t0 = time.perf_counter()
            if args.via_parquet:
                if gpu:
                    import dask_cudf

                    ddf = dask_cudf.read_parquet(path)
                else:
                    ddf = dd.read_parquet(path)
            else:
                ddf = spark_dask.to_dask(df)  # pandas partitions here, cudf on dask-cuda workers
                print(
                    f"spark -> dask: {len(ddf)} rows in {ddf.npartitions} partitions (to_dask) "
                    f"in {time.perf_counter() - t0:.1f}s"
                )
            features_ = [c for c in ddf.columns if c.startswith("f")]
            train, test = ddf.random_split([0.8, 0.2], random_state=0)
            dtrain = xgb.dask.DaskDMatrix(client, train[features_], train["y"])
            dtest = xgb.dask.DaskDMatrix(client, test[features_], test["y"])
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
            pred = xgb.dask.predict(client, out["booster"], test[features_])
            print(
                f"xgboost on {len(client.scheduler_info()['workers'])} Dask workers: "
                f"test rmse {rmse:.4f}, {len(pred)} predictions"
            )
            assert rmse < 0.2 * float(np.std(test["y"].compute())) + 0.05, rmse
            if not args.via_parquet:
                # the predictions back to Spark, beside their ids
                scored = test[["id", "y"]].assign(prediction=pred.astype("float64"))
                sdf = spark_dask.to_spark(scored)
                mean_err = sdf.selectExpr("avg(abs(prediction - y)) AS e").collect()[0]["e"]
                print(f"dask -> spark: {sdf.count()} scored rows (to_spark), mean abs error {mean_err:.4f}")
        print("done; Spark jobs still active:", list(spark.sparkContext.statusTracker().getActiveJobsIds()))
    finally:
        if not os.environ.get("DATABRICKS_RUNTIME_VERSION"):
            spark.stop()
        if scratch is not None:
            scratch.cleanup()


if __name__ == "__main__":
    main()
