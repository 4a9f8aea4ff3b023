"""``spark-dask run`` in YARN cluster mode: spark-submit puts the driver, and with it the
Dask scheduler, in the application master's container; the script runs there against
the cluster the command started, and everything ends with the application."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from spark_dask import cli
from tests.support.processes import wait_until
from tests.support.yarn import processes_under
from tests.support.yarn_fixtures import yarn_bed

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SPARK_SUBMIT = os.path.join(os.path.dirname(sys.executable), "spark-submit")
# the user's script: a computation on the command's cluster, its result where the test
# reads it (on a real cluster: HDFS or an object store; here the containers share a disk)
JOB = """\
import os
import sys

import dask.array as da
from distributed import Client

client = Client()  # the command's cluster (its scheduler file in the environment)
total = int(client.compute(da.arange(100_000, chunks=10_000).sum()).result())
workers = sorted(set(client.run(lambda: os.environ.get("CONTAINER_ID")).values()))
with open(sys.argv[1], "w") as f:
    f.write(" ".join([str(total), os.environ.get("CONTAINER_ID", "?"), *workers]))
"""


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    with yarn_bed(str(tmp_path_factory.mktemp("yarn-cluster-mode"))) as b:
        yield b


def _submit(bed, tmp_path, out) -> subprocess.CompletedProcess:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    conf = bed.spark_conf(executors=2, cores=2)
    for key in ("spark.master", "spark.submit.deployMode", "spark.driver.host", "spark.driver.bindAddress"):
        conf.pop(key)  # the driver runs in a container: its own address
    conf.update(
        {
            "spark.yarn.appMasterEnv.PYSPARK_PYTHON": sys.executable,  # the driver's Python, in the AM
            "spark.driver.memory": "768m",
            "spark.executor.memoryOverhead": "1536m",
            "spark.log.level": "WARN",
        }
    )
    cmd = [SPARK_SUBMIT, "--master", "yarn", "--deploy-mode", "cluster", "--files", str(job)]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [cli.__file__, "run", "--n-workers", "2", "--no-progress", "job.py", str(out)]
    env = dict(
        os.environ,
        HADOOP_CONF_DIR=bed.conf_dir,
        PYSPARK_PYTHON=sys.executable,
        PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
    )
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=str(tmp_path))


def test_spark_dask_run_in_cluster_mode(bed, tmp_path):
    out = tmp_path / "result.txt"
    t0 = time.monotonic()
    proc = _submit(bed, tmp_path, out)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "final status: SUCCEEDED" in proc.stderr, proc.stderr[-3000:]  # YARN's application report
    total, driver, *workers = out.read_text().split()
    assert total == "4999950000"
    assert driver.endswith("_000001")  # the script ran in the AM's container: cluster mode
    assert len(workers) == 2 and driver not in workers and all(w.startswith("container_") for w in workers)
    # (the RM's REST answer from the shaded minicluster lacks the apps' states: the
    # application report spark-submit prints is YARN's word, asserted above)
    # nothing of the application is left in the bed: no container, no Dask process
    daemons = {d.process.pid for d in [bed.rm, *bed.nms]}
    assert wait_until(lambda: not [p for p in processes_under(bed.directory) if p.pid not in daemons], 30)
    assert time.monotonic() - t0 < 240
