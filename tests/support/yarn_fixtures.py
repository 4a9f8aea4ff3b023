"""What a test module on YARN starts: the bed (:class:`tests.support.yarn.YarnBed`),
skipped where it cannot run here and failed under CI, which must run it; and a Spark
application on it, in client mode."""

from __future__ import annotations

import contextlib
import os

import pytest

from spark_dask.commands.run import environment
from tests.support.jars import require
from tests.support.spark import make_spark, stop_spark
from tests.support.yarn import JARS_GROUP, YarnBed, unavailable


def _missing(reason: str) -> None:
    """Skip for ``reason``; under CI, fail: CI has Java, the jars and ``.venv35``."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the YARN tests: {reason}", pytrace=False)
    pytest.skip(reason)


def yarn_jars() -> list[str]:
    """The daemons' jars (fetched once); skipped (under CI: failed) where Java or a
    pyspark with Hadoop 3.3.4's client jars is missing."""
    jars = require(JARS_GROUP)
    reason = unavailable()
    if reason:
        _missing(reason)
    return jars


@contextlib.contextmanager
def yarn_bed(directory: str, nodemanagers: int = 2, settings: dict | None = None):
    """A started :class:`YarnBed` under ``directory``, stopped after the block."""
    jars = yarn_jars()
    with YarnBed.start(directory, nodemanagers=nodemanagers, jars=jars, settings=settings) as bed:
        yield bed


@contextlib.contextmanager
def session_on(bed: YarnBed, executors: int = 2, cores: int = 2, **conf):
    """A client-mode SparkSession on ``bed`` (``conf`` over :meth:`YarnBed.spark_conf`):
    ``HADOOP_CONF_DIR`` in this process's environment while its JVM starts and runs,
    back as it was after; the session stopped after the block."""
    with environment(HADOOP_CONF_DIR=bed.conf_dir):
        settings = {**bed.spark_conf(executors=executors, cores=cores), **conf}
        spark = make_spark(settings.pop("spark.master"), **settings)
        try:
            yield spark
        finally:
            stop_spark(spark)
