"""The driver-side halves of the multi-host tests: functions the driver service on host
``driver`` runs (``Driver.call("tests.multihost.multihost_scenarios:start", ...)``).

They use spark_dask's public API on the service's SparkSession and return plain data
(what they saw) for the test to check. A cluster lives in :data:`CLUSTERS` between calls
(started by one call, looked at, scaled or closed by later ones, also after a fault).

This module is pickled by value (Dask and PySpark): the functions it sends to Dask
workers or Spark tasks reach executors that cannot import ``tests``.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import tempfile
import time

import cloudpickle
import dask.array as da
import pyspark.cloudpickle
from distributed import Client
from pyspark.sql import functions as F

import spark_dask
from spark_dask import SparkCluster
from spark_dask.spark import frames
from tests.support.hosts import session
from tests.support.parts import parts_of
from tests.support.spark import task_localities
from tests.support.yarn import refresh_nodes

cloudpickle.register_pickle_by_value(sys.modules[__name__])
pyspark.cloudpickle.register_pickle_by_value(sys.modules[__name__])

CLUSTERS: dict[str, SparkCluster] = {}
CLIENTS: dict[str, Client] = {}


# --------------------------------------------------------------------------- on the workers


def _by_value(fn):
    """``fn`` as a closure: distributed pickles a module-level function by reference
    (the workers cannot import ``tests``), a closure with cloudpickle, by value."""

    def run(*args, **kwargs):
        return fn(*args, **kwargs)

    run.__doc__ = fn.__doc__
    return run


def _worker_facts() -> dict:
    """What a Dask worker sees of its host (runs on the worker)."""
    return {
        "hostname": socket.gethostname(),
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "pid": os.getpid(),
        "local_dirs": os.environ.get("SPARK_LOCAL_DIRS"),
        "tmp": tempfile.gettempdir(),
    }


def _host_of(_=None) -> str:
    """The host name of whoever runs this (a Dask task, a Spark task)."""
    return socket.gethostname()


worker_facts = _by_value(_worker_facts)
host_of = _by_value(_host_of)


# --------------------------------------------------------------------------- clusters


def start(name: str, **options) -> dict:
    """Start ``SparkCluster(spark, **options)`` as ``name``; :func:`describe` of it."""
    cluster = SparkCluster(session(), progress=False, **options)
    CLUSTERS[name] = cluster
    CLIENTS[name] = Client(cluster)
    return describe(name)


def describe(name: str) -> dict:
    """The cluster's scheduler, dashboard and, per worker address, the worker's name,
    threads, Spark facts and what it sees of its host."""
    cluster, client = CLUSTERS[name], CLIENTS[name]
    facts = client.run(worker_facts)
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return {
        "tag": cluster.tag,
        "scheduler": cluster.scheduler_address,
        "dashboard_link": cluster.dashboard_link,
        "dashboard_port": cluster.scheduler_info["services"].get("dashboard"),
        "gangs": [(g.tag, g.wanted, g.status, g.done) for g in parts_of(cluster).gangs],
        "workers": {
            addr: {**facts.get(addr, {}), "name": w["name"], "nthreads": w["nthreads"], "spark": w.get("spark")}
            for addr, w in workers.items()
        },
    }


def compute(name: str) -> dict:
    """A real computation: an array sum, and 64 tasks that say where they ran."""
    client = CLIENTS[name]
    n = 2_000_000
    total = int(da.arange(n, chunks=100_000).sum().compute())
    where = client.gather(client.map(host_of, range(64), pure=False))
    return {"total": total, "want": n * (n - 1) // 2, "hosts": sorted(set(where))}


def scale(name: str, n: int, wait: float = 120) -> dict:
    """``cluster.scale(n)``, then wait (bounded) until ``n`` workers run and only the
    gangs that hold them are left; :func:`describe`."""
    cluster, client = CLUSTERS[name], CLIENTS[name]
    cluster.scale(n)
    deadline = time.monotonic() + wait
    while len(client.scheduler_info(n_workers=-1)["workers"]) != n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(client.scheduler_info()['workers'])} workers, not {n}, after {wait} s")
        time.sleep(0.2)
    return describe(name)


def close(name: str, wait: float = 30) -> dict:
    """Close the cluster; the Spark jobs still active after it (bounded wait)."""
    cluster, client = CLUSTERS.pop(name), CLIENTS.pop(name)
    client.close()
    cluster.close()
    return {"active_jobs": active_jobs(wait), "tag": cluster.tag}


def close_all() -> None:
    """Close every cluster left (a test's clean-up after a failure)."""
    for name in list(CLUSTERS):
        close(name, wait=5)


def active_jobs(wait: float = 0) -> list[int]:
    """The session's active Spark jobs, after waiting up to ``wait`` seconds for none."""
    tracker = session().sparkContext.statusTracker()
    deadline = time.monotonic() + wait
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.1)
    return list(tracker.getActiveJobsIds())


def write_connection(name: str, directory: str) -> str:
    """``cluster.write_connection(directory)``; the scheduler file's path."""
    return CLUSTERS[name].write_connection(directory)


def executors() -> dict:
    """The session's executors: their ids and hosts (addresses), sorted."""
    sc = session().sparkContext
    ids = [i for i in sc._jsc.sc().getExecutorIds().mkString(",").split(",") if i and i != "driver"]
    driver = sc.getConf().get("spark.driver.host")
    hosts = [e.host() for e in sc._jsc.sc().statusTracker().getExecutorInfos() if e.host() != driver]
    return {"ids": sorted(ids), "hosts": sorted(hosts)}


# --------------------------------------------------------------------------- hand-off


def sample_frame(partitions: int = 6):
    """A Spark DataFrame of several types and nulls, over ``partitions`` partitions."""
    return (
        session()
        .range(0, 30_000, 1, partitions)
        .selectExpr(
            "id",
            "cast(id % 7 as int) as k",
            "cast(id as double) * 0.5 as x",
            "cast(id as string) as s",
            "date_add(date'2020-01-01', cast(id % 400 as int)) as d",
            "case when id % 5 = 0 then null else cast(id * 3 as decimal(20, 2)) end as m",
        )
    )


class _Said(logging.Handler):
    """The spark_dask log lines of a scenario (the driver's WARNINGs)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _read_localities(df, group: str) -> list[str]:
    """Spark's locality of each task of one scan of ``df`` (a no-op write: one stage)."""
    sc = session().sparkContext
    sc.setJobGroup(group, group)
    try:
        df.write.format("noop").mode("overwrite").save()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return [locality for locality, _ in task_localities(session(), group)]


def handoff(name: str, misplace: bool = False) -> dict:
    """``to_dask`` and ``to_spark`` on cluster ``name``: Dask's results against Spark's
    own, the rows back in Spark against the rows that went out (both ways exact); where
    Spark ran ``to_spark``'s read tasks (their localities) and what the driver said.
    ``misplace``: each read task prefers a host other than its file's, so every file is
    streamed from a Dask worker of its machine (the fallback when Spark runs a task
    elsewhere)."""
    client = CLIENTS[name]
    df = sample_frame()
    said = _Said()
    logging.getLogger("spark_dask").addHandler(said)
    real = frames.preferred_host_ids
    if misplace:
        others = executors()["hosts"]

        def elsewhere(spark, wanted):
            return real(spark, [next(o for o in others if o != h) for h in wanted])

        frames.preferred_host_ids = elsewhere
    try:
        ddf = spark_dask.to_dask(df, client=client)
        dask_sums = ddf.groupby("k").x.sum().compute().sort_index()
        spark_sums = df.groupBy("k").agg(F.sum("x").alias("x")).toPandas().set_index("k")["x"].sort_index()
        back = spark_dask.to_spark(ddf, client=client)
        derived = spark_dask.to_spark(ddf.assign(y=ddf.x * 2)[["id", "y"]], client=client)
        localities = _read_localities(back, f"localities-{name}-{time.monotonic_ns()}")
        want_derived = df.selectExpr("id", "x * 2 as y")
        out = {
            "localities": localities,
            "npartitions": ddf.npartitions,
            "rows": len(ddf),
            "sums_equal": dask_sums.to_dict() == spark_sums.to_dict(),
            "schema": [(f.name, f.dataType.simpleString()) for f in back.schema.fields],
            "want_schema": [(f.name, f.dataType.simpleString()) for f in df.schema.fields],
            "missing": df.exceptAll(back).count(),
            "extra": back.exceptAll(df).count(),
            "derived_missing": want_derived.exceptAll(derived).count(),
            "derived_extra": derived.exceptAll(want_derived).count(),
            "spark_hosts": sorted(set(df.rdd.mapPartitions(lambda it: [host_of(0)]).collect())),
        }
        # the workers' events reach the driver's scheduler a moment after the scans
        deadline = time.monotonic() + (10 if misplace else 2)
        while time.monotonic() < deadline and len([x for x in said.lines if "across hosts" in x]) < 2:
            time.sleep(0.1)
        out["across_hosts"] = [line for line in said.lines if "across hosts" in line]
        return out
    finally:
        frames.preferred_host_ids = real
        logging.getLogger("spark_dask").removeHandler(said)


def logs(name: str) -> dict[str, str]:
    """``cluster.get_logs()`` of cluster ``name`` (for a failing test's message)."""
    return dict(CLUSTERS[name].get_logs())


def spark_hosts(partitions: int = 8) -> list[str]:
    """The hosts a plain Spark job's tasks ran on."""
    rdd = session().sparkContext.parallelize(range(partitions), partitions)
    return sorted(set(rdd.map(host_of).collect()))


def yarn_refresh_nodes(graceful_timeout: int | None = None) -> None:
    """``yarn rmadmin -refreshNodes [-g]`` through the session's JVM
    (:func:`tests.support.yarn.refresh_nodes`)."""
    refresh_nodes(session(), graceful_timeout)
