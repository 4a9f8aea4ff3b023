"""``spark_dask.write_delta``: a Dask DataFrame written as a Delta table by Spark.

The rows go to Spark with ``to_spark`` (worker to executor, not through the driver),
and Spark's own Delta writer commits them: the table gets the features the runtime
gives new tables (deletion vectors, column mapping, liquid clustering on Databricks)
and Unity Catalog's governance applies to a table name.
"""

from __future__ import annotations

import os
import warnings

from spark_dask.delta import lineage
from spark_dask.delta.sources import file_source, is_table_name, spark_source
from spark_dask.errors import DeltaError, PlanError
from spark_dask.events import outside_package
from spark_dask.handoff import driver as handoff
from spark_dask.spark import databricks
from spark_dask.spark.compat import jvm_reachable
from spark_dask.spark.conf import conf
from spark_dask.spark.session import active_session

MODES = {"error": "errorifexists", "append": "append", "overwrite": "overwrite"}


def write_delta(
    ddf,
    target: str,
    *,
    mode: str = "error",
    partition_by=None,
    spark=None,
    client=None,
    options=None,
    replace_newer: bool = False,
):
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
    replace_newer : bool
        An overwrite of a table that ``ddf`` was read from (by ``read_delta``, at some
        version) fails, before anything is written, when the table has a newer commit:
        its changes would be replaced. True: overwrite all the same. Appends,
        ``replaceWhere`` and frames not read from the target are not checked.

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
    session = active_session(spark)
    store = store_warning(target, _log_store(session, target), databricks.detect(session) is not None)
    if store:
        warnings.warn(store, UserWarning, **outside_package())
    read = _version_read(ddf, target, mode, options, replace_newer, session)
    if read is not None:
        lineage.check_newer(session, target, read)  # before the Dask side is computed
    df = handoff.to_spark(ddf, spark, client=client)
    writer = df.write.format("delta").mode(MODES[mode])
    if columns:
        writer = writer.partitionBy(*columns)
    for key, value in (options or {}).items():
        writer = writer.option(key, value)
    if read is not None:
        lineage.check_newer(df.sparkSession, target, read)  # again, just before the writer's transaction
    if is_table_name(target):
        writer.saveAsTable(target)
    else:
        writer.save(spark_source(target))
    if read is not None:
        lineage.check_replaced(df.sparkSession, target, read)


def _scheme(target: str) -> str:
    return target.split("://", 1)[0].lower() if "://" in target else ""


def _log_store(spark, target: str) -> str | None:
    """The Delta log store Spark is configured to commit to ``target``'s scheme with."""
    return conf(spark, f"spark.delta.logStore.{_scheme(target)}.impl") or conf(spark, "spark.delta.logStore.class")


def store_warning(target: str, log_store: str | None, on_databricks: bool) -> str | None:
    """The warning for a write to S3 where Spark commits with Delta's default log store
    for it, ``S3SingleDriverLogStore``: its commits are atomic only within one driver (S3
    has no put-if-absent Delta uses), so two clusters writing the table at once can lose
    a commit. Not on Databricks (its commit service serves every cluster of the
    workspace) nor with ``S3DynamoDBLogStore``.

    >>> "S3SingleDriverLogStore, safe only while one Spark driver" in store_warning("s3a://b/t", None, False)
    True
    >>> store_warning("s3://b/t", "io.delta.storage.S3DynamoDBLogStore", False) is None
    True
    >>> store_warning("s3://b/t", None, True) is None, store_warning("abfss://c@a/t", None, False) is None
    (True, True)
    """
    scheme = _scheme(target)
    if scheme not in ("s3", "s3a", "s3n") or on_databricks or "DynamoDB" in (log_store or ""):
        return None
    return (
        f"spark-dask: write_delta to {target}: Spark commits to S3 with Delta's S3SingleDriverLogStore, safe only "
        "while one Spark driver writes the table at a time (a commit of another cluster at the same moment can be "
        f"lost). Where several clusters write it, set spark.delta.logStore.{scheme}.impl="
        "io.delta.storage.S3DynamoDBLogStore on each (docs/delta.md, 'Several writers')"
    )


def _version_read(ddf, target: str, mode: str, options, replace_newer: bool, session) -> int | None:
    """The version of ``target`` that ``ddf`` was read at, where an overwrite must check
    that it is still the latest (None: nothing to check)."""
    if mode != "overwrite" or replace_newer or "replacewhere" in {str(k).lower() for k in options or {}}:
        return None
    read = lineage.versions_read(ddf)
    if not read:
        return None
    return read.get(lineage.table_key(target, session))


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


__all__ = ["MODES", "exists", "hadoop_exists", "store_warning", "write_delta"]
