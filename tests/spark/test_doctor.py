"""``spark-dask doctor`` (:func:`spark_dask.doctor`) on a real local-cluster application:
a healthy one, an executor Python without ``distributed``, ``distributed`` of another
release or patch level, the driver's port out of the executors' reach, task slots held
by another job. (Fake GPUs with a broken cudf: tests/spark/test_cuda_path.py, whose
application has them.)

Each broken executor Python is the real one with a directory put first on its
``PYTHONPATH`` (:func:`tests.support.spark.executor_python_path`): a ``sitecustomize``
that makes ``import distributed`` fail, or a ``distributed-<version>.dist-info`` that
makes ``importlib.metadata`` report another version. The module shares the tests'
default application (local-cluster[2,1,1024]).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import warnings

import distributed
import pytest
from click.testing import CliRunner

import spark_dask
from spark_dask import DoctorError, cli
from tests.support.processes import wait_until
from tests.support.spark import active_jobs, executor_python_path, without_module

# The core run (pyspark 3.5, the lowest distributed) checks that the doctor runs and is
# cancelled there; what it judges does not depend on Spark's version.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


def fake_version(directory, version: str) -> None:
    info = directory / f"distributed-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: distributed\nVersion: {version}\n")


def other_release(version: str) -> str:
    year, month = (int(p) for p in version.split(".")[:2])
    return f"{year}.{month - 1}.1" if month > 1 else f"{year - 1}.12.1"


@pytest.mark.core
def test_a_healthy_application_is_ready(spark):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")  # pyproject's filter for pyspark's pandas >= 3 warning off here
        found = spark_dask.doctor(spark)
    # issue 55: the check's mapInArrow gave pyspark's pandas >= 3 FutureWarning (it moves no pandas)
    assert not [w for w in said if "does not yet fully support pandas" in str(w.message)]
    assert found.ready, found.render()
    assert found.findings == [] or all(not f.problem for f in found.findings)
    # spark_dask is installed where the executors' Python runs (this venv), the
    # application runs Spark's own Python daemon: the doctor suggests the preloading one
    (tip,) = [f for f in found.findings if "spark.python.daemon.module" in f.fix]
    assert not tip.problem and "spark_dask.spark.daemon" in tip.fix
    (host,) = found.hosts.values()  # local-cluster: one host, both executors answered
    assert sorted(host["executors"]) == ["0", "1"]
    assert host["versions"]["distributed"] == distributed.__version__
    assert host["reach"] is None and host["unpickles"] is None
    assert host["local_dirs"] and all(free > 0 for free in host["local_dirs"].values())
    text = found.render()
    assert text.splitlines()[-1] == "ready: every executor can start Dask workers."
    assert "scheduler reached: yes; task code unpickles: yes" in text
    assert not active_jobs(spark)


def test_an_executor_python_without_distributed(spark, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(without_module("distributed"))
    with executor_python_path(spark, tmp_path):
        found = spark_dask.doctor(spark)
    assert not found.ready
    (problem,) = [f for f in found.findings if f.problem]
    assert (
        problem.text
        == "distributed does not import on the executors (ModuleNotFoundError: No module named 'distributed')"
    )
    assert f"pip install distributed=={distributed.__version__}" in problem.fix
    assert found.render().splitlines()[-1] == "not ready: 1 problem to fix (above)."


@pytest.mark.parametrize("kind", ["release", "patch"])
def test_distributed_of_another_version(spark, tmp_path, kind):
    mine = distributed.__version__
    theirs = other_release(mine) if kind == "release" else ".".join(mine.split(".")[:2]) + ".99"
    fake_version(tmp_path, theirs)
    with executor_python_path(spark, tmp_path):
        found = spark_dask.doctor(spark)
    (said,) = [f for f in found.findings if theirs in f.text]  # the version finding
    assert theirs in said.text and mine in said.text
    assert said.problem is (kind == "release") and found.ready is (kind == "patch")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


TC_DROP = [  # lo's traffic as before, but what goes to the port lands in a queue of length 0
    "qdisc add dev lo root handle 1: htb default 10",
    "class add dev lo parent 1: classid 1:10 htb rate 100gbit",
    "class add dev lo parent 1: classid 1:20 htb rate 8bit",
    "qdisc add dev lo parent 1:20 handle 20: pfifo limit 0",
    "filter add dev lo parent 1: protocol ip prio 1 u32 match ip dport {port} 0xffff flowid 1:20",
]


@pytest.fixture
def dropped_port():
    """A port whose TCP packets on ``lo`` are dropped (``tc``: a firewall between the
    executors and the driver's port; the kernel here has htb and pfifo, not the drop
    action); root and tc only. Put back as it was after the test."""
    if os.geteuid() != 0 or shutil.which("tc") is None:
        pytest.skip("dropping a port's packets needs root and tc")
    port = _free_port()
    try:
        for rule in TC_DROP:
            subprocess.run(["tc", *rule.format(port=port).split()], check=True, timeout=10, capture_output=True)
        yield port
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], timeout=10, capture_output=True)


def test_a_port_the_executors_cannot_reach(spark, dropped_port):
    t0 = time.monotonic()
    found = spark_dask.doctor(spark, port=dropped_port, dial_timeout=2)
    assert not found.ready
    (problem,) = [f for f in found.findings if f.problem]
    assert f":{dropped_port}: TimeoutError" in problem.text, problem.text
    assert "cannot reach the Dask scheduler" in problem.text and "scheduler_host=" in problem.fix
    assert time.monotonic() - t0 < 60


@pytest.mark.core
def test_busy_slots_end_in_a_clear_error_and_no_job_left(spark):
    def hold():
        with contextlib.suppress(Exception):  # cancelled at the end of the test
            spark.sparkContext.parallelize(range(2), 2).foreach(lambda _: time.sleep(20))

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert wait_until(lambda: active_jobs(spark), timeout=30)
    try:
        with pytest.raises(DoctorError, match=r"the doctor.s check job did not end within 3s .*cancelled"):
            spark_dask.doctor(spark, timeout=3)
        assert wait_until(lambda: len(active_jobs(spark)) == 1, timeout=30)  # the holder's only
    finally:
        spark.sparkContext.cancelAllJobs()
        holder.join(30)


def test_the_command_prints_json_and_its_exit_status_says_ready(spark):
    done = CliRunner().invoke(cli.main, ["doctor", "--json"])  # the running application
    assert done.exit_code == 0, done.output
    answer = json.loads(done.output)
    assert answer["ready"] is True and answer["spark"]["executors"] == 2
    assert [h["python"] for h in answer["hosts"].values()] == [answer["driver"]["python"]]
