"""to_dask / to_spark beside a gang that holds every (fake) GPU: the transfer's Spark
tasks run with a CPU-only stage-level task profile.

local-cluster[1,4,1024]: one executor, four cores, two fake GPUs, one GPU per task
(Databricks' default): the gang's two tasks hold both GPUs, a default-profile task would
wait for a GPU forever; the CPU-only profile uses the two cores they leave.
"""

from __future__ import annotations

import time
import warnings

import pytest

import spark_dask
from spark_dask import HandoffError
from spark_dask.handoff import driver as handoff
from spark_dask.spark import jobs
from tests.support.gpus import gpu_conf
from tests.support.parts import parts_of
from tests.support.processes import wait_until
from tests.support.spark import active_jobs, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def spark():
    s = make_spark("local-cluster[1,4,1024]", **gpu_conf(2, "1"))
    yield s
    stop_spark(s)


def test_transfers_run_beside_a_gang_holding_every_gpu(spark, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the gang takes every GPU slot: start() says so
        client = spark_dask.start(spark, worker="cpu", progress=False)
    with client:
        assert client.cluster.gang_plan.n_workers == 2 and parts_of(client.cluster).facts.task_gpus == 1
        profiles = []
        real = jobs.cpu_profile
        monkeypatch.setattr(jobs, "cpu_profile", lambda s: profiles.append(1) or real(s))
        df = spark.range(0, 20_000, 1, 4).selectExpr("id", "id * 2 AS y")
        ddf = spark_dask.to_dask(df)
        assert ddf["y"].sum().compute() == 2 * sum(range(20_000))
        back = spark_dask.to_spark(ddf, checkpoint=True)  # read and kept by CPU-only tasks
        assert len(profiles) == 2  # both jobs asked for 1 CPU and no GPU

        # the GPU check script's round trip runs no default-profile Spark job either
        from tools import gpu_check

        ok, text = gpu_check._handoff_check(spark, client, n=20_000)
        assert "partitions are pandas, exact: True" in text and "to_spark" in text and "(exact: True)" in text
        # without cudf here the check expects pandas partitions (cudf ones where it is installed)
        assert "with a CPU-only profile" in text and ok

        # without stage-level profiles the transfer would wait for a GPU: refused at once
        monkeypatch.setattr(handoff, "task_profiles_supported", lambda s: False)
        gang_jobs = set(active_jobs(spark))
        t0 = time.monotonic()
        with pytest.raises(HandoffError, match="holds? every slot") as e:
            spark_dask.to_dask(df)
        assert time.monotonic() - t0 < 30
        msg = str(e.value)
        assert "stage-level scheduling" in msg and "n_workers=1" in msg and "spark.executor.cores" in msg
        with pytest.raises(HandoffError, match="to_spark needs Spark task slots"):
            spark_dask.to_spark(ddf)
        assert set(active_jobs(spark)) == gang_jobs  # nothing was submitted
    assert wait_until(lambda: not active_jobs(spark))
    # Spark jobs on the result use the default profile (a GPU each), like any Spark job
    # beside this gang: they run once it has closed, from the checkpointed rows
    assert back.count() == 20_000 and back.selectExpr("sum(y)").collect()[0][0] == 2 * sum(range(20_000))
