"""User-facing texts: counts agree with their nouns, and spark-dask's Python warnings
point at the caller's line even when the event loop's thread gives them (issue 24)."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest

from spark_dask import faults, slots, widget
from spark_dask.aio import blocking
from spark_dask.events import Events
from spark_dask.handoff.capacity import no_slot_message, transfer_slots
from spark_dask.plan import ClusterFacts, GangPlan, hog_warning, scale_step
from spark_dask.sizes import plural


def test_counts_agree_with_their_nouns():
    assert plural(1, "Dask worker") == "1 Dask worker" and plural(3, "task") == "3 tasks"
    texts = [
        faults.worker_lost_message("spark-0", 0, 1, True, 30),
        faults.no_workers_warning(1, "waiting", 60),
        slots.no_slots_message(1, 15, 2, []),
        slots.start_timeout_message(0, 1, "tls://a:1", 60, "t", True, False, None),
        scale_step(5, current=1, held_tasks=1, capacity=2).note,
        hog_warning(
            ClusterFacts(executors=1, executor_cores=1, executor_memory=0, slots=1), GangPlan("cpu", False, 1, 1)
        ),
    ]
    for text in texts:
        for wrong in (
            "1 workers",
            "1 Dask workers",
            "1 tasks",
            "1 more Dask workers",
            "1 barrier tasks",
            "1 task take",
        ):
            assert wrong not in text, (wrong, text)
    assert "the cluster has 0 of 1 worker;" in texts[0]
    assert "the Dask cluster's 1 barrier task takes every task slot" in texts[5] and "x 1 core)" in texts[5]


def test_two_clusters_slots_in_words():
    facts = ClusterFacts(executors=2, executor_cores=2, executor_memory=0, slots=4)
    plan = GangPlan("cpu", False, 1, 1, 1, task_cpus=2)
    other = (("spark-dask-a", 1, 2),)
    assert transfer_slots(facts, plan, False) == 2 and transfer_slots(facts, plan, False, other) == 0
    msg = no_slot_message(facts, plan, "to_dask", False, other)
    assert (
        "its 1 barrier task and the application's other spark-dask cluster spark-dask-a (1 task of 2 CPUs) hold" in msg
    )
    assert "close the other spark-dask cluster" in msg
    said = slots.holding("spark-dask-b", 1, 4, True, (2, 4), other)
    assert said.startswith("the Dask cluster spark-dask-b holds 1 barrier task (2 of the application's 4 cores)")


def test_task_line_without_an_executor():
    assert widget.task_line({"partition": 0, "status": "waiting for a task slot"}) == "task 0: waiting for a task slot"


def test_held_warnings_point_at_the_callers_line():
    events = Events([])
    other = threading.Thread(target=events.warn, args=("spark-dask: from the loop thread",))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with events.hold():
            other.start()
            other.join()
            assert not got  # kept until the hold ends
        events.warn("spark-dask: direct")
    assert [str(w.message) for w in got] == ["spark-dask: from the loop thread", "spark-dask: direct"]
    assert [w.filename for w in got] == [__file__, __file__]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("issue", [True, False])
def test_overlapping_holds_each_get_their_own_warnings(issue):
    """A user's ``scale()`` and a handle's at the same time (issue 37): each hold gets the
    warnings of its own call, given on the event loop's thread (distributed's ``sync``) and
    in a thread of ``aio.blocking``; none is lost, given twice or handed to the other."""
    from distributed.utils import LoopRunner, sync

    events = Events([], quiet=True)
    runner = LoopRunner(asynchronous=False)
    runner.start()
    both_in = threading.Barrier(2, timeout=10)
    said = {}

    async def scale(n):  # as SparkCluster._scale: on the loop's thread, with a blocking call
        await asyncio.sleep(0.05)
        events.warn(f"spark-dask: grow to {n}")
        await blocking(events.warn, f"spark-dask: {n} wait for slots")
        await asyncio.sleep(0.05)
        events.warn(f"spark-dask: done {n}")

    def caller(n):
        with events.hold(issue=issue) as mine:
            both_in.wait()  # both holds open before either call gives a warning
            sync(runner.loop, scale, n)
            said[n] = list(mine)

    got = []  # (the thread that issued it, the warning)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = lambda message, *_, **__: got.append((threading.current_thread().name, str(message)))
            threads = [threading.Thread(target=caller, args=(n,), name=f"caller-{n}") for n in (1, 2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
    finally:
        runner.stop()
    own = {n: [f"spark-dask: grow to {n}", f"spark-dask: {n} wait for slots", f"spark-dask: done {n}"] for n in (1, 2)}
    assert said == own
    # issued once each: by its caller at the end of its hold, or (issue=False: only
    # collected) at once, by the thread that gave it
    assert sorted(msg for _, msg in got) == sorted(own[1] + own[2])
    if issue:
        assert sorted(got) == sorted((f"caller-{n}", msg) for n in (1, 2) for msg in own[n])
