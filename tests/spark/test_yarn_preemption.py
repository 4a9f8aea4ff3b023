"""YARN preemption: the Dask cluster's application in queue ``a`` holds more than the
queue's guaranteed capacity, another application in queue ``b`` asks for its own, and
the CapacityScheduler's preemption monitor takes one of the first application's
executor containers back (ContainerExitStatus.PREEMPTED, -102). The loss line names
it, the cluster runs on with the workers the executor left can hold, and gets the other
back once the second application ends.

Two NodeManagers of 4 GiB (8 GiB in all). Queue ``a`` is guaranteed 40 % (3.2 GiB),
``b`` 60 %, each may grow to 100 % (``user-limit-factor`` lets one user's application
do so). The Dask cluster's application: its AM (640 MiB) and two executors of 2 GiB,
4.6 GiB, over ``a``'s share; the second: the same, of which its AM and one executor fit
in what is free, and the other executor is what ``b`` claims back from ``a``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import spark_dask
from tests.support.processes import wait_until
from tests.support.spark import assert_no_leftovers
from tests.support.yarn_fixtures import session_on, yarn_bed

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

MONITOR = "yarn.resourcemanager.monitor.capacity.preemption."
QUEUES = "yarn.scheduler.capacity.root."
SETTINGS = {
    "yarn.resourcemanager.scheduler.monitor.enable": "true",
    "yarn.resourcemanager.scheduler.monitor.policies": (
        "org.apache.hadoop.yarn.server.resourcemanager.monitor.capacity.ProportionalCapacityPreemptionPolicy"
    ),
    # a round each second; a container marked for preemption is killed 2 s later
    # (15 s by default); all that is owed at once, no dead zone
    MONITOR + "monitoring_interval": "1000",
    MONITOR + "max_wait_before_kill": "2000",
    MONITOR + "natural_termination_factor": "1.0",
    MONITOR + "total_preemption_per_round": "1.0",
    MONITOR + "max_ignored_over_capacity": "0",
    QUEUES + "queues": "a,b",
    QUEUES + "a.capacity": "40",
    QUEUES + "a.maximum-capacity": "100",
    QUEUES + "a.user-limit-factor": "10",
    QUEUES + "b.capacity": "60",
    QUEUES + "b.maximum-capacity": "100",
    QUEUES + "b.user-limit-factor": "10",
}
EXECUTOR = {"spark.executor.memoryOverhead": "1536m"}  # 512 MiB heap + 1.5 GiB: 2 GiB containers
# The second application: a session in queue b, held until its stdin closes.
CLAIMANT = """
import json, sys
from pyspark.sql import SparkSession
builder = SparkSession.builder.appName("spark-dask-tests-claimant")
for k, v in json.loads(sys.argv[1]).items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()
print("started", flush=True)
sys.stdin.read()
spark.stop()
"""


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    with yarn_bed(str(tmp_path_factory.mktemp("yarn-preemption")), settings=SETTINGS) as b:
        yield b


@pytest.fixture(scope="module")
def spark(bed):
    with session_on(bed, **{"spark.yarn.queue": "a", **EXECUTOR}) as s:
        yield s


def claimant(bed) -> subprocess.Popen:
    """The second application, in queue b (started; ended by closing its stdin)."""
    conf = {**bed.spark_conf(executors=2, cores=2), "spark.yarn.queue": "b", "spark.ui.enabled": "false", **EXECUTOR}
    env = {**os.environ, "HADOOP_CONF_DIR": bed.conf_dir}
    return subprocess.Popen(
        [sys.executable, "-c", CLAIMANT, json.dumps(conf)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )


def _loss_lines(cluster) -> list[str]:
    return [line for line in cluster.get_logs()["Cluster"].splitlines() if "failed (executor" in line]


def test_a_preempted_executor_is_named_and_its_workers_come_back(spark, bed):
    client = spark_dask.start(spark, n_workers=2, progress=False)
    cluster = client.cluster
    other = None
    try:
        assert bed.metrics()["allocatedMB"] == 640 + 2 * 2048  # over queue a's 40 % (3276 MiB)
        t0 = time.monotonic()
        other = claimant(bed)
        assert wait_until(lambda: _loss_lines(cluster), timeout=90), cluster.get_logs()["Cluster"][-3000:]
        t_loss = time.monotonic()
        line = _loss_lines(cluster)[0]
        assert "lost: YARN preempted its container (PREEMPTED: the queue's capacity went to another application)" in (
            line
        ), line
        assert "2 Dask workers lost" in line and "starting 1 now" in line and "1 more once Spark" in line, line
        client.wait_for_workers(1, timeout=60)
        assert client.submit(sum, range(10)).result(timeout=60) == 45
        other.stdin.close()  # the second application ends: its capacity comes back to queue a
        other.wait(60)
        other = None
        t_end = time.monotonic()
        client.wait_for_workers(2, timeout=120)
        print(f"\npreempted {t_loss - t0:.1f} s after the second application started; both workers back "
              f"{time.monotonic() - t_end:.1f} s after it ended\n{line}")  # fmt: skip
        assert client.submit(sum, range(100)).result(timeout=60) == 4950
    finally:
        if other is not None:
            other.kill()
            other.wait(30)
        client.close()
    assert_no_leftovers(spark, cluster)
