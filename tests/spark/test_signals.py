"""Ctrl-C in a Spark call that waits for the gang's slots; SIGTERM of a notebook process.

Each test runs a driver script in a process of its own (local-cluster[2,1,1024], where
the gang holds both task slots) and sends it the signal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from spark_dask import signals
from tests.support.paths import ROOT
from tests.support.processes import dask_processes, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(300)]


PRELUDE = """
import json, os, signal, sys, time
os.environ["PYSPARK_PYTHON"] = sys.executable
sys.path.insert(0, {root!r})
from pyspark.sql import SparkSession
import spark_dask
spark = (SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("WARN")
"""

CTRL_C = (
    PRELUDE
    + """
import atexit

def executors_at_exit():  # runs after spark-dask's exit hook (registered later, by start())
    jsc = spark.sparkContext._jsc.sc()
    ids = [i for i in jsc.getExecutorIds().mkString(",").split(",") if i]
    active = [i for i in ids if jsc.schedulerBackend().isExecutorActive(i)]  # not being killed
    print("EXECUTORS_AT_EXIT", len(active), flush=True)

atexit.register(executors_at_exit)
client = spark_dask.start(spark, progress=False)
tracker = spark.sparkContext.statusTracker()
print("READY", flush=True)
try:
    spark.range(100).count()  # waits: the gang holds every slot
    print("NOT INTERRUPTED", flush=True)
except KeyboardInterrupt:
    print("INTERRUPTED", time.time(), flush=True)
gang = sorted(j for tag in client.cluster.gang_tags for j in tracker.getJobIdsForGroup(tag))
print("JOBS", json.dumps({"active": sorted(tracker.getActiveJobsIds()), "gang": gang}), flush=True)
print("DASK", client.submit(sum, [1, 2, 3]).result(), flush=True)
client.close()
print("SPARK", spark.range(7).count(), flush=True)
"""
)


def _start(script: str, tmp_path, args=(), env=None) -> subprocess.Popen:
    path = tmp_path / "driver.py"
    path.write_text(textwrap.dedent(script).replace("{root!r}", repr(ROOT)))
    return subprocess.Popen(
        [sys.executable, *args, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(tmp_path),
        env=dict(os.environ, **(env or {})),
    )


def _wait_for_line(proc: subprocess.Popen, prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line.strip()
    proc.kill()
    out, err = proc.communicate(timeout=30)
    raise AssertionError(f"no {prefix!r} line; stdout: {out[-2000:]} stderr: {err[-3000:]}")


def test_ctrl_c_in_a_spark_call_waiting_for_the_gang(tmp_path):
    proc = _start(CTRL_C, tmp_path)
    _wait_for_line(proc, "READY", 180)
    time.sleep(3)  # the count job is queued behind the gang by now
    sent = time.time()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert "INTERRUPTED" in lines, out
    print(f"Ctrl-C: KeyboardInterrupt {float(lines['INTERRUPTED']) - sent:.2f}s after SIGINT")
    assert float(lines["INTERRUPTED"]) - sent < 10  # promptly, not after the cluster closed
    jobs = json.loads(lines["JOBS"])
    assert jobs["active"] == jobs["gang"]  # the waiting job was cancelled, the gang runs on
    assert lines["DASK"] == "6" and lines["SPARK"] == "7"  # both keep working afterwards
    # no py4j re-entrant call, no traceback of the interrupted call, and no second
    # copy of the gang's job (py4j re-sends a call whose connection it cut)
    for text in ("reentrant", "Traceback", "KeyboardInterrupt while sending", "cannot reach the Dask scheduler"):
        assert text not in err, err[-3000:]
    # the script exits without spark.stop(): spark-dask's exit hook let local-cluster's
    # executors go first, so the in-process Master relaunches none into the JVM's
    # shutdown (Spark's "ERROR Worker: Failed to launch executor ... Shutdown hooks
    # cannot be modified during shutdown", 10-20 per exit otherwise, plain PySpark too);
    # and a cancel finds the jobs by tag, so Spark does not warn of a job group it
    # cannot find
    assert lines["EXECUTORS_AT_EXIT"] == "0", out
    for text in ("Failed to launch executor", "Shutdown hooks cannot be modified", "Failed to cancel job group"):
        assert text not in err, err[-3000:]


SIGTERM = (
    PRELUDE
    + """
from tests.support.processes import dask_processes

def previous_handler(signum, frame):
    # runs after spark-dask's handler: what is left of the cluster at that point
    tag = client.cluster.tag
    state = {"active_jobs": list(spark.sparkContext.statusTracker().getActiveJobsIds()),
             "workers": len(dask_processes(tag)), "status": client.cluster.status.name,
             "t": time.time()}
    with open("chained.json", "w") as f:
        json.dump(state, f)
    os._exit(0)

signal.signal(signal.SIGTERM, previous_handler)
client = spark_dask.start(spark, progress=False)
print("READY", client.cluster.tag, flush=True)
while True:
    time.sleep(1)
"""
)


@pytest.mark.parametrize("how", ["interactive", pytest.param("configured", marks=pytest.mark.newest)])
def test_sigterm_closes_the_cluster_then_runs_the_previous_handler(tmp_path, how):
    # "interactive": python -i (auto-detected); "configured": close-on-sigterm: true
    if how == "interactive":
        proc = _start(SIGTERM, tmp_path, args=("-i",))
    else:
        proc = _start(SIGTERM, tmp_path, env={"DASK_SPARK_DASK__CLOSE_ON_SIGTERM": "true"})
    tag = _wait_for_line(proc, "READY", 180).split()[1]
    assert dask_processes(tag)
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    assert wait_until(lambda: not dask_processes(tag), 3.0)
    proc.communicate(timeout=60)
    state = json.loads((tmp_path / "chained.json").read_text())
    print(f"SIGTERM ({how}): cluster closed, previous handler ran {state['t'] - sent:.2f}s after the signal")
    assert state["t"] - sent < 3.0
    assert state == {**state, "active_jobs": [], "workers": 0, "status": "closed"}


def test_sigterm_setting():
    assert signals.close_on_sigterm(True) and signals.close_on_sigterm("true")
    assert not signals.close_on_sigterm(False) and not signals.close_on_sigterm("false")
    assert signals.close_on_sigterm("auto") == signals.interactive()
    assert not signals.interactive()  # pytest is not an interactive session


def test_waiting_jobs():
    assert signals.waiting_jobs([3, 0, 5], {0}) == [3, 5]
    assert signals.waiting_jobs([0], {0}) == []
