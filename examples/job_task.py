"""A job-task script for ``spark-dask run``: plain Dask code, no cluster set-up.

Locally::

    spark-dask run --master 'local-cluster[2,1,1024]' --n-workers 1 examples/job_task.py --rows 200000

Under spark-submit (any cluster manager)::

    spark-submit --master ... "$(python -c 'import spark_dask.cli as m; print(m.__file__)')" \\
        run --n-workers 1 examples/job_task.py --rows 200000

Databricks "Python script" task: script ``spark_dask/cli.py`` of the installed package
(or a one-line wrapper calling ``spark_dask.cli.main()``) with parameters
``["run", "/Workspace/.../job_task.py", "--rows", "200000"]``; "Python wheel" task:
package ``spark_dask``, entry point ``spark-dask``, same parameters.
"""

import argparse
import sys

import dask.dataframe as dd
import numpy as np
import pandas as pd
from distributed import Client
from pyspark.sql import SparkSession


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()

    client = Client()  # spark-dask run put the scheduler address and credentials in dask.config
    workers = client.scheduler_info()["workers"].values()
    print(f"connected to {client.scheduler.address}: workers {sorted(w['name'] for w in workers)}")

    pdf = pd.DataFrame({"k": np.arange(args.rows) % 7, "x": np.ones(args.rows)})
    counts = dd.from_pandas(pdf, npartitions=4).groupby("k").x.sum().compute()
    print(f"dask rows: {int(counts.sum())}")

    # The same SparkSession: a Spark job runs next to the Dask cluster when the gang
    # leaves task slots free (here --n-workers 1 on two one-core executors).
    spark = SparkSession.builder.getOrCreate()
    print(f"spark rows: {spark.range(args.rows).count()}")
    client.close()
    return 0 if int(counts.sum()) == args.rows else 1


if __name__ == "__main__":
    sys.exit(main())
