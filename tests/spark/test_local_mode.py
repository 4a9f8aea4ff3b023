"""``local[N]`` masters: what ``SparkSession.builder.getOrCreate()`` gives by default.

The driver JVM runs the tasks; there are no executors to wait for.
"""

from __future__ import annotations

import os

import dask.dataframe as dd
import pandas as pd
import pytest

import spark_dask
from spark_dask.parts import parts_of
from tests.support.spark import assert_no_leftovers, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def spark():
    s = make_spark("local[2]")
    s.sparkContext.setLogLevel("WARN")  # Spark's warnings are part of what a user sees
    yield s
    stop_spark(s)


def test_local_master_starts_at_once_and_computes(spark, capfd):
    with spark_dask.start(spark, progress=False) as client:
        cluster = client.cluster
        facts = parts_of(cluster).facts
        assert facts.local_mode and facts.executors == 1 and facts.executor_cores == 2
        assert (cluster.gang_plan.n_workers, cluster.gang_plan.kind) == (1, "cpu")
        # recognised from the master: no executor-wait (30 s) for executors that never come
        assert parts_of(cluster).timings["facts"] < 5, parts_of(cluster).timings
        pdf = pd.DataFrame({"k": [i % 3 for i in range(300)], "x": range(300)})
        got = dd.from_pandas(pdf, npartitions=4).groupby("k").x.sum().compute().sort_index()
        pd.testing.assert_series_equal(got, pdf.groupby("k").x.sum().sort_index())
        pids = set(client.run(os.getpid).values())
        assert os.getpid() not in pids
        # the gang took one of the two slots: a Spark job runs beside it
        assert spark.range(10).count() == 10
    assert_no_leftovers(spark, cluster)
    err = capfd.readouterr().err
    assert "Requesting executors is not supported" not in err
    assert "every task slot Spark jobs can use" not in err


def test_local_one_slot_is_said_at_start(spark):
    with pytest.warns(UserWarning, match="every task slot Spark jobs can use"):
        client = spark_dask.start(spark, n_workers=2, progress=False)
    cluster = client.cluster
    client.close()
    assert_no_leftovers(spark, cluster)
