"""Waits that a frozen process (alive, its connections open, never answering) must not
stall (issue 54), without Spark: the named, bounded wait; the pool's scale-down, drain
and group removal past a nanny or a worker that does not answer; the scheduler side's
close; and a named handle's warnings that must not reach a user's ``scale()`` running
at the same time. The real processes frozen under Spark: tests/spark/test_drain.py."""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from functools import partial
from types import SimpleNamespace

import dask
import pytest
from distributed import Scheduler
from distributed.security import Security
from distributed.utils import LoopRunner, sync

from spark_dask.aio import bounded, gave_up_message
from spark_dask.events import Events
from spark_dask.executor import task_line
from spark_dask.executor.task_line import TASK_LINE
from spark_dask.gangs.waits import logs_within
from spark_dask.handoff.registry import TransferFiles
from spark_dask.scheduler import DriverScheduler
from tests.support.task_specs import make_spec
from tests.unit.test_pool import (
    OPTIONS,
    cluster_options,
    fake_launcher,  # noqa: F401 - autouse: gangs without Spark
    join,
    make_pool,
    settle,
)

pytestmark = pytest.mark.core


def test_a_bounded_wait_says_what_it_waited_for_and_what_happens_instead():
    said, acted = [], []

    async def never():
        await asyncio.Event().wait()

    async def soon():
        return 1

    async def run():
        late = await bounded(never(), 0.05, "the nanny of Dask worker spark-1 (tcp://h:2) to end it",
                             lambda: acted.append(1) or "its Spark task ends it", said.append)  # fmt: skip
        in_time = await bounded(soon(), 1.0, "x", "y", said.append)
        return late, in_time

    assert asyncio.run(run()) == (False, True)
    assert acted == [1]
    assert said == [
        gave_up_message("the nanny of Dask worker spark-1 (tcp://h:2) to end it", 0.05, "its Spark task ends it")
    ]
    assert said[0].startswith("spark-dask: waited 0.05s for the nanny of Dask worker spark-1")


class FrozenSide:
    """A stand-in scheduler side one of whose nannies never answers (SIGSTOP): its
    ``terminate`` waits for good; cutting its task's line is what ends it."""

    def __init__(self, side, frozen: set[str]):
        self.inner = side
        self.frozen = frozen
        self.cut: list[str] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def terminate_nanny(self, address, fast=False):
        if address in self.frozen:
            await asyncio.Event().wait()
        await self.inner.terminate_nanny(address, fast)

    def end_frozen(self, name):
        self.cut.append(name)
        return f"its Spark task ends the processes of {name}"


def frozen_pool(options):
    pool, side, events = make_pool(2, options=options)
    frozen = FrozenSide(side, set())
    pool.driver_scheduler = frozen
    return pool, side, frozen, events


@pytest.mark.timeout(30)
def test_a_frozen_nanny_does_not_stall_scale_down_and_a_later_scale_up():
    """Before issue 54 the pool's lock was held for good by the scale-down: the
    scale-up after it never submitted its gang."""
    options = cluster_options(**{**vars(OPTIONS), "close_timeout": 0.3})

    async def run():
        pool, side, frozen, events = frozen_pool(options)
        g0 = pool.submit(pool.shape, "start")
        addresses = [join(pool, side, g0, k) for k in range(2)]
        frozen.frozen.add(side.scheduler.workers[addresses[1]].nanny)
        pool.running = True
        t0 = time.monotonic()
        await pool.scale(1)
        await settle(pool, timeout=5)
        took = time.monotonic() - t0
        await pool.scale(2)
        await settle(pool, timeout=5)
        return pool, frozen, events, took

    pool, frozen, events, took = asyncio.run(run())
    assert took < 3, took
    assert frozen.cut == ["spark-1"]
    assert len(pool.gangs) == 2 and pool.gangs[1].reason == "scale"  # the scale-up went on
    said = [m for _, m in events.logs]
    assert any(m.startswith("spark-dask: waited 0.3s for the nanny of Dask worker spark-1") for m in said), said


@pytest.mark.timeout(30)
def test_a_drain_past_a_frozen_worker_removes_it_and_ends_it_through_its_task():
    """The worker of a drained executor stops heartbeating (frozen) while Dask moves its
    data: it is removed from the scheduler after close-timeout of silence, its nanny's
    answer is waited for at most close-timeout, and its task's line is cut."""
    options = cluster_options(**{**vars(OPTIONS), "close_timeout": 0.3})

    async def run():
        pool, side, frozen, events = frozen_pool(options)
        g0 = pool.submit(pool.shape, "start")
        addresses = [join(pool, side, g0, k) for k in range(2)]
        victim = side.scheduler.workers[addresses[0]]
        victim.last_seen = time.time()
        frozen.frozen.add(victim.nanny)
        removed, gone = [], asyncio.Event()

        async def retire_workers(names, close_workers, remove):
            await gone.wait()  # its data cannot be fetched: done once the worker is removed
            return {addresses[0]: {"name": "spark-0"}}

        async def remove_worker(address, stimulus_id, close=True):
            removed.append(address)
            side.scheduler.closed(address)
            gone.set()

        side.scheduler.retire_workers = retire_workers
        side.scheduler.remove_worker = remove_worker
        pool.running = True
        t0 = time.monotonic()
        late = await pool.drain(["spark-0"], window=30)
        return time.monotonic() - t0, late, removed, frozen, events, addresses

    took, late, removed, frozen, events, addresses = asyncio.run(run())
    assert took < 5, took  # not the 30 s window: the worker is silent
    assert removed == [addresses[0]] and frozen.cut == ["spark-0"] and late == []
    said = [m for _, m in events.logs]
    assert any(
        "waited 0.3s for Dask worker spark-0 (tls://w0:1) to hand its data to the other workers" in m for m in said
    ), said


@pytest.mark.timeout(30)
def test_the_scheduler_sides_close_is_bounded_and_cuts_a_frozen_workers_line():
    class Comm:
        def __init__(self):
            self.aborted = False

        def closed(self):
            return self.aborted

        def abort(self):
            self.aborted = True

    class Rpc:
        async def terminate(self, reason):
            await asyncio.Event().wait()

    class Scheduler:
        def __init__(self):
            ws = SimpleNamespace(name="spark-0", nanny="tcp://h:2", extra={"spark": {}})
            self.workers = {"tcp://h:1": ws}
            self.stream_comms, self.client_comms = {"tcp://h:1": Comm()}, {}
            self.stopped = False

        def rpc(self, address):
            return Rpc()

        async def close(self, reason):
            await asyncio.Event().wait()

        def stop(self):
            self.stopped = True

    async def run():
        events = Events([], quiet=True)
        side = DriverScheduler(asyncio.Event(), events)
        side.scheduler = Scheduler()
        line = Comm()
        side.task_line(line, workers=["spark-0"])
        t0 = time.monotonic()
        await side.close(0.2)
        return time.monotonic() - t0, side, line, events

    took, side, line, events = asyncio.run(run())
    assert took < 2, took
    assert line.aborted and side.scheduler.stopped and side.scheduler.stream_comms["tcp://h:1"].aborted
    said = [m for _, m in events.logs]
    assert said[0].startswith("spark-dask: waited 0.2s for the nanny of Dask worker spark-0 (tcp://h:2)")
    assert said[0].endswith("its Spark task ends the processes of spark-0 (SIGKILL after kill-grace)")
    assert said[1].startswith("spark-dask: waited 0.2s for the Dask scheduler to close")


@pytest.mark.timeout(30)
def test_a_handles_warnings_do_not_reach_a_users_scale_at_the_same_time():
    """``named.owner.carry_out``: a handle's ``adapt()`` runs in a context with only a
    collecting hold; a user's ``scale()`` has its issuing hold open at the same time.
    The handle's warning is the handle's (collected), not the user's."""
    events = Events([], quiet=True)
    user_in, handle_done = threading.Event(), threading.Event()
    said = {}

    def user():
        with events.hold() as mine:
            user_in.set()
            handle_done.wait(10)
            said["user"] = list(mine)

    def handle():
        user_in.wait(10)
        with events.hold(issue=False) as mine:
            events.warn("spark-dask: from the handle")
            said["handle"] = list(mine)
        handle_done.set()

    threads = [threading.Thread(target=user, name="user"), threading.Thread(target=handle, name="handle")]
    got = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, *_, **__: got.append((threading.current_thread().name, str(message)))
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    assert said == {"user": [], "handle": ["spark-dask: from the handle"]}
    assert got == [("handle", "spark-dask: from the handle")]  # collected, and given at once (as without a user)


@pytest.mark.timeout(60)
def test_a_tasks_line_ends_its_workers_when_cut_or_when_the_scheduler_closes_not_when_hung_up():
    """The real line (``task_line.TaskLine``, TLS) to a real scheduler with the driver
    side's handler: cut by the driver or closed with the scheduler, the task ends its
    workers (``on_cut``); hung up by the task itself, it does not; either way its thread
    ends (a Python worker Spark reuses keeps none)."""
    security = Security.temporary()
    tls = {"ca": security.tls_ca_file, "cert": security.tls_worker_cert, "key": security.tls_worker_key}

    async def registered(side, name):
        while name not in side.lines:
            await asyncio.sleep(0.01)

    async def run():
        async with Scheduler(host="127.0.0.1", port=0, protocol="tls", security=security, dashboard=False) as s:
            side = DriverScheduler(asyncio.Event())
            side.scheduler = s
            s.handlers[TASK_LINE] = side.task_line
            spec = make_spec(scheduler_address=s.address, tls=tls)
            cuts = {name: threading.Event() for name in ("spark-0", "spark-1", "spark-2")}
            lines = {name: task_line.TaskLine(spec, [name], cut.set) for name, cut in cuts.items()}
            for name in cuts:
                await asyncio.wait_for(registered(side, name), 10)
            assert side.cut_line("spark-0") and not side.cut_line("spark-9")
            assert await asyncio.to_thread(cuts["spark-0"].wait, 10)
            assert await asyncio.to_thread(lines["spark-1"].hang_up, 10)
        # the scheduler closed: the last line closed with it
        assert await asyncio.to_thread(cuts["spark-2"].wait, 10)
        return cuts, lines

    cuts, lines = asyncio.run(run())
    assert not cuts["spark-1"].is_set()
    assert all(line.hang_up(5) and line.error is None for line in lines.values())
    # nor a thread of their event loops' (the resolver's): the next gang's nannies fork only without threads
    assert not [t.name for t in threading.enumerate() if t.name.startswith("asyncio_")]


@pytest.mark.timeout(60)
def test_removing_transfer_files_past_a_frozen_worker_is_bounded(caplog):
    """``remove_now`` (the user's thread, after a transfer): the workers' removal is
    broadcast, and a frozen worker never answers it; the call returns after
    close-timeout and says so, instead of blocking the user's ``to_spark`` for good."""
    runner = LoopRunner(asynchronous=False)
    runner.start()
    try:

        class FrozenScheduler:
            def add_plugin(self, plugin, name=None):
                pass

            async def broadcast(self, msg, on_error):
                await asyncio.Event().wait()  # a frozen worker's answer

        registry = TransferFiles(SimpleNamespace(scheduler=FrozenScheduler(), sync=partial(sync, runner.loop)))
        registry.add("t1", [("host-a", "/local/spark-dask-x-t1")])
        t0 = time.monotonic()
        with dask.config.set({"spark-dask.close-timeout": "0.3s"}), caplog.at_level("WARNING", logger="spark_dask"):
            registry.remove_now("t1")
        took = time.monotonic() - t0
    finally:
        runner.stop()
    assert took < 5, took
    [said] = [r.getMessage() for r in caplog.records if "transfer files" in r.getMessage()]
    assert said == (
        "spark-dask: waited 0.3s for every Dask worker to remove the transfer files in host-a:/local/spark-dask-x-t1, "
        "without an answer (frozen?); a worker that did not answer leaves those of its host until its executor stops"
    )


def test_the_logs_come_without_the_workers_when_one_never_sends_its_own():
    async def get(workers):
        if workers:
            await asyncio.Event().wait()  # a frozen worker's log
        return {"Cluster": "kept", "Scheduler": "its log"}

    events = Events([], quiet=True)
    assert asyncio.run(logs_within(get, True, 0.05, events)) == {"Cluster": "kept", "Scheduler": "its log"}
    assert [m for _, m in events.logs] == [
        "spark-dask: waited 0.05s for every Dask worker to send its log, without an answer (frozen?); "
        "the logs come without the workers'"
    ]
