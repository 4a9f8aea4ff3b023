"""The pools of a cluster's worker groups (:mod:`spark_dask.groups.spec`), one
:class:`~spark_dask.pool.GangPool` each: which pool hears of a worker, which pool a
``group=`` names, and a group added to or removed from a running cluster.
:class:`spark_dask.cluster.SparkCluster` holds one :class:`GroupPools`; the pools
themselves are in ``ClusterParts.pools`` (the default group's also ``ClusterParts.pool``).
"""

from __future__ import annotations

from spark_dask.aio import blocking
from spark_dask.dask_compat import stop_adaptive
from spark_dask.errors import PlanError
from spark_dask.groups.adapt import GroupAdaptive
from spark_dask.groups.spec import DEFAULT, WorkerGroup, group_resource, plan_groups
from spark_dask.named import extra_groups
from spark_dask.plan import gang_steps
from spark_dask.pool import GangPool
from spark_dask.sizes import plural
from spark_dask.slots import pools_held
from spark_dask.waits import StartWait


class GroupPools:
    """The worker groups' pools of one cluster.

    Parameters
    ----------
    parts : spark_dask.parts.ClusterParts
        The cluster's parts (``pools``, ``pool``, ``maker``, ``side``, ``options``).
    tag : str
        The cluster's job tag (workers name it in their Spark facts).
    new_pool : callable
        ``new_pool(group, plan)``: the pool of a :class:`~spark_dask.groups.spec.WorkerGroup`
        with its plan, not started.
    """

    def __init__(self, parts, tag: str, new_pool):
        self.parts = parts
        self.tag = tag
        self.new_pool = new_pool
        self.adaptives: dict[str, GroupAdaptive] = {}  # group -> its adaptive scaling (adapt(group=))

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
        (:class:`~spark_dask.groups.adapt.GroupAdaptive`): a group named, or a cluster with
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
        """The running adaptive scaling of group ``name``, or None."""
        return self.adaptives.get(name)

    # ------------------------------------------------------------------ add and remove
    async def add(self, group: WorkerGroup, spark) -> GangPool:
        """Start ``group`` beside the running groups; return its pool once its workers
        connected. On a failure nothing of the group is left running."""
        p = self.parts
        facts = await blocking(p.maker.fresh_facts)
        held = tuple((n, c) for _, n, c in pools_held(p.pools, p.facts, but=""))  # every group's
        plan = plan_groups(facts, {group.name: group}, p.options, held)[group.name]
        pool = self.new_pool(group, plan)
        p.pools[group.name] = pool
        pool.running = True
        gangs = [pool.submit(step, "start") for step in gang_steps(plan, plan.n_workers)]
        wait = StartWait(spark, p.side, facts, p.options.slot_wait, p.connect, progress=False,
                         count=lambda: sum(g.connected for g in gangs))  # fmt: skip
        try:
            await wait.wait(gangs, p.options.timeout, gangs[0].tag)
        except BaseException:
            await self.end(group.name, 0, spark)
            raise
        pool.status = "running"
        p.entry.update(groups=extra_groups(p.pools))  # spark-dask list
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
        self.parts.entry.update(groups=extra_groups(self.parts.pools))


__all__ = ["GroupPools"]
