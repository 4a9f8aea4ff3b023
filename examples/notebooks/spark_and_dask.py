# Databricks notebook source
# MAGIC %md
# MAGIC # Spark and Dask on one cluster
# MAGIC
# MAGIC Spark SQL prepares a table and writes it as Parquet; a Dask cluster started in the same Spark
# MAGIC application reads and aggregates it; the result goes back to Spark while the Dask cluster
# MAGIC still runs. The gang leaves Spark task slots free (`n_workers=1` here, on two one-core
# MAGIC executors), so the Spark query inside the block runs at once.
# MAGIC
# MAGIC On GPU clusters the same cells use dask-cudf (`workers_are_gpus` below); see the RAPIDS page of
# MAGIC the docs for the cluster configuration.

# COMMAND ----------

# MAGIC %pip install /Volumes/main/default/libs/spark_dask-0.1.0-py3-none-any.whl

# COMMAND ----------

import os
import sys
import tempfile

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local runs only: the executors' Python

from pyspark.sql import SparkSession

spark = SparkSession.getActiveSession() or (
    SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local-cluster[2,1,1024]"))
    .appName("spark-dask: Spark and Dask")
    # Spark's console progress bar (spark.ui.showConsoleProgress) would show the Dask
    # cluster's barrier stage, which runs as long as the cluster, as "[Stage 0:> (0 + 2) / 2]"
    # in front of every later line: Spark cannot leave one stage out of it, so it is off.
    .config("spark.ui.showConsoleProgress", "false")
    .getOrCreate()
)
# Storage both engines see: a Unity Catalog volume on Databricks, a scratch directory elsewhere.
on_databricks = bool(os.environ.get("DATABRICKS_RUNTIME_VERSION"))
base = "/Volumes/main/default/scratch/spark-dask" if on_databricks else tempfile.mkdtemp(prefix="spark-dask-nb-")
path = f"{base}/orders"

# COMMAND ----------

# Spark: a table from SQL, written as Parquet.
spark.range(200_000).createOrReplaceTempView("ids")
orders = spark.sql(
    """
    SELECT id AS order_id, id % 50 AS customer, CAST(id % 7 AS DOUBLE) * 1.5 AS amount
    FROM ids
    """
)
orders.write.mode("overwrite").parquet(path)
print("spark wrote", orders.count(), "orders to", path)

# COMMAND ----------

import spark_dask

cluster = spark_dask.SparkCluster(spark, n_workers=1)  # one barrier task: a Spark slot stays free
client = cluster.get_client()
workers_are_gpus = cluster.gang_plan.kind == "cuda"
cluster

# COMMAND ----------

# Dask: read the Parquet (dask-cudf on GPU workers) and aggregate per customer.
if workers_are_gpus:
    import dask_cudf

    ddf = dask_cudf.read_parquet(path)
else:
    import dask.dataframe as dd

    ddf = dd.read_parquet(path)
per_customer = ddf.groupby("customer").amount.sum().compute().sort_index()
if workers_are_gpus:
    per_customer = per_customer.to_pandas()
print("customers:", len(per_customer), "total amount:", round(float(per_customer.sum()), 1))

# COMMAND ----------

# Back to Spark while the Dask cluster runs: a small result as a Spark DataFrame.
top = spark.createDataFrame(per_customer.rename("amount").reset_index()).orderBy("amount", ascending=False)
best = top.first()
print("top customer:", int(best["customer"]), "amount:", best["amount"])
expected = spark.sql("SELECT SUM(CAST(id % 7 AS DOUBLE) * 1.5) AS s FROM ids").first()["s"]
assert abs(float(per_customer.sum()) - expected) < 1e-6 * expected
print("dask and spark agree:", round(expected, 1))

# COMMAND ----------

client.close()
cluster.close()
print("closed; Spark jobs still active:", list(spark.sparkContext.statusTracker().getActiveJobsIds()))
if not on_databricks:
    import shutil

    shutil.rmtree(base, ignore_errors=True)
    spark.stop()
