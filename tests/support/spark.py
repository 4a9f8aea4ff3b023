"""Real Spark applications on ``local-cluster`` for the tests: sessions in a fresh JVM,
the default session and the Delta Lake one shared from one test module to the next
(:class:`SharedSpark`, behind the ``spark`` and ``delta_spark`` fixtures of
``tests/conftest.py``), and leak checks."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import textwrap

import pytest

from tests.support.cds import java_options
from tests.support.processes import dask_processes, port_open, wait_until


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
        except Exception:  # noqa: BLE001
            proc.kill()
            proc.wait(30)


def test_jvm_conf() -> dict[str, str]:
    """The JVM options of the test sessions' driver and executors
    (:func:`tests.support.cds.java_options`: quick JVMs, their class-data archives)."""
    return {
        "spark.driver.extraJavaOptions": java_options("driver"),
        "spark.executor.extraJavaOptions": java_options("executor"),
    }


def submit_confs() -> list[str]:
    """The same options for every JVM the tests start besides their own sessions (the
    examples, notebooks, CLI runs and scripts they run as subprocesses, each a cold
    application; Spark Connect servers), as spark-submit arguments:
    spark.driver/executor.defaultJavaOptions (Spark >= 3.0, prepended to any
    extraJavaOptions a test or script sets). tests/conftest.py gives them to every
    pyspark the tests start (``PYSPARK_SUBMIT_ARGS``); a test that runs spark-submit
    puts them on its command line. Not a SPARK_CONF_DIR: a JVM maps no class-data
    archive while a non-empty directory is on its class path (tests/support/cds.py)."""
    return [
        "--conf", f"spark.driver.defaultJavaOptions={java_options('driver')}",
        "--conf", f"spark.executor.defaultJavaOptions={java_options('executor')}",
    ]  # fmt: skip


def submit_args(*more: str) -> str:
    """``PYSPARK_SUBMIT_ARGS`` of a pyspark the tests start: :func:`submit_confs`,
    ``more`` spark-submit arguments, ``pyspark-shell``."""
    return shlex.join([*submit_confs(), *more, "pyspark-shell"])


def make_spark(master: str, **conf):
    """A classic SparkSession on a local-cluster master, quiet and UI-less, in a fresh
    JVM (so no conf of an earlier test module's session leaks into it)."""
    from pyspark.sql import SparkSession

    for shared in SHARED:
        shared.release()
    fresh_jvm()

    builder = (
        SparkSession.builder.master(master)
        .appName("spark-dask-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.sql.shuffle.partitions", "4")
    )
    for k, v in {**test_jvm_conf(), **conf}.items():
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
    """A session kept from one test module to the next while each leaves it as it found
    it (:meth:`as_found`); a module that changed it, or one that needs other confs
    (:func:`make_spark`, which ends every shared session: one JVM at a time), gets a
    fresh one. An application start is ~8-10 s of CI time per module;
    pytest_collection_modifyitems runs the modules that share one after the other.

    ``DEFAULT_SPARK`` (``local-cluster[2,1,1024]``, the ``spark`` fixture) and
    :data:`tests.support.delta_tables.DELTA_SPARK` (the same with Delta Lake's connector,
    the ``delta_spark`` fixture) are the two; ``conf`` is called at each start for the
    session's confs."""

    MASTER = "local-cluster[2,1,1024]"

    def __init__(self, master: str = MASTER, conf=dict):
        self.master = master
        self.make_conf = conf
        self.session = None
        self.conf: set = set()
        SHARED.append(self)

    def take(self):
        if self.session is not None and not running(self.session):
            self.session = None  # ended with its JVM (a module's fresh_jvm)
        if self.session is None:
            self.session = make_spark(self.master, **self.make_conf())
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
        if s is not None and running(s):  # not one whose JVM a module already shut down
            stop_spark(s)


# What Spark's own code sets in a session's runtime conf as it works, not a module's change:
# Delta 3.3 records the version of the session's last commit (DeltaSQLConf's
# DELTA_LAST_COMMIT_VERSION_IN_SESSION, set by OptimisticTransactionImpl on every commit).
BOOKKEEPING = {"spark.databricks.delta.lastCommitVersionInSession"}


def runtime_conf(s) -> set:
    """The session's runtime SQL conf set beyond the defaults (``SET``), Spark's own
    bookkeeping (:data:`BOOKKEEPING`) left out."""
    return {(r[0], r[1]) for r in s.sql("SET").collect() if r[0] not in BOOKKEEPING}


def running(s) -> bool:
    """Whether ``s`` is this process's active Spark application (not stopped, its JVM
    not shut down for another's)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is s.sparkContext and s.sparkContext._jsc is not None


# Every SharedSpark: make_spark ends them all before it starts a session (one JVM at a time).
SHARED: list[SharedSpark] = []
DEFAULT_SPARK = SharedSpark()


def active_jobs(spark) -> list[int]:
    return list(spark.sparkContext.statusTracker().getActiveJobsIds())


def task_localities(spark, group: str) -> list[tuple[str, str]]:
    """``(locality, host)`` of every task of the jobs of job group ``group``, as Spark's
    status store has them (``NODE_LOCAL``: the task ran on a host its partition prefers)."""
    sc = spark.sparkContext
    tracker, store = sc.statusTracker(), sc._jsc.sc().statusStore()
    out = []
    for job in tracker.getJobIdsForGroup(group):
        for stage in tracker.getJobInfo(job).stageIds:
            tasks = store.taskList(stage, tracker.getStageInfo(stage).currentAttemptId, 100_000)
            out += [(tasks.apply(k).taskLocality(), tasks.apply(k).host()) for k in range(tasks.size())]
    return out


def assert_no_leftovers(spark, cluster) -> None:
    """Nothing of ``cluster`` is left: processes, Spark jobs, scheduler port."""
    assert wait_until(lambda: not dask_processes(cluster.tag)), [p.info for p in dask_processes(cluster.tag)]
    assert wait_until(lambda: not active_jobs(spark)), active_jobs(spark)
    assert not port_open(cluster.scheduler_address)


@contextlib.contextmanager
def executor_python_path(spark, directory):
    """The executors' Python of the Python functions made in the block: the real one
    with ``directory`` first on its ``PYTHONPATH`` (a wrapper script as
    ``sc.pythonExec``, which pyspark puts in each function; Spark starts fresh Python
    workers for it). What a test uses to break that Python in one way (a
    ``sitecustomize``, a fake ``dist-info``) without an application of its own."""
    sc = spark.sparkContext
    before = sc.pythonExec
    path = os.path.join(str(directory), "python-with-path.sh")
    with open(path, "w") as f:
        f.write(
            f'#!/bin/sh\nPYTHONPATH="{directory}${{PYTHONPATH:+:$PYTHONPATH}}" exec {shlex.quote(sys.executable)} "$@"\n'
        )
    os.chmod(path, 0o755)
    sc.pythonExec = path
    try:
        yield path
    finally:
        sc.pythonExec = before


def without_module(name: str) -> str:
    """The text of a ``sitecustomize.py`` that makes every import of ``name`` (and its
    submodules) fail, as where it is not installed: a directory holding it, put on an
    executor Python's ``PYTHONPATH``, takes ``name`` away from that Python only."""
    return textwrap.dedent(
        f"""
        import sys


        class Without:
            def find_spec(self, name, path=None, target=None):
                if name == {name!r} or name.startswith({name + "."!r}):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None


        sys.meta_path.insert(0, Without())
        """
    )


def decommission_executor(spark, executor_id: str, message: str = "test") -> bool:
    """Spark decommissions executor ``executor_id`` from the driver, as its own
    WorkerDecommissionSuite does (``CoarseGrainedSchedulerBackend.decommissionExecutor``,
    where a standalone Worker's SIGPWR and the allocation manager end too); True when
    Spark took it."""
    jvm = spark.sparkContext._jvm
    info = jvm.org.apache.spark.scheduler.ExecutorDecommissionInfo(message, jvm.scala.Option.apply(None))
    return bool(spark.sparkContext._jsc.sc().schedulerBackend().decommissionExecutor(executor_id, info, False, False))
