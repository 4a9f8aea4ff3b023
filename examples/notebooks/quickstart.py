# Databricks notebook source
# MAGIC %md
# MAGIC # spark-dask quick start
# MAGIC
# MAGIC A Dask cluster inside this notebook's Spark application: the scheduler on the driver, one
# MAGIC Dask worker per executor in a Spark barrier stage. Nothing to install at cluster start, no
# MAGIC restart; closing the cluster ends the barrier stage.
# MAGIC
# MAGIC - **Databricks**: *Workspace → Import* this file (`examples/notebooks/quickstart.py`, Databricks'
# MAGIC   source format) and attach it to a cluster in dedicated (single user) or no-isolation shared
# MAGIC   access mode, autoscaling off. The first cell installs the spark-dask wheel from a volume
# MAGIC   (build it with `pip wheel --no-deps -w dist .` and upload it, or change the path).
# MAGIC - **Jupyter**: `examples/notebooks/quickstart.ipynb` has the same cells (generated from this
# MAGIC   file); it starts a local `local-cluster[2,1,1024]` Spark application.

# COMMAND ----------

# MAGIC %pip install /Volumes/main/default/libs/spark_dask-0.1.0-py3-none-any.whl

# COMMAND ----------

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local runs only: the executors' Python

from pyspark.sql import SparkSession

# On Databricks `spark` exists already; elsewhere this starts a small local Spark application.
spark = SparkSession.getActiveSession() or (
    SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local-cluster[2,1,1024]"))
    .appName("spark-dask notebook quick start")
    # Spark's console progress bar (spark.ui.showConsoleProgress) would show the Dask
    # cluster's barrier stage, which runs as long as the cluster, as "[Stage 0:> (0 + 2) / 2]"
    # in front of every later line: Spark cannot leave one stage out of it, so it is off.
    .config("spark.ui.showConsoleProgress", "false")
    .getOrCreate()
)

# COMMAND ----------

import spark_dask

cluster = spark_dask.SparkCluster(spark)  # workers, threads, memory, GPUs, dashboard, job tag
client = cluster.get_client()
cluster  # the last expression of a cell shows the cluster widget

# COMMAND ----------

# The widget's facts, as text.
print("dashboard:", cluster.dashboard_link)
for key, value in cluster.spark_info().items():
    print(f"Spark {key}: {value}")

# COMMAND ----------

import dask.dataframe as dd
import numpy as np
import pandas as pd

pdf = pd.DataFrame({"k": np.arange(50_000) % 5, "x": np.arange(50_000, dtype=float)})
ddf = dd.from_pandas(pdf, npartitions=8)
result = ddf.groupby("k").x.sum().compute().sort_index()
assert np.allclose(result.values, pdf.groupby("k").x.sum().sort_index().values)
print("sum per k:", result.tolist())

# COMMAND ----------

# Closing the cluster ends the Spark barrier job. Cancelling the cell that starts it, or
# detaching the notebook, tears it down too (docs: Databricks, "Cancelling a cell").
client.close()
cluster.close()
print("closed; Spark jobs still active:", list(spark.sparkContext.statusTracker().getActiveJobsIds()))

if not os.environ.get("DATABRICKS_RUNTIME_VERSION"):
    spark.stop()
