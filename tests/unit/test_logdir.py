"""Logs that outlive the cluster (spark_dask.logdir): the layout, the executors' copy of
the workers' logs (a Spark task's own code, run here without Spark), the driver's files
and reading them back. No JVM; the real cluster is in tests/spark/test_logdir_cluster.py."""

from __future__ import annotations

import datetime
import doctest
import logging
import os
import sys
import textwrap
from dataclasses import replace

import pytest
from distributed.utils import Logs, silence_logging_cmgr

from spark_dask import logdir, report
from spark_dask.events import Events
from spark_dask.executor import gang_task as task
from spark_dask.executor import logs, task_context
from spark_dask.executor.gang_task import WorkerStartError
from spark_dask.executor.logs import save_worker_logs
from spark_dask.logdir import KeptLogs, cluster_directory, read_logs
from tests.support.task_specs import FakePlainContext, make_spec

pytestmark = [pytest.mark.core, pytest.mark.timeout(60)]


def test_doctests():
    assert doctest.testmod(logdir).failed == 0


def test_directory_names():
    assert cluster_directory("", "etl", "ab") is None
    assert cluster_directory("/v/logs", "nightly etl/2", "ab12") == "/v/logs/nightly_etl_2-ab12"
    assert cluster_directory("rel", "x", "ab") == os.path.join(os.getcwd(), "rel", "x-ab")  # the executors share no cwd
    assert os.path.basename(cluster_directory("/v", "..", "ab")) == "_-ab"
    assert logs.worker_log_path("/d", "spark-1-gpu0:1") == "/d/workers/spark-1-gpu0_1.log"


# ------------------------------------------------------------- the executor's side


def test_save_copies_each_workers_whole_log(tmp_path):
    os.makedirs(tmp_path / "c" / "workers")
    sources = []
    for name in ("spark-0", "spark-1"):
        (tmp_path / f"{name}.src").write_text("".join(f"{name} line {i}\n" for i in range(1000)))
        sources.append((name, str(tmp_path / f"{name}.src")))
    assert save_worker_logs(str(tmp_path / "c"), sources) is None
    kept = (tmp_path / "c" / "workers" / "spark-1.log").read_text()
    assert kept.startswith("spark-1 line 0\n") and kept.endswith("spark-1 line 999\n")  # whole, not a tail


def test_save_without_the_drivers_directory_says_it_is_not_shared(tmp_path):
    (tmp_path / "w.log").write_text("x")
    problem = save_worker_logs(str(tmp_path / "missing"), [("spark-0", str(tmp_path / "w.log"))])
    assert "does not exist on this executor" in problem and "share" in problem
    assert not (tmp_path / "missing").exists()  # made nowhere nobody reads


def test_save_that_cannot_write_reports_and_keeps_the_others(tmp_path):
    os.makedirs(tmp_path / "c" / "workers" / "spark-0.log")  # a directory where the file goes
    for name in ("spark-0", "spark-1"):
        (tmp_path / f"{name}.src").write_text(name)
    problem = save_worker_logs(str(tmp_path / "c"), [(n, str(tmp_path / f"{n}.src")) for n in ("spark-0", "spark-1")])
    assert problem.startswith("spark-0: IsADirectoryError")
    assert (tmp_path / "c" / "workers" / "spark-1.log").read_text() == "spark-1"


def _task_spec(tmp_path, listener, body: str, log_directory):
    script = tmp_path / "fake_worker.py"
    script.write_text(textwrap.dedent(body))
    host, port = listener.getsockname()
    return replace(
        make_spec(scheduler_address=f"tcp://{host}:{port}", n_workers=1, barrier=False, log_lines=2,
                  worker_command=[sys.executable, str(script), "{name}"]),
        log_directory=log_directory,
    )  # fmt: skip


@pytest.fixture
def plain_task(monkeypatch):
    ctx = task_context._PlainContext(FakePlainContext(0), task_context.PLAIN_JOB)
    monkeypatch.setattr(task, "barrier_context", lambda *barrier: ctx)


WORKER = """
    import sys
    for i in range(50):
        print("fake worker", sys.argv[1], "line", i)
    print("Registered to: tcp://scheduler")  # what distributed's worker logs once it joined
"""


def test_a_task_keeps_its_workers_whole_logs(tmp_path, listener, plain_task):
    directory = tmp_path / "logs" / "etl-ab"
    os.makedirs(directory / "workers")
    row = task.run_task(_task_spec(tmp_path, listener, WORKER, str(directory)))
    assert row["status"] == "ok" and row["log_error"] is None
    kept = (directory / "workers" / "spark-0.log").read_text()
    assert "fake worker spark-0 line 0" in kept and "line 49" in kept  # the row has 2 lines only
    assert row["workers"][0]["log_tail"].count("\n") == 1


def test_a_task_that_cannot_keep_them_says_why_and_its_worker_runs(tmp_path, listener, plain_task):
    row = task.run_task(_task_spec(tmp_path, listener, WORKER, str(tmp_path / "not-shared")))
    assert row["status"] == "ok" and row["workers"][0]["exit_code"] == 0
    assert "does not exist on this executor" in row["log_error"]


def test_a_worker_that_dies_before_it_connects_leaves_its_log(tmp_path, listener, plain_task):
    directory = tmp_path / "c"
    os.makedirs(directory / "workers")
    crash = "import sys\nprint('cannot start: no GPU here')\nsys.exit(3)\n"
    with pytest.raises(WorkerStartError, match="exited with code 3 before it connected"):
        task.run_task(_task_spec(tmp_path, listener, crash, str(directory)))
    assert "cannot start: no GPU here" in (directory / "workers" / "spark-0.log").read_text()


def test_without_a_log_directory_nothing_is_written(tmp_path, listener, plain_task):
    row = task.run_task(_task_spec(tmp_path, listener, WORKER, None))
    assert "log_error" not in row and row["workers"][0]["exit_code"] == 0


# ------------------------------------------------------------- the driver's side


class Cluster:
    """What KeptLogs reads of a cluster: its events, its task log, its tasks' rows."""

    def __init__(self, directory):
        self.events = Events([], quiet=True)
        self.rows: list[dict] = []
        self.kept = KeptLogs(
            directory, self.events, lambda: "Spark barrier stage spark-dask-ab: ended", lambda: self.rows
        )


def test_the_drivers_files_while_it_runs_and_after_it_closed(tmp_path, caplog):
    directory = str(tmp_path / "logs" / "etl-ab")
    c = Cluster(directory)
    with c.kept as made:
        assert made == directory and os.path.isdir(os.path.join(directory, "workers"))
        c.events.note("spark-dask: 2 cpu workers connected")
        with silence_logging_cmgr("error"):  # silence-logs: the notebook shows none of it
            logging.getLogger("distributed.scheduler").info("Register worker spark-0")
        # written as it comes: a driver that crashes now leaves it
        with open(os.path.join(directory, "scheduler.log")) as f:
            assert "Register worker spark-0" in f.read()
        c.rows = [{"task": 1, "host": "10.0.0.2", "log_error": "IsADirectoryError: no"}]
        with caplog.at_level(logging.WARNING, "spark_dask"):
            c.kept.save()  # a gang ended
            c.kept.save()
        assert (
            len([r for r in caplog.records if "1 Spark task could not keep their Dask workers' logs" in r.getMessage()])
            == 1
        )
        with open(os.path.join(directory, "spark-tasks.log")) as f:
            tasks = f.read()
        assert tasks.startswith("Spark barrier stage spark-dask-ab: ended\n")
        assert "worker logs of task 1 not kept: IsADirectoryError: no" in tasks
    logging.getLogger("distributed.scheduler").warning("after the close")
    kept = read_logs(directory)
    assert list(kept) == ["Cluster", "Scheduler", "Spark tasks"]
    assert "after the close" not in kept["Scheduler"]
    assert kept["Cluster"].splitlines()[0].endswith(" spark-dask: 2 cpu workers connected")
    datetime.datetime.strptime(kept["Cluster"][:19], "%Y-%m-%d %H:%M:%S")
    assert "task 1 on 10.0.0.2: IsADirectoryError" in kept["Cluster"]  # the warning is an event too


def test_reading_back_in_get_logs_order_and_selection(tmp_path):
    d = tmp_path / "c"
    os.makedirs(d / "workers")
    for name in ("spark-10", "spark-2", "spark-1-gpu0"):
        (d / "workers" / f"{name}.log").write_text(f"{name} says hi\n")
    (d / "cluster.log").write_text("the cluster\n")
    (d / "spark-tasks.log").write_text("the tasks\n")
    kept = read_logs(str(d))
    assert list(kept) == ["Cluster", "spark-1-gpu0", "spark-2", "spark-10", "Spark tasks"]  # no scheduler.log
    assert kept["spark-2"] == "spark-2 says hi" and kept["Cluster"] == "the cluster"
    assert list(read_logs(str(d), cluster=False, workers=["spark-10"])) == ["spark-10"]
    assert read_logs(str(d), cluster=False, scheduler=False, workers=False) == {}
    assert read_logs(str(tmp_path / "gone")) == {}


def test_closed_cluster_logs_fall_back_to_memory(tmp_path):
    c = Cluster(None)  # the option is off: what a closed cluster always had
    c.events.note("spark-dask: closed")
    with c.kept as made:
        assert made is None
    logs = report.kept_logs(c.kept.read())
    assert isinstance(logs, Logs) and dict(logs) == {"Cluster": "spark-dask: closed",
                                                     "Spark tasks": "Spark barrier stage spark-dask-ab: ended"}  # fmt: skip
    assert c.kept.read(cluster=False) == {}


def test_a_directory_the_driver_cannot_make_is_a_warning_not_a_failure(tmp_path):
    (tmp_path / "file").write_text("")
    c = Cluster(str(tmp_path / "file" / "etl-ab"))
    with (
        pytest.warns(UserWarning, match="cannot keep the cluster's logs in .*the cluster runs on without them"),
        c.kept as made,
    ):
        c.kept.save()
    assert made is None
    assert list(c.kept.read()) == ["Cluster", "Spark tasks"]


def test_a_file_the_driver_cannot_write_is_warned_once(tmp_path, caplog):
    directory = tmp_path / "c"
    c = Cluster(str(directory))
    with caplog.at_level(logging.WARNING, "spark_dask"), c.kept:
        os.makedirs(directory / "cluster.log")  # a directory where the file goes
        c.kept.save()
    warned = [r.getMessage() for r in caplog.records if "cannot keep the cluster's logs" in r.getMessage()]
    assert len(warned) == 1 and "cluster.log" in warned[0]
    assert (directory / "spark-tasks.log").exists()  # the other file is written all the same
