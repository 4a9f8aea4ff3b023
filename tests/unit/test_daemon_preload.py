"""The preloading Python daemon's imports, in a Python of their own (no Spark): what it
loads before PySpark's daemon forks must start no Python thread and hold no random state
that every forked Python worker would share."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from spark_dask.spark import daemon

pytestmark = pytest.mark.timeout(120)

PROBE = """
import gc, json, sys, threading
from spark_dask.spark import daemon
loaded = daemon.preload()
gc.collect(); gc.freeze()
print(json.dumps({"loaded": loaded, "threads": [t.name for t in threading.enumerate()],
                  "modules": sorted(sys.modules), "frozen": gc.get_freeze_count()}))
"""


@pytest.fixture(scope="module")
def preloaded():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=100, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_it_loads_what_a_gang_task_imports(preloaded):
    assert set(daemon.PRELOADED) <= set(preloaded["loaded"]) <= {*daemon.PRELOADED, *daemon.OPTIONAL}
    assert {"distributed.nanny", "distributed.worker", "pyspark.worker"} <= set(preloaded["modules"])
    assert preloaded["frozen"] > 10_000  # distributed's and pyspark's modules, out of the full collections


def test_it_starts_no_python_thread_and_holds_no_random_state(preloaded):
    assert preloaded["threads"] == ["MainThread"]
    # numpy.random's global generator would be the same in every forked Python worker
    assert "numpy.random" not in preloaded["modules"]


def test_the_conf_names_this_module():
    assert daemon.MODULE == daemon.__name__ and daemon.CONF == "spark.python.daemon.module"
