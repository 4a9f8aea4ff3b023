"""Run short Spark jobs from the driver: ``mapInArrow`` collected as a tagged job, on a
CPU-only stage-level profile where the tasks must not wait for a GPU.

The hand-off's transfer jobs (:mod:`spark_dask.handoff.driver`) and the GPU check
(``tools/gpu_check.py``) run on it; :mod:`spark_dask.spark.frames` makes their inputs.
"""

from __future__ import annotations

from contextlib import nullcontext

from spark_dask.spark import compat
from spark_dask.spark.conf import application_id
from spark_dask.spark.jobtags import tagged
from spark_dask.spark.pyspark_warnings import pandas3_warning_off
from spark_dask.spark.session import is_stopped

__all__ = ["cpu_profile", "forget_stopped", "map_collect"]

_cpu_profiles: dict = {}  # application id (or session id()) -> (profile, session)


def cpu_profile(spark):
    """The stage-level profile of a task asking for 1 CPU and no GPU, one per session:
    a scan of ``to_spark``'s cached result has the transfer's stage in its lineage, and
    a stage may not mix two profiles."""
    from pyspark.resource import ResourceProfileBuilder, TaskResourceRequests

    compat.ready_connect_profile(spark)
    key = application_id(spark) or id(spark)
    forget_stopped(_cpu_profiles, is_stopped)
    if key not in _cpu_profiles:
        _cpu_profiles[key] = (ResourceProfileBuilder().require(TaskResourceRequests().cpus(1)).build, spark)
    return _cpu_profiles[key][0]


def forget_stopped(cache: dict, stopped) -> None:
    """Drop the entries ``key -> (value, session)`` of ``cache`` whose session is
    ``stopped(session)`` (its application is gone: its profile cannot serve again)."""
    for key, (_, session) in list(cache.items()):
        if stopped(session):
            cache.pop(key, None)


def map_collect(df, schema: str, fn, cpu_only: bool, tag: str, description: str, confs=None) -> list[dict]:
    """Run ``df.mapInArrow(fn, schema)`` as a tagged Spark job (a CPU-only profile when
    asked; inside the context manager ``confs`` when given, e.g. the session confs of a
    transfer); its rows as dicts."""
    spark = df.sparkSession
    profile = cpu_profile(spark) if cpu_only else None
    new_api = compat.map_in_arrow_takes_profile(spark)
    kwargs = {"profile": profile} if profile is not None and new_api else {}
    with pandas3_warning_off():  # a transfer's mapInArrow: Arrow, not pandas
        out = df.mapInArrow(fn, schema, **kwargs)
    with tagged(spark, tag, description), confs if confs is not None else nullcontext():
        if profile is not None and not new_api:  # Spark 3.x: the profile on the RDD of the stage
            return [r.asDict() for r in out.rdd.withResources(profile).collect()]
        return [r.asDict() for r in out.collect()]
