"""Idle shutdown decided without Spark: the clock over scheduler snapshots, the watcher
over a stand-in scheduler, the option's checks. The real cluster closing itself and
giving its task slots back: tests/spark/test_scale.py."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from spark_dask import idle, options
from spark_dask.errors import PlanError

QUIET = idle.Activity(7, False, frozenset({"fire-and-forget", "client-1"}))


def test_a_quiet_cluster_expires_after_the_timeout_and_not_before():
    clock = idle.IdleClock(10, now=100)
    assert clock.observe(QUIET, now=101) == 0  # the first look counts as activity
    assert clock.observe(QUIET, now=110.5) == 9.5
    assert not clock.expired(110.5)
    assert clock.observe(QUIET, now=111) == 10
    assert clock.expired(111)


@pytest.mark.parametrize(
    "change",
    [
        idle.Activity(8, False, QUIET.clients),  # a task changed state
        idle.Activity(7, True, QUIET.clients),  # a task is processing (no transition meanwhile)
        idle.Activity(7, False, QUIET.clients | {"client-2"}),  # a client joined
        idle.Activity(7, False, frozenset({"fire-and-forget"})),  # a client left
    ],
    ids=["transition", "busy", "client joined", "client left"],
)
def test_any_activity_restarts_the_clock(change):
    clock = idle.IdleClock(10, now=0)
    clock.observe(QUIET, now=1)
    assert clock.observe(QUIET, now=9) == 8
    assert clock.observe(change, now=9.5) == 0
    assert not clock.expired(15)
    assert clock.expired(19.5)  # a timeout after the last activity it saw
    if change.busy:
        assert clock.observe(change, now=30) == 0  # a long task is never idle
        assert not clock.expired(30)


def test_poll_interval_and_texts():
    assert [idle.poll_interval(t) for t in (1, 3, 60, 600, 36000)] == [0.25, 0.25, 3.0, 5.0, 5.0]
    assert [idle.duration_text(t) for t in (0.5, 59, 60, 61, 3600, 3661, 7200)] == [
        "0.5s", "59s", "1m", "1m 1s", "1h", "1h 1m", "2h"
    ]  # fmt: skip
    assert "no Dask tasks or client activity for 10m (idle_timeout)" in idle.closing_message("c", 600)
    assert idle.closed_message("c", 1.26) == (
        "spark-dask: cluster 'c' closed after being idle (idle_timeout) in 1.3s: its Spark task slots are free"
    )


@pytest.mark.parametrize("value, seconds", [(None, None), (False, None), (30, 30), ("2m", 120), ("1.5s", 1.5)])
def test_the_option_is_read_as_seconds(value, seconds):
    assert options.check_idle_timeout(value) == seconds


@pytest.mark.parametrize("value", ["soon", 0, -5, True, "0s", [1]])
def test_a_bad_idle_timeout_is_refused(value):
    with pytest.raises(PlanError, match="idle_timeout must be"):
        options.check_idle_timeout(value)


def test_the_option_is_resolved():
    given = {o.name: None for o in options.keyword_options() if o.config}
    assert options.resolve(**given).idle_timeout is None
    assert options.resolve(**{**given, "idle_timeout": "1m"}).idle_timeout == 60


class StandIn:
    """The scheduler attributes :func:`spark_dask.idle.activity` reads."""

    def __init__(self):
        self.transition_counter = 0
        self.queued = []
        self.unrunnable = {}
        self.clients = {"fire-and-forget": None}
        self.workers = {"w1": SimpleNamespace(processing={})}


def test_the_watcher_calls_back_once_the_scheduler_stays_idle():
    scheduler = StandIn()
    called = []

    async def on_idle():
        called.append(time.monotonic())

    async def scenario():
        t0 = time.monotonic()
        watcher = asyncio.ensure_future(idle.close_when_idle(scheduler, 1.0, on_idle))
        # busy for 1.5 s: a task processes, then another changes state
        scheduler.workers["w1"].processing = {"task": 1.0}
        await asyncio.sleep(1.2)
        assert not called
        scheduler.workers["w1"].processing = {}
        scheduler.transition_counter += 3
        await asyncio.wait_for(watcher, 5)
        return t0

    t0 = asyncio.run(scenario())
    assert len(called) == 1
    # idle from about t0 + 1.2 (the last activity), closed one timeout later, give or take a poll
    assert 2.2 - 0.3 <= called[0] - t0 <= 2.2 + 1.0


def test_the_watcher_is_cancelled_with_the_cluster():
    async def scenario():
        watcher = asyncio.ensure_future(idle.close_when_idle(StandIn(), 60, None))
        await asyncio.sleep(0.3)
        watcher.cancel()
        with pytest.raises(asyncio.CancelledError):
            await watcher

    asyncio.run(scenario())
