"""The gang's RDD on real Spark: its task profile, and one Python worker per task.

local-cluster[1,2,1024]: one executor with two cores, so a profile asking for both is
told apart from Spark's default of one.
"""

from __future__ import annotations

import json

import pytest

from spark_dask.capacity import GangPlan
from spark_dask.spark.launcher import gang_rdd
from tests.support.spark import make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def spark():
    s = make_spark("local-cluster[1,2,1024]")
    yield s
    stop_spark(s)


def _reporter():
    # A closure: pickled by value, so the executors need not import this test module.
    def report(iterator):
        import json as _json
        import os as _os

        from pyspark import TaskContext

        ctx = TaskContext.get()
        yield _json.dumps({"items": list(iterator), "cpus": ctx.cpus(), "barrier": type(ctx).__name__,
                           "pid": _os.getpid()})  # fmt: skip

    return report


@pytest.mark.parametrize("barrier", [True, False])
def test_the_profile_is_on_the_last_rdd_so_the_task_function_runs_in_one_python_worker(spark, barrier):
    plan = GangPlan(kind="cpu", pinned=False, n_workers=1, n_tasks=1, task_cpus=2, barrier=barrier)
    rdd = gang_rdd(spark.sparkContext, plan, _reporter())
    profile = rdd.getResourceProfile()
    assert profile is not None and profile.taskResources["cpus"].amount == 2
    # One Python pipeline: parallelize(range(n)) is itself a Python RDD, and a profile
    # put on it would make our function a second one, run by a second Python worker.
    lineage = rdd.toDebugString().decode()
    assert lineage.count("PythonRDD[") == 1, lineage
    (row,) = [json.loads(r) for r in rdd.collect()]
    assert row["items"] == [0]
    assert row["cpus"] == 2  # the task ran with the profile, not the default (1 CPU)
    assert row["barrier"] == ("BarrierTaskContext" if barrier else "TaskContext")


def test_without_a_profile_the_stage_uses_the_default(spark):
    plan = GangPlan(kind="cpu", pinned=False, n_workers=2, n_tasks=2)
    rdd = gang_rdd(spark.sparkContext, plan, _reporter())
    assert rdd.getResourceProfile() is None
    rows = [json.loads(r) for r in rdd.collect()]
    assert sorted(r["items"] for r in rows) == [[0], [1]]
    assert {r["cpus"] for r in rows} == {1}
