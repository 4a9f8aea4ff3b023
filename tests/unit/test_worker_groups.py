"""Worker groups without Spark: the checks of a group's spec and flag
(spark_dask.options.groups), the plan rule of a group's gangs (spark_dask.plan.plan_group), and
two pools of one cluster (the default group's and a CPU group's) side by side with the
stand-in launcher and scheduler of test_pool: each takes only its own workers, a lost
gang of one group is relaunched by that group alone, a group's scale-down retires only
its own workers."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import click
import pytest

from spark_dask.capacity import ClusterFacts, GangPlan, hog_warning
from spark_dask.cli import group_values
from spark_dask.errors import PlanError
from spark_dask.events import Events
from spark_dask.gangs import gang as gang_module
from spark_dask.gangs.adapt import group_target, idle_to_close
from spark_dask.gangs.gang import Gang
from spark_dask.gangs.pool import GangPool
from spark_dask.gangs.pools import GroupPools, PoolContext
from spark_dask.gangs.waits import watch_starved_stages
from spark_dask.options.groups import check_groups, group_options, parse_flag, plan_groups
from spark_dask.parts import ClusterParts
from spark_dask.plan import plan_group
from tests.support.task_specs import FakeLauncher, cluster_options, make_spec
from tests.unit.test_pool import OPTIONS, TAG, FakeSide, facts, settle

pytestmark = [pytest.mark.core, pytest.mark.timeout(30)]

# two executors of 8 cores and 2 GPUs, whole-GPU Spark tasks (the Databricks default)
GPU_FACTS = ClusterFacts(
    executors=2, executor_cores=8, executor_memory=2**32, executor_gpus=2, task_gpus=1, slots=4,
    task_profiles=True, master="spark://m:7077",
)  # fmt: skip


@pytest.fixture(autouse=True)
def fake_launcher(monkeypatch):
    monkeypatch.setattr(gang_module, "GangLauncher", FakeLauncher)


# ---------------------------------------------------------------------------- the plan rule
def test_a_cpu_group_on_gpu_executors_holds_cpus_and_no_gpu():
    plan = plan_group(GPU_FACTS, "cpu", threads_per_worker=4, beside=((4, 1),))
    assert (plan.kind, plan.pinned, plan.n_workers, plan.task_cpus, plan.task_gpus) == ("cpu", False, 2, 4, None)
    assert plan.uses_profile and plan.gpu_mode is None


def test_a_cpu_group_without_task_profiles_is_refused():
    with pytest.raises(PlanError, match="stage-level task profiles are not available"):
        plan_group(ClusterFacts(**{**GPU_FACTS.__dict__, "task_profiles": False}), "cpu", threads_per_worker=4)


def test_a_cpu_group_beside_cpu_only_executors_needs_no_profile_at_spark_task_cpus():
    f = ClusterFacts(executors=2, executor_cores=4, executor_memory=0, slots=8)
    assert not plan_group(f, "cpu").uses_profile
    assert plan_group(f, "cpu", barrier=False).barrier is False


def test_a_cpu_group_fits_only_into_the_cores_the_other_groups_leave():
    with pytest.raises(PlanError, match="hold 2"):
        plan_group(GPU_FACTS, "cpu", n_workers=3, threads_per_worker=4, beside=((2, 1),))
    assert plan_group(GPU_FACTS, "cpu", n_workers=2, threads_per_worker=4, beside=((2, 1),)).n_tasks == 2


def test_a_cuda_group_is_planned_as_cuda_workers():
    plan = plan_group(GPU_FACTS, "cuda")
    assert plan.kind == "cuda" and plan.pinned and plan.n_workers == 4


def test_bad_kinds_and_threads_are_refused():
    with pytest.raises(PlanError, match="'cpu' or 'cuda'"):
        plan_group(GPU_FACTS, "auto")
    with pytest.raises(PlanError, match="exceeds the 8 cores"):
        plan_group(GPU_FACTS, "cpu", threads_per_worker=9)


def test_groups_are_planned_one_beside_the_other_and_named_in_errors():
    groups = check_groups(
        {"a": {"worker": "cpu", "threads_per_worker": 3}, "b": {"worker": "cpu", "threads_per_worker": 5}}
    )
    opts = cluster_options()
    with pytest.raises(PlanError, match="worker group 'b': a 'cpu' worker group of 2 workers"):
        plan_groups(GPU_FACTS, groups, opts, ((2, 1),))
    plans = plan_groups(GPU_FACTS, {"a": groups["a"]}, opts, ((2, 1),))
    assert plans["a"].task_cpus == 3


def test_the_slot_warning_counts_the_groups():
    f = ClusterFacts(executors=1, executor_cores=4, executor_memory=0, slots=4, task_profiles=True)
    default = GangPlan("cpu", False, 1, 1, 1, task_cpus=2)
    assert hog_warning(f, default) is None
    warning = hog_warning(f, default, groups=(("cpu", 1, 2),))
    assert warning is not None and "with its worker groups cpu (1 task of 2 CPUs)" in warning


# ---------------------------------------------------------------------------- specs and flags
def test_group_specs_are_checked_with_clear_messages():
    assert list(check_groups({"cpu": {"worker": "cpu"}})) == ["cpu"]
    bad = [
        ({"default": {}}, "'default' is the cluster's own worker group"),
        ({"a b": {}}, "a worker group's name is 1 to 32 letters"),
        ({"cpu": {"worker": "tpu"}}, "worker must be 'cpu' or 'cuda'"),
        ({"cpu": {"n_worker": 2}}, "unknown key 'n_worker'"),
        ({"cpu": {"n_workers": 0}}, "n_workers must be a positive integer"),
        ({"cpu": {"memory_limit": "lots"}}, "memory_limit must be"),
        ({"cpu": {"resources": {"a b": 1}}}, "resources maps names"),
        ({"cpu": "cpu"}, "must be a dict"),
        (["cpu"], "worker_groups must be a dict"),
    ]
    for groups, message in bad:
        with pytest.raises(PlanError, match=message):
            check_groups(groups)


def test_a_group_overlays_the_cluster_options_and_carries_its_resource():
    opts = cluster_options(worker_options={"resources": {"mem": 1}, "lifetime": "1h"}, threads_per_worker=8)
    (group,) = check_groups(
        {"io": {"worker": "cpu", "resources": {"io": 2}, "worker_options": {"lifetime": "2h"}}}
    ).values()
    mine = group_options(opts, group, task_cpus=3)
    assert mine.worker == "cpu" and mine.threads_per_worker == 3 and mine.worker_groups == {}
    # the cluster's resources are the default group's workers': not the group's
    assert mine.worker_options == {"resources": {"io": 2, "group-io": 1}, "lifetime": "2h"}


def test_the_cli_flag_reads_yaml_values():
    assert parse_flag("cpu:worker=cpu,threads_per_worker=4") == ("cpu", {"worker": "cpu", "threads_per_worker": 4})
    with pytest.raises(PlanError, match="NAME:KEY=VALUE"):
        parse_flag("cpu")


# ---------------------------------------------------------------------------- two pools
def two_pools():
    """The default group's pool and a CPU group's, one scheduler and task count."""
    side, events = FakeSide(), Events([], quiet=True)
    context = PoolContext(facts(8, 8), events, side)

    def maker(group):
        def make_gang(plan, reason, index, first):
            return Gang(None, plan, make_spec(scheduler_address="tls://s:1"), cluster_tag=TAG, index=index,
                        first=first, reason=reason, group=group)  # fmt: skip

        return make_gang

    pools = {}
    for group in ("default", "cpu"):
        shape = GangPlan("cpu", False, 2, 2, 1)
        pools[group] = GangPool(shape, OPTIONS, context, maker(group), lambda: facts(8, 8), group=group)
    context.pools.update(pools)

    def removed(address):
        for pool in pools.values():
            pool.worker_removed(address)

    side.scheduler.on_leave = removed
    return pools, side, events


def join(pools, side, gang, k):
    """Worker k of ``gang`` connects: every pool hears of it, as the cluster's plugin does."""
    name, address = f"spark-{gang.first + k}", f"tls://w{gang.first + k}:1"
    side.scheduler.workers[address] = SimpleNamespace(
        name=name, address=address, nanny=f"tls://w{gang.first + k}:2",
        extra={"spark": {"cluster": TAG, "gang": gang.index, "group": gang.group, "host": "h", "executor_id": str(k)}},
    )  # fmt: skip
    for pool in pools.values():
        pool.worker_added(side.scheduler, address, TAG)
    return address


def start(pools, side):
    gangs = {}
    for name, pool in pools.items():
        gangs[name] = pool.submit(pool.shape, "start")
        for k in range(2):
            join(pools, side, gangs[name], k)
        pool.running, pool.status = True, "running"
    return gangs


def test_each_pool_takes_its_own_groups_workers_under_unique_names_and_tags():
    pools, side, _ = two_pools()
    gangs = start(pools, side)
    assert gangs["default"].tag == TAG and gangs["cpu"].tag == f"{TAG}-cpu-g0"
    assert sorted(gangs["default"].workers) == ["spark-0", "spark-1"]
    assert sorted(gangs["cpu"].workers) == ["spark-2", "spark-3"]  # one task count for both groups
    assert pools["default"].connected() == pools["cpu"].connected() == 2
    assert "(worker group cpu)" in gangs["cpu"].describe()


def test_a_lost_gang_is_relaunched_by_its_group_alone():
    async def main():
        pools, side, events = two_pools()
        gangs = start(pools, side)
        cpu = gangs["cpu"]
        cpu.launcher.finish(error=RuntimeError("ExecutorLostFailure (executor 1 exited)"))
        pools["cpu"].ended(cpu)
        await settle(pools["cpu"])
        assert [g.reason for g in pools["cpu"].gangs] == ["start", "relaunch"]
        relaunch = pools["cpu"].gangs[1]
        assert relaunch.group == "cpu" and relaunch.tag == f"{TAG}-cpu-g1" and relaunch.first == 4
        assert [g.reason for g in pools["default"].gangs] == ["start"] and not gangs["default"].done
        assert pools["default"].relaunches == 0 and pools["cpu"].relaunches == 1

    asyncio.run(main())


def test_a_groups_scale_down_retires_only_its_own_workers():
    async def main():
        pools, side, _ = two_pools()
        start(pools, side)
        await pools["cpu"].scale(1)
        await settle(pools["cpu"])
        retired = [n for names in side.scheduler.retired for n in names]
        assert len(retired) == 1 and retired[0] in ("spark-2", "spark-3"), retired
        assert pools["default"].connected() == 2 and pools["default"].target == 2
        await pools["default"].scale(1)
        await settle(pools["default"])
        retired = [n for names in side.scheduler.retired for n in names]
        assert len(retired) == 2 and retired[1] in ("spark-0", "spark-1"), retired

    asyncio.run(main())


def test_removing_a_group_retires_all_its_workers_and_cancels_waiting_gangs():
    async def main():
        pools, side, _ = two_pools()
        start(pools, side)
        waiting = pools["cpu"].submit(pools["cpu"].shape, "scale")  # no worker of it connected
        await pools["cpu"].retire_all()
        assert waiting.cancelled and pools["cpu"].target == 0 and not pools["cpu"].running
        assert sorted(n for names in side.scheduler.retired for n in names) == ["spark-2", "spark-3"]
        assert pools["default"].connected() == 2

    asyncio.run(main())


def test_the_starved_stage_watch_counts_every_groups_tasks_and_scale_gangs():
    """A Spark stage starved of slots is told every group's tasks, and a group's scale-up
    gang waiting for slots is said as the default group's is (the watch saw the default
    group's pool only: "holds 2 barrier tasks", and no line for the CPU group's gang)."""

    async def main():
        pools, side, events = two_pools()
        start(pools, side)
        scale = pools["cpu"].submit(pools["cpu"].shape, "scale")  # waits for its slots
        starved = {"stageId": 7, "name": "collect at job.py:3", "numTasks": 2, "numActiveTasks": 0,
                   "numCompletedTasks": 0}  # fmt: skip
        rounds = []

        def snapshot(spark, tags):
            rounds.append(sorted(tags))
            if len(rounds) == 2:
                for pool in pools.values():
                    pool.running = False
            return [starved], set()

        watch = watch_starved_stages(None, pools, TAG, 0.0, every=0.01, patience=0.0, snapshot=snapshot)
        await asyncio.wait_for(watch, 10)
        assert scale.tag in rounds[0] and len(rounds[0]) == 3  # every group's gangs
        return [text for _, text in events.logs]

    said = asyncio.run(main())
    assert any("holds 6 barrier tasks (6 of the application's 8 cores)" in line for line in said), said
    assert any(line.startswith(f"spark-dask: {TAG}-cpu-g1, the barrier stage for 2 more Dask workers") for line in said)


def test_the_default_group_is_one_of_the_pools():
    """Relaunches count every group's; adaptive's scale-down reaches each worker's own
    group; each group's later gangs take the size of its own first workers (the default
    group's pool was the only one the cluster's parts, scale-down and sizes saw)."""

    async def main():
        pools, side, _ = two_pools()
        start(pools, side)
        pools["cpu"].relaunches = 1
        sizes = {"spark-0": (4, 8), "spark-1": (4, 8), "spark-2": (1, 2), "spark-3": (1, 2)}
        side.worker_size = lambda of: min(v for n, v in sizes.items() if of is None or of(n))
        parts = ClusterParts(OPTIONS, {}, None, side, None, None, None, None, pools=pools)  # what GroupPools reads
        parts.makers = {name: SimpleNamespace(worker_size=None) for name in pools}
        groups = GroupPools(parts, None, TAG, None, lambda: None, tuple)
        for name in pools:
            groups.running(name)
        assert parts.relaunches == 1 and len(parts.gangs) == 2
        assert {name: m.worker_size for name, m in parts.makers.items()} == {"default": (4, 8), "cpu": (1, 2)}
        await groups.scale_down(["spark-3"])
        await settle(pools["cpu"])
        assert pools["cpu"].target == 1 and pools["default"].target == 2
        assert side.scheduler.retired == [["spark-3"]]

    asyncio.run(main())


def test_a_groups_scale_up_fits_into_the_cores_the_other_groups_leave():
    async def main():
        pools, side, events = two_pools()
        start(pools, side)
        cpu = pools["cpu"]
        # 8 executors of one core: the default group's two tasks hold two of them (the
        # pools' shared context holds every group's pool)
        with pytest.warns(UserWarning, match="other worker groups hold the executors' other cores"):
            await cpu.scale(10)
        await settle(cpu)
        assert cpu.target == 6 and pools["default"].target == 2

    asyncio.run(main())


def test_the_cli_flag_is_repeatable_and_bad_ones_are_usage_errors():
    flags = ["cpu:worker=cpu,n_workers=2", "io:threads_per_worker=1"]
    assert group_values(None, None, flags) == {
        "cpu": {"worker": "cpu", "n_workers": 2},
        "io": {"threads_per_worker": 1},
    }
    with pytest.raises(click.BadParameter, match="NAME:KEY=VALUE"):
        group_values(None, None, ["cpu"])


def _ws(name, processing=(), nbytes=0, limit=1000, nthreads=2, gang=0, partition=0):
    return SimpleNamespace(name=name, address=name, processing=set(processing), nbytes=nbytes, memory_limit=limit,
                           nthreads=nthreads, extra={"spark": {"gang": gang, "partition": partition, "group": "cpu"}})  # fmt: skip


class _Task(SimpleNamespace):
    __hash__ = object.__hash__  # a key of the scheduler's unrunnable dict, as TaskState


def _task(resource=None, duration=1.0):
    return _Task(resource_restrictions={resource: 1} if resource else {},
                 prefix=SimpleNamespace(duration_average=duration))  # fmt: skip


def test_a_groups_target_counts_its_own_work_only():
    waiting = [_task("group-cpu") for _ in range(20)] + [_task() for _ in range(50)] + [_task("group-io")]
    scheduler = SimpleNamespace(queued=[t for t in waiting if not t.resource_restrictions],
                                unrunnable={t: 0 for t in waiting if t.resource_restrictions})  # fmt: skip
    members = [_ws("a"), _ws("b")]
    # 20 one-second tasks of the cpu group within 5 s: 4 threads' worth, 2 threads a worker
    assert group_target(scheduler, members, "group-cpu", 5.0) == 2
    assert group_target(scheduler, members, "group-cpu", 1.0) == 10
    # the default group's work is the 50 tasks without restrictions
    assert group_target(scheduler, members, None, 5.0) == 5
    idle = SimpleNamespace(queued=[], unrunnable={})
    assert group_target(idle, members, "group-cpu", 5.0) == 0
    busy = [_ws("a", processing=[_task("group-cpu")]), _ws("b")]
    assert group_target(idle, busy, "group-cpu", 5.0) == 1  # the busy worker stays
    full = [_ws("a", nbytes=700), _ws("b", nbytes=700)]
    assert group_target(idle, full, "group-cpu", 5.0) == 4  # memory: twice the members
    assert group_target(scheduler, [], "group-io", 5.0) == 1  # work and no worker: one


def test_idle_workers_close_by_whole_spark_tasks():
    members = [_ws("a0", partition=0), _ws("a1", partition=0, nbytes=5), _ws("b", partition=1, nbytes=1),
               _ws("c", partition=2, processing=[1])]  # fmt: skip
    assert idle_to_close(members, 3) == ["b"]
    assert idle_to_close(members, 1) == ["b", "a0", "a1"]  # a Spark task's two workers together
    assert idle_to_close(members, 0) == ["b", "a0", "a1"]  # never the busy one
