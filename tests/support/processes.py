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


def driver_url(spark) -> str:
    """The ``--driver-url`` the application's executor JVMs are started with: unique
    among the applications running on this machine, where application ids are not (two
    local-cluster masters started in the same second, as in run-all.sh's two halves side
    by side, both name theirs ``app-<that second>-0000``)."""
    conf = spark.sparkContext.getConf()
    return f"spark://CoarseGrainedScheduler@{conf.get('spark.driver.host')}:{conf.get('spark.driver.port')}"


def executor_log_urls(spark) -> set[str]:
    """The stderr log URL of every executor, live or gone, of the application (Spark's
    status store): each executor's ``SPARK_LOG_URL_STDERR``, which names its Worker's
    address, so unique on this machine where the application id alone is not."""
    executors = spark.sparkContext._jsc.sc().statusStore().executorList(False)
    urls = set()
    for i in range(executors.size()):
        url = executors.apply(i).executorLogs().get("stderr")
        if url.isDefined():
            urls.add(str(url.get()))
    return urls


def dask_processes(tag: str | None = None, spark=None) -> list[psutil.Process]:
    """Worker processes started by spark-dask: for one cluster tag, for one Spark
    application (``spark``: its executors' processes, by their log URL), or any."""
    app = spark.sparkContext.applicationId if spark is not None else None
    urls = executor_log_urls(spark) if spark is not None else None
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            env = p.environ()
            owner = process_cluster(env, None) or process_cluster({}, p.cwd())
        except (psutil.Error, OSError):
            continue
        if owner is None or (tag is not None and owner != tag):
            continue
        stderr = env.get("SPARK_LOG_URL_STDERR", "")
        if spark is not None and (stderr not in urls if urls else app not in stderr):
            continue
        found.append(p)
    return found


def no_workers_left(output: str) -> bool:
    """No worker process of the clusters named in ``output`` is left (other test runs on
    this machine may have their own)."""
    tags = set(re.findall(r"spark-dask-[0-9a-f]{10}", output))
    assert tags, output[-2000:]
    return wait_until(lambda: not any(dask_processes(t) for t in tags), timeout=20)


def executor_jvms(driver: str, executor_id: str | None = None) -> list[psutil.Process]:
    """The executor JVMs on this machine of the application whose driver is ``driver``
    (:func:`driver_url`), or only executor ``executor_id``'s (their command line:
    ``CoarseGrainedExecutorBackend --driver-url DRIVER ... --executor-id N``)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" not in cmd or driver not in cmd:
            continue
        if executor_id is None or cmd[cmd.index("--executor-id") + 1] == executor_id:
            found.append(p)
    return found


def executor_jvm(driver: str, executor_id: str) -> int:
    """The pid of executor JVM ``executor_id`` of the application of ``driver``
    (:func:`executor_jvms`)."""
    for p in executor_jvms(driver, executor_id):
        return p.pid
    raise LookupError(f"no JVM for executor {executor_id} of the application of {driver}")
