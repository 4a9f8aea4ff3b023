"""Shared fixtures: real Spark applications on ``local-cluster`` and leak checks."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import stat
import sys
import tempfile
import time

import psutil
import pytest

from spark_dask.plan import process_cluster

from . import hosts as hostlib

HERE = os.path.dirname(__file__)


def needs(module: str, extra: str):
    """Import ``module`` (a test extra's package) or skip with the install line; under
    ``CI`` a missing package FAILS instead, so CI never skips these checks silently."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        reason = f"pip install -e '.[{extra}]' (missing {module}: {e})"
        if os.environ.get("CI"):
            pytest.fail(f"CI must install the {extra} extra: {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def _pyspark_version() -> tuple[int, int]:
    try:
        import pyspark
    except ImportError:
        return (0, 0)
    major, minor = pyspark.__version__.split(".")[:2]
    return int(major), int(minor)


PYSPARK_VERSION = _pyspark_version()

# Tests of what only Spark >= 4.0 can do (CI also runs the core tests on pyspark 3.5).
needs_spark4 = pytest.mark.skipif(
    PYSPARK_VERSION < (4, 0),
    reason="Spark < 4.0 splits a task profile's GPUs in the default profile's fractions (SPARK-45527)",
)


def fresh_jvm() -> None:
    """Shut down the py4j gateway JVM left by an earlier session in this process.

    spark-submit turns a session's confs into JVM system properties, and every later
    ``SparkConf(loadDefaults=True)`` in that JVM reads them back: the fake GPUs of a
    classic GPU test module would reach the Connect server, and the Connect plugin the
    next classic module. A fresh JVM starts from the given confs only.
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    finally:
        SparkContext._gateway = None
        SparkContext._jvm = None
    if proc is not None:
        proc.stdin.close()  # the gateway JVM exits on EOF
        try:
            proc.wait(30)
        except Exception:
            proc.kill()
            proc.wait(30)


# JVM options of the test sessions' driver and executors: C1 only and the serial GC start
# a local-cluster application (and run its first job) in about 16 s instead of 25 on a
# 2-CPU machine (the test JVMs are short-lived and small); the product sets no JVM option.
TEST_JVM_CONF = {
    "spark.driver.extraJavaOptions": hostlib.QUICK_JVM,
    "spark.executor.extraJavaOptions": hostlib.QUICK_JVM,
}


def make_spark(master: str, **conf):
    """A classic SparkSession on a local-cluster master, quiet and UI-less, in a fresh
    JVM (so no conf of an earlier test module's session leaks into it)."""
    from pyspark.sql import SparkSession

    DEFAULT_SPARK.release()
    fresh_jvm()

    builder = (
        SparkSession.builder.master(master)
        .appName("spark-dask-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.sql.shuffle.partitions", "4")
    )
    for k, v in {**TEST_JVM_CONF, **conf}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stop_spark(spark) -> None:
    spark.stop()
    # A new getOrCreate() in the same process must not find the stopped session.
    from pyspark.sql import SparkSession

    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    fresh_jvm()


class SharedSpark:
    """The default session (``local-cluster[2,1,1024]``), kept from one test module to
    the next while each leaves it as it found it (:meth:`as_found`); a module that
    changed it, or one that needs other confs (:func:`make_spark`), gets a fresh one.
    An application start is ~8-10 s of CI time per module; pytest_collection_modifyitems
    runs the modules that use it one after the other."""

    MASTER = "local-cluster[2,1,1024]"

    def __init__(self):
        self.session = None
        self.conf: set = set()

    def take(self):
        if self.session is None:
            self.session = make_spark(self.MASTER)
            self.conf = runtime_conf(self.session)
        return self.session

    def give_back(self) -> None:
        """After a module: kept if it is as found, else stopped."""
        if self.session is None:
            return
        try:
            kept = self.as_found(self.session)
        except Exception:  # noqa: BLE001 - a session that cannot even answer is not kept
            kept = False
        if not kept:
            self.release()

    def as_found(self, s) -> bool:
        """Running, no job, both executors, no spark-dask cluster or worker of this
        process, the runtime conf as it was made."""
        from spark_dask.cluster import live_clusters

        sc = s.sparkContext
        if sc._jsc is None:  # stopped
            return False
        return (
            not sc._jsc.sc().isStopped()
            and wait_until(lambda: not active_jobs(s), timeout=10)
            and sc._jsc.sc().getExecutorMemoryStatus().size() == 3  # the driver and 2 executors
            and not live_clusters()
            and wait_until(lambda: not dask_processes(spark=s), timeout=10)
            and runtime_conf(s) == self.conf
        )

    def release(self) -> None:
        s, self.session = self.session, None
        if s is not None:
            stop_spark(s)


def runtime_conf(s) -> set:
    """The session's runtime SQL conf set beyond the defaults (``SET``)."""
    return {(r[0], r[1]) for r in s.sql("SET").collect()}


DEFAULT_SPARK = SharedSpark()


def pytest_collection_modifyitems(session, config, items):
    """The modules that use the default ``spark`` (not a ``spark`` fixture of their own)
    run one after the other, from the first one's place, so they share its application."""
    modules: dict = {}
    for item in items:
        modules.setdefault(item.module, []).append(item)
    shared = [m for m, its in modules.items() if not hasattr(m, "spark") and any("spark" in i.fixturenames for i in its)]
    if len(shared) < 2:
        return
    order, placed = [], False
    for m in modules:
        if m in shared:
            if not placed:
                order += shared
                placed = True
        else:
            order.append(m)
    items[:] = [item for m in order for item in modules[m]]


@pytest.fixture(scope="session")
def default_spark_pool():
    yield DEFAULT_SPARK
    DEFAULT_SPARK.release()


@pytest.fixture(scope="module")
def spark(default_spark_pool):
    """local-cluster[2,1,1024]: two executors with one core each (shared by the modules
    that leave it as they found it: :class:`SharedSpark`)."""
    yield default_spark_pool.take()
    default_spark_pool.give_back()


def fake_gpu_script(addresses) -> str:
    """A GPU discovery script, the mechanism Spark's own tests use for fake GPUs."""
    fd, path = tempfile.mkstemp(prefix="gpus-", suffix=".sh")
    with os.fdopen(fd, "w") as f:
        f.write("#!/usr/bin/env bash\n")
        f.write("echo '" + json.dumps({"name": "gpu", "addresses": list(addresses)}) + "'\n")
    os.chmod(path, stat.S_IRWXU)
    atexit.register(_remove, path)  # Spark workers may run it until the session stops
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def gpu_conf(n_gpus: int, task_amount: str, **extra) -> dict:
    """Spark conf for one Spark worker (and executor) that owns ``n_gpus`` fake GPUs."""
    script = fake_gpu_script([str(i) for i in range(n_gpus)])
    return {
        "spark.worker.resource.gpu.amount": str(n_gpus),
        "spark.worker.resource.gpu.discoveryScript": script,
        "spark.executor.resource.gpu.amount": str(n_gpus),
        "spark.task.resource.gpu.amount": task_amount,
        **extra,
    }


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


@pytest.fixture
def listener():
    """A listening TCP socket on 127.0.0.1 (a stand-in scheduler for task code that only
    checks it can connect)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


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


def active_jobs(spark) -> list[int]:
    return list(spark.sparkContext.statusTracker().getActiveJobsIds())


def assert_no_leftovers(spark, cluster) -> None:
    """Nothing of ``cluster`` is left: processes, Spark jobs, scheduler port."""
    assert wait_until(lambda: not dask_processes(cluster.tag)), [
        p.info for p in dask_processes(cluster.tag)
    ]
    assert wait_until(lambda: not active_jobs(spark)), active_jobs(spark)
    assert not port_open(cluster.scheduler_address)



# Fake GPUs of the multi-host cluster's worker hosts: the same addresses on every host,
# as real machines number theirs (local-cluster cannot show this: its workers share one
# discovery script, and every executor gets the same "0").
MULTIHOST_GPUS = {"worker-1": ["0", "1"], "worker-2": ["0", "1"]}


def multihost_or_skip() -> None:
    """Skip where this machine cannot build the multi-host cluster (not root, no
    ``ip``/``unshare``/``nsenter``/``tc``, namespaces refused); under ``CI`` FAIL instead."""
    reason = hostlib.unavailable()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the multi-host tests: {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def multihost():
    """The multi-host cluster (``tests/hosts.py``): ``driver`` (Spark Master) and
    ``worker-1``, ``worker-2`` (a Spark Worker each: 4 cores, 3g, two fake GPUs), one for
    the whole session; a test that breaks a host replaces it. Remains of a crashed
    earlier session are removed first."""
    multihost_or_skip()
    hostlib.purge_stale()
    # the Master's spark.worker.timeout as Spark's default (60 s): a host cut off for
    # less (tests/test_multihost_faults.py) is not dropped; a killed host is noticed
    # at once anyway (its connections reset)
    h = hostlib.Hosts.up(workers=2, cores=4, memory="3g", gpus=MULTIHOST_GPUS, worker_timeout=60)
    yield h
    h.down()


@pytest.fixture(scope="module")
def multihost_driver(multihost):
    """A driver service (``multihost.driver()``) with the default confs, for this module;
    a module that needs other confs defines its own ``multihost_driver`` fixture."""
    d = multihost.driver()
    yield d
    d.close()
