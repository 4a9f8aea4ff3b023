"""What the running cluster's watches cost while nothing happens (issue 70, point 6: the
idle driver's CPU), counted, not timed: their reads of Spark go through one thread
(:class:`~spark_dask.gangs.waits.SparkReads`; a thread per read opened a py4j connection
and a JVM thread each time), the slot watch reads two py4j calls a round while Spark
runs no stage but the cluster's own (:class:`~spark_dask.gangs.waits.OwnStages`), and
the decommission watch looks up its workers' executors when a worker joins or leaves,
not each round. Without Spark: what they read is faked; the real thing is in
tests/spark/test_idle_driver.py."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from spark_dask.events import Events
from spark_dask.gangs import drain
from spark_dask.gangs.waits import SparkReads, watch_starved_stages
from spark_dask.spark.launcher import active_stage_ids, stage_snapshot
from tests.unit.test_drain import Pool, scheduler
from tests.unit.test_pool import (
    fake_launcher,  # noqa: F401 - autouse: gangs without Spark
    running_pool,
)
from tests.unit.test_status_reads import context

pytestmark = [pytest.mark.core, pytest.mark.timeout(30)]


async def inline(fn, *args):
    """A read awaited in the loop's own thread (the watches' ``read`` seam)."""
    return fn(*args)


def reads_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_the_reads_run_in_one_thread_until_closed_and_errors_reach_the_caller():
    reads = SparkReads("test-reads-a")

    def unreadable():
        raise ValueError("status tracker unreadable")

    async def main():
        idents = [await reads(threading.get_ident) for _ in range(5)]
        with pytest.raises(ValueError, match="unreadable"):
            await reads(unreadable)
        return idents, await reads(threading.get_ident)

    idents, after = asyncio.run(main())
    assert len(set(idents)) == 1 and after == idents[0] and idents[0] != threading.get_ident()
    (thread,) = reads_threads("test-reads-a")
    reads.close()
    thread.join(10)
    assert not thread.is_alive() and not reads_threads("test-reads-a")
    # a read after the close starts another thread
    assert asyncio.run(reads(lambda: "again")) == "again"
    (again,) = reads_threads("test-reads-a")
    reads.close()
    again.join(10)
    assert not again.is_alive()


def test_a_read_whose_watch_was_cancelled_or_whose_loop_closed_is_dropped():
    reads = SparkReads("test-reads-b")
    gate, started = threading.Event(), threading.Event()

    def held():
        started.set()
        return gate.wait(10)

    async def cancelled():
        job = asyncio.ensure_future(reads(held))
        await asyncio.sleep(0)  # the read is queued
        assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        job.cancel()
        gate.set()
        return await reads(lambda: "next")

    assert asyncio.run(cancelled()) == "next"
    gate.clear()
    started.clear()

    async def left():  # the loop closes while its read runs
        asyncio.ensure_future(reads(held))
        await asyncio.sleep(0)
        assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)

    asyncio.run(left())
    gate.set()
    assert asyncio.run(reads(lambda: "the thread lives on")) == "the thread lives on"
    assert len(reads_threads("test-reads-b")) == 1
    (thread,) = reads_threads("test-reads-b")
    reads.close()
    thread.join(10)
    assert not thread.is_alive()


def slot_watch_rounds(pool, actives: list[set], stages: dict) -> tuple[list, list]:
    """Run the slot watch one round per entry of ``actives`` (Spark's active stage ids
    in that round); ``stages``: stage id -> (tasks, running). The gang's job is stage 5.
    Returns (the full snapshots' tags, the active stage ids read)."""
    full, cheap, sets = [], [], iter(actives)
    now = {"stages": set(), "rounds": 0, "then": False}  # a full read follows in the same round

    def next_round():
        now["stages"], now["rounds"] = next(sets), now["rounds"] + 1
        pool.running = now["rounds"] < len(actives)

    def snapshot(spark, tags):
        if not now["then"]:
            next_round()
        now["then"] = False
        full.append(list(tags))
        listed = [{"stageId": s, "name": f"collect at job.py:{s}", "numTasks": stages[s][0],
                   "numActiveTasks": stages[s][1], "numCompletedTasks": 0} for s in sorted(now["stages"])]  # fmt: skip
        return listed, {5} & now["stages"]

    def active(spark):
        next_round()
        now["then"] = not now["stages"] <= {5}
        cheap.append(now["stages"])
        return now["stages"]

    watch = watch_starved_stages(None, {"default": pool}, "t", 15.0, every=0.0, patience=0.0, snapshot=snapshot,
                                 read=inline, active=active)  # fmt: skip
    asyncio.run(asyncio.wait_for(watch, 10))
    assert now["rounds"] == len(actives)
    return full, cheap


def test_an_idle_slot_watch_round_reads_the_active_stage_ids_only():
    """10 rounds with only the gang's stage active: one full snapshot (the first), then
    the active stage ids, whatever the number of workers and stages of the gang."""
    pool, *_ = running_pool(2)
    full, cheap = slot_watch_rounds(pool, [{5}] * 10, {5: (2, 2)})
    assert full == [[pool.gangs[0].tag]] and len(cheap) == 9


def test_a_stage_not_the_gangs_or_a_gang_waiting_for_slots_takes_the_full_read():
    """A user's stage waiting beside the gang's: a full read (and it is said, patience
    0); once it is gone the rounds are cheap again. A scale-up gang waiting for its
    slots: a full read each round (its waiting is said after slot_wait)."""
    pool, _side, events, *_ = running_pool(2)
    rounds = [{5}, {5}, {5, 9}, {5, 9}, {5}, {5}]
    full, cheap = slot_watch_rounds(pool, rounds, {5: (2, 2), 9: (4, 0)})
    assert len(full) == 3 and cheap == rounds[1:], (full, cheap)  # the first round and the two with stage 9
    assert any("Spark stage 9 (collect at job.py:9) has waited" in text for _, text in events.logs), events.logs
    pool, *_ = running_pool(2)
    pool.running = True
    pool.submit(pool.shape, "scale")  # no worker of it connected: pending
    full, cheap = slot_watch_rounds(pool, [{5}] * 4, {5: (2, 2)})
    assert len(full) == 4 and cheap == []


def test_the_slot_watch_reads_the_whole_snapshot_each_round_without_active():
    pool, *_ = running_pool(2)
    calls = []

    def snapshot(spark, tags):
        calls.append(tags)
        pool.running = len(calls) < 5
        return [], set()

    watch = watch_starved_stages(None, {"default": pool}, "t", 15.0, every=0.0, snapshot=snapshot, read=inline)
    asyncio.run(asyncio.wait_for(watch, 10))
    assert len(calls) == 5


def test_the_active_stage_ids_are_two_py4j_calls_and_the_trackers_are_looked_up_once():
    """Against the py4j stand-in of tests/unit/test_status_reads.py: a snapshot's 21 calls
    are 18 once the SparkContext's trackers are known (the two trackers, and the
    ``sc()`` between), and a round of the idle slot watch is 2."""
    sc, jvm = context({0: [0]}, {0: (64, 64)}, {0}, {"t": [0]}, {})
    spark = SimpleNamespace(sparkContext=sc)
    assert active_stage_ids(spark) == {0}
    assert jvm.calls == 3 + 2  # the trackers (and sc() between), once; the array and its text
    for _ in range(3):
        jvm.calls = 0
        assert active_stage_ids(spark) == {0} and jvm.calls == 2
    jvm.calls = 0
    stages, ours = stage_snapshot(spark, ["t"])
    assert ours == {0} and [s["stageId"] for s in stages] == [0]
    assert jvm.calls == 21 - 3, jvm.calls


def decommission_rounds(monkeypatch, workers, rounds: int, roster=None, joined=None):
    """The decommission watch over ``rounds`` rounds on ``workers`` (name, executor id):
    the executors asked each round and how often the workers' executors were looked up.
    ``joined(sched, round)``: a worker joins at some round (changing ``roster``)."""
    sched = scheduler(*workers)
    pool = Pool([n for n, _ in workers])
    asked, looked = [], []
    where = drain.executors_of

    def executors_of(sched_, tag):
        looked.append(len(sched_.workers))
        return where(sched_, tag)

    def read(spark, ids):
        asked.append(ids)
        if joined is not None:
            joined(sched, len(asked))
        pool.running = len(asked) < rounds
        return {}

    monkeypatch.setattr(drain, "jvm_reachable", lambda spark: True)
    monkeypatch.setattr(drain, "spark_window", lambda spark, timeout: 30.0)
    monkeypatch.setattr(drain, "decommissioning", read)
    monkeypatch.setattr(drain, "executors_of", executors_of)
    events = Events([], quiet=True)
    coro = drain.watch_decommission(None, "t", sched, lambda: [pool], 30.0, events, list.append, every=0.0,
                                    read=inline, roster=roster)  # fmt: skip
    asyncio.run(asyncio.wait_for(coro, 10))
    return asked, looked


@pytest.mark.parametrize("n_workers", [8, 64])
def test_an_idle_decommission_round_asks_as_much_at_64_workers_as_at_8(monkeypatch, n_workers):
    """8 workers per executor: 1 executor at 8 workers, 8 at 64. Each round asks about at
    most PER_ROUND executors (2 py4j reads each), and the workers' executors are looked
    up once while no worker joins or leaves: nothing per worker per round."""
    workers = [(f"spark-{i}", str(i // 8)) for i in range(n_workers)]
    asked, looked = decommission_rounds(monkeypatch, workers, 20, roster=lambda: 7)
    assert len(asked) == 20 and all(len(ids) == min(n_workers // 8, drain.PER_ROUND) for ids in asked)
    assert looked == [n_workers]


def test_the_executors_are_looked_up_again_when_a_worker_joins(monkeypatch):
    workers = [(f"spark-{i}", "1") for i in range(4)]
    roster = {"n": 4}

    def joined(sched, round_):
        if round_ == 3:  # a worker on executor 2 joins after the third round
            sched.workers["spark-9"] = SimpleNamespace(
                name="spark-9", has_what=(), extra={"spark": {"cluster": "t", "executor_id": "2", "host": "h"}}
            )
            roster["n"] += 1

    asked, looked = decommission_rounds(monkeypatch, workers, 6, roster=lambda: roster["n"], joined=joined)
    assert looked == [4, 5]
    assert asked == [["1"]] * 3 + [["1", "2"]] * 3
    # without a roster: looked up each round, as before
    _, looked = decommission_rounds(monkeypatch, workers, 6)
    assert looked == [4] * 6
