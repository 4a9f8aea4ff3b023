"""Executors whose Python lacks ``distributed``: the executor's own error, at once.

The Spark application's Python workers run a fresh virtualenv that has nothing but the
standard library (PySpark ships its own code to them).
"""

from __future__ import annotations

import os
import sys
import time
import venv

import pytest

import spark_dask
from spark_dask import SparkDaskError
from tests.support.processes import wait_until
from tests.support.spark import active_jobs, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    env_dir = tmp_path_factory.mktemp("bare-venv")
    venv.create(env_dir, with_pip=False)
    python = str(env_dir / "bin" / "python")
    old = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = python  # read when the SparkContext starts
    try:
        s = make_spark("local-cluster[1,1,1024]", **{"spark.executorEnv.PYSPARK_PYTHON": python})
    finally:
        os.environ["PYSPARK_PYTHON"] = old or sys.executable
    s.bare_python = python
    yield s
    stop_spark(s)


def test_executor_without_distributed_reports_its_import_error(spark):
    t0 = time.monotonic()
    with pytest.raises(SparkDaskError) as e:
        spark_dask.start(spark, progress=False)
    msg = str(e.value)
    assert "cannot import distributed" in msg
    assert spark.bare_python in msg  # which Python, on which executor
    assert "executor 0" in msg
    assert time.monotonic() - t0 < 60
    assert wait_until(lambda: not active_jobs(spark))
