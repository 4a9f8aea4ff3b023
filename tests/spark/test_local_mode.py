"""``local[N]`` masters: what ``SparkSession.builder.getOrCreate()`` gives by default.

The driver JVM runs the tasks; there are no executors to wait for.
"""

from __future__ import annotations

import glob
import os
import stat

import dask.dataframe as dd
import pandas as pd
import pytest

import spark_dask
from spark_dask.handoff import transfer
from spark_dask.handoff.files import DIR_PREFIX
from tests.support import users
from tests.support.parts import parts_of
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


@pytest.mark.newest  # the files are written by the same code on pyspark 3.5 (test_handoff.py's core tests)
def test_another_local_user_reads_nothing_of_a_hand_off(spark):
    """Issue 54. In local mode the hand-off's files sit in the driver's block manager
    directory, right in /tmp (``blockmgr-<uuid>``, which Spark makes with the umask's
    mode: 0755): the transfer directories of to_dask and to_spark must be mode 0700 and
    their Arrow files 0600, so that a second Unix user (made by the test) can neither
    list nor read them while the data is handed over. (On local-cluster and standalone
    the executors' directories are 0700 already; the connection files, the state
    directory and its lock: tests/unit/test_local_users.py.)"""
    with users.other_user() as other, spark_dask.start(spark, progress=False) as client:
        ddf = spark_dask.to_dask(spark.range(0, 3000, 1, 3).selectExpr("id", "id * 2 as y"))  # Spark wrote its files
        spark_dask.to_spark(ddf[ddf.y % 3 == 0])  # the Dask worker writes its files now; Spark reads them lazily
        roots = {w["root"] for w in client.run(transfer.host_info).values()}
        dirs = sorted(d for r in roots for d in glob.glob(os.path.join(r, f"{DIR_PREFIX}{client.cluster.tag}-*")))
        files = sorted(f for d in dirs for f in glob.glob(os.path.join(d, "*")))
        assert len(dirs) == 2 and len(files) >= 4, (dirs, files)  # to_dask's 3 partitions, to_spark's
        assert other.reaches(roots) == [f"listed {r}" for r in sorted(roots)]  # Spark's own directory is open
        assert other.reaches(dirs + files) == []
        modes = {p: stat.S_IMODE(os.stat(p).st_mode) for p in dirs + files}
        assert modes == {**dict.fromkeys(dirs, 0o700), **dict.fromkeys(files, 0o600)}
