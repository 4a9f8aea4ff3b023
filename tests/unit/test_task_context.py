"""A barrier task whose Python worker gets a plain ``TaskContext`` (Databricks Runtime
14.3, barrier ``mapInArrow``: NVIDIA spark-rapids PR 12456 / issue 12477).

The fake is the thinnest possible: an object with the three calls a plain
``TaskContext`` answers (``partitionId``, ``resources``, ``cpus``), installed where
pyspark keeps the task's context, so ``BarrierTaskContext.get()`` runs its real check.
"""

from __future__ import annotations

import json
import socket
import sys
import textwrap
from dataclasses import replace

import pytest

from spark_dask.executor import gang_task as task
from spark_dask.executor import gpu_claims, task_context
from spark_dask.executor.gang_task import WorkerStartError
from spark_dask.executor.task_spec import TaskSpec
from tests.support.task_specs import FakePlainContext, make_spec

pytestmark = [pytest.mark.core, pytest.mark.timeout(60)]


@pytest.fixture
def plain_task_context():
    """Put a plain context where pyspark's worker puts it (``TaskContext._taskContext``)."""
    from pyspark import TaskContext

    saved = TaskContext._taskContext
    ctx = FakePlainContext(1, gpus=["1"], cpus=2)
    TaskContext._taskContext = ctx
    yield ctx
    TaskContext._taskContext = saved


def test_context_falls_back_to_the_plain_task_context(plain_task_context):
    ctx = task_context.barrier_context()  # pyspark's BarrierTaskContext.get() refuses the plain context
    assert isinstance(ctx, task_context._PlainContext)
    assert "BARRIER" in ctx.reason.upper()  # NOT_IN_BARRIER_STAGE (3.5, 4.x)
    assert (ctx.partitionId(), ctx.cpus(), ctx.resources()["gpu"].addresses) == (1, 2, ["1"])


def test_no_task_context_at_all_is_a_clear_error():
    from pyspark import TaskContext

    assert TaskContext.get() is None  # the test process is no Spark task
    with pytest.raises(WorkerStartError, match="no Spark task context"):
        task_context.barrier_context()


def test_facts_and_gang_without_task_infos(monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.1.2.3")
    monkeypatch.setenv("SPARK_EXECUTOR_ID", "7")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    ctx = task_context._PlainContext(FakePlainContext(1, gpus=["1"], cpus=2), "plain TaskContext")
    spec = make_spec(requires=[], n_workers=3, workers_per_task=1)
    me = task_context.task_facts(ctx, spec)
    assert (me["partition"], me["executor"], me["host"], me["executor_id"]) == (1, "10.1.2.3:7", "10.1.2.3", "7")
    assert me["gpus"] == ["6"] and me["cpus"] == 2  # address 1 through CUDA_VISIBLE_DEVICES
    assert "no barrier task infos" in me["context"]
    me["unreachable"] = None
    gang = task_context.gang_from_task_infos(ctx, me)
    assert [t["partition"] for t in gang] == [0, 1, 2]
    assert gang[1] is me
    assert [(t["executor"], t["host"]) for t in (gang[0], gang[2])] == [(None, None), (None, None)]


def test_host_without_spark_local_ip(monkeypatch):
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    host = task_context._fallback_host()
    assert host in (socket.gethostname(), socket.gethostbyname(socket.gethostname()))


def test_barrier_context_still_gives_addresses_from_task_infos():
    class Info:
        def __init__(self, address):
            self.address = address

    class FakeBarrier(FakePlainContext):
        def getTaskInfos(self):
            return [Info("10.0.0.1:4040"), Info("10.0.0.2:4040")]

        def allGather(self, message=""):
            return [message]

    ctx = FakeBarrier(1)
    me = task_context.task_facts(ctx, make_spec(requires=[]))
    assert (me["executor"], me["host"]) == ("10.0.0.2:4040", "10.0.0.2") and "context" not in me
    me["unreachable"] = None
    gang = task_context.gang_from_task_infos(ctx, me)
    assert [t["host"] for t in gang] == ["10.0.0.1", "10.0.0.2"]


def _spec(tmp_path, listener, gather: bool) -> TaskSpec:
    script = tmp_path / "fake_worker.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            print("fake worker", *sys.argv[1:])
            """
        )
    )
    host, port = listener.getsockname()
    return make_spec(
        cluster_id="spark-dask-test",
        scheduler_address=f"tcp://{host}:{port}",
        tls=None,
        kind="cpu",
        pinned=gather,
        gather=gather,
        workers_per_task=1,
        n_workers=2,
        requires=[],
        threads_per_worker=None,
        memory_limit="auto",
        executor_cores=2,
        executor_memory=2**28,
        worker_options={},
        worker_command=[sys.executable, str(script), "{name}", "{nthreads}", "{memory_limit}"],
        death_timeout=5,
        kill_grace=1,
        connect_timeout=2,
        env={},
        log_lines=5,
        rmm=None,
    )


def test_run_task_with_a_plain_context_starts_its_worker(tmp_path, listener, monkeypatch):
    ctx = task_context._PlainContext(FakePlainContext(1, cpus=2), "plain TaskContext")
    monkeypatch.setattr(task, "barrier_context", lambda *barrier: ctx)
    row = task.run_task(_spec(tmp_path, listener, gather=False))
    assert row["status"] == "ok" and row["partition"] == 1
    [worker] = row["workers"]
    assert worker["name"] == "spark-1" and worker["exit_code"] == 0
    # the task sized its worker as the only gang task on its executor: its 2 cores
    assert worker["log_tail"].startswith("fake worker spark-1 2 ")
    json.dumps(row)  # the row goes back to the driver as JSON


def test_run_task_that_needs_all_gather_says_why(tmp_path, listener, monkeypatch):
    ctx = task_context._PlainContext(FakePlainContext(0, gpus=["0"]), "plain TaskContext")
    monkeypatch.setattr(task, "barrier_context", lambda *barrier: ctx)
    with pytest.raises(WorkerStartError, match="no BarrierTaskContext") as e:
        task.run_task(_spec(tmp_path, listener, gather=True))
    assert "spark.task.resource.gpu.amount=1" in str(e.value)


def test_run_task_sharing_gpus_without_task_infos_says_why(tmp_path, listener, monkeypatch):
    # gpu_mode="shared": the tasks on an executor split its GPUs by their placement, which
    # a plain TaskContext does not tell: a clear error, not two workers on one GPU
    ctx = task_context._PlainContext(FakePlainContext(0, gpus=["0"]), "plain TaskContext")
    monkeypatch.setattr(task, "barrier_context", lambda *barrier: ctx)
    spec = replace(_spec(tmp_path, listener, gather=False), pinned=True, gpu_mode="shared", gpus_per_executor=2)
    with pytest.raises(WorkerStartError, match="no BarrierTaskContext"):
        task.run_task(spec)


# ------------------------------------------------- plain jobs (dynamic allocation), claims


def test_plain_job_task_sizes_its_worker_from_its_own_cpus(tmp_path, listener, monkeypatch):
    # A plain job's task cannot see the other workers' tasks on its executor: its worker
    # gets the task's CPUs (not the executor's 2 cores) and is named from the gang's base.
    ctx = task_context._PlainContext(FakePlainContext(0, cpus=1), task_context.PLAIN_JOB)
    monkeypatch.setattr(task, "barrier_context", lambda *barrier: ctx)
    spec = replace(_spec(tmp_path, listener, gather=False), barrier=False, n_workers=1, gang=3, name_base=7)
    row = task.run_task(spec)
    [worker] = row["workers"]
    assert worker["name"] == "spark-7" and worker["log_tail"].startswith("fake worker spark-7 1 ")
    assert (row["gang"], row["task"], row["partition"]) == (3, 7, 0) and "context" not in row


def test_plain_job_task_reports_a_start_failure_as_a_row(tmp_path, listener, monkeypatch):
    # raising would make Spark retry the task (spark.task.maxFailures) before the error
    ctx = task_context._PlainContext(FakePlainContext(0, cpus=1), task_context.PLAIN_JOB)
    monkeypatch.setattr(task, "barrier_context", lambda *barrier: ctx)
    spec = replace(_spec(tmp_path, listener, gather=False), barrier=False, n_workers=1, requires=["no_such_mod"])
    row = task._run_or_row(spec)
    assert row["status"] == "failed" and "WorkerStartError: spark-dask:" in row["error"]
    assert "cannot import no_such_mod" in row["error"]
    with pytest.raises(WorkerStartError):  # a barrier task raises: the stage fails at once
        task._run_or_row(replace(spec, barrier=True))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="GPU claims are abstract sockets (Linux)")
def test_gpu_claims_keep_one_worker_per_gpu_across_gangs():
    cluster = f"spark-dask-claims-{id(object())}"
    name = lambda gpu: f"spark-9-gpu{gpu}"  # noqa: E731
    first, held = gpu_claims.claim_gpus(cluster, [{"name": "spark-0-gpu0", "gpu": "0"}], ["0", "1"], 0, name, "here")
    assert first == [{"name": "spark-0-gpu0", "gpu": "0"}]
    # a later gang's task placed on GPU 0 takes the free GPU 1, renamed
    second, held2 = gpu_claims.claim_gpus(cluster, [{"name": "spark-9-gpu0", "gpu": "0"}], ["0", "1"], 0, name, "here")
    assert second == [{"name": "spark-9-gpu1", "gpu": "1"}]
    # every GPU in use: a clear error after the wait
    with pytest.raises(WorkerStartError, match=r"no free GPU .* GPUs \['0', '1'\] of this host"):
        gpu_claims.claim_gpus(cluster, [{"name": "x", "gpu": "0"}], ["0", "1"], 0.3, name, "here")
    # a task's own (Spark-assigned) GPU only, without spares: taken is an error too
    with pytest.raises(WorkerStartError, match="no free GPU"):
        gpu_claims.claim_gpus(cluster, [{"name": "x", "gpu": "1"}], [], 0, name, "here")
    # another cluster does not see these claims; a released claim is free again
    other, held3 = gpu_claims.claim_gpus(cluster + "-b", [{"name": "y", "gpu": "0"}], [], 0, name, "here")
    for claim in held + held2 + held3:
        claim.close()
    again, held4 = gpu_claims.claim_gpus(cluster, [{"name": "spark-0-gpu0", "gpu": "0"}], [], 0, name, "here")
    assert again[0]["gpu"] == "0"
    for claim in held4:
        claim.close()


def test_executors_sharing_a_host_each_take_their_own_gpus(monkeypatch):
    # a standalone Worker (or a NodeManager) hands each executor of a host other GPUs; a
    # gang task holding no GPU (whole-GPU Spark tasks) finds its executor's by the id
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "10,11,12,13")
    host = {"executor_gpus": {"h": [["0", "1"], ["2", "3"]]}, "gpus_by_executor": {"0": ["0", "1"], "1": ["2", "3"]}}
    spec = make_spec(kind="cpu", pinned=True, gpu_mode="shared", gpus_per_executor=2, n_workers=4, **host)
    assert gpu_claims.executor_gpus(spec, "h:7001", [], "1") == ["12", "13"]
    assert gpu_claims.executor_gpus(spec, "h:7001", ["2"]) == ["12", "13"]  # a GPU share tells them apart too
    assert gpu_claims.host_shared_gpus(spec, "h") == []
    # the gang as getTaskInfos() gives it: only this task's executor id is known
    gang = [{"partition": p, "executor": f"h:700{p % 2}", "host": "h"} for p in range(4)]
    me = {**gang[3], "executor_id": "1", "spark_gpus": []}
    assignment, spare = task._place(None, spec, me, [*gang[:3], me])
    assert assignment[3] == [{"name": "spark-3-gpu13", "gpu": "13"}] and spare == ["12", "13"]


def test_executor_id_from_the_executor_jvm(monkeypatch):
    for key in ("SPARK_EXECUTOR_ID", "SPARK_LOG_URL_STDERR", "SPARK_LOG_URL_STDOUT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("CONTAINER_ID", "container_1_0001_01_000002")
    assert task_context.jvm_executor_id() is None  # no executor JVM above this test
    assert task_context.executor_id() == "container_1_0001_01_000002"
    monkeypatch.setattr(task_context, "jvm_executor_id", lambda: "2")  # YARN: the status store's id
    assert task_context.executor_id() == "2"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="GPU claims are abstract sockets (Linux)")
def test_gpu_claims_name_the_gpus_several_executors_registered():
    cluster = f"spark-dask-claims-{id(object())}"
    name = lambda gpu: f"spark-9-gpu{gpu}"  # noqa: E731
    _, held = gpu_claims.claim_gpus(cluster, [{"name": "spark-0-gpu0", "gpu": "0"}], ["0"], 0, name, "here")
    try:
        with pytest.raises(
            WorkerStartError, match=r"several executors of this host registered the same GPUs \['0', '1'\]"
        ):
            gpu_claims.claim_gpus(cluster, [{"name": "x", "gpu": "0"}], ["0"], 0, name, "here", ["0", "1"])
        with pytest.raises(WorkerStartError, match="are all used by other workers"):  # GPUs no other executor has
            gpu_claims.claim_gpus(cluster, [{"name": "x", "gpu": "0"}], ["0"], 0, name, "here", ["5"])
    finally:
        for claim in held:
            claim.close()
