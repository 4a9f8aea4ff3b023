"""Task slots without Spark: the counts of spark_dask/capacity.py (what the application
has, what the gangs hold, what Spark jobs keep, a scale-up's and a hand-off's share) and
the starved-stage rule of spark_dask/gangs/slots.py."""

from __future__ import annotations

import doctest

import pytest

from spark_dask import capacity
from spark_dask.capacity import (
    ScaleStep,
    adapt_maximum,
    gang_capacity,
    hog_warning,
    max_workers,
    scale_step,
    spare_slots,
)
from spark_dask.errors import PlanError
from spark_dask.gangs.slots import starved_stages
from spark_dask.plan import plan_gang
from tests.support.task_specs import small_facts

GiB = 2**30

pytestmark = pytest.mark.core


facts = small_facts


def test_spare_slots_beside_the_gang():
    # local-cluster[2,4,1024]: each gang task takes 3 of 4 cores -> one core free per executor
    f = facts(executors=2, executor_cores=4, slots=8, task_profiles=True)
    p = plan_gang(f)
    assert p.task_cpus == 3 and spare_slots(f, p) == 2 and hog_warning(f, p) is None
    # one-core executors: the gang holds every slot, and the warning says how to leave room
    f = facts()
    p = plan_gang(f)
    assert spare_slots(f, p) == 0
    msg = hog_warning(f, p)
    assert "waits until the cluster closes" in msg and "n_workers=1" in msg
    assert spare_slots(f, plan_gang(f, n_workers=1)) == 1


def test_spare_slots_on_shared_and_exclusive_gpus():
    # 1 executor, 4 cores, 2 GPUs, half a GPU per Spark task: 4 slots
    f = facts(executors=1, executor_cores=4, executor_gpus=2, task_gpus=0.5, slots=4, task_profiles=True)
    shared = plan_gang(f)
    assert shared.gpu_mode == "shared" and spare_slots(f, shared) == 2
    exclusive = plan_gang(f, gpu_mode="exclusive")  # both GPUs held whole: no GPU left for Spark
    assert spare_slots(f, exclusive) == 0
    assert "gpu_mode='shared'" in hog_warning(f, exclusive)
    # whole-GPU Spark tasks beside a CPU-only gang: every GPU stays free
    f = facts(executors=1, executor_cores=8, executor_gpus=2, task_gpus=1, slots=2,
              task_profiles=True, rapids_plugin=True)  # fmt: skip
    assert spare_slots(f, plan_gang(f)) == 2


def test_profile_slots_counted_for_gpu_profile():
    f = facts(executors=1, executor_cores=2, executor_gpus=2, task_gpus=0.5, slots=2, task_profiles=True)
    with pytest.raises(PlanError, match="needs 3"):
        plan_gang(f, n_workers=3, gpu_mode="exclusive")


def test_capacity_of_the_gangs_kind():
    f = facts(executors=2, executor_cores=4, slots=8, task_profiles=True)
    one_per_executor = plan_gang(f, n_workers=1)
    assert one_per_executor.task_cpus == 3
    assert gang_capacity(f, one_per_executor) == 2 and max_workers(f, one_per_executor) == 2
    assert gang_capacity(f, plan_gang(f, task_profile=False)) == 8
    # shared GPUs: slots of half-GPU tasks, but one worker per physical GPU
    g = facts(executors=1, executor_cores=4, slots=4, executor_gpus=2, task_gpus=0.5)
    shared = plan_gang(g)
    assert shared.gpu_mode == "shared" and gang_capacity(g, shared) == 4 and max_workers(g, shared) == 2
    # tasks owning two GPUs: two workers per task slot
    h = facts(executors=1, executor_cores=4, slots=2, executor_gpus=4, task_gpus=2)
    two = plan_gang(h)
    assert (two.n_tasks, two.workers_per_task) == (2, 2) and max_workers(h, two) == 4
    assert gang_capacity(facts(dynamic_allocation=True), plan_gang(facts(dynamic_allocation=True))) is None


def test_scale_step_grows_into_free_slots_only():
    step = scale_step(2, current=1, held_tasks=1, capacity=2)
    assert (step.target, step.new_workers, step.new_tasks, step.note) == (2, 1, 1, None)
    step = scale_step(5, current=1, held_tasks=1, capacity=2, why_bounded="; one Dask worker per GPU")
    assert (step.target, step.new_workers) == (2, 1)
    assert (
        "task slots for 1 more Dask worker (2 slots of this kind, 1 held by the cluster; one Dask worker " in step.note
    )
    assert "growing to 2 workers" in step.note
    full = scale_step(3, current=2, held_tasks=2, capacity=2)
    assert (full.target, full.new_workers) == (2, 0) and "slots for 0 more" in full.note
    assert scale_step(9, 1, 1, None).new_workers == 8  # no bound known (dynamic allocation)
    # shrinking is always possible
    assert scale_step(0, 3, 3, 2) == ScaleStep(target=0)
    # whole tasks: a task with two GPUs starts two workers
    step = scale_step(3, current=0, held_tasks=0, capacity=4, workers_per_task=2)
    assert (step.target, step.new_tasks) == (4, 2) and "grows to 4" in step.note
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(PlanError, match="number of workers"):
            scale_step(bad, 1, 1, 2)


def test_adapt_maximum_bounded_by_the_application():
    assert adapt_maximum(float("inf"), 4) == (4, None)
    assert adapt_maximum(3, 4) == (3, None)
    maximum, note = adapt_maximum(10, 4)
    assert maximum == 4 and "holds at most 4 Dask workers" in note
    assert adapt_maximum(float("inf"), None) == (float("inf"), None)


def test_no_slot_warning_under_dynamic_allocation_below_its_maximum():
    f = facts(executors=1, slots=1, dynamic_allocation=True, max_executors=2)
    assert hog_warning(f, plan_gang(f, n_workers=1)) is None  # Spark adds an executor
    assert "maxExecutors" in hog_warning(f, plan_gang(f, n_workers=2))
    assert (
        hog_warning(facts(executors=1, slots=1, dynamic_allocation=True), plan_gang(facts(dynamic_allocation=True)))
        is None
    )


def test_starved_stages():
    def st(sid, n, active, done):
        return {
            "stageId": sid,
            "numTasks": n,
            "numActiveTasks": active,
            "numCompletedTasks": done,
            "numFailedTasks": 0,
            "name": f"s{sid}",
        }

    stages = [st(1, 2, 2, 0), st(2, 4, 0, 0), st(3, 4, 1, 2), st(4, 4, 0, 4)]
    assert [s["stageId"] for s in starved_stages(stages, gang_stages={1})] == [2]
    assert starved_stages(stages, gang_stages={2}) == []


def test_doctests_of_the_capacity_module():
    assert doctest.testmod(capacity).failed == 0
