"""Waits and the processes spark-dask leaves: its workers (by cluster tag or Spark
application), open ports. No Spark needed (a ``spark`` argument only narrows)."""

from __future__ import annotations

import re
import socket
import time

import psutil

from spark_dask.executor.command import process_cluster


def wait_until(predicate, timeout: float = 15.0, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def port_open(address: str) -> bool:
    hostport = address.split("://", 1)[-1]
    host, port = hostport.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, int(port))) == 0


def dask_processes(tag: str | None = None, spark=None) -> list[psutil.Process]:
    """Worker processes started by spark-dask: for one cluster tag, for one Spark
    application (``spark``), or any."""
    app = spark.sparkContext.applicationId if spark is not None else None
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            env = p.environ()
            owner = process_cluster(env, None) or process_cluster({}, p.cwd())
        except (psutil.Error, OSError):
            continue
        if owner is None or (tag is not None and owner != tag):
            continue
        if app is not None and app not in env.get("SPARK_LOG_URL_STDERR", ""):
            continue
        found.append(p)
    return found


def no_workers_left(output: str) -> bool:
    """No worker process of the clusters named in ``output`` is left (other test runs on
    this machine may have their own)."""
    tags = set(re.findall(r"spark-dask-[0-9a-f]{10}", output))
    assert tags, output[-2000:]
    return wait_until(lambda: not any(dask_processes(t) for t in tags), timeout=20)


def executor_jvm(app_id: str, executor_id: str) -> int:
    """The pid of Spark application ``app_id``'s executor JVM ``executor_id`` on this
    machine (its command line: ``CoarseGrainedExecutorBackend ... --executor-id N``)."""
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmd and app_id in cmd:
            if cmd[cmd.index("--executor-id") + 1] == executor_id:
                return p.pid
    raise LookupError(f"no JVM for executor {executor_id} of {app_id}")
