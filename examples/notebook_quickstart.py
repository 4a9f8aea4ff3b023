# Databricks notebook source
# MAGIC %md
# MAGIC # spark-dask quick start (notebook)
# MAGIC
# MAGIC Import this file into a Databricks workspace as a notebook (each `# COMMAND` is a
# MAGIC cell), or run it anywhere as a script: `python examples/notebook_quickstart.py`.
# MAGIC On Databricks, `spark` exists already and the cluster needs nothing installed at
# MAGIC start: `%pip install` of the spark-dask wheel (docs/databricks.md, Install) in the first cell is enough.

# COMMAND ----------

# On Databricks: %pip install /Volumes/<catalog>/<schema>/<volume>/spark_dask-0.1.0-py3-none-any.whl
# (notebook-scoped: the Dask workers use it too; see docs/databricks.md, Install)
import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local runs only: executors' Python

from pyspark.sql import SparkSession

spark = SparkSession.getActiveSession() or (
    SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local-cluster[2,1,1024]"))
    .appName("spark-dask notebook quick start")
    .config("spark.ui.showConsoleProgress", "false")
    .getOrCreate()
)

# COMMAND ----------

import spark_dask

cluster = spark_dask.SparkCluster(spark)  # workers, threads, memory, GPUs, dashboard, job tag
client = cluster.get_client()
cluster  # the last expression of a cell shows the cluster widget (_repr_html_)

# COMMAND ----------

# The widget's facts, as text (what the notebook shows in the cluster's table).
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
# detaching the notebook, tears it down too (docs/databricks.md says how and how fast).
client.close()
cluster.close()
print("closed; Spark jobs still active:", list(spark.sparkContext.statusTracker().getActiveJobsIds()))

if not os.environ.get("DATABRICKS_RUNTIME_VERSION"):
    spark.stop()
