"""The cluster in an MLflow run, without Spark: the params from a plan and Spark facts,
the metrics of a real in-process scheduler (and worker), the performance report asked of
it, the scrubbing of what goes into a run, which run ``mlflow=`` picks, and a tracking
server that is down or does not answer costing a bounded wait and one line. The run read
back from a real server after a real cluster: tests/spark/test_mlflow.py."""

from __future__ import annotations

import ast
import asyncio
import glob
import os
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from distributed import Client, Scheduler, Worker

from spark_dask import options
from spark_dask.capacity import GangPlan
from spark_dask.errors import PlanError
from spark_dask.tracking import Tracking, artifacts
from spark_dask.tracking.redact import REDACTED, Redactor, public_uri
from spark_dask.tracking.run import FIRST_CALL_WAIT, Link, cluster_params, off_message, versions, wanted
from spark_dask.tracking.sampler import Sampler, key, snapshot, workers_by_group
from tests.support.paths import ROOT
from tests.support.task_specs import small_facts

SECRET = "hunter2-planted-secret"


def test_params_are_a_fixed_list_from_the_plan_the_workers_and_the_facts():
    facts = small_facts(master=f"spark://admin:{SECRET}@head:7077")
    shapes = {"default": GangPlan("cpu", False, 2, 2), "gpus": GangPlan("cuda", True, 1, 1)}
    workers = {"default": [(1, 2**30), (1, 2**30)], "gpus": [(1, 4 * 2**30)]}
    assert cluster_params(facts, shapes, workers, 3.456) == {
        "spark.master": "spark://head:7077",
        "spark.executors": "2",
        "spark_dask.workers": "3",
        "spark_dask.startup_seconds": "3.46",
        "spark_dask.group.default.workers": "2",
        "spark_dask.group.default.kind": "cpu",
        "spark_dask.group.default.threads": "1",
        "spark_dask.group.default.memory_limit_bytes": str(2**30),
        "spark_dask.group.default.gpus_per_worker": "0",
        "spark_dask.group.gpus.workers": "1",
        "spark_dask.group.gpus.kind": "cuda",
        "spark_dask.group.gpus.threads": "1",
        "spark_dask.group.gpus.memory_limit_bytes": str(4 * 2**30),
        "spark_dask.group.gpus.gpus_per_worker": "1",
    }
    found = versions()
    assert {"spark_dask.version", "dask.version", "distributed.version", "pyspark.version"} <= set(found)
    assert set(found) <= {"spark_dask.version", "dask.version", "distributed.version", "pyspark.version",
                          "rapids.version", "dask_cuda.version"}  # fmt: skip


def test_metrics_of_a_real_scheduler_and_worker_and_the_performance_report():
    async def run():
        async with Scheduler(host="127.0.0.1", port=0, dashboard=False) as s:
            empty = snapshot(s, ["default", "gpus"], 0)
            start = artifacts.ReportStart(s)
            async with (
                Worker(s.address, nthreads=2, memory_limit=2**30) as w,
                Client(s.address, asynchronous=True) as c,
            ):
                await c.submit(sum, [1, 2, 3])
                await asyncio.wait_for(w.heartbeat(), 10)  # the memory the scheduler knows comes with a heartbeat
                busy = snapshot(s, ["default"], 12345)
                by_group = workers_by_group(s)
                html = await start.html(s)
            return empty, busy, by_group, html

    empty, busy, by_group, html = asyncio.run(run())
    assert empty == {
        "dask/workers": 0, "dask/group/default/workers": 0, "dask/group/gpus/workers": 0, "dask/memory_bytes": 0,
        "dask/spilled_bytes": 0, "dask/memory_limit_bytes": 0, "dask/tasks_processing": 0, "dask/tasks_queued": 0,
        "dask/handoff_bytes": 0,
    }  # fmt: skip
    assert busy["dask/workers"] == busy["dask/group/default/workers"] == 1
    assert busy["dask/memory_limit_bytes"] == 2**30 and busy["dask/memory_bytes"] > 0
    assert busy["dask/handoff_bytes"] == 12345
    assert by_group == {"default": [(2, 2**30)]}
    assert "<html" in html.lower() and "bokeh" in html.lower() and "Dask Performance Report" in html


def test_gpu_metrics_are_named_after_the_worker_where_nvml_answers():
    """A plain data snapshot: workers as the scheduler keeps them (NVML's readings under
    ``metrics["gpu"]``), one of a worker group, one without NVML."""
    gpu = SimpleNamespace(name="spark-1-gpu0", metrics={"gpu": {"utilization": 87, "memory-used": 5 * 2**30}},
                          extra={"spark": {"group": "gpus"}}, memory_limit=8 * 2**30, processing={"x": 1})  # fmt: skip
    cpu = SimpleNamespace(name="spark-0", metrics={}, extra={}, memory_limit=2**30, processing={})
    scheduler = SimpleNamespace(workers={"a": gpu, "b": cpu}, memory=SimpleNamespace(process=3, spilled=4),
                                queued=[1, 2], unrunnable={3: 0})  # fmt: skip
    assert snapshot(scheduler, ["default", "gpus"]) == {
        "dask/workers": 2, "dask/group/default/workers": 1, "dask/group/gpus/workers": 1, "dask/memory_bytes": 3,
        "dask/spilled_bytes": 4, "dask/memory_limit_bytes": 9 * 2**30, "dask/tasks_processing": 1,
        "dask/tasks_queued": 3, "dask/gpu_utilization/spark-1-gpu0": 87,
        "dask/gpu_memory_bytes/spark-1-gpu0": 5 * 2**30, "dask/handoff_bytes": 0,
    }  # fmt: skip
    names = sorted(snapshot(scheduler, ["default", "gpus"]))
    assert not [(a, b) for a in names for b in names if b.startswith(a + "/")]  # the file store: a file each
    assert key("dask", "group", "odd:name?", "workers") == "dask/group/odd_name_/workers"


def test_each_sample_goes_to_mlflow_with_the_wall_time_it_was_taken():
    """Issue 68 point 10: a sample's metrics carry the time the sample was taken (ms, what
    MLflow's charts draw on a time x-axis), not the time the link got to send them."""
    mlflow = pytest.importorskip("mlflow")
    sent = []
    sampler = Sampler(lambda: {"dask/workers": 2}, lambda *args: sent.append(args), 5)
    before = int(time.time() * 1000)
    sampler.sample()
    sampler.sample()
    after = time.time() * 1000
    assert [(step, sample) for step, sample, _ in sent] == [(0, {"dask/workers": 2}), (1, {"dask/workers": 2})]
    assert before <= sent[0][2] <= sent[1][2] <= after and all(isinstance(t, int) for *_, t in sent)
    batches = []
    tracking = Tracking(False)
    tracking.run_id = "r"
    tracking.client = SimpleNamespace(log_batch=lambda run_id, metrics: batches.append(metrics))
    tracking.log_sample(7, {"dask/workers": 2, "dask/memory_bytes": 5}, 1_700_000_000_123)
    assert [(m.key, m.value, m.timestamp, m.step) for m in batches[0]] == [
        ("dask/workers", 2.0, 1_700_000_000_123, 7),
        ("dask/memory_bytes", 5.0, 1_700_000_000_123, 7),
    ]
    assert isinstance(batches[0][0], mlflow.entities.Metric)


def test_a_planted_secret_never_reaches_a_run():
    logs = f"worker started\nexport AWS_SECRET_ACCESS_KEY={SECRET} and more\nconf corp.vault.pin: {SECRET}\n"
    out = Redactor(r"(?i)vault\.pin").text(logs)  # Spark's default pattern and the application's
    assert SECRET not in out
    assert out.splitlines() == [
        "worker started",
        f"export AWS_SECRET_ACCESS_KEY={REDACTED}",
        f"conf corp.vault.pin:{REDACTED}",
    ]
    html = f'<script>{{"logs": "token={SECRET}", "ok": "tokens counted"}}</script>'
    assert Redactor().pairs(html) == f'<script>{{"logs": "token={REDACTED}", "ok": "tokens counted"}}</script>'
    assert public_uri(f"https://u:{SECRET}@mlflow.example.com:8443/x") == "https://mlflow.example.com:8443/x"
    texts = artifacts.files(html, {"spark-0": logs}, logs, Redactor(r"(?i)vault\.pin"))
    assert set(texts) == {"logs/spark-0.txt", "events.txt", "performance-report.html"}
    assert not any(SECRET in t for t in texts.values())


def test_which_run_mlflow_auto_true_false_pick(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tmp_path.as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.x: a file store only when asked
    assert wanted("auto") == (False, None) and wanted(True) == (True, None) and wanted(False) == (False, None)
    with mlflow.start_run(experiment_id=mlflow.create_experiment("which-run")) as run:
        assert wanted("auto") == wanted(True) == (True, run.info.run_id)
        assert wanted(False) == (False, None)
        elsewhere = []
        t = threading.Thread(target=lambda: elsewhere.append(wanted("auto")))  # MLflow's active run is per thread
        t.start()
        t.join(10)
        assert elsewhere == [(False, None)]


def test_auto_imports_nothing_and_true_without_mlflow_says_which_extra():
    code = (
        "import sys; import spark_dask; from spark_dask.tracking.run import wanted\n"
        "print(wanted('auto'), 'mlflow' in sys.modules)\n"
        "sys.modules['mlflow'] = None  # as where it is not installed: find_spec None, import fails\n"
        "from spark_dask.options import check_mlflow\n"
        "check_mlflow('auto', 5); check_mlflow(False, 5)\n"
        "check_mlflow(True, 5)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines() == ["(False, None) False"]
    assert out.stderr.strip().splitlines()[-1] == (
        "spark_dask.errors.PlanError: spark-dask: mlflow=True, but MLflow is not installed in this Python: "
        "pip install 'spark-dask[mlflow]' (or mlflow=False)"
    )
    with pytest.raises(PlanError, match="mlflow-interval must be a positive duration"):
        options.check_mlflow("auto", 0)


@pytest.mark.parametrize("server", ["refuses", "never answers"])
def test_a_tracking_server_that_is_down_costs_a_bounded_wait_and_one_line(server, monkeypatch):
    """Nothing listening: refused within the probe; a server that accepts and never
    answers (MLflow's client would retry for minutes): the bounded wait passes. Either
    way one line, and nothing is sent after it."""
    pytest.importorskip("mlflow")
    listening = socket.socket()  # bound: no other process takes the port while the test runs
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    if server == "never answers":
        listening.listen(16)  # connections are accepted by the kernel; nobody answers
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://user:{SECRET}@127.0.0.1:{port}")
    said: list[str] = []
    tracking = Tracking(True)
    tracking.link = Link("etl", said.append)
    t0 = time.monotonic()
    try:
        opened = tracking.link.wait("opening the MLflow run", FIRST_CALL_WAIT, tracking.open_run, {"a": "1"})
        took = time.monotonic() - t0
        assert not opened and took < FIRST_CALL_WAIT + 1
        assert len(said) == 1 and SECRET not in said[0]
        if server == "refuses":
            assert said == [
                off_message("etl", f"cannot reach the tracking server http://127.0.0.1:{port} (Connection refused)")
            ]
        else:
            assert said == [off_message("etl", f"opening the MLflow run took more than {FIRST_CALL_WAIT:g}s")]
        assert not tracking.link.send(print, "never sent")
        assert not tracking.link.wait("again", 1, print, "never sent")
        assert len(said) == 1
    finally:
        tracking.link.close()
        listening.close()


def test_a_run_of_the_clusters_own_gets_params_samples_artifacts_and_ends(tmp_path, monkeypatch):
    """``mlflow=True`` without an active run (``spark-dask run --mlflow true``): the
    cluster makes a run in the experiment MLflow would choose for the user's own run
    (here ``mlflow.set_experiment()``'s: on Databricks a notebook's) and ends it at close
    (a local store)."""
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tmp_path.as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = mlflow.tracking.MlflowClient()
    monkeypatch.setattr(mlflow.tracking.fluent, "_active_experiment_id", None)  # set_experiment's, undone after
    chosen = mlflow.set_experiment("chosen").experiment_id
    said: list[str] = []
    tracking = Tracking(True)
    tracking.link = Link("etl", said.append)
    try:
        assert tracking.link.wait("opening the MLflow run", 60, tracking.open_run, {"spark_dask.workers": "2"})
        run = client.get_run(tracking.run_id)
        assert tracking.own_run and run.info.run_name == "spark-dask etl" and run.info.status == "RUNNING"
        assert run.info.experiment_id == chosen
        assert mlflow.active_run() is None  # the cluster's run is not the calling thread's
        assert run.data.params == {"spark_dask.workers": "2"}
        tracking.send_sample(0, {"dask/workers": 2, "dask/group/default/workers": 2})
        tracking.send_sample(1, {"dask/workers": 1, "dask/group/default/workers": 1})
        texts = {"events.txt": "started", "logs/spark-0.txt": "worker log"}
        assert tracking.link.wait("sending the artifacts to MLflow", 60, tracking.finish, texts)
        assert [(m.step, m.value) for m in client.get_metric_history(tracking.run_id, "dask/workers")] == [
            (0, 2.0),
            (1, 1.0),
        ]
        assert client.get_run(tracking.run_id).info.status == "FINISHED"
        listed = {a.path for a in client.list_artifacts(tracking.run_id, "spark-dask")}
        assert listed == {"spark-dask/events.txt", "spark-dask/logs"}
        assert said == []
    finally:
        tracking.link.close()


def test_only_tracking_imports_mlflow():
    """MLflow's door, as spark/ is Spark's: no other module of the package imports it."""
    found = []
    for path in glob.glob(os.path.join(ROOT, "spark_dask", "**", "*.py"), recursive=True):
        rel = os.path.relpath(path, ROOT)
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "mlflow" or n.startswith("mlflow.") for n in names):
                found.append(rel)
    assert found and all(r.startswith(os.path.join("spark_dask", "tracking", "")) for r in found), found
