"""``spark-submit --master spark://driver:7077`` of a ``spark-dask run`` job on the
multi-host cluster (``tests/support/hosts.py``), run on host ``driver`` as a user would: the job
script's plain ``Client()`` reaches one Dask worker per executor host; the cluster and
the application end with the script. No driver service runs here: the submitted
application gets every core."""

from __future__ import annotations

import json
import os
import sys

import pytest

import spark_dask.cli
from tests.support.hosts import DRIVER, spark_home
from tests.support.processes import wait_until
from tests.support.spark import submit_confs

pytestmark = [pytest.mark.multihost, pytest.mark.timeout(240)]

JOB = """
import json, socket, sys
from distributed import Client
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
client = Client()
hosts = client.run(socket.gethostname)
out = {
    "me": socket.gethostname(),
    "master": spark.sparkContext.master,
    "scheduler": client.scheduler.address,
    "workers": sorted(hosts.values()),
    "addresses": sorted(a.split("://")[1].rsplit(":", 1)[0] for a in hosts),
    "total": client.submit(sum, range(10)).result(),
    "count": spark.range(1000).count(),
}
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
"""


def test_spark_submit_of_a_spark_dask_run_job(multihost):
    job, result = f"{multihost.shared_dir}/job.py", f"{multihost.shared_dir}/job-result.json"
    with open(job, "w") as f:
        f.write(JOB)
    driver_ip = multihost.hosts[DRIVER].ip
    argv = [os.path.join(spark_home(), "bin", "spark-submit"), *submit_confs(), "--master", multihost.master_url,
            "--conf", f"spark.driver.host={driver_ip}", "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.executorEnv.PYSPARK_PYTHON={sys.executable}", "--conf", "spark.executor.memory=1g",
            # how many executors to wait for: standalone does not say, and without it the
            # cluster starts with the executors registered so far (one of two, at times)
            "--conf", "spark.executor.instances=2",
            spark_dask.cli.__file__, "run", "--no-progress", job, result]  # fmt: skip
    done = multihost.run(DRIVER, argv, timeout=200)
    with open(result) as f:
        got = json.load(f)
    assert got["me"] == "driver" and got["master"] == multihost.master_url
    assert got["scheduler"].startswith(f"tls://{driver_ip}:")
    assert got["workers"] == ["worker-1", "worker-2"]
    assert got["addresses"] == ["198.18.0.11", "198.18.0.12"]
    assert (got["total"], got["count"]) == (45, 1000)
    assert done.returncode == 0
    assert wait_until(lambda: not multihost.dask_processes(), 20), multihost.dask_processes()
    assert wait_until(lambda: not any(multihost.executor_pids(h.name) for h in multihost.workers), 30)
