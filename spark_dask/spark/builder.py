"""The command line's own SparkSession: the active one, or one made from ``--master``,
``--conf`` and ``--app-name`` (:func:`get_or_create_session`, with the defaults a
``spark-dask`` command wants of a session it makes), and Spark's log of a failed task
kept quiet while a cluster starts (:func:`quiet_task_failures`).

pyspark is imported where it is used: ``spark-dask --help`` and ``spark-dask list`` run
without it.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager, suppress

from spark_dask.spark import databricks
from spark_dask.spark.pyspark_warnings import pandas3_warning_off
from spark_dask.spark.session import require_pyspark


def _conf_given(key: str) -> bool:
    """Whether ``spark-submit --conf`` / ``spark-defaults.conf`` set ``key``."""
    from pyspark import SparkConf

    try:
        return bool(SparkConf().contains(key))
    except Exception:  # noqa: BLE001
        return False


def _executors_python_unset(master: str | None, conf: dict | None) -> bool:
    """Whether a new session would be local (``local``, ``local-cluster`` masters) and
    the user named no Python for its executors (``PYSPARK_PYTHON``,
    ``spark.pyspark.python``)."""
    from pyspark import SparkConf

    conf = conf or {}
    if os.environ.get("PYSPARK_PYTHON") or "spark.pyspark.python" in conf or _conf_given("spark.pyspark.python"):
        return False
    if not master:
        try:
            master = SparkConf().get("spark.master", None)
        except Exception:  # noqa: BLE001 - no readable defaults: leave the executors' Python alone
            return False
    return (master or "local[*]").startswith("local")


def get_or_create_session(master: str | None = None, conf: dict | None = None, app_name: str | None = None):
    """(session, created): the active SparkSession, or a new one from the options.

    ``created`` is True when this call started the SparkContext (so the caller may stop it).
    Without pyspark: an ImportError that says what to install.
    """
    require_pyspark()
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    if existing is not None and not master and not conf:
        return existing, False
    had_context = SparkContext._active_spark_context is not None
    builder = SparkSession.builder
    if master:
        builder = builder.master(master)
    if app_name:
        builder = builder.appName(app_name)
    if (
        not had_context
        and "spark.ui.showConsoleProgress" not in (conf or {})
        and not _conf_given("spark.ui.showConsoleProgress")
    ):
        # The barrier stage runs as long as the cluster: Spark's console progress bar
        # would redraw "[Stage 0:> (0 + 2) / 2]" over the script's output all the while.
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if not had_context and _executors_python_unset(master, conf):
        # A local master's executors run on this machine: give them this interpreter
        # (a venv's spark-dask run without the venv activated would give them the
        # system python3 from PATH, which lacks distributed). PySpark reads the
        # variable (not the conf) when the SparkContext starts.
        os.environ["PYSPARK_PYTHON"] = sys.executable
    with pandas3_warning_off():  # the session is spark-dask's here, and it uses no pandas through Spark
        spark = builder.getOrCreate()
    return spark, not had_context and existing is None


# The loggers of a failed task's Java stack trace on the driver: TaskSetManager's "Lost
# task", and with local[N] masters the executor's (the same JVM).
TASK_FAILURE_LOGGERS = ("org.apache.spark.scheduler.TaskSetManager", "org.apache.spark.executor.Executor")


def command_session(spark, master: str | None, conf: dict | None, app_name: str | None):
    """(session, stop it after): ``spark``, or the active or a new session
    (:func:`get_or_create_session`); a command stops the session it started, except on
    Databricks, whose session is the cluster's."""
    created = False
    if spark is None:
        spark, created = get_or_create_session(master, conf, app_name)
    return spark, created and databricks.detect(spark) is None


@contextmanager
def quiet_task_failures(spark):
    """No Spark log of the gang's failed tasks (a Java stack trace around the task's
    Python traceback) while the cluster starts: a task's error reaches the user as
    spark-dask's one message. Classic sessions with log4j 2 only; afterwards each
    logger is as before (the script's own jobs log as usual)."""
    try:
        log4j = spark.sparkContext._jvm.org.apache.logging.log4j
        context = log4j.LogManager.getContext(False)
        loggers = context.getConfiguration().getLoggers()
        before = {n: (loggers.containsKey(n), log4j.LogManager.getLogger(n).getLevel()) for n in TASK_FAILURE_LOGGERS}
        for n in TASK_FAILURE_LOGGERS:
            log4j.core.config.Configurator.setLevel(n, log4j.Level.OFF)
    except Exception:  # noqa: BLE001 - Spark Connect, another logging backend: leave it
        before = {}
    try:
        yield
    finally:
        with suppress(Exception):
            for n, (had, level) in before.items():
                if had:
                    log4j.core.config.Configurator.setLevel(n, level)
                else:  # no logger config of its own, as before (Spark's shell filter applies)
                    context.getConfiguration().removeLogger(n)
            if before:
                context.updateLoggers()
