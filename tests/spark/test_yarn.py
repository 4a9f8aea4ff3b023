"""spark-dask on YARN: a ResourceManager and two NodeManagers on this machine
(:class:`tests.support.yarn.YarnBed`, the ``yarn-3.3`` jars group), a client-mode
application with two executors in YARN containers, and what a user does with it."""

from __future__ import annotations

import os

import pytest

import spark_dask
from tests.support.jars import require
from tests.support.processes import wait_until
from tests.support.spark import assert_no_leftovers, make_spark, stop_spark
from tests.support.yarn import HADOOP, JARS_GROUP, YarnBed, daemon_jars_dir, find_java_home

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


def _missing(reason: str) -> None:
    """Skip for ``reason``; under CI, fail: CI has Java, the jars and ``.venv35``."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the YARN tests: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """The RM and 2 NMs, for the module."""
    jars = require(JARS_GROUP)
    if find_java_home() is None:
        _missing("no Java (JAVA_HOME or java on PATH)")
    if daemon_jars_dir() is None:
        _missing(f"no pyspark with Hadoop {HADOOP}'s client jars (pyspark 3.5, or .venv35) for the YARN daemons")
    with YarnBed.start(str(tmp_path_factory.mktemp("yarn")), nodemanagers=2, jars=jars) as b:
        yield b


@pytest.fixture(scope="module")
def spark(bed):
    """A session on the bed: HADOOP_CONF_DIR in this process's environment while it
    starts its JVM (and runs), back as it was after."""
    before = os.environ.get("HADOOP_CONF_DIR")
    os.environ["HADOOP_CONF_DIR"] = bed.conf_dir
    try:
        conf = bed.spark_conf(executors=2, cores=2)
        s = make_spark(conf.pop("spark.master"), **conf)
        try:
            yield s
        finally:
            stop_spark(s)
    finally:
        if before is None:
            os.environ.pop("HADOOP_CONF_DIR", None)
        else:
            os.environ["HADOOP_CONF_DIR"] = before


def _total(client) -> int:
    import dask.array as da

    return int(client.compute(da.arange(100_000, chunks=10_000).sum()).result())


def _make_container_id():
    # a closure: Dask pickles it by value (the tests package is not on the workers)
    def container_id():
        import os

        return os.environ.get("CONTAINER_ID")

    return container_id


_container_id = _make_container_id()


def test_start_compute_scale_close_on_yarn(spark, bed):
    assert spark.sparkContext.master == "yarn"
    client = spark_dask.start(spark, n_workers=2)
    cluster = client.cluster
    try:
        containers = set(client.run(_container_id).values())
        assert len(containers) == 2 and all(c and c.startswith("container_") for c in containers), containers
        assert _total(client) == 4_999_950_000

        cluster.scale(1)
        assert wait_until(lambda: len(client.scheduler_info()["workers"]) == 1, timeout=60)
        cluster.scale(2)
        client.wait_for_workers(2, timeout=90)
        assert _total(client) == 4_999_950_000
        assert all(c and c.startswith("container_") for c in client.run(_container_id).values())
    finally:
        client.close()
    assert_no_leftovers(spark, cluster)
    assert bed.metrics()["appsRunning"] == 1  # the application itself, still up
