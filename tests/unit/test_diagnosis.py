"""``spark-dask doctor``'s judgement without Spark (:mod:`spark_dask.commands.doctor`): the
answers of executors as :mod:`spark_dask.executor.checkup` gives them, merged per
finding, and the RAPIDS Accelerator jar's shims read from a real zip file."""

from __future__ import annotations

import zipfile

import pytest

from spark_dask import DoctorError
from spark_dask.commands.doctor import Checkup, Listener, findings, group_answers, rapids_jar_problem
from spark_dask.executor import checkup

pytestmark = pytest.mark.core

DRIVER = {"python": "3.11.7", "executable": "/usr/bin/python3", "versions": dict.fromkeys(checkup.CORE, "1.0.0")}


def answer(host: str, executor: str, **changes) -> dict:
    base = {"host": host, "executor": executor, "python": "3.11.7", "executable": "/usr/bin/python3",
            "versions": dict(DRIVER["versions"]), "import_errors": {}, "unpickles": None, "reach": None,
            "local_dirs": {"/local_disk0/spark-1/executor-2/blockmgr-3": 500 * 2**30}, "gpu": None}  # fmt: skip
    return {**base, **changes}


def test_a_finding_on_several_hosts_is_said_once_with_every_host():
    slow = {"/local_disk0/spark-1/executor-2/blockmgr-3": 2**30}
    answers = [
        answer("h1", "1", reach="TimeoutError: timed out", local_dirs=slow),
        answer("h2", "2", reach="TimeoutError: timed out"),
        answer("h3", "3"),
    ]
    found = findings(DRIVER, answers, "10.0.0.5:41234", unseen=["4"])
    assert [(f.problem, f.hosts) for f in found] == [(True, ("h1", "h2")), (False, ("h1",)), (False, ())]
    assert "cannot reach the Dask scheduler at 10.0.0.5:41234: TimeoutError: timed out" in found[0].text
    assert found[1].text.startswith("1.00 GiB free under the Spark local directory")
    assert found[2].text.startswith("no check ran on executor(s) 4")


def test_a_healthy_answer_finds_nothing_and_renders_ready():
    answers = [answer("h1", "1"), answer("h1", "2")]
    assert findings(DRIVER, answers, "10.0.0.5:41234", unseen=[]) == []
    c = Checkup(
        {"master": "spark://m:7077", "version": "3.5.5", "executors": 2, "slots": 8, "executor_gpus": 0,
         "scheduler": "10.0.0.5:41234"},
        DRIVER, {"h1": {**answers[0], "executors": ["1", "2"]}}, [],
    )  # fmt: skip
    lines = c.render().splitlines()
    assert lines[0] == (
        "spark-dask doctor: spark://m:7077, Spark 3.5.5, 2 executors on 1 host; driver Python 3.11.7; "
        "scheduler address 10.0.0.5:41234"
    )
    assert "local disk free: /local_disk0 500.00 GiB" in lines[3]
    assert lines[-1] == "ready: every executor can start Dask workers."
    assert c.to_dict()["ready"] is True


def test_the_rapids_jar_is_read_for_its_shims(tmp_path):
    jar = tmp_path / "rapids-4-spark_2.12-26.08.0.jar"
    with zipfile.ZipFile(jar, "w") as z:
        for entry in (
            "com/nvidia/spark/SQLPlugin.class",
            "spark350/x.class",
            "spark353/x.class",
            "spark350db143/x.class",
        ):
            z.writestr(entry, b"")
    with zipfile.ZipFile(jar) as z:
        names = z.namelist()
    assert rapids_jar_problem(names, "3.5.3", databricks=False) is None
    assert rapids_jar_problem(names, "3.5.0", databricks=True) is None  # Databricks 14.3's shim
    assert rapids_jar_problem(names, "3.5.5", databricks=False) == (
        "has no shim for Spark 3.5.5 (it has spark350, spark350db143, spark353)"
    )
    assert rapids_jar_problem(["com/nvidia/spark/SQLPlugin.class"], "4.0.0", databricks=False) is None


def test_a_listener_where_this_machine_has_no_address_is_refused():
    with pytest.raises(DoctorError, match=r"cannot listen on 198\.18\.255\.254:0 as the scheduler would"):
        Listener("198.18.255.254")  # a benchmark address (RFC 2544), never this machine's
    listener = Listener("127.0.0.1")
    listener.close()
    assert not listener.thread.is_alive()


def test_answers_are_grouped_per_executor_and_host():
    gpu = {"spark_gpus": ["0"], "nvml": {}, "versions": {}, "import_errors": {}}
    rows = [answer("h1", "1", gpu=gpu), answer("h1", "1", gpu={**gpu, "spark_gpus": ["1"]}), answer("h2", "2")]
    answers, hosts = group_answers(rows)
    assert sorted(answers) == ["1", "2"] and answers["1"]["gpu"]["spark_gpus"] == ["0", "1"]
    assert {h: a["executors"] for h, a in hosts.items()} == {"h1": ["1"], "h2": ["2"]}
