"""The cluster in the user's MLflow run, read back from a real ``mlflow server``
(tests/support/mlflow_server.py) through MLflow's client: a cluster started inside
``mlflow.start_run()`` (``mlflow="auto"``) leaves every param, at least two samples of
each metric that applies, Dask's performance report and the logs, and no planted secret
anywhere; with the server down the cluster starts, computes and closes, and says so
exactly once. The pure parts (names, scrubbing, the bounded calls): tests/unit/test_tracking.py."""

from __future__ import annotations

import logging
import os
import socket
import time
import warnings

import dask
import pytest

import spark_dask
from spark_dask.tracking.run import off_message
from tests.support.parts import parts_of

mlflow = pytest.importorskip("mlflow")

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SECRET = "hunter2-planted-in-mlflow-test"
INTERVAL = "0.5s"
PARAMS = {
    "spark_dask.version", "dask.version", "distributed.version", "pyspark.version", "spark.master",
    "spark.executors", "spark_dask.workers", "spark_dask.startup_seconds", "spark_dask.group.default.workers",
    "spark_dask.group.default.kind", "spark_dask.group.default.threads", "spark_dask.group.default.memory_limit_bytes",
    "spark_dask.group.default.gpus_per_worker",
}  # fmt: skip
METRICS = {
    "dask/workers", "dask/group/default/workers", "dask/memory_bytes", "dask/memory_limit_bytes", "dask/spilled_bytes",
    "dask/tasks_processing", "dask/tasks_queued", "dask/handoff_bytes",
}  # fmt: skip


def say_secret():
    """A task that writes a planted secret into its worker's log (defined here, so that
    cloudpickle ships it by value: the workers cannot import the tests)."""
    secret = SECRET

    def task(x):
        import logging

        logging.getLogger("distributed.worker").warning("password=%s", secret)
        return x + 1

    return task


def test_a_cluster_in_a_run_leaves_params_metrics_report_and_logs(spark, mlflow_server, monkeypatch, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    client = mlflow.tracking.MlflowClient()
    experiment = client.create_experiment(f"spark-dask-{time.monotonic_ns()}")
    with mlflow.start_run(experiment_id=experiment) as run:
        with (
            dask.config.set({"spark-dask.mlflow-interval": INTERVAL}),
            spark_dask.start(spark, n_workers=1, env={"MY_TOKEN": SECRET}, quiet=True) as dask_client,
        ):
            cluster = dask_client.cluster
            assert spark_dask.log_cluster(cluster) == run.info.run_id  # tracked already: left as it is
            with pytest.raises(spark_dask.PlanError, match="log_cluster.. takes a SparkCluster of this process"):
                spark_dask.log_cluster(dask_client)
            assert dask_client.submit(say_secret(), 1).result(timeout=60) == 2
            frame = spark_dask.to_dask(spark.range(1000).toDF("x"))
            assert int(frame.x.sum().compute()) == sum(range(1000))
            parts_of(cluster).events.log(f"spark-dask: an event naming the access.key={SECRET}")
        with pytest.raises(
            spark_dask.PlanError, match=r"takes a SparkCluster of this process, got SparkCluster \(closed\)"
        ):
            spark_dask.log_cluster(cluster)  # closed: no run to keep it in any more
    run_id = run.info.run_id
    got = client.get_run(run_id).data
    assert PARAMS <= set(got.params), set(got.params) ^ PARAMS
    assert got.params["spark_dask.workers"] == "1" and got.params["spark_dask.group.default.kind"] == "cpu"
    assert SECRET not in str(got.params)
    for name in METRICS:
        history = client.get_metric_history(run_id, name)
        assert len(history) >= 2, (name, history)  # the first sample, and the last at close
        assert [m.step for m in history] == list(range(len(history))), (name, history)
    assert client.get_metric_history(run_id, "dask/handoff_bytes")[-1].value > 0
    paths = {a.path for a in client.list_artifacts(run_id, "spark-dask")}
    assert {"spark-dask/performance-report.html", "spark-dask/events.txt", "spark-dask/logs"} <= paths
    logs = {a.path for a in client.list_artifacts(run_id, "spark-dask/logs")}
    assert {"spark-dask/logs/cluster.txt", "spark-dask/logs/scheduler.txt", "spark-dask/logs/spark-tasks.txt",
            "spark-dask/logs/spark-0.txt"} <= logs  # fmt: skip
    local = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="spark-dask", dst_path=str(tmp_path))
    html = open(os.path.join(local, "performance-report.html"), encoding="utf-8").read()
    assert "Dask Performance Report" in html and "bokeh" in html.lower()
    texts = {}
    for root, _, names in os.walk(local):
        for n in names:
            texts[n] = open(os.path.join(root, n), encoding="utf-8", errors="replace").read()
    assert "spark-0" in texts["spark-0.txt"] and "spark-0" in texts["spark-tasks.txt"]
    assert "password=*********(redacted)" in texts["spark-0.txt"]
    assert "access.key=*********(redacted)" in texts["events.txt"]
    assert not [n for n, t in texts.items() if SECRET in t]


def test_a_down_tracking_server_costs_one_line_not_the_cluster(spark, mlflow_server, monkeypatch, caplog):
    """The run is opened on the server, then the tracking URI names a port where nothing
    listens (as a server that went down; the shared server is not restarted for it). The
    cluster, started without tracking, is handed to ``log_cluster()``."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    experiment = mlflow.tracking.MlflowClient().create_experiment(f"spark-dask-down-{time.monotonic_ns()}")
    held = socket.socket()  # bound, not listening: connections are refused, and no other process takes the port
    held.bind(("127.0.0.1", 0))
    down = f"http://127.0.0.1:{held.getsockname()[1]}"
    with held, mlflow.start_run(experiment_id=experiment):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", down)
        with caplog.at_level(logging.WARNING, "spark_dask"):
            with spark_dask.start(spark, n_workers=1, mlflow=False, quiet=True) as dask_client:
                cluster = dask_client.cluster
                assert spark_dask.log_cluster(cluster) is None
                assert spark_dask.log_cluster(cluster) is None  # no second try, no second line
                assert dask_client.submit(say_secret(), 1).result(timeout=60) == 2
        monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)  # the run ends on the server
    lines = [r.getMessage() for r in caplog.records if "MLflow" in r.getMessage()]
    assert lines == [off_message(cluster.name, f"cannot reach the tracking server {down} (Connection refused)")]


def test_the_runs_events_go_up_to_the_close_and_its_samples_carry_their_times(spark, monkeypatch, tmp_path):
    """Issue 68 point 10, in a local store (no tracking server): ``events.txt`` holds the
    start, the scaling and, last, the close (it ended before the close); each sample's
    timestamp is the wall time it was taken, within the cluster's life, one per step."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = mlflow.tracking.MlflowClient()
    with mlflow.start_run(experiment_id=client.create_experiment("events")) as run:
        before = int(time.time() * 1000)
        with (
            dask.config.set({"spark-dask.mlflow-interval": INTERVAL}),
            spark_dask.start(spark, n_workers=1, quiet=True) as dask_client,
        ):
            cluster = dask_client.cluster
            with warnings.catch_warnings():  # all the task slots or not: the shared session's
                warnings.simplefilter("ignore", UserWarning)
                cluster.scale(2)
            dask_client.wait_for_workers(2, timeout=120)
            time.sleep(1.5)  # a few samples of two workers
            cluster.scale(1)
            deadline = time.monotonic() + 60
            while len(dask_client.scheduler_info()["workers"]) > 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(1.5)  # a few samples of one worker
        after = int(time.time() * 1000)
    run_id = run.info.run_id
    local = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="spark-dask/events.txt",
                                                dst_path=str(tmp_path / "dl"))  # fmt: skip
    lines = open(local, encoding="utf-8").read().splitlines()
    assert " 1 cpu worker connected to " in lines[0], lines
    assert any("1 more Dask worker connected" in line for line in lines), lines
    assert any("retired Dask workers" in line for line in lines), lines
    assert "spark-dask: closing cluster " in lines[-1] and "1 Dask worker connected" in lines[-1], lines
    history = client.get_metric_history(run_id, "dask/workers")
    assert [m.step for m in history] == list(range(len(history))) and len(history) >= 4, history
    stamps = [m.timestamp for m in history]
    assert before <= stamps[0] and stamps == sorted(stamps) and stamps[-1] <= after, (before, stamps, after)
    assert 2.0 in [m.value for m in history] and history[-1].value == 1.0, history
