"""What the driver reads of Spark's executor decommissioning (classic sessions).

With ``spark.decommission.enabled`` Spark tells an executor that it will go and lets its
running tasks finish. Spark posts no listener event for it (there is none in 3.5 or
4.x); the driver's task scheduler holds the state from the moment the decommission
starts (``TaskSchedulerImpl.getExecutorDecommissionState``), read here through py4j.
A Spark Connect session cannot read it (:func:`spark_dask.spark.compat.jvm_reachable`).
The drain policy that acts on it is :mod:`spark_dask.gangs.drain`'s.
"""

from __future__ import annotations

import time

from dask.utils import parse_timedelta

from spark_dask.spark.conf import conf, kept

__all__ = ["ENABLED", "FORCE_KILL", "KILL_INTERVAL", "decommissioning", "decommissions", "kill_timeouts"]

ENABLED = "spark.decommission.enabled"
# Spark kills a decommissioned executor after this (optional; driver side) ...
FORCE_KILL = "spark.executor.decommission.forceKillTimeout"
# ... or tells Spark when an outside service will (optional; used for speculation)
KILL_INTERVAL = "spark.executor.decommission.killInterval"


def decommissions(spark) -> bool:
    """Whether Spark decommissions executors (``spark.decommission.enabled``; blocking)."""
    return str(conf(spark, ENABLED) or "").lower() == "true"


def kill_timeouts(spark) -> tuple[float | None, float | None]:
    """``(forceKillTimeout, killInterval)`` in seconds, None where unset (blocking:
    reads the session's conf; a bare number is milliseconds, as in Spark)."""
    kills = [conf(spark, key) for key in (FORCE_KILL, KILL_INTERVAL)]
    force_kill, kill_interval = (None if k in (None, "") else parse_timedelta(k, default="ms") for k in kills)
    return force_kill, kill_interval


def decommissioning(spark, executor_ids: list[str]) -> dict[str, float]:
    """``{executor id: seconds since Spark began decommissioning it}`` for those of
    ``executor_ids`` that Spark decommissions (blocking: py4j reads of the driver's task
    scheduler, a classic session only): two reads per executor, the scheduler looked up
    once per SparkContext. Its state's start is the driver's wall clock in milliseconds
    (``TaskSchedulerImpl``'s ``SystemClock``), which is this process's ``time.time()``."""
    sc = spark.sparkContext
    scheduler = kept(sc, "task scheduler", lambda sc: sc._jsc.sc().taskScheduler())
    now = time.time() * 1000
    out = {}
    for executor in executor_ids:
        state = scheduler.getExecutorDecommissionState(executor)
        if state.isDefined():
            out[executor] = max(now - state.get().startTime(), 0) / 1000
    return out
