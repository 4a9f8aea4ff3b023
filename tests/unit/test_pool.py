"""The gang policy (spark_dask.gangs.pool.GangPool) without Spark: a stand-in launcher (from
test_gang), a stand-in scheduler, real Gang objects and the real Recovery. What the
pool decides (which gang to submit, cancel or relaunch, which workers to retire) and
what it says."""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from spark_dask.aio import background
from spark_dask.capacity import ClusterFacts, GangPlan
from spark_dask.errors import PlanError
from spark_dask.events import Events
from spark_dask.gangs import gang as gang_module
from spark_dask.gangs.adapt import adapt_bounds, size_per_worker
from spark_dask.gangs.gang import Gang
from spark_dask.gangs.pool import GangPool
from spark_dask.gangs.pools import PoolContext
from spark_dask.gangs.waits import watch_starved_stages
from tests.support.task_specs import FakeLauncher, cluster_options, make_spec

pytestmark = pytest.mark.core

TAG = "spark-dask-t"
OPTIONS = cluster_options(relaunch_attempts=3, lost_worker_grace=0.0, no_workers_timeout=600.0, close_timeout=5.0)


@pytest.fixture(autouse=True)
def fake_launcher(monkeypatch):
    monkeypatch.setattr(gang_module, "GangLauncher", FakeLauncher)


class FakeScheduler:
    """What the pool uses of distributed's Scheduler: workers, workers_to_close,
    retire_workers. A worker asked to close (``close_workers=True, remove=False``) leaves
    a moment later, when its connection closes (``on_leave``: the pool's plugin hook)."""

    def __init__(self):
        self.workers: dict = {}
        self.retired: list[list[str]] = []
        self.on_leave = lambda address: None

    def workers_to_close(self, n, key, attribute):
        return [ws.name for ws in list(self.workers.values())[-n:]]

    async def retire_workers(self, names, close_workers, remove):
        self.retired.append(list(names))
        out = {}
        for address, ws in list(self.workers.items()):
            if ws.name in names:
                out[address] = {"name": ws.name}
                if close_workers:
                    asyncio.get_running_loop().call_later(0.05, self.closed, address)
        return out

    def closed(self, address):
        if self.workers.pop(address, None) is not None:
            self.on_leave(address)


class FakeSide:
    """What the pool uses of DriverScheduler."""

    def __init__(self):
        self.scheduler = FakeScheduler()
        self.terminated: list[str] = []
        self.still_connected: list[str] = []  # nannies ended while their worker was connected

    def open_nanny_comms(self, nannies):
        pass

    async def terminate_nanny(self, address, fast=False):
        self.terminated.append(address)
        self.still_connected += [address for ws in self.scheduler.workers.values() if ws.nanny == address]

    async def remove_lost(self, addresses, why):
        """As distributed's remove_worker: gone from the scheduler, the plugin told."""
        removed = [a for a in addresses if a in self.scheduler.workers]
        for address in removed:
            self.scheduler.closed(address)
        return removed


def facts(slots=4, executors=4):
    return ClusterFacts(
        executors=executors, executor_cores=1, executor_memory=2**30, slots=slots, master="spark://m:7077"
    )


def make_pool(n=2, options=OPTIONS, slots=4, adaptive=None):
    shape = GangPlan("cpu", False, n, n, 1)
    side = FakeSide()
    events = Events([], quiet=True)

    def make_gang(plan, reason, index, first):
        return Gang(None, plan, make_spec(scheduler_address="tls://s:1"), cluster_tag=TAG, index=index, first=first,
                    reason=reason)  # fmt: skip

    context = PoolContext(facts(slots), events, side)
    pool = GangPool(shape, options, context, make_gang, lambda: facts(slots), adaptive=lambda: adaptive)
    context.pools["default"] = pool
    side.scheduler.on_leave = pool.worker_removed
    return pool, side, events


def join(pool, side, gang, k):
    """Worker k of ``gang`` connects (the scheduler plugin's add_worker)."""
    name = f"spark-{gang.first + k}"
    address = f"tls://w{gang.first + k}:1"
    side.scheduler.workers[address] = SimpleNamespace(
        name=name, address=address, nanny=f"tls://w{gang.first + k}:2",
        extra={"spark": {"cluster": TAG, "gang": gang.index, "host": f"host-{k}", "executor_id": str(k)}},
    )  # fmt: skip
    pool.worker_added(side.scheduler, address, TAG)
    return address


def leave(pool, side, address):
    """A worker's connection ends (the scheduler plugin's remove_worker)."""
    side.scheduler.workers.pop(address, None)
    pool.worker_removed(address)


async def settle(pool, timeout=5.0):
    """Until the pool's reconciliation (and what it started in threads) is done."""
    deadline = time.monotonic() + timeout
    await asyncio.sleep(0)
    while pool._reconcile is not None and not pool._reconcile.done():
        assert time.monotonic() < deadline, "the pool did not settle"
        await asyncio.sleep(0.01)


def running_pool(n=2, **kwargs):
    pool, side, events = make_pool(n, **kwargs)
    first = pool.submit(pool.shape, "start")
    addresses = [join(pool, side, first, k) for k in range(n)]
    pool.running = True
    pool.status = "running"
    return pool, side, events, first, addresses


def texts(events):
    return [text for _, text in events.logs]


def test_start_gang_names_and_status():
    pool, side, _ = make_pool(2)
    gang = pool.submit(pool.shape, "start")
    assert pool.status == "starting" and gang.first == 0 and pool.numbers.next == 2
    join(pool, side, gang, 0)
    join(pool, side, gang, 1)
    assert gang.status == "running" and pool.connected() == 2 and pool.held() == 2
    assert pool.planned_names() == {"spark-0", "spark-1"}
    assert pool.gang_of("spark-1") is gang and pool.gang_of("spark-9") is None


def test_a_worker_of_another_cluster_is_ignored():
    pool, side, _ = make_pool(1)
    gang = pool.submit(pool.shape, "start")
    side.scheduler.workers["tls://x:1"] = SimpleNamespace(
        name="spark-0", nanny=None, extra={"spark": {"cluster": "other"}}
    )
    pool.worker_added(side.scheduler, "tls://x:1", TAG)
    assert gang.connected == 0


def test_scale_up_submits_a_gang_into_free_slots_only():
    async def main():
        pool, side, events, first, _ = running_pool(2, slots=4)
        await pool.scale(3)
        await settle(pool)
        assert pool.target == 3 and len(pool.gangs) == 2
        second = pool.gangs[1]
        assert (second.reason, second.plan.n_workers, second.first) == ("scale", 1, 2)
        await pool.scale(10)  # 4 slots: one more worker fits
        await settle(pool)
        assert pool.target == 4 and sum(g.wanted for g in pool.live()) == 4
        assert any("slot" in t for t in texts(events)), texts(events)

    asyncio.run(main())


def test_scale_down_cancels_a_waiting_gang_before_retiring_workers():
    async def main():
        pool, side, _, first, _ = running_pool(2)
        await pool.scale(4)
        await settle(pool)
        waiting = pool.gangs[1]
        assert waiting.pending
        await pool.scale(2)
        await settle(pool)
        assert waiting.cancelled and waiting.launcher.cancelled == 1
        assert side.scheduler.retired == [] and first.wanted == 2

    asyncio.run(main())


def test_scale_down_retires_connected_workers_and_ends_them():
    async def main():
        pool, side, events, first, addresses = running_pool(2)
        await pool.scale(1)
        await settle(pool)
        assert side.scheduler.retired == [["spark-1"]]
        assert side.terminated == ["tls://w1:2"]  # its nanny: the worker's Spark task returns
        # ... once the worker's own close ended (a heartbeat of a worker killed mid-close
        # reaches a scheduler that forgot it: "Received heartbeat from unregistered worker")
        assert side.still_connected == []
        assert addresses[1] not in side.scheduler.workers
        assert first.wanted == 1 and "spark-1" in first.retiring
        assert not pool.recovery.missing  # a retired worker is no loss
        assert "retired Dask workers spark-1" in " ".join(texts(events))

    asyncio.run(main())


def test_a_lost_executor_relaunches_only_the_failed_gang():
    """The failed gang's workers that are still registered (silent: their host cut off)
    leave the scheduler at once; the healthy gang's stays."""

    async def main():
        pool, side, events, first, lost = running_pool(2)
        await pool.scale(3)
        await settle(pool)
        second = pool.gangs[1]
        kept = join(pool, side, second, 0)
        first.launcher.finish(
            error=RuntimeError("ExecutorLostFailure (executor 1 exited caused by one of the running tasks)")
        )
        pool.ended(first)
        await settle(pool)
        await asyncio.sleep(0.01)  # the removal runs in the background
        assert not set(lost) & set(side.scheduler.workers) and kept in side.scheduler.workers
        assert first.status.startswith("failed") and first.wanted == 0
        relaunch = pool.gangs[2]
        assert (relaunch.reason, relaunch.plan.n_workers, relaunch.first) == ("relaunch", 2, 3)
        assert second.wanted == 1 and not second.done  # the healthy gang is left alone
        assert pool.relaunches == 1 and pool.status == "relaunching (1)" and pool.target == 3
        assert any("relaunch 1 of 3" in t for t in texts(events)), texts(events)
        join(pool, side, relaunch, 0)
        join(pool, side, relaunch, 1)
        assert pool.status == "running"

    asyncio.run(main())


def test_relaunches_used_up_shrink_the_cluster_and_say_so():
    async def main():
        pool, side, events, first, _ = running_pool(2, options=replace(OPTIONS, relaunch_attempts=0))
        first.launcher.finish(error=RuntimeError("ExecutorLostFailure (executor 1 exited)"))
        pool.ended(first)
        await settle(pool)
        assert len(pool.gangs) == 1 and pool.target == 0 and pool.relaunches == 0
        assert pool.status.startswith("failed")
        assert any("0 relaunches are used up" in t and "Close it and start a new one" in t for t in texts(events))

    asyncio.run(main())


def test_gangs_that_keep_failing_to_start_stop_adaptive():
    adaptive = SimpleNamespace(stopped=[], stop=lambda reason="": adaptive.stopped.append(reason))

    async def main():
        pool, side, events, first, _ = running_pool(1, adaptive=adaptive)
        for i in range(3):
            await pool.scale(2)
            await settle(pool)
            gang = pool.live()[-1]
            gang.launcher.finish(error=RuntimeError("WorkerStartError: spark-dask: cannot import distributed"))
            pool.ended(gang)
            assert pool.target == 1 and gang.status.startswith("failed")
            assert len(adaptive.stopped) == (1 if i == 2 else 0)
        assert "adaptive scaling is stopped" in texts(events)[-1]

    asyncio.run(main())


def test_a_lost_worker_is_replaced_after_the_grace():
    async def main():
        pool, side, events, first, addresses = running_pool(2)
        leave(pool, side, addresses[0])
        assert "spark-0" in pool.recovery.missing and first.connected == 1
        await pool.replace_missing()  # grace 0: due at once
        await settle(pool)
        assert first.wanted == 1 and not first.done
        replacement = pool.gangs[-1]
        assert len(pool.gangs) == 2 and replacement.plan.n_workers == 1 and replacement.reason == "relaunch"
        assert pool.target == 2
        assert any("host-0" in t for t in texts(events)), texts(events)

    asyncio.run(main())


def test_a_worker_that_comes_back_is_not_replaced():
    async def main():
        pool, side, _, first, addresses = running_pool(2, options=replace(OPTIONS, lost_worker_grace=60.0))
        leave(pool, side, addresses[0])
        join(pool, side, first, 0)  # its nanny restarted it
        assert not pool.recovery.missing
        await pool.replace_missing()
        assert len(pool.gangs) == 1 and first.wanted == 2

    asyncio.run(main())


def test_a_worker_leaving_on_purpose_is_no_loss():
    pool, side, _, first, addresses = running_pool(2)
    pool.recovery.leaving.add(addresses[1])
    leave(pool, side, addresses[1])
    assert not pool.recovery.missing and "tls://w1:1" not in pool.recovery.leaving


def test_closed_workers_shrink_the_target():
    """Workers retired from Dask (client.retire_workers: closing_gracefully, heard as
    leaving) end their gang's job without error: the cluster is that much smaller."""
    pool, side, events, first, addresses = running_pool(2)
    for a in addresses:
        pool.recovery.leaving.add(a)
        leave(pool, side, a)
    first.launcher.finish()  # ended without error while wanted
    pool.ended(first)
    assert first.status == "ended: its workers were closed" and pool.target == 0


def test_workers_that_end_by_themselves_are_relaunched():
    """A worker cut off from its scheduler closes itself, and its Spark task ends without
    an error (the chaos soak, issue 37: the target went down for good). Not leaving on
    purpose, so the gang is relaunched and the target stays."""
    pool, side, events, first, addresses = running_pool(2)
    leave(pool, side, addresses[1])  # its connection broke; then the task returned
    first.launcher.finish()

    async def main():
        pool.ended(first)  # kicks the reconciliation: on the event loop
        pool.running = False

    asyncio.run(main())
    assert pool.target == 2
    assert (
        first.status
        == "failed: its Dask workers ended without being asked to (cut off from the scheduler, or closed from inside)"
    )
    assert pool.recovery.lost == 2  # relaunched as after a lost executor (the pool's kick)


def test_a_task_nobody_awaits_is_kept_and_its_exception_logged(caplog):
    """What the pool starts and does not await (closing surplus workers, failing the
    cluster) runs to its end and says why it failed (issue 37: it was lost)."""

    async def fails():
        await asyncio.sleep(0.01)
        raise RuntimeError("the nanny did not answer")

    async def main():
        background(fails(), "closing the surplus Dask workers spark-3")  # no reference kept here
        gc.collect()
        await asyncio.sleep(0.1)

    with caplog.at_level("WARNING", logger="spark_dask"):
        asyncio.run(main())
    said = [r.getMessage() for r in caplog.records if r.name == "spark_dask"]
    assert said == [
        "spark-dask: closing the surplus Dask workers spark-3 failed: RuntimeError: the nanny did not answer"
    ]


def test_the_starved_stage_watch_survives_a_failed_round(caplog):
    """A round whose stage snapshot fails is logged (WARNING, then DEBUG while it keeps
    failing) and the watch goes on; it used to end for the cluster's life, silently."""
    pool, *_ = running_pool(1)
    rounds = []

    def snapshot(spark, tags):  # launcher.stage_snapshot's seam: the status tracker
        rounds.append(list(tags))
        if len(rounds) in (1, 2):
            raise RuntimeError("status tracker unreadable")
        if len(rounds) == 4:
            pool.running = False
        return [], set()

    with caplog.at_level("DEBUG", logger="spark_dask"):
        asyncio.run(
            asyncio.wait_for(
                watch_starved_stages(None, {"default": pool}, TAG, 15.0, every=0.01, snapshot=snapshot), 10
            )
        )
    assert rounds == [[pool.gangs[0].tag]] * 4
    failed = [r for r in caplog.records if "the watch on Spark stages" in r.getMessage()]
    assert [r.levelname for r in failed] == ["WARNING", "DEBUG"]
    assert failed[0].getMessage().startswith("spark-dask: the watch on Spark stages waiting for task slots failed "
                                             "(RuntimeError: status tracker unreadable); it tries again every 0.01s")  # fmt: skip


def test_adapt_bounds_and_size_per_worker():
    assert adapt_bounds(0, 10, None, 8, None, None, 2, None, None)[:2] == (0, 4)
    assert adapt_bounds(0, 10, 4, None, "4GiB", None, 2, 2**30, None)[:2] == (4, 10)
    minimum, maximum, note = adapt_bounds(1, 10, None, None, None, None, None, None, 3)
    assert (minimum, maximum) == (1, 3) and note
    with pytest.raises(PlanError, match="needs a worker's threads"):
        adapt_bounds(0, 10, None, 8, None, None, None, None, None)
    with pytest.raises(PlanError, match="minimum=5 is above the maximum 3"):
        adapt_bounds(5, 10, None, None, None, None, None, None, 3)
    opts = replace(OPTIONS, threads_per_worker=None, memory_limit="auto")
    assert size_per_worker(opts, (2, 100)) == (2, 100) and size_per_worker(opts, None) == (None, None)
    assert size_per_worker(replace(OPTIONS, threads_per_worker=4, memory_limit=50), (2, 100)) == (4, 50)


def test_a_drain_retires_the_workers_and_owes_as_many_without_a_relaunch():
    """Spark decommissions the executor of spark-1: it is retired (data moved, its
    nanny ended after it left), the gang keeps its other worker, and a new gang for one
    worker starts in a free slot; no relaunch attempt is spent."""

    async def main():
        pool, side, events, first, addresses = running_pool(2, slots=4)
        late = await pool.drain(["spark-1"], 30.0)
        await settle(pool)
        assert late == [] and side.scheduler.retired == [["spark-1"]]
        assert side.terminated == ["tls://w1:2"] and side.still_connected == []
        assert first.wanted == 1 and not first.done and pool.target == 2
        (replacement,) = pool.gangs[1:]
        assert replacement.plan.n_workers == 1 and pool.relaunches == 0
        assert not pool.recovery.missing and pool.recovery.lost == 0
        assert not any("lost" in t for t in texts(events)), texts(events)

    asyncio.run(main())


def test_a_drain_longer_than_its_window_ends_the_workers_anyway():
    """The data does not move within the window: ``before_end`` sees the moment, then
    the nanny is ended once (not twice: a second end would wait for a connection to a
    nanny that is gone) and the retirement finishes when the worker has left."""

    async def main():
        pool, side, _, first, addresses = running_pool(2, slots=4)
        scheduler = side.scheduler
        left = asyncio.Event()

        async def slow_retire(names, close_workers, remove):
            scheduler.retired.append(list(names))
            await left.wait()  # distributed's RetireWorker: done once the worker is gone
            return {}

        scheduler.retire_workers = slow_retire
        seen = []

        async def terminate(address, fast=False):
            side.terminated.append(address)
            scheduler.closed(addresses[1])
            left.set()

        side.terminate_nanny = terminate
        late = await pool.drain(["spark-1"], 0.05, lambda: seen.append(sorted(scheduler.workers)))
        await settle(pool)
        assert late == ["spark-1"] and seen == [sorted(addresses)]  # before the nanny ended it
        assert side.terminated == ["tls://w1:2"]
        assert first.wanted == 1 and pool.relaunches == 0 and not pool.recovery.missing

    asyncio.run(main())


class Steps(dict):
    """A gang's ``workers`` that counts the entries every look through it visits."""

    steps = 0

    def __iter__(self):
        for key in super().__iter__():
            self.steps += 1
            yield key

    def items(self):
        for item in super().items():
            self.steps += 1
            yield item

    def values(self):
        for _, value in self.items():
            yield value


@pytest.mark.parametrize("n", [16, 256])
def test_a_worker_joining_or_leaving_looks_through_no_list_of_workers(n):
    """Issue 57: each registration counted the gang's connected workers (twice), each
    removal looked for the worker's name among them: steps growing as n² (66 048 for a
    start and 32 896 for a close of 256 workers); now none."""
    pool, side, _ = make_pool(n, slots=n)
    gang = pool.submit(pool.shape, "start")
    gang.workers = Steps()
    addresses = [join(pool, side, gang, k) for k in range(n)]
    assert gang.status == "running" and pool.connected() == n
    joined = gang.workers.steps
    for address in addresses:
        leave(pool, side, address)
    assert not gang.workers and pool.connected() == 0
    assert (joined, gang.workers.steps - joined) == (0, 0)
