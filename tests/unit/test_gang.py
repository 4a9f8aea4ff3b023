"""A gang's bookkeeping without Spark: a stand-in for its launcher (the Spark job)."""

from __future__ import annotations

import threading

import pytest

from spark_dask.capacity import GangPlan
from spark_dask.gangs import gang as gang_module
from spark_dask.gangs.gang import Gang, end_gangs, gang_of_placeholder
from tests.support.task_specs import FakeLauncher, make_spec

pytestmark = pytest.mark.core


@pytest.fixture(autouse=True)
def fake_launcher(monkeypatch):
    monkeypatch.setattr(gang_module, "GangLauncher", FakeLauncher)


def make(index=1, n=2, per_task=1, ended=None) -> Gang:
    plan = GangPlan("cpu", False, n, n // per_task, per_task)
    return Gang(None, plan, make_spec(scheduler_address="tls://x:1"), cluster_tag="spark-dask-t", index=index,
                first=4, reason="scale", on_done=ended).submit()  # fmt: skip


def test_tag_spec_and_names():
    g = make()
    assert g.tag == "spark-dask-t-g1" and make(index=0).tag == "spark-dask-t"
    spec = g.launcher.spec
    assert (spec.gang, spec.name_base, spec.n_workers, spec.barrier) == (1, 4, 2, True)
    assert "(scale): 2 Dask workers" in g.launcher.description
    assert g.status == "starting" and g.pending
    assert g.planned_names() == ["spark-dask-t-g1/pending-0", "spark-dask-t-g1/pending-1"]
    assert gang_of_placeholder(g.planned_names()[0]) == g.tag
    g.worker_joined("spark-4", "tls://a:1", "tls://a:2")
    assert g.status == "starting" and not g.pending
    g.worker_joined("spark-5", "tls://b:1", "tls://b:2")
    assert g.status == "running" and g.planned_names() == ["spark-4", "spark-5"]
    assert g.tasks_held() == 2


def test_retire_lowers_wanted_and_placeholders_count():
    g = make(n=3)
    g.worker_joined("spark-4", "tls://a:1", None)
    assert g.retire(["spark-4", g.planned_names()[-1]]) == ["spark-4"]  # the real one, to retire in Dask
    assert g.wanted == 1 and g.connected == 0
    assert g.planned_names() == ["spark-dask-t-g1/pending-0"]
    g.worker_joined("spark-5", "tls://b:1", None)
    g.worker_joined("spark-6", "tls://c:1", None)  # connected after the scale-down reached it
    assert g.surplus() == ["spark-6"]


def test_outcomes():
    ended = []
    g = make(ended=ended.append)
    g.worker_joined("spark-4", "tls://a:1", None)
    g.worker_joined("spark-5", "tls://b:1", None)
    g.launcher.finish(error=RuntimeError("Job aborted due to stage failure: ExecutorLostFailure"))
    assert ended == [g] and g.done and g.outcome() == "lost" and g.planned_names() == [] and g.tasks_held() == 0
    assert "ExecutorLostFailure" in g.failure()

    g = make()
    g.launcher.finish(error=RuntimeError("WorkerStartError: spark-dask: cannot import distributed"))
    assert g.outcome() == "start-failed"

    g = make()
    g.retire(g.planned_names())
    g.launcher.finish(rows=[{"partition": 0, "status": "ok"}])
    assert g.outcome() == "retired" and g.rows == [{"partition": 0, "status": "ok", "gang": 1}]

    g = make()
    g.launcher.finish()
    assert g.outcome() == "closed"  # no worker ever joined

    g = make()
    g.worker_joined("spark-4", "tls://a:1", None)
    g.worker_left("spark-4", on_purpose=True)  # client.retire_workers
    g.launcher.finish()
    assert g.outcome() == "closed" and g.failure() == ""  # its workers left without a scale-down

    g = make()
    g.worker_joined("spark-4", "tls://a:1", None)
    g.worker_left("spark-4")  # cut off from the scheduler, it closed itself
    g.launcher.finish()
    assert g.outcome() == "lost" and "ended without being asked to" in g.failure()

    g = make()
    g.cancel()
    assert g.cancelled and g.outcome() == "cancelled"


def test_end_gangs_cancels_waiting_gangs_at_once_and_others_after_the_grace():
    waiting, running, ending = make(), make(index=2), make(index=3)
    for g in (running, ending):
        g.worker_joined(f"spark-{g.index}", "tls://a:1", None)
    threading.Timer(0.1, ending.launcher.finish).start()
    assert end_gangs([waiting, running, ending], grace=0.5)
    assert waiting.launcher.cancelled == 1  # no worker connected: nothing would end it
    assert running.launcher.cancelled == 1  # still running after the grace
    assert ending.launcher.cancelled == 0  # ended by itself within the grace
