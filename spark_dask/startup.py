"""How a :class:`~spark_dask.cluster.SparkCluster` starts (:class:`Startup`): the Spark
facts and the scheduler at once, the plan (:func:`plan_start`) and every worker group's
pool (:meth:`spark_dask.gangs.pools.GroupPools.make_all`), the first gangs of every group
and the wait for their workers; then the watchers that run while the cluster runs (lost
workers of each group, stages starved of task slots or the Connect session's stop,
decommissioned executors, idleness).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack, suppress
from functools import partial

from spark_dask import idle
from spark_dask.aio import blocking
from spark_dask.capacity import GangPlan, hog_warning, task_cpus, workers_per_executor
from spark_dask.errors import PlanError
from spark_dask.executor.gang_task import host_memory
from spark_dask.executor.sizing import memory_problem, warning
from spark_dask.gangs import (
    GroupPools,
    StartWait,
    other_clusters,
    watch_decommission,
    watch_faults,
    watch_session_stop,
    watch_starved_stages,
)
from spark_dask.gangs.waits import SparkReads
from spark_dask.options import ClusterOptions
from spark_dask.options.groups import DEFAULT, group_holds, plan_groups
from spark_dask.plan import check_request, gang_steps, memory_advice, plan_gang
from spark_dask.sizes import plural
from spark_dask.spark.launcher import active_stage_ids
from spark_dask.spark.session import cluster_facts, connect_session_problem, is_connect
from spark_dask.worker_flags import check_worker_options


async def first_failure(facts_job, scheduler_job) -> None:
    """Raise the first failure of the two start jobs (the facts' first)."""
    try:
        done, _ = await asyncio.wait({facts_job, scheduler_job}, return_when=asyncio.FIRST_EXCEPTION)
        for job in (facts_job, scheduler_job):
            if job in done and job.exception() is not None:
                raise job.exception()
    except BaseException:
        if not facts_job.done():
            facts_job.add_done_callback(lambda j: j.cancelled() or j.exception())
        raise


def plan_start(
    facts, opts: ClusterOptions, quiet: bool, others: tuple = ()
) -> tuple[GangPlan, list[str], dict[str, GangPlan], bool]:
    """The plan of a cluster's starting gang from the Spark facts and its options, after
    the checks that refuse it (a :class:`~spark_dask.errors.PlanError` before anything
    is submitted: the worker options among them); the start-up warnings (``others``: the
    slots the application's other spark-dask clusters hold,
    :func:`spark_dask.gangs.slots.other_clusters`); the plan of each worker group
    (:func:`spark_dask.options.groups.plan_groups`); and whether the slot warning is among
    the warnings (it counted every group: said once)."""
    plan = plan_gang(facts, opts.n_workers, opts.worker, opts.task_profile, opts.gpu_mode, opts.barrier)
    group_plans = plan_groups(facts, opts.worker_groups, opts, ((plan.n_tasks, task_cpus(plan, facts)),))
    check_request(facts, opts.threads_per_worker)
    check_worker_options(opts.worker_options, plan.kind, opts.worker_command)
    limit = opts.memory_limit
    if limit != "auto" and facts.master.startswith("local"):
        # the executors run on this host (local and local-cluster masters); elsewhere
        # each task checks its own host
        problem = memory_problem(int(limit), host_memory())
        if problem:
            raise PlanError("spark-dask: " + problem)
    hog = None if quiet else hog_warning(facts, plan, others, group_holds(group_plans, facts))
    memory = memory_warnings(facts, plan, limit)
    return plan, [n for n in (*plan.notes, *memory, hog) if n], group_plans, hog is not None


def memory_warnings(facts, plan: GangPlan, limit: int | str) -> list[str]:
    """What the start warns of the workers' memory: where it does not fit the executors'
    containers (YARN, Kubernetes), and where PySpark's memory limit reaches them."""
    return [warning(a) for a in memory_advice(facts, limit, workers_per_executor(facts, plan))]


class Startup:
    """The start of one cluster and the watchers it leaves running. It works on the
    cluster's parts and returns; the cluster sets its own status around it.

    Parameters
    ----------
    parts : spark_dask.parts.ClusterParts
        The cluster's parts: what the start fills in (facts,
        pools, timings, log directory) and what it works with.
    groups : GroupPools
        The cluster's worker groups' pools.
    spark : SparkSession
        The cluster's session.
    tag : str
        The cluster's Spark job tag.
    quiet : bool
        No progress line and no slot warning.
    exit_stack : ExitStack
        What the cluster's teardown leaves (its name's entry, the log directory).
    """

    def __init__(self, parts, groups: GroupPools, spark, tag: str, quiet: bool, exit_stack: ExitStack):
        self.parts = parts
        self.groups = groups
        self.spark = spark
        self.tag = tag
        self.quiet = quiet
        self.exit_stack = exit_stack
        self.connected = False  # every starting worker connected
        self.fail = None  # the cluster's reaction to lost workers, once watched
        self.watchers: list[asyncio.Task] = []  # faults; stage starvation or session stop; drains; idleness
        self.reads = SparkReads(f"{tag}-reads")  # the watchers' reads of Spark, in one thread

    async def run(self, t0: float, open_contract) -> None:
        """Start the cluster, up to every starting worker connected: on a failure, once
        what was started is settled, the failure is raised (the cluster tears down what
        it made). ``open_contract``: the cluster's side of distributed's ``Cluster``
        contract, opened as soon as the scheduler listens (:meth:`start_scheduler`)."""
        p, opts = self.parts, self.parts.options
        scheduler_job = None
        try:
            self.exit_stack.enter_context(p.entry)  # the name is this cluster's until it closes
            p.log_dir = self.exit_stack.enter_context(p.log_keeper)  # left after the gangs ended
            if is_connect(self.spark):
                problem = await blocking(connect_session_problem, self.spark, opts.scheduler_host)
                if problem:
                    raise PlanError(problem)
            await blocking(p.credentials.read)  # without a source: refused now (a py4j read, off the loop)
            p.connect = is_connect(self.spark)
            # The facts (Spark calls) and the scheduler (credentials, listening sockets,
            # dashboard) do not depend on each other: both at once.
            facts_job = asyncio.ensure_future(blocking(cluster_facts, self.spark, opts.executor_wait, opts.n_workers))
            scheduler_job = asyncio.ensure_future(self.start_scheduler(t0, open_contract))
            await first_failure(facts_job, scheduler_job)
            p.facts = await facts_job
            p.timings["facts"] = time.monotonic() - t0
            self.plan()
            await scheduler_job
            await self.first_gangs(t0)
        except BaseException:
            if scheduler_job is not None:
                # the teardown closes the scheduler: let its start finish (or fail) first,
                # also when the plan refused after the facts (the scheduler may still start)
                with suppress(BaseException):
                    await scheduler_job
            raise

    async def first_gangs(self, t0: float) -> None:
        """Submit every group's first gangs and wait for their workers."""
        p, opts = self.parts, self.parts.options
        p.driver_scheduler.watch_workers(
            self.groups.worker_added, self.groups.worker_removed, self.groups.worker_leaving
        )
        t_submit = time.monotonic()
        gangs = [
            pool.submit(step, "start")
            for pool in p.pools.values()
            for step in gang_steps(pool.shape, pool.shape.n_workers)
        ]
        progress = bool(opts.progress) and not self.quiet
        wait = StartWait(
            self.spark, p.driver_scheduler, p.facts, opts.slot_wait, p.connect, progress, log_dir=p.log_dir
        )
        await wait.wait(gangs, opts.timeout, self.tag)
        now = time.monotonic()
        p.timings["workers"] = now - t_submit
        p.timings["start"] = now - t0
        self.connected = True
        for name in p.pools:
            self.groups.running(name)

    def plan(self) -> None:
        """The plan of the starting gang, its warnings, and the pool of every group."""
        p = self.parts
        others = other_clusters(self.spark, self.tag)
        plan, notes, group_plans, slot_warning_said = plan_start(p.facts, p.options, self.quiet, others)
        for note in notes:
            p.events.warn(note)
        self.groups.make_all(plan, group_plans, slot_warning_said)
        if not plan.barrier and p.facts.dynamic_allocation:
            p.events.log(
                "spark-dask: dynamic allocation is on, where Spark runs no barrier stages: each "
                "Dask worker runs as a Spark job of one task, started as Spark finds (or adds) "
                "an executor for it"
            )

    def watch(self, fail, close, name: str) -> None:
        """The cluster runs: its watchers start. ``fail(msg)``: the cluster cannot go on (no
        workers for ``no-workers-timeout``); ``close()``: the cluster's close (a Connect
        session stopped, or ``idle_timeout`` passed without work: then said, ``name``
        the cluster's)."""
        p, read = self.parts, self.reads
        self.fail = fail
        # Connect: a stopped session does not end the collecting thread (the client
        # keeps retrying), so watch the session itself.
        if p.connect:
            watch = watch_session_stop(self.spark, p.pools, p.events.log, close, read=read)
        else:
            watch = watch_starved_stages(
                self.spark, p.pools, self.tag, p.options.slot_wait, read=read, active=active_stage_ids
            )
        scheduler = p.driver_scheduler.scheduler
        drains = watch_decommission(
            self.spark,
            self.tag,
            scheduler,
            lambda: list(p.pools.values()),
            p.options.drain_timeout,
            p.events,
            p.drains.append,
            read=read,
            roster=p.driver_scheduler.roster,
        )
        for pool in p.pools.values():
            self.watch_faults(pool)
        self.watchers += [asyncio.ensure_future(watch), asyncio.ensure_future(drains)]
        if p.options.idle_timeout:
            idle_watch = idle.close_when_idle(scheduler, p.options.idle_timeout, partial(self.idle_close, close, name))
            self.watchers.append(asyncio.ensure_future(idle_watch))

    async def idle_close(self, close, name: str) -> None:
        """``idle_timeout`` passed without work: close, and say so."""
        p, t0 = self.parts, time.monotonic()
        p.events.closing(name, 0, idle.closing_message(name, p.options.idle_timeout))
        await close()
        p.events.log(idle.closed_message(name, time.monotonic() - t0))
        p.log_keeper.save()  # cluster.log was written at the close, before this line

    def started_line(self, name: str) -> str:
        """What the cluster says once every worker connected."""
        p = self.parts
        plan = p.pools[DEFAULT].shape
        groups = "".join(
            f" + worker group {group}: {plural(pool.shape.n_workers, pool.shape.kind + ' worker')}"
            for group, pool in p.pools.items()
            if group != DEFAULT
        )
        address = p.driver_scheduler.scheduler.address
        return (
            f"spark-dask: {plural(plan.n_workers, plan.kind + ' worker')}{groups} connected to "
            f"{address} in {p.timings['start']:.1f}s (cluster {name!r}, Spark job tag {self.tag})"
        )

    def watch_faults(self, pool) -> None:
        """Watch the lost workers of ``pool`` (a group's) while it runs
        (:func:`spark_dask.gangs.waits.watch_faults`)."""
        self.watchers.append(asyncio.ensure_future(watch_faults(pool, self.fail)))

    async def start_scheduler(self, t0: float, open_contract) -> None:
        """The scheduler side (credentials, scheduler, dashboard), then ``open_contract()``:
        the cluster's rpc to it and worker-status subscription (``Cluster._start``)."""
        p = self.parts
        await p.driver_scheduler.start(self.spark, p.options)
        # The contract's worker-status subscription now, before the workers connect, as
        # SpecCluster subscribes before it starts its workers: opened after 64 of them
        # had joined, the loop busy with their registrations, it missed distributed's
        # 30 s connect timeout (docs/benchmarks.md, scale).
        await open_contract()
        p.timings["scheduler"] = time.monotonic() - t0

    def stop_watchers(self) -> None:
        """The cluster closes: the watchers end (but the one that closes it), and the
        thread of their reads after the read it is in."""
        for watcher in self.watchers:
            if watcher is not None and watcher is not asyncio.current_task():
                watcher.cancel()
        self.reads.close()


__all__ = ["Startup", "first_failure", "plan_start"]
