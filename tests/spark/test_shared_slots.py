"""Two spark-dask clusters in one Spark application share its task slots.

On ``local-cluster[2,2,1024]`` each gang task takes both cores of its executor (the
task profile asks for ``cores // 2 + 1`` CPUs): one cluster of one worker leaves an
executor to Spark, a second one takes it. The slot accounting counts every cluster of
the application, with the CPUs its tasks really hold (issue 24).
"""

from __future__ import annotations

import logging
import threading
import time

import dask
import pytest

import spark_dask
from spark_dask import HandoffError
from tests.support.processes import wait_until
from tests.support.spark import assert_no_leftovers, make_spark, stop_spark


@pytest.fixture(scope="module")
def spark():
    s = make_spark("local-cluster[2,2,1024]")
    yield s
    stop_spark(s)


def test_one_worker_leaves_an_executor_to_spark(spark, recwarn):
    with spark_dask.start(spark, n_workers=1) as client:
        assert client.cluster.gang_plan.task_cpus == 2
        assert not [w for w in recwarn if "every task slot" in str(w.message)]
        ddf = spark_dask.to_dask(spark.range(100).selectExpr("id", "id % 3 AS k"))
        assert int(ddf.id.sum().compute()) == sum(range(100))
        assert spark.sparkContext.parallelize(range(10), 2).count() == 10
    assert_no_leftovers(spark, client.cluster)


def test_second_cluster_is_warned_and_to_dask_refused(spark, caplog):
    a = spark_dask.start(spark, n_workers=1)
    try:
        with pytest.warns(UserWarning, match="every task slot Spark jobs can use") as started:
            b = spark_dask.start(spark, n_workers=1)
        hog = [w for w in started if "every task slot" in str(w.message)]
        assert len(hog) == 1
        text = str(hog[0].message)
        assert f"the application's other spark-dask cluster {a.cluster.tag} (1 task of 2 CPUs)" in text, text
        assert "close the other spark-dask cluster" in text, text
        # the warning points at this file's start() line, not into spark_dask
        assert hog[0].filename == __file__, hog[0].filename
        try:
            t0 = time.monotonic()
            with pytest.raises(HandoffError, match="hold every slot") as refused:
                spark_dask.to_dask(spark.range(10), client=b)
            assert time.monotonic() - t0 < 30
            assert a.cluster.tag in str(refused.value) and "close the other spark-dask cluster" in str(refused.value)
            # the first cluster's transfer is refused too: the second holds the other executor
            with pytest.raises(HandoffError, match=b.cluster.tag):
                spark_dask.to_dask(spark.range(10), client=a)
            # a DataFrame query waits, and a third cluster's start waits for slots beside it:
            # the query is said once (not once per cluster), by its name, not Spark's call
            # site; the third cluster's gang is no "Spark stage waiting" of the others: its
            # own start says that it got no slots, naming the gangs that hold them
            result, third = {}, {}
            query = spark.range(0, 100, 1, 2).selectExpr("id % 3 AS k").groupBy("k").count()
            job = threading.Thread(target=lambda: result.update(rows=query.collect()))

            def start_a_third():
                with dask.config.set({"spark-dask.slot-wait": 14}):
                    try:
                        spark_dask.start(spark, n_workers=1, progress=False).close()
                    except spark_dask.ClusterError as e:
                        third["error"] = str(e)

            starter = threading.Thread(target=start_a_third)
            with caplog.at_level(logging.WARNING, logger="spark_dask"):
                job.start()
                starter.start()
                assert wait_until(lambda: any("has waited" in r.getMessage() for r in caplog.records), 60)
                starter.join(60)
            said = [r.getMessage() for r in caplog.records if "has waited" in r.getMessage()]
            assert len(said) == 1, said
            assert "(a DataFrame or SQL query)" in said[0] and "$anonfun" not in said[0], said
            assert "(2 of the application's 4 cores)" in said[0], said
            assert "the other spark-dask cluster" in said[0], said
            assert "got no free task slots" in third.get("error", ""), third
            assert f"spark-dask: barrier stage {a.cluster.tag}" in third["error"], third
            assert f"spark-dask: barrier stage {b.cluster.tag}" in third["error"], third
        finally:
            b.close()
            b.cluster.close()
        job.join(60)
        assert sorted(row["k"] for row in result.get("rows", [])) == [0, 1, 2]
    finally:
        a.close()
        a.cluster.close()
    assert_no_leftovers(spark, a.cluster)
