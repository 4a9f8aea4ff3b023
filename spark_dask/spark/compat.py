"""Every Spark-version and Spark Connect gate, named after what it works around.

The one place a new Spark version's quirk goes: callers ask a question here
(``task_profiles_supported(spark)``) instead of comparing versions themselves, so each
rule exists once, with the Spark version and the reason beside it. Which kind of
session ``spark`` is stays the low-level fact of :func:`spark_dask.spark.conf.is_connect`.
"""

from __future__ import annotations

import re

from spark_dask.spark.conf import conf, is_connect

__all__ = [
    "arrow_batch_rdd_takes_arguments",
    "arrow_batches_bounded_by_bytes",
    "current_catalog",
    "jvm_reachable",
    "job_tags_supported",
    "map_in_arrow_takes_profile",
    "ready_connect_profile",
    "spark_version",
    "struct_from_ddl",
    "task_profile_shares_gpus",
    "task_profiles_supported",
]


def spark_version(spark) -> tuple[int, int]:
    """``(major, minor)`` of the session's Spark (``spark.version``)."""
    major, minor = (spark.version.split(".") + ["0"])[:2]
    return int(major), int(re.sub(r"\D.*", "", minor) or 0)


def jvm_reachable(spark) -> bool:
    """Whether the driver's JVM is at hand: a classic session (a SparkContext, RDDs,
    py4j reads of the driver's scheduler and Hadoop filesystem). A Spark Connect
    session is a gRPC client of a server that runs the JVM: it has none of them."""
    return not is_connect(spark)


def map_in_arrow_takes_profile(spark) -> bool:
    """Whether ``DataFrame.mapInArrow`` takes a resource profile (``profile=``, Spark
    >= 4.0). Before, a stage's profile goes on the RDD (``rdd.withResources``), which
    Spark Connect, having no RDDs, cannot do."""
    return spark_version(spark) >= (4, 0)


def task_profiles_supported(spark) -> bool:
    """Whether a Spark job of this session may run with a stage-level task profile
    (a ``TaskResourceProfile``, no executor resources asked): classic Spark >= 3.4
    (SPARK-39853: task profiles on standalone without dynamic allocation; Kubernetes
    followed in SPARK-45495), Spark Connect >= 4.0 (:func:`map_in_arrow_takes_profile`);
    never in local mode (``local[N]``: ``ResourceProfileManager.isSupported`` accepts
    YARN, Kubernetes and standalone, ``local-cluster`` being standalone). Dynamic
    allocation and the gang's own limits are the planner's."""
    if is_connect(spark):
        if not map_in_arrow_takes_profile(spark):
            return False
        master = conf(spark, "spark.master", "") or ""
    else:
        if spark_version(spark) < (3, 4):
            return False
        master = spark.sparkContext.master
    return not (master.startswith("local") and not master.startswith("local-cluster"))


def task_profile_shares_gpus(spark) -> bool:
    """Whether a stage-level task profile asking for whole GPUs would share them.

    Before Spark 4.0 an executor splits each GPU address into the parts the *default*
    profile's fractional ``spark.task.resource.gpu.amount`` implies, and a task profile
    asking for 1 GPU takes one part: two gang tasks get the same address (measured on
    pyspark 3.5.9: both workers on one GPU). SPARK-45527 (apache/spark PR 43494) fixed
    the accounting in 4.0.0; the 3.5 backport (PR 44690) was not merged.
    """
    try:
        task_gpus = float(conf(spark, "spark.task.resource.gpu.amount") or 0)
    except ValueError:
        task_gpus = 0.0
    return spark_version(spark) < (4, 0) and 0 < task_gpus < 1


def arrow_batch_rdd_takes_arguments(spark) -> bool:
    """Whether ``Dataset.toArrowBatchRdd`` takes the batch size, time zone and large
    var types as arguments (Spark >= 4.0); Spark 3.x's takes none and reads the
    session's ``maxRecordsPerBatch`` and time zone, with no large types."""
    return spark_version(spark) >= (4, 0)


def arrow_batches_bounded_by_bytes(spark) -> bool:
    """Whether Spark ends an Arrow batch it sends to Python at
    ``spark.sql.execution.arrow.maxBytesPerBatch`` (Spark >= 4.0; the conf is not in
    3.5's ``SQLConf``), estimating the batch's size after every row unless the limit is
    Int.MaxValue."""
    return spark_version(spark) >= (4, 0)


def current_catalog(spark) -> str:
    """The session's current catalog (``Catalog.currentCatalog``, Spark >= 3.4); before
    it, and where it cannot be read, ``spark_catalog``, the only one."""
    try:
        return spark.catalog.currentCatalog()
    except Exception:  # noqa: BLE001 - Spark < 3.4
        return "spark_catalog"


def struct_from_ddl(spark, ddl: str):
    """The ``StructType`` of a DDL string (``"a long, b string"``): pyspark >= 4.0 parses
    it itself (``DataType.fromDDL``); 3.x asks Spark, through an empty DataFrame of
    that schema."""
    from pyspark.sql.types import StructType

    if hasattr(StructType, "fromDDL"):
        return StructType.fromDDL(ddl)
    return spark.createDataFrame([], ddl).schema


def job_tags_supported(sc) -> bool:
    """Whether the SparkContext tags jobs (``addJobTag``, ``removeJobTag``,
    ``cancelJobsWithTag``: Spark >= 3.5, SPARK-43952); before, job groups only."""
    return hasattr(sc, "addJobTag") and hasattr(sc, "cancelJobsWithTag")


def ready_connect_profile(spark) -> None:
    """Before a resource profile is used with a Spark Connect session: make ``spark``
    this thread's active session. A profile's id is made on the server the first time
    it is asked, through the thread's active session (pyspark's Connect
    ``ResourceProfile`` reads ``SparkSession.getActiveSession()``), which may be
    another session or none in the thread that submits the job. Nothing for a classic
    session."""
    if is_connect(spark):
        active = getattr(type(spark), "_active_session", None)
        if active is not None:
            active.session = spark
