#!/bin/bash
# Cluster-scoped init script for the RAPIDS Accelerator for Apache Spark (Spark's GPU SQL
# plugin), NOT for spark-dask: spark.plugins=com.nvidia.spark.SQLPlugin is loaded when the
# driver and executor JVMs start, so its jar must be on their classpath before that.
# NVIDIA's Databricks instructions put it into /databricks/jars with an init script, as
# here. spark-dask itself and the Dask/RAPIDS Python packages need no init script
# (%pip install in the notebook, or the job's libraries).
set -euo pipefail
SPARK_RAPIDS_VERSION=25.08.0   # a release that supports your Databricks runtime (NVIDIA's download page)
curl -fsSL -o "/databricks/jars/rapids-4-spark_2.12-${SPARK_RAPIDS_VERSION}.jar" \
  "https://repo1.maven.org/maven2/com/nvidia/rapids-4-spark_2.12/${SPARK_RAPIDS_VERSION}/rapids-4-spark_2.12-${SPARK_RAPIDS_VERSION}-cuda12.jar"
