"""spark-dask on YARN with dynamic allocation (shuffle tracking on, 0 to 2 executors):
Spark refuses barrier stages there (SPARK-24942), so each Dask worker runs as a plain
one-task Spark job; YARN gives Spark a container for each waiting one, and takes it back
once its worker has been retired and the executor idled."""

from __future__ import annotations

import time
import warnings

import pytest

import spark_dask
from spark_dask import PlanError
from tests.support.processes import wait_until
from tests.support.spark import assert_no_leftovers
from tests.support.yarn_fixtures import session_on, yarn_bed

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

IDLE = 3  # spark.dynamicAllocation.executorIdleTimeout, seconds


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    with yarn_bed(str(tmp_path_factory.mktemp("yarn-dynamic"))) as b:
        yield b


@pytest.fixture(scope="module")
def spark(bed):
    conf = {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        "spark.dynamicAllocation.minExecutors": "0",
        "spark.dynamicAllocation.initialExecutors": "0",
        "spark.dynamicAllocation.maxExecutors": "2",
        "spark.dynamicAllocation.executorIdleTimeout": f"{IDLE}s",
        "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
        "spark.executor.memoryOverhead": "1536m",
    }
    with session_on(bed, executors=0, cores=1, **conf) as s:
        yield s


def _executor_containers(bed) -> int:
    """Containers the RM has allocated to the application, its AM's apart."""
    return bed.metrics()["containersAllocated"] - 1


def test_workers_come_and_go_with_yarn_containers(spark, bed):
    assert wait_until(lambda: _executor_containers(bed) == 0, 30)  # minExecutors 0: only the AM
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        client = spark_dask.start(spark, n_workers=2, timeout=120)
    # one worker per executor (1 core each), and its container leaves it 1.12 GiB
    assert not [w for w in said if "executors' containers" in str(w.message)], [str(w.message) for w in said]
    cluster = client.cluster
    try:
        assert len(client.scheduler_info()["workers"]) == 2
        assert _executor_containers(bed) == 2  # YARN started an executor for each worker's task
        cluster.scale(1)
        assert wait_until(lambda: len(client.scheduler_info()["workers"]) == 1, 60)
        # the retired worker's executor idles, and Spark gives its container back
        assert wait_until(lambda: _executor_containers(bed) == 1, 30 + IDLE)
        assert int(client.submit(sum, range(10)).result(timeout=60)) == 45
    finally:
        client.close()
    assert_no_leftovers(spark, cluster)
    assert wait_until(lambda: _executor_containers(bed) == 0, 30 + IDLE)


def test_barrier_mode_is_refused_at_once(spark):
    t0 = time.monotonic()
    with pytest.raises(
        PlanError,
        match=r"barrier=True, but dynamic allocation is on and Spark runs no barrier stages under it \(SPARK-24942\)",
    ):
        spark_dask.start(spark, barrier=True)
    assert time.monotonic() - t0 < 10
