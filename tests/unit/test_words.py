"""User-facing texts: counts agree with their nouns, and spark-dask's Python warnings
point at the caller's line even when the event loop's thread gives them (issue 24)."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest

import spark_dask.errors
from spark_dask import idle, logdir, options, widget
from spark_dask.aio import blocking
from spark_dask.capacity import ClusterFacts, GangPlan, hog_warning, no_slot_message, scale_step, transfer_slots
from spark_dask.errors import SparkDaskError
from spark_dask.events import Events
from spark_dask.executor import command, logs, placement, rmm, sizing
from spark_dask.gangs import faults, slots
from spark_dask.named import store
from spark_dask.plan import encryption_problem
from spark_dask.sizes import plural
from spark_dask.spark import databricks
from spark_dask.xlang import graph, scheduler
from tests.support.paths import ROOT
from tools import errors


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
        hog_warning(
            ClusterFacts(executors=1, executor_cores=1, executor_memory=0, executor_gpus=1, task_gpus=1, slots=1),
            GangPlan("cuda", True, 1, 1, gpu_mode="exclusive", task_gpus=1),
        ),
        placement.gang_shortfall({0: [{}], 1: []}, 2, True),  # issue 55: "can start 1 Dask workers"
        placement.gang_shortfall({0: [{}], 1: []}, 2, False),
    ]
    for text in texts:
        for wrong in (
            "1 workers",
            "1 Dask workers",
            "1 tasks",
            "1 more Dask workers",
            "1 barrier tasks",
            "1 task take",
            " 1 GPUs",
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


def refusals() -> list[str]:
    """Every composed refusal and warning of the package, rendered with the values of
    each of its branches (advice lists long and short, one and several others)."""
    small = ClusterFacts(executors=2, executor_cores=1, executor_memory=0, slots=2)
    wide = ClusterFacts(executors=2, executor_cores=2, executor_memory=0, slots=4)
    gpus = ClusterFacts(executors=2, executor_cores=2, executor_memory=0, executor_gpus=1, task_gpus=1, slots=2)
    dynamic = ClusterFacts(executors=1, executor_cores=1, executor_memory=0, slots=1, dynamic_allocation=True,
                           max_executors=1)  # fmt: skip
    one, two = GangPlan("cpu", False, 1, 1), GangPlan("cpu", False, 2, 2)
    cuda = GangPlan("cuda", True, 2, 2, gpu_mode="exclusive", task_gpus=1)
    others = [(("spark-dask-a", 1, 1),), (("spark-dask-a", 1, 1), ("spark-dask-c", 1, 2))]
    record = {"status": "starting", "pid": 7, "host": "elsewhere"}
    texts = [
        hog_warning(small, two),
        hog_warning(wide, GangPlan("cpu", False, 2, 2, task_cpus=2)),
        hog_warning(gpus, cuda),
        hog_warning(dynamic, one),
        *(hog_warning(wide, GangPlan("cpu", False, 1, 1, task_cpus=1), o) for o in others),
        no_slot_message(small, two, "to_dask", False),
        no_slot_message(small, one, "to_spark", False),
        no_slot_message(gpus, cuda, "to_dask", False),
        *(no_slot_message(wide, GangPlan("cpu", False, 1, 1, task_cpus=2), "to_dask", False, o) for o in others),
        slots.no_slots_message(2, 15, 2, ["stage 3 'collect' (2 running tasks)"]),
        slots.no_slots_message(1, 15, 2, []),
        *(slots.start_timeout_message(0, 2, "tls://a:1", 60, "t", b, d, 4) for b, d in ((1, 0), (0, 1), (0, 0))),
        slots.start_timeout_message(63, 64, "tls://a:1", 180, "t", True, False, None, slots.silent_text([48], "/l")),
        faults.worker_lost_message("spark-0", 0, 1, True, 30),
        faults.no_workers_warning(2, "waiting", 60),
        faults.no_workers_message(2, 61, 60, "the Spark barrier stage failed"),
        faults.loss_message(
            "the Spark barrier stage spark-dask-a failed (executor 1 on h)",
            "",
            [("spark-0", "h")],
            0,
            2,
            1,
            1,
            "relaunch 1 of 3",
        ),  # fmt: skip
        faults.relaunched_message(1, 1, 2, False, "spark-dask-a-g1"),
        faults.relaunched_message(2, 2, 2, True, "t"),
        store.unknown_name_message("etl", ["a", "b"], "/run/user/0/spark-dask"),
        store.unknown_name_message("etl", [], "/run/user/0/spark-dask"),
        store.name_taken_message("etl", record),
        store.not_running_message("etl", record),
        idle.closing_message("etl", 1800),
        idle.closed_message("etl", 0.2),
        rmm.rmm_problem({"rmm_pool_size": "1GiB"}, False, "/usr/bin/python3"),
        *command.version_problem("2026.8.0", "2026.7.1"),
        *command.version_problem("2026.8.0", "2026.8.1"),
        command.unreachable_message("executor 1 (host h)", "tls://10.0.0.1:8786", "timed out"),
        placement.gang_shortfall({0: [{}], 1: []}, 2, True),
        placement.gang_shortfall({0: [{}], 1: []}, 2, False),
        placement.gang_shortfall({0: [{}, {}], 1: []}, 3, True, shared=True),
        logs.not_shared_message("/Volumes/x/workers"),
        encryption_problem(True, False, False),
        encryption_problem(True, True, False),
        databricks.connect_problem({}, "10.0.0.9", False),
        logdir.not_kept_message("/logs", [{"task": 0, "host": "h", "log_error": "read-only file system"}]),
        logdir.unwritable_message("/logs/x", PermissionError("denied")),
        sizing.memory_problem(2**40, 2**30),
        sizing.small_memory_problem("512", 512),
        sizing.small_memory_problem("100MB", 10**8),
        options.unknown_keyword_message("start()", "n_worker", ["n_workers"]),
        options.unknown_key_message("n-worker"),
        graph.carry_problem(object(), "the argument"),
        graph.carry_problem(2**70, "the argument"),
        scheduler.no_worker_message("node", "k", "add"),
        slots.holding("spark-dask-b", 2, 4, True, (1, 4), others[1]),
    ]
    return [t for t in texts if isinstance(t, str)]


def test_refusals_read_as_whole_sentences():
    """Every message the package raises or warns with reads as whole sentences
    (:func:`tools.errors.sentence_problems`): the composed ones rendered in each branch,
    and every literal message the troubleshooting check collects (values as "…")."""
    bad = []
    texts = refusals()
    assert len(texts) > 40
    for text in texts + [m.text for m in errors.collect(ROOT)]:
        bad += [f"{problem}: {text}" for problem in errors.sentence_problems(text)]
    assert not bad, "\n".join(bad)


def test_every_refusal_says_who_speaks():
    """Issue 55, point 6: every message raised with one of the package's exceptions
    starts with ``spark-dask:`` (``n_workers must be at least 1, ...`` did not)."""
    classes = {n for n, c in vars(spark_dask.errors).items() if isinstance(c, type) and issubclass(c, SparkDaskError)}
    classes |= {"XLangError", "XLangTaskError"}
    found = errors.collect(ROOT)
    assert {m.exception for m in found} & classes >= {"PlanError", "HandoffError", "DeltaError", "XLangError"}
    bad = errors.unprefixed(found, classes)
    assert not bad, "start these with 'spark-dask: ':\n" + "\n".join(
        f"  {m.module}:{m.line} {m.text[:100]}" for m in bad
    )


def test_the_sentence_check_catches_what_a_reader_would():
    assert errors.sentence_problems("Nothing was started. Use close the other spark-dask cluster, or a Dask cluster.")
    assert errors.sentence_problems("spark-dask: the the cluster")
    assert errors.sentence_problems("spark-dask: it waits. it closes")
    assert errors.sentence_problems("spark-dask: (unclosed")
    assert not errors.sentence_problems("spark-dask: it waits (e.g. a job). Use n_workers=1, or scale(n)")
