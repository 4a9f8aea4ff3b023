"""Behaviour that depends on the Spark version, on real local-cluster applications.

- Stage-level CPU task profiles (Spark >= 3.4 on standalone): the gang takes
  ``cores // 2 + 1`` CPUs of the executor and Spark jobs still run beside it.
- Spark 3.5 with a fractional ``spark.task.resource.gpu.amount`` and
  ``gpu_mode="exclusive"``: a task profile asking for whole GPUs would be handed GPU
  *fractions* (SPARK-45527, fixed in 4.0), two workers on one GPU. spark-dask must not
  use the profile there; the tasks then agree on one worker per GPU and report a
  shortfall at once. (The default for fractional amounts, ``gpu_mode="shared"``, needs
  no profile: tests/spark/test_gpu_shared.py, also on 3.5.)

Each class has its own Spark application (class-scoped fixtures: never two at once).
"""

from __future__ import annotations

import os

import pytest

import spark_dask
from spark_dask import SparkDaskError
from spark_dask.commands.info import describe
from spark_dask.spark import session
from tests.support.gpus import gpu_conf
from tests.support.processes import dask_processes, wait_until
from tests.support.spark import PYSPARK_VERSION, active_jobs, assert_no_leftovers, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(180)]


@pytest.fixture(scope="class")
def spark_3_cores():
    s = make_spark("local-cluster[1,3,1024]")  # one executor, three cores
    yield s
    stop_spark(s)


@pytest.fixture(scope="class")
def spark_half_gpus():
    conf = gpu_conf(2, "0.5", **{"spark.executorEnv.CUDA_VISIBLE_DEVICES": "5,7"})
    s = make_spark("local-cluster[1,2,1024]", **conf)
    yield s
    stop_spark(s)


class TestCpuTaskProfile:
    def test_gang_takes_part_of_the_executor_and_spark_jobs_still_run(self, spark_3_cores):
        spark = spark_3_cores
        with spark_dask.start(spark) as client:
            gang = client.cluster.gang_plan
            assert (gang.n_workers, gang.uses_profile, gang.task_cpus) == (1, True, 2)
            assert len(client.scheduler_info()["workers"]) == 1
            assert client.submit(sum, [1, 2, 3]).result() == 6
            # the third core stays with Spark: a job inside the block finishes
            assert spark.range(0, 100, 1, 2).count() == 100
            cluster = client.cluster
        assert_no_leftovers(spark, cluster)


@pytest.mark.skipif(PYSPARK_VERSION >= (4, 0), reason="Spark >= 4.0 gives task profiles whole GPUs")
class TestFractionalGpusOnSpark35:
    @pytest.fixture
    def spark(self, spark_half_gpus):
        return spark_half_gpus

    def test_no_task_profile_for_whole_gpus(self, spark):
        assert not session.cluster_facts(spark).task_profiles
        plan = describe(spark, worker="cpu", gpu_mode="exclusive")
        assert plan["task request"] == "default resource profile" and plan["workers"] == 2

    def test_two_workers_never_share_a_gpu(self, spark):
        # Spark hands both 0.5-GPU tasks the same address: the tasks agree on one worker
        # for that GPU and the start fails at once, naming the fix.
        with pytest.raises(SparkDaskError, match="the same GPU") as e:
            spark_dask.start(spark, worker="cpu", gpu_mode="exclusive")
        assert "n_workers=1" in str(e.value)
        assert wait_until(lambda: not active_jobs(spark))
        assert not dask_processes(spark=spark)

    def test_one_worker_per_gpu_it_owns(self, spark):
        with spark_dask.start(spark, worker="cpu", gpu_mode="exclusive", n_workers=1) as client:
            seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
            assert list(seen.values()) in (["5"], ["7"])
            cluster = client.cluster
        assert_no_leftovers(spark, cluster)
