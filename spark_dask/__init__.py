"""spark_dask: a Dask cluster inside a running Spark application.

>>> import spark_dask
>>> with spark_dask.start(spark) as client:      # doctest: +SKIP
...     ddf.groupby("k").x.mean().compute()
"""

from spark_dask.client import start
from spark_dask.cluster import SparkCluster
from spark_dask.commands.doctor import Checkup, doctor
from spark_dask.delta import read_delta, write_delta
from spark_dask.errors import (
    ClusterError,
    ClusterTimeoutError,
    DeltaError,
    DoctorError,
    HandoffError,
    HandoffTypeError,
    PlanError,
    SparkDaskError,
    TaskFailed,
    UnknownKeywordError,
    WorkerStartError,
)
from spark_dask.handoff.driver import to_dask, to_spark
from spark_dask.named import NamedCluster, list_clusters
from spark_dask.options import config as _config  # noqa: F401  (loads the package defaults)
from spark_dask.tracking import log_cluster
from spark_dask.xlang.graph import XLangError, XLangTaskError

__version__ = "0.1.0"

__all__ = [
    "Checkup",
    "ClusterError",
    "ClusterTimeoutError",
    "DeltaError",
    "DoctorError",
    "HandoffError",
    "HandoffTypeError",
    "NamedCluster",
    "PlanError",
    "SparkCluster",
    "SparkDaskError",
    "TaskFailed",
    "UnknownKeywordError",
    "WorkerStartError",
    "XLangError",
    "XLangTaskError",
    "doctor",
    "list_clusters",
    "log_cluster",
    "read_delta",
    "start",
    "to_dask",
    "to_spark",
    "write_delta",
]
