"""Adaptive scaling of one worker group (:mod:`spark_dask.options.groups`): distributed's
``Adaptive`` (its rhythm, ``minimum``/``maximum``, ``wait_count``) with the group's own
view of the work, so that each group of a cluster grows and shrinks on its own.

distributed's ``Scheduler.adaptive_target`` counts every task and every worker; a
group's target counts the tasks that only its workers may run (those restricted to its
Dask resource, :func:`spark_dask.options.groups.group_resource`; for the default group, the
tasks with no resource restriction) and its own workers' load and memory
(:func:`group_target`). Scale-down closes only the group's own idle workers, the
workers of one Spark task together (:func:`idle_to_close`); scaling goes through the
group's :class:`~spark_dask.gangs.pool.GangPool`. ``adapt()``'s bounds in workers, from its
arguments in workers, cores and memory: :func:`adapt_bounds`.
"""

from __future__ import annotations

import math
from itertools import chain, islice

import dask
from dask.utils import parse_bytes, parse_timedelta
from distributed.deploy.adaptive import Adaptive

from spark_dask.capacity import adapt_maximum
from spark_dask.errors import PlanError
from spark_dask.options import ClusterOptions
from spark_dask.plan import workers_for
from spark_dask.scheduler import task_group

MEMORY_SHARE = 0.6  # as distributed's adaptive_target: more workers above this share of memory used


def wanted(ts, resource: str | None) -> bool:
    """Whether task ``ts`` is the group's to run: restricted to ``resource`` (a group's
    Dask resource), or, for the default group (``resource`` None), restricted to none."""
    restrictions = ts.resource_restrictions or {}
    return resource in restrictions if resource is not None else not restrictions


def group_target(scheduler, members: list, resource: str | None, target_duration: float) -> int:
    """Workers the group needs for its work: the tasks waiting for it (queued, or
    without a worker that may run them) and those its ``members`` (WorkerStates) run,
    at their prefixes' average durations, finished within ``target_duration``; at least
    twice the members when they use more than 60 % of their memory; never fewer than
    the members that are busy (a scale-down waits for them)."""
    unknown = parse_timedelta(dask.config.get("distributed.scheduler.unknown-task-duration"))

    def duration(ts) -> float:
        average = ts.prefix.duration_average
        return average if average is not None and average >= 0 else unknown

    waiting = [ts for ts in chain(scheduler.queued, scheduler.unrunnable) if wanted(ts, resource)]
    sample = list(islice(waiting, 100))
    busy_time = sum(duration(ts) for ts in sample) * (len(waiting) / len(sample) if sample else 0)
    running = [ts for ws in members for ts in ws.processing]
    busy_time += sum(duration(ts) for ts in running)
    tasks = len(waiting) + len(running)
    threads = sum(ws.nthreads for ws in members) / len(members) if members else 1
    cpu = math.ceil(min(busy_time / max(target_duration, 1e-3), tasks) / max(threads, 1))
    if waiting and not members:
        cpu = max(cpu, 1)
    limit = sum(ws.memory_limit or 0 for ws in members)
    memory = 2 * len(members) if limit and sum(ws.nbytes for ws in members) > MEMORY_SHARE * limit else 0
    busy = sum(1 for ws in members if ws.processing)
    return max(cpu, memory, busy)


def idle_to_close(members: list, target: int) -> list[str]:
    """Names of the group's idle workers to close to come down to ``target``: whole Spark
    tasks (:func:`spark_dask.scheduler.task_group`) of workers that run nothing, those
    holding the least data first.

    >>> from types import SimpleNamespace as W
    >>> ws = [W(name=n, processing=p, nbytes=b, extra={}, address=n) for n, p, b in
    ...       [("a", set(), 10), ("b", {1}, 0), ("c", set(), 0)]]
    >>> idle_to_close(ws, 1)
    ['c', 'a']
    """
    excess = len(members) - target
    tasks: dict = {}
    for ws in members:
        tasks.setdefault(task_group(ws), []).append(ws)
    idle = [g for g in tasks.values() if not any(ws.processing for ws in g)]
    out: list[str] = []
    for g in sorted(idle, key=lambda g: sum(ws.nbytes for ws in g)):
        if len(out) >= excess:
            break
        out += [str(ws.name) for ws in g]
    return out


class GangTargets:
    """What distributed's ``Adaptive`` reads of what it scales, the same for the cluster
    (its default group) and for one worker group's :class:`GroupAdaptive`: ``plan``, the
    workers the gangs are to hold (a placeholder ``<gang>/pending-<i>`` for each not yet
    connected); ``requested``, the plan itself (a gang's workers are asked of Spark
    together, never one by one); ``observed``, those connected. A mixin ahead of
    ``Cluster`` or ``Adaptive`` in the bases."""

    @property
    def plan(self) -> set:
        return self._planned_names()

    @property
    def requested(self) -> set:
        return self._planned_names()

    @property
    def observed(self) -> set:
        return self._observed_names()

    def _planned_names(self) -> set:
        raise NotImplementedError

    def _observed_names(self) -> set:
        raise NotImplementedError


class GroupAdaptive(GangTargets, Adaptive):
    """distributed's ``Adaptive`` for one worker group of a
    :class:`~spark_dask.cluster.SparkCluster`.

    Parameters
    ----------
    cluster : SparkCluster
    pool : spark_dask.gangs.pool.GangPool
        The group's pool: its planned workers, its scale-up and scale-down.
    resource : str or None
        The group's Dask resource (None: the default group).
    **kwargs
        ``Adaptive``'s (``minimum``, ``maximum``, ``interval``, ``wait_count``,
        ``target_duration``).
    """

    def __init__(self, cluster, pool, resource: str | None, **kwargs):
        self.pool = pool
        self.resource = resource
        super().__init__(cluster, **kwargs)

    def members(self) -> list:
        """The group's connected workers (WorkerStates), those leaving left out."""
        scheduler = self.cluster.scheduler
        if scheduler is None:
            return []
        return [ws for ws in scheduler.workers.values() if self.pool.holds(str(ws.name))]

    def _planned_names(self) -> set:
        return self.pool.planned_names()

    def _observed_names(self) -> set:
        return {str(ws.name) for ws in self.members()}

    async def target(self) -> int:
        return group_target(self.cluster.scheduler, self.members(), self.resource, self.target_duration)

    async def recommendations(self, target: int) -> dict:
        # distributed's waits for the cluster when plan and requested differ; here they never do
        return await super(Adaptive, self).recommendations(target)

    async def workers_to_close(self, target: int) -> list[str]:
        return idle_to_close(self.members(), target)

    async def scale_up(self, n: int) -> None:
        await self.pool.scale(n)

    async def scale_down(self, workers) -> None:
        """Retire ``workers`` through the group's pool (Dask moves their data first)."""
        await self.pool.scale_down(list(workers))


def adapt_bounds(
    minimum: int,
    maximum: float,
    minimum_cores,
    maximum_cores,
    minimum_memory,
    maximum_memory,
    threads: int | None,
    per_memory: int | None,
    bound: int | None,
) -> tuple[int, float, str | None]:
    """``adapt()``'s minimum and maximum in workers, from its arguments in workers, cores
    and memory (``threads`` and ``per_memory``: one worker's) and the bound of the Spark
    application (``bound``: :func:`spark_dask.capacity.max_workers`); and a note when the
    bound lowered the maximum.

    >>> adapt_bounds(0, 10, None, 8, None, None, 2, None, 3)[:2]
    (0, 3)
    """
    if minimum_cores is not None:
        minimum = max(minimum, workers_for(0, minimum_cores, None, threads, None))
    if minimum_memory is not None:
        minimum = max(minimum, workers_for(0, None, parse_bytes(minimum_memory), None, per_memory))
    if maximum_cores is not None:
        if not threads:
            raise PlanError("spark-dask: adapt(maximum_cores=...) needs a worker's threads: none is known yet")
        maximum = min(maximum, math.floor(maximum_cores / threads))
    if maximum_memory is not None:
        if not per_memory:
            raise PlanError("spark-dask: adapt(maximum_memory=...) needs a worker's memory limit: none is known yet")
        maximum = min(maximum, math.floor(parse_bytes(maximum_memory) / per_memory))
    maximum, note = adapt_maximum(maximum, bound)
    if minimum > maximum:
        raise PlanError(f"spark-dask: adapt(): minimum={minimum} is above the maximum {maximum:g}")
    return minimum, maximum, note


def size_per_worker(options: ClusterOptions, size: tuple[int, int] | None) -> tuple[int | None, int | None]:
    """(threads, memory) of one worker, for ``scale(cores=, memory=)`` and ``adapt``: the
    options where the user chose them, else ``size`` (the workers' own, smallest)."""
    threads = options.threads_per_worker or (size[0] if size else None)
    memory = options.memory_limit
    if memory == "auto":
        memory = size[1] if size else None
    return threads, memory


__all__ = ["GangTargets", "GroupAdaptive", "adapt_bounds", "group_target", "idle_to_close", "size_per_worker", "wanted"]
