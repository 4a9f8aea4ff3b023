"""``spark.python.daemon.module=spark_dask.spark.daemon``: the executors' Python workers
are forked from a daemon that imported distributed (issue 70, point 3: warm first starts).

One application of its own (the setting is read when an executor starts its daemon):
its first Python tasks run in Python workers that have distributed loaded and frozen
before their task began, forked from Spark's daemon running this module; a Dask
cluster's gang tasks run there too, and the cluster works and leaves nothing behind;
the doctor says nothing of the daemon where it is on. Spark 3.5 (whose daemon imports
its worker module before the fork) and 4.x (after it) alike: ``core``.
"""

from __future__ import annotations

import sys

import pytest

import spark_dask
from spark_dask.spark import daemon
from spark_dask.spark.shipping import ship_by_value
from tests.support.spark import assert_no_leftovers, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(240)]
ship_by_value(sys.modules[__name__])  # the task functions below: the executors cannot import tests/


@pytest.fixture(scope="module")
def spark():
    s = make_spark("local-cluster[1,2,1024]", **{daemon.CONF: daemon.MODULE})
    yield s
    stop_spark(s)


def _at_task_start(_it):
    import gc
    import os
    import sys

    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = f.read().split(b"\0")
    yield ("distributed" in sys.modules, gc.get_freeze_count(), [a.decode() for a in parent])


def _ancestors_cmdlines():
    import psutil

    return [" ".join(p.cmdline()) for p in psutil.Process().parents()]


def test_python_workers_are_forked_with_distributed_loaded(spark):
    got = spark.sparkContext.parallelize(range(2), 2).mapPartitions(_at_task_start).collect()
    assert len(got) == 2
    for loaded, frozen, parent in got:
        assert parent[parent.index("-m") + 1] == daemon.MODULE  # Spark ran this daemon ...
        assert loaded and frozen > 10_000  # ... and the task's Python worker had it all already


def test_a_cluster_starts_from_it_and_leaves_nothing(spark):
    cluster = spark_dask.SparkCluster(spark, n_workers=2, worker="cpu", quiet=True)
    try:
        with cluster.get_client() as client:
            assert client.submit(sum, [1, 2, 3]).result(timeout=60) == 6
            lines = client.run(_ancestors_cmdlines)
        for ancestors in lines.values():  # worker <- nanny <- gang task <- the daemon
            assert any(f"-m {daemon.MODULE}" in c for c in ancestors), ancestors
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)


def test_the_doctor_does_not_suggest_it_again(spark):
    found = spark_dask.doctor(spark)
    assert found.ready, found.render()
    assert not [f for f in found.findings if daemon.CONF in f.fix]
