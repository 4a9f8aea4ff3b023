"""The pools of a cluster's worker groups (:mod:`spark_dask.options.groups`), one
:class:`~spark_dask.gangs.pool.GangPool` each, the default group's made like any other
(:meth:`GroupPools.new_pool`): which pool hears of a worker, which pool a ``group=``
names, and a group added to or removed from a running cluster.
:class:`spark_dask.cluster.SparkCluster` holds one :class:`GroupPools`; the pools
themselves are in ``ClusterParts.pools``, what they share in a :class:`PoolContext`, the
task numbers in :class:`TaskNumbers`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from spark_dask.aio import blocking
from spark_dask.capacity import ClusterFacts, GangPlan, max_workers, task_cpus
from spark_dask.dask_compat import stop_adaptive
from spark_dask.errors import PlanError
from spark_dask.events import Events
from spark_dask.gangs.adapt import GroupAdaptive, adapt_bounds, size_per_worker
from spark_dask.gangs.maker import GangMaker, WorkerCredentials
from spark_dask.gangs.pool import GangPool
from spark_dask.gangs.slots import pools_held
from spark_dask.gangs.waits import StartWait
from spark_dask.options.groups import (
    DEFAULT,
    WorkerGroup,
    check_group,
    group_env,
    group_options,
    group_resource,
    plan_groups,
)
from spark_dask.plan import gang_steps
from spark_dask.scheduler import DriverScheduler
from spark_dask.sizes import plural
from spark_dask.worker_flags import check_worker_options


class TaskNumbers:
    """The cluster-wide numbers of Spark tasks, one count for the pools of all its worker
    groups: worker names (``spark-<n>``) never repeat over the cluster.

    >>> numbers = TaskNumbers()
    >>> numbers.take(2), numbers.take(1), numbers.next
    (0, 2, 3)
    """

    def __init__(self) -> None:
        self.next = 0

    def take(self, n: int) -> int:
        """The first of ``n`` new task numbers."""
        first = self.next
        self.next += n
        return first


@dataclass
class PoolContext:
    """What the pools of one cluster's worker groups share, given to each at construction.

    Attributes
    ----------
    facts : ClusterFacts
        The Spark facts read at start.
    events : Events
        Where the pools say what they do.
    driver_scheduler : DriverScheduler
        The scheduler (workers to close, retirement, nannies).
    numbers : TaskNumbers
        The cluster-wide task numbers.
    pools : dict
        Every worker group's pool by name (the cluster's ``ClusterParts.pools``): what
        the other groups hold counts in a pool's scale-up.
    other_clusters : callable
        ``other_clusters()``: the ``(job tag, tasks, CPUs per task)`` of the application's
        other spark-dask clusters (:func:`spark_dask.gangs.slots.other_clusters`).
    """

    facts: ClusterFacts
    events: Events
    driver_scheduler: DriverScheduler
    numbers: TaskNumbers = field(default_factory=lambda: TaskNumbers())
    pools: dict = field(default_factory=dict)
    other_clusters: Callable[[], tuple] = tuple


class GroupPools:
    """The worker groups' pools of one cluster.

    Parameters
    ----------
    parts : spark_dask.parts.ClusterParts
        The cluster's parts (``pools``, ``makers``, ``driver_scheduler``, ``options``, ``facts``).
    spark : SparkSession
    tag : str
        The cluster's job tag (workers name it in their Spark facts).
    on_done : callable
        ``on_done(gang)``, from the launcher thread, when a gang's Spark job ends.
    cluster_adaptive : callable
        ``cluster_adaptive()``: distributed's ``Adaptive`` of the cluster, or None (it
        scales the default group of a cluster without other groups).
    other_clusters : callable
        ``other_clusters()``: what the application's other spark-dask clusters hold
        (:func:`spark_dask.gangs.slots.other_clusters`).
    """

    def __init__(self, parts, spark, tag: str, on_done, cluster_adaptive, other_clusters):
        self.parts = parts
        self.spark = spark
        self.tag = tag
        self.on_done = on_done
        self.cluster_adaptive = cluster_adaptive
        self.other_clusters = other_clusters
        self.context: PoolContext | None = None  # once the facts are read (make_all)
        self.adaptives: dict[str, GroupAdaptive] = {}  # group -> its adaptive scaling (adapt(group=))

    # ------------------------------------------------------------------ made
    def make_all(self, plan: GangPlan, group_plans: dict[str, GangPlan], slot_warning_said: bool) -> None:
        """The pools of the groups the cluster starts with, the default group's (its
        ``plan``) first, once the facts are read; ``slot_warning_said``: the start's
        slot warning, which counted every group, was given."""
        p = self.parts
        self.context = PoolContext(
            p.facts, p.events, p.driver_scheduler, pools=p.pools, other_clusters=self.other_clusters
        )
        self.new_pool(None, plan, slot_warning_said, p.credentials)
        for name, group_plan in group_plans.items():
            self.new_pool(p.options.worker_groups[name], group_plan, slot_warning_said)

    def new_pool(
        self,
        group: WorkerGroup | None,
        plan: GangPlan,
        slot_warning_said: bool = False,
        credentials: WorkerCredentials | None = None,
    ) -> GangPool:
        """The pool and the gang maker of worker group ``group`` (None: the default
        group, whose options are the cluster's own) for ``plan``, kept in the cluster's
        parts: the cluster's options with the group's overlaid
        (:func:`~spark_dask.options.groups.group_options`), the task numbers shared with the
        other groups. ``credentials``: the Databricks credentials read at the start."""
        p = self.parts
        name = DEFAULT if group is None else group.name
        opts = p.options if group is None else group_options(p.options, group, task_cpus(plan, p.facts))
        env = p.env if group is None else group_env(p.env, group)
        maker = GangMaker(
            self.spark,
            self.tag,
            p.driver_scheduler,
            self.on_done,
            group=name,
            options=opts,
            env=env,
            plan=plan,
            facts=p.facts,
            worker_options=check_worker_options(opts.worker_options, plan.kind, opts.worker_command),
            credentials=credentials or WorkerCredentials(opts, p.events),
            log_dir=p.log_dir,
        )
        pool = GangPool(
            plan,
            opts,
            self.context,
            maker.make,
            maker.fresh_facts,
            partial(self.adaptive, name),
            group=name,
            slot_warning_said=slot_warning_said,
        )
        p.makers[name], p.pools[name] = maker, pool
        return pool

    def running(self, name: str) -> None:
        """The starting workers of group ``name`` connected: its pool runs, and its later
        gangs' workers take the size its first workers got (:class:`~spark_dask.gangs.maker.GangMaker`)."""
        p = self.parts
        pool = p.pools[name]
        pool.status, pool.running = "running", True
        p.makers[name].worker_size = p.driver_scheduler.worker_size(pool.holds if len(p.pools) > 1 else None)

    def size_per_worker(self, pool: GangPool) -> tuple[int | None, int | None]:
        """(threads, memory) of one worker of ``pool``'s group, for ``scale(cores=,
        memory=)`` and ``adapt``: its options where set, else its workers' own (with
        several groups, only its own workers), else the size its first workers had."""
        p = self.parts
        size = p.driver_scheduler.worker_size(pool.holds if len(p.pools) > 1 else None)
        return size_per_worker(pool.options, size or p.makers[pool.group].worker_size)

    def adapt_bounds(
        self, group: str | None, minimum, maximum, minimum_cores, maximum_cores, minimum_memory, maximum_memory
    ) -> tuple[int, float]:
        """``adapt()``'s minimum and maximum in workers of ``group`` (None: the default
        group; :func:`~spark_dask.gangs.adapt.adapt_bounds`), with a warning when the
        Spark application's bound lowered the maximum."""
        pool = self.pool_of(group)
        threads, per_memory = self.size_per_worker(pool)
        bound = max_workers(self.parts.facts, pool.shape)
        minimum, maximum, note = adapt_bounds(
            minimum, maximum, minimum_cores, maximum_cores, minimum_memory, maximum_memory, threads, per_memory, bound
        )
        if note:
            self.parts.events.warn(note)
        return minimum, maximum

    def check_new(self, name, spec: dict) -> WorkerGroup:
        """The group ``add_worker_group(name, **spec)`` asks for, checked
        (:func:`~spark_dask.options.groups.check_group`); refused while the cluster's
        distributed ``Adaptive`` runs."""
        group = check_group(name, spec, self.parts.pools)
        adaptive = self.cluster_adaptive()
        if adaptive is not None and getattr(adaptive, "state", "") == "running":
            raise PlanError(
                "spark-dask: add_worker_group(): stop adaptive scaling first (adaptive.stop() on what cluster.adapt() returned)"
            )
        return group

    async def scale_down(self, workers: list) -> None:
        """``scale_down(workers)`` (what distributed's ``Adaptive`` calls after it retired
        them): each group's pool drops its own workers from their gangs (a cluster of one
        group: its pool, whatever the names)."""
        pools = list(self.parts.pools.values())
        for pool in pools:
            mine = [w for w in workers if pool.gang_of(str(w)) is not None]
            if mine or len(pools) == 1:
                await pool.scale_down(mine)

    def stop(self) -> None:
        """The cluster closes: every group's adaptive scaling and pool stop."""
        self.stop_adaptive()
        for pool in self.parts.pools.values():
            pool.stop()

    async def end_all(self, grace: float) -> None:
        """The cluster closes (its workers were terminated): every group's gangs end
        (:meth:`~spark_dask.gangs.pool.GangPool.end`, all at once)."""
        await asyncio.gather(*(pool.end(grace, self.spark) for pool in self.parts.pools.values()))

    # ------------------------------------------------------------------ scheduler plugin
    def worker_added(self, scheduler, address: str) -> None:
        """A worker joined: the pool of its group takes it (each pool checks its facts)."""
        for pool in list(self.parts.pools.values()):
            pool.worker_added(scheduler, address, cluster_tag=self.tag)

    def worker_removed(self, address: str) -> None:
        for pool in list(self.parts.pools.values()):
            pool.worker_removed(address)

    def worker_leaving(self, address: str) -> None:
        for pool in list(self.parts.pools.values()):
            pool.recovery.leaving.add(address)

    # ------------------------------------------------------------------ by name
    def pool_of(self, group: str | None) -> GangPool:
        """The pool of worker group ``group`` (None: the default group), or a PlanError."""
        pool = self.parts.pools.get(DEFAULT if group is None else group)
        if pool is None:
            raise PlanError(
                f"spark-dask: the cluster has no worker group {group!r} (its groups: "
                f"{', '.join(self.parts.pools) or 'none yet'})"
            )
        return pool

    def planned_names(self) -> set:
        """The names every group's gangs are to hold (``Cluster.plan``)."""
        return {n for pool in self.parts.pools.values() for n in pool.planned_names()}

    def per_group(self, group: str | None) -> bool:
        """Whether ``adapt(group=group)`` adapts one group on its own
        (:class:`~spark_dask.gangs.adapt.GroupAdaptive`): a group named, or a cluster with
        groups beside the default one, where distributed's ``Adaptive`` (one kind of
        worker) would retire any group's workers and add only default ones."""
        if group is not None:
            self.pool_of(group)  # an unknown group: said as such
        return group is not None or len(self.parts.pools) > 1

    def adapt(self, cluster, group: str | None, **kwargs) -> GroupAdaptive:
        """Adaptive scaling of ``group`` (None: the default group), replacing the
        group's earlier one; ``kwargs``: ``Adaptive``'s."""
        name = DEFAULT if group is None else group
        pool = self.pool_of(name)
        self.stop_adaptive(name, "spark-dask: adapt() called again")
        resource = None if name == DEFAULT else group_resource(name)
        self.adaptives[name] = GroupAdaptive(cluster, pool, resource, **kwargs)
        return self.adaptives[name]

    def stop_adaptive(self, name: str | None = None, reason: str = "spark-dask cluster closed") -> None:
        """Stop the adaptive scaling of group ``name`` (None: of every group)."""
        for key in [k for k in self.adaptives if name is None or k == name]:
            stop_adaptive(self.adaptives.pop(key), reason)

    def adaptive(self, name: str):
        """The adaptive scaling of group ``name`` (distributed's ``Adaptive`` of the
        cluster scales the default group), or None."""
        if name == DEFAULT and self.cluster_adaptive() is not None:
            return self.cluster_adaptive()
        return self.adaptives.get(name)

    # ------------------------------------------------------------------ add and remove
    async def add(self, group: WorkerGroup, spark) -> GangPool:
        """Start ``group`` beside the running groups; return its pool once its workers
        connected. On a failure nothing of the group is left running."""
        p = self.parts
        facts = await blocking(p.makers[DEFAULT].fresh_facts)
        held = tuple((n, c) for _, n, c in pools_held(p.pools, p.facts, but=""))  # every group's
        plan = plan_groups(facts, {group.name: group}, p.options, held)[group.name]
        pool = self.new_pool(group, plan)
        pool.running = True
        gangs = [pool.submit(step, "start") for step in gang_steps(plan, plan.n_workers)]
        wait = StartWait(
            spark,
            p.driver_scheduler,
            facts,
            p.options.slot_wait,
            p.connect,
            progress=False,
            count=lambda: sum(g.connected for g in gangs),
            log_dir=p.log_dir,
        )
        try:
            await wait.wait(gangs, p.options.timeout, gangs[0].tag)
        except BaseException:
            await self.end(group.name, 0, spark)
            raise
        self.running(group.name)
        p.entry.groups_changed(p.pools)  # spark-dask list
        p.events.log(
            f"spark-dask: worker group {group.name}: {plural(plan.n_workers, plan.kind + ' worker')} connected "
            f"(Dask resource {group_resource(group.name)})"
        )
        return pool

    async def end(self, name: str, grace: float, spark) -> None:
        """Retire the workers of group ``name`` (Dask moves their data to the other
        workers first), end its Spark jobs and forget its pool."""
        pool = self.parts.pools[name]
        self.stop_adaptive(name, f"spark-dask: worker group {name} removed")
        await pool.retire_all()
        pool.stop()
        await pool.end(grace, spark)
        self.parts.pools.pop(name, None)
        self.parts.makers.pop(name, None)
        self.parts.entry.groups_changed(self.parts.pools)


__all__ = ["GroupPools", "PoolContext", "TaskNumbers"]
