"""``spark_dask.write_delta``: a Dask DataFrame written as a Delta table by Spark.

The rows go to Spark with ``to_spark`` (worker to executor, not through the driver),
and Spark's own Delta writer commits them: the table gets the features the runtime
gives new tables (deletion vectors, column mapping, liquid clustering on Databricks)
and Unity Catalog's governance applies to a table name.
"""

from __future__ import annotations

import os

from spark_dask.delta.read import file_source, is_table_name
from spark_dask.errors import DeltaError, PlanError
from spark_dask.handoff import driver as handoff
from spark_dask.spark.compat import jvm_reachable
from spark_dask.spark.session import active_session

MODES = {"error": "errorifexists", "append": "append", "overwrite": "overwrite"}


def write_delta(ddf, target: str, *, mode: str = "error", partition_by=None, spark=None, client=None, options=None):
    """Write a Dask DataFrame as a Delta table, with Spark's Delta writer.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        Computed once, on the spark-dask cluster; a named index is written as a
        column, an unnamed one is not (as ``to_spark`` does).
    target : str
        A table path or URI, or a table name (``catalog.schema.table``: created or
        written with ``saveAsTable``).
    mode : {"error", "append", "overwrite"}
        ``error``: fail when the table exists (Spark's ``errorifexists``).
    partition_by : str or list of str, optional
        Partition columns of a new table.
    spark : SparkSession, optional
        Default: the cluster's session.
    client : distributed.Client, optional
        Default: the current client.
    options : dict, optional
        Writer options for Spark's Delta writer (``mergeSchema``, ``replaceWhere``,
        ``overwriteSchema``, ...).

    Returns
    -------
    None
        The table is committed when this returns.
    """
    if mode not in MODES:
        raise PlanError(f"spark-dask: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not isinstance(target, str) or not target:
        raise PlanError(f"spark-dask: write_delta needs a table path or name, got {target!r}")
    ddf = handoff.frame_for_spark(ddf)  # the columns Spark gets: a named index is one
    columns = [partition_by] if isinstance(partition_by, str) else list(partition_by or [])
    missing = [c for c in columns if c not in ddf.columns]
    if missing:
        raise PlanError(f"spark-dask: partition_by names {missing[0]!r}, which is not a column of the DataFrame")
    if mode == "error" and exists(target, spark):
        raise DeltaError(
            f"spark-dask: the Delta table {target} exists already: pass mode='append' or mode='overwrite' "
            "to write to it"
        )
    df = handoff.to_spark(ddf, spark, client=client)
    writer = df.write.format("delta").mode(MODES[mode])
    if columns:
        writer = writer.partitionBy(*columns)
    for key, value in (options or {}).items():
        writer = writer.option(key, value)
    if is_table_name(target):
        writer.saveAsTable(target)
    else:
        writer.save(target)


def exists(target: str, spark=None) -> bool:
    """Whether the table exists (checked before the Dask side is computed): a name in
    Spark's catalog; a path where Spark would write it, through Spark's own Hadoop
    filesystem (a cloud URI's credentials are often Spark's only: its ``spark.hadoop.*``
    confs, the cluster's instance profile), a local path here. Where neither can tell
    (Spark Connect, a scheme Spark has no filesystem for), False: Spark's writer then
    refuses an existing table itself (``errorifexists``)."""
    if is_table_name(target):
        return bool(active_session(spark).catalog.tableExists(target))
    location = file_source(target)
    if "://" not in location and not location.startswith("file:"):
        return os.path.isdir(os.path.join(location, "_delta_log"))
    return bool(hadoop_exists(active_session(spark), location.rstrip("/") + "/_delta_log"))


def hadoop_exists(spark, path: str) -> bool | None:
    """Whether ``path`` exists for Spark's Hadoop filesystem (classic sessions), or None
    where it cannot tell (Spark Connect, no filesystem for the scheme, refused)."""
    if not jvm_reachable(spark):
        return None
    try:
        hadoop_path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path)
        fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        return bool(fs.exists(hadoop_path))
    except Exception:  # noqa: BLE001 - a Py4J error of any kind: Spark's writer decides
        return None


__all__ = ["MODES", "exists", "hadoop_exists", "write_delta"]
