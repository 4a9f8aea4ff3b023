"""The internals of distributed that spark-dask still touches (spark_dask.internals):
each checked against the installed distributed (CI: the newest and the lowest that
pyproject declares), and a plain scheduler left as distributed made it. No Spark."""

from __future__ import annotations

import asyncio

import pytest
from distributed import Scheduler

from spark_dask import internals
from spark_dask.scheduler import WorkerWatch
from spark_dask.xlang.scheduler import Placement

pytestmark = pytest.mark.core


@pytest.fixture
def scheduler():
    return Scheduler(validate=False, dashboard_address=":0")  # unstarted: its attributes and handlers


def test_every_internal_the_package_touches_is_as_described(scheduler):
    found = internals.problems(scheduler)
    assert not found, (
        "distributed changed internals that spark-dask relies on (spark_dask/internals.py lists where each "
        "is used):\n  " + "\n  ".join(found)
    )


def test_a_changed_signature_is_named(monkeypatch, scheduler):
    """The check can fail: a release whose valid_workers takes another argument."""

    def valid_workers(self, task):
        return None

    monkeypatch.setattr(Scheduler, "valid_workers", valid_workers)
    monkeypatch.delattr(Scheduler, "time_started", raising=False)
    found = internals.problems(scheduler)
    assert found[0] == "test_a_changed_signature_is_named.<locals>.valid_workers(task) has no parameter ts"


def test_the_placement_of_other_languages_engages_only_when_asked(scheduler):
    placement = Placement(scheduler)
    scheduler.add_plugin(placement)
    assert internals.replaced(scheduler) == []
    placement.engage()
    placement.engage()  # once
    assert internals.replaced(scheduler) == [
        "valid_workers",
        "decide_worker_non_rootish",
        "check_idle_saturated",
        "stream_handlers['task-erred']",
    ]


def test_status_changes_are_heard_through_the_public_event_hook():
    """WorkerWatch hears a status change through SchedulerPlugin.log_event (what
    handle_worker_status_change logs, retire_workers included), not a wrapped handler."""

    async def main():
        changed, leaving = asyncio.Event(), []
        scheduler = Scheduler(validate=False, dashboard_address=":0", plugins=[WorkerWatch(changed)])
        scheduler.plugins[WorkerWatch.name].on_leaving = leaving.append
        scheduler.log_event("tcp://10.0.0.1:1", {"action": "worker-status-change", "prev-status": "init",
                                                 "status": "running", "stimulus_id": "s1"})  # fmt: skip
        assert changed.is_set() and leaving == []
        changed.clear()
        scheduler.log_event("tcp://10.0.0.1:1", {"action": "worker-status-change", "prev-status": "running",
                                                 "status": "closing_gracefully", "stimulus_id": "s2"})  # fmt: skip
        assert changed.is_set() and leaving == ["tcp://10.0.0.1:1"]
        changed.clear()
        scheduler.log_event("tcp://10.0.0.1:1", {"action": "add-worker"})
        scheduler.log_event("all", "a user's event")
        assert not changed.is_set() and leaving == ["tcp://10.0.0.1:1"]
        assert internals.replaced(scheduler) == []

    asyncio.run(asyncio.wait_for(main(), 30))
