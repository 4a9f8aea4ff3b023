"""The decommission watch (spark_dask.gangs.drain) without Spark: what it reads of the
driver's task scheduler is the one thing faked (``decommissioning``), the scheduler's
workers are stand-ins, the pool a recorder of its ``drain`` calls. The real thing runs in
tests/spark/test_drain.py and tests/multihost/test_multihost_faults.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from spark_dask.events import Events
from spark_dask.gangs import drain

pytestmark = [pytest.mark.core, pytest.mark.timeout(30)]


class Pool:
    def __init__(self, names):
        self.names, self.running, self.calls = set(names), True, []

    def gang_of(self, name):
        return self if name in self.names else None

    async def drain(self, names, window, before_end=None):
        self.calls.append((names, round(window, 1)))
        self.running = False  # the watch ends after this round
        return []


class Worker(SimpleNamespace):
    __hash__ = object.__hash__  # as WorkerState


def scheduler(*workers):
    """Stand-in WorkerStates: (name, executor id) of cluster "t"."""
    return SimpleNamespace(
        workers={n: Worker(name=n, has_what=(), extra={"spark": {"cluster": "t", "executor_id": e, "host": "h"}})
                 for n, e in workers},
        tasks={},
    )  # fmt: skip


def watch(monkeypatch, read, sched, pools, events, window=30.0):
    monkeypatch.setattr(drain, "jvm_reachable", lambda spark: True)
    monkeypatch.setattr(drain, "spark_window", lambda spark, timeout: window)
    monkeypatch.setattr(drain, "decommissioning", read)
    drained = []
    coro = drain.watch_decommission(None, "t", sched, lambda: pools, 30.0, events, drained.append, every=0.01)
    asyncio.run(asyncio.wait_for(coro, 10))
    return drained


def test_a_decommissioned_executor_drains_its_workers_within_what_is_left_of_the_window(monkeypatch):
    pool = Pool(["spark-0", "spark-1", "spark-2"])
    asked = []

    def read(spark, ids):
        asked.append(ids)
        return {e: 4.0 for e in ids if e == "2"}  # Spark began 4 s ago

    events = Events([], quiet=True)
    drained = watch(monkeypatch, read, scheduler(("spark-0", "1"), ("spark-1", "2"), ("spark-2", "2")), [pool], events)
    assert asked[0] == ["1", "2"]  # only the executors of this cluster's workers
    assert pool.calls == [(["spark-1", "spark-2"], 26.0)]
    assert [(d["executor"], d["workers"]) for d in drained] == [("2", ["spark-1", "spark-2"])]
    (line,) = [t for _, t in events.logs]
    assert line.startswith(
        "spark-dask: Spark is decommissioning executor 2: Dask workers spark-1 on h, spark-2 on h retired"
    )


def test_the_watch_ends_with_one_line_when_the_driver_cannot_be_read(monkeypatch):
    def refuse(spark, ids):
        raise RuntimeError("Py4JSecurityException: Method public ... is not whitelisted")

    events, pool = Events([], quiet=True), Pool(["spark-0"])
    watch(monkeypatch, refuse, scheduler(("spark-0", "1")), [pool], events)
    (line,) = [t for _, t in events.logs]
    assert "driver's scheduler cannot be read (RuntimeError: Py4JSecurityException" in line, line
    assert pool.calls == [] and pool.running  # ended by itself, not with the cluster


def test_no_watch_where_spark_does_not_decommission(monkeypatch):
    def never(spark, ids):
        raise AssertionError("read although spark.decommission.enabled is off")

    events = Events([], quiet=True)
    watch(monkeypatch, never, scheduler(("spark-0", "1")), [Pool(["spark-0"])], events, window=None)
    assert events.logs == []


def test_many_executors_are_asked_about_a_few_at_a_time_and_each_in_turn(monkeypatch):
    # 10 executors: 4 per round (8 py4j reads), each asked within 3 rounds
    workers = [(f"spark-{i}", str(i)) for i in range(10)]
    pool = Pool([n for n, _ in workers])
    asked = []

    def read(spark, ids):
        asked.append(ids)
        return {e: 1.0 for e in ids if e == "7"}

    drained = watch(monkeypatch, read, scheduler(*workers), [pool], Events([], quiet=True))
    assert all(len(ids) <= drain.PER_ROUND for ids in asked), asked
    assert asked[:3] == [["0", "1", "2", "3"], ["4", "5", "6", "7"], ["8", "9", "0", "1"]][: len(asked)]
    assert [d["executor"] for d in drained] == ["7"] and pool.calls == [(["spark-7"], 29.0)]
