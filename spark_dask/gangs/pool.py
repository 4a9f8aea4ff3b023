"""The gangs of one worker group and the policy that keeps them at their target: scale
up (submit gangs into free task slots), scale down (cancel waiting gangs, retire
workers), relaunch the workers of a failed gang, replace workers lost longer than the
grace (watched by :func:`spark_dask.gangs.waits.watch_faults`).

:class:`GangPool` is to :class:`spark_dask.SparkCluster` what distributed's
``AdaptiveCore`` is to a cluster manager: the decisions, apart from the effects. It
holds the :class:`~spark_dask.gangs.gang.Gang` objects and the target; what it does to the
world comes in at construction: two callables (make a gang, read the Spark facts
again) and what the pools of the cluster share
(:class:`~spark_dask.gangs.pools.PoolContext`: the facts, the events, the
:class:`~spark_dask.scheduler.DriverScheduler`, the other groups' pools and the other
clusters), so its tests run with a fake launcher and a fake scheduler, without Spark.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

from spark_dask.aio import background, blocking, bounded
from spark_dask.capacity import (
    ClusterFacts,
    GangPlan,
    cpu_room,
    gang_capacity,
    hog_warning,
    max_workers,
    placeable,
    scale_step,
    task_cpus,
)
from spark_dask.capacity import tasks_for as tasks_for_workers
from spark_dask.dask_compat import stop_adaptive
from spark_dask.gangs.faults import (
    Recovery,
    loss_message,
    lost_executor,
    lost_worker,
    relaunched_message,
    where,
    worker_lost_message,
    yarn_loss,
)
from spark_dask.gangs.gang import Gang, end_gangs, gang_of_placeholder
from spark_dask.gangs.slots import pools_held
from spark_dask.gangs.waits import retirement_moved
from spark_dask.options import ClusterOptions
from spark_dask.options.groups import DEFAULT
from spark_dask.plan import gang_steps
from spark_dask.scheduler import task_group
from spark_dask.sizes import plural
from spark_dask.spark.launcher import session_closed
from spark_dask.spark.session import is_stopped

logger = logging.getLogger("spark_dask")


class GangPool:
    """The gangs of one worker group, their target size and what brings them to it.

    Parameters
    ----------
    shape : GangPlan
        The plan of the starting gang: the shape every later gang takes.
    options : dict
        The group's resolved options (``relaunch_attempts``, ``lost_worker_grace``,
        ``no_workers_timeout``).
    context : spark_dask.gangs.pools.PoolContext
        What the pools of the cluster share (facts, events, scheduler, task numbers,
        the other pools and clusters).
    make_gang : callable
        ``make_gang(plan, reason, index, first)``: a new, not yet submitted Gang.
    fresh_facts : callable
        Blocking: the Spark facts read again (executors come and go).
    adaptive : callable, optional
        ``adaptive()``: the group's ``Adaptive`` or None (stopped when gangs keep
        failing to start).
    group : str
        The worker group whose gangs this pool keeps (:mod:`spark_dask.options.groups`): it takes
        only the workers whose Spark facts name it.
    slot_warning_said : bool
        Whether the start already warned that the cluster holds most task slots (said
        once: at start or at the first scale-up).
    """

    def __init__(
        self,
        shape: GangPlan,
        options: ClusterOptions,
        context,
        make_gang,
        fresh_facts,
        adaptive=None,
        group: str = DEFAULT,
        slot_warning_said: bool = False,
    ):
        self.shape = shape
        self.options = options
        self.context = context
        self.facts = context.facts
        self.events = context.events
        self.driver_scheduler = context.driver_scheduler
        self.make_gang = make_gang
        self.fresh_facts = fresh_facts
        self.adaptive = adaptive or (lambda: None)
        self.recovery = Recovery(options.lost_worker_grace, options.no_workers_timeout)
        self.gangs: list[Gang] = []  # every gang (Spark job) submitted, in order
        self.target = shape.n_workers  # workers the group is to have
        self.relaunches = 0
        self.status = "not started"  # of the gangs, as the widget shows it
        self.running = False  # the cluster runs: losses count, surplus workers are closed
        self.group = group
        self.numbers = context.numbers  # the cluster-wide number of the next gang's first task
        self.slot_warning_said = slot_warning_said
        self._by_address: dict[str, tuple[Gang, str]] = {}  # address -> (its gang, the worker's name)
        self._gone: dict[str, asyncio.Future] = {}  # address -> set when it leaves
        self._lock = asyncio.Lock()
        self._reconcile: asyncio.Task | None = None
        self._again = False
        self._last_scale_note: str | None = None

    # ------------------------------------------------------------------ gangs
    def submit(self, plan: GangPlan, reason: str) -> Gang:
        """Submit a gang for ``plan``'s workers (``reason``: start, scale or relaunch).
        Its workers are named from the next task number, so names never repeat."""
        gang = self.make_gang(plan, reason, len(self.gangs), self.numbers.take(plan.n_tasks))
        self.gangs.append(gang)
        if self.status in ("not started", "running") and reason == "start":
            self.status = "starting"
        return gang.submit()

    def live(self) -> list[Gang]:
        """The gangs whose Spark job has not ended."""
        return [g for g in self.gangs if not g.done]

    def gang_of(self, name: str) -> Gang | None:
        """The gang of a worker (or of a placeholder name of ``planned_names``)."""
        tag = gang_of_placeholder(name)
        for g in self.gangs:
            if (tag is not None and g.tag == tag) or (tag is None and name in g.seen):
                return g
        return None

    def holds(self, name: str) -> bool:
        """Whether ``name`` is a connected worker of this pool's gangs, not leaving."""
        gang = self.gang_of(name)
        return gang is not None and name in gang.workers and name not in gang.retiring

    def connected(self) -> int:
        """Workers of the live gangs that are connected."""
        return sum(g.connected for g in self.live())

    def held(self) -> int:
        """Spark task slots the live gangs hold (or wait for)."""
        return sum(g.tasks_held() for g in self.live())

    def planned_names(self) -> set:
        """Names of the workers the gangs are to hold (``Cluster.plan``)."""
        return {n for g in self.live() for n in g.planned_names()}

    def placeable(self, wanted: int) -> int:
        """Workers of ``wanted`` a new barrier stage can start now (blocking: Spark calls)."""
        facts = self.fresh_facts()
        return placeable(
            wanted,
            gang_capacity(facts, self.shape),
            self.held(),
            self.shape.workers_per_task,
        )

    # ------------------------------------------------------------------ workers
    def worker_added(self, scheduler, address: str, cluster_tag: str) -> None:
        """Scheduler plugin (event loop): a worker of cluster ``cluster_tag`` joined."""
        ws = scheduler.workers.get(address)
        facts = ws.extra.get("spark") if ws is not None else None
        if not isinstance(facts, dict) or facts.get("cluster") != cluster_tag:
            return
        if facts.get("group", DEFAULT) != self.group:
            return
        index = facts.get("gang", 0)
        gang = self.gangs[index] if isinstance(index, int) and 0 <= index < len(self.gangs) else None
        if gang is None:
            return
        was, name = gang.status, str(ws.name)
        self._by_address[address] = (gang, name)
        gang.worker_joined(
            name,
            address,
            ws.nanny,
            str(facts.get("host") or ""),
            str(facts.get("executor_id") or ""),
        )
        for old in self.recovery.worker_back(gang, name):
            self.events.note(f"spark-dask: Dask worker {old} is back" + (f" (as {name})" if old != name else ""))
        if ws.nanny:
            self.driver_scheduler.open_nanny_comms([ws.nanny])
        if was == "starting" and gang.status == "running":
            self._gang_started(gang)
        extra = gang.surplus()
        if extra and self.running:
            background(
                self.close_workers({n: gang for n in extra}),
                f"closing the surplus Dask workers {', '.join(extra)}",
            )

    def _gang_started(self, gang: Gang) -> None:
        self.recovery.start_failures = 0
        if gang.reason == "relaunch":
            starting = any(g.reason == "relaunch" and g.status == "starting" for g in self.live())
            whole = not starting and not self.recovery.owed
            if whole:  # back to full size
                self.status = "running"
            self.events.log(relaunched_message(gang.wanted, self.connected(), self.target, whole, gang.tag, self.group))
        elif gang.reason == "scale":
            self.events.note(f"spark-dask: {gang.tag}: {plural(gang.wanted, 'more Dask worker')} connected")

    def worker_removed(self, address: str) -> None:
        """Scheduler plugin: a worker left; unless it was leaving on purpose, it is lost."""
        gang, name = self._by_address.pop(address, (None, ""))
        gone = self._gone.pop(address, None)
        if gone is not None and not gone.done():
            gone.set_result(None)
        leaving = address in self.recovery.leaving
        self.recovery.leaving.discard(address)
        if gang is not None and gang.workers.get(name) == address:  # not one that joined again elsewhere
            gang.worker_left(name, on_purpose=leaving)
            running = self.running and not gang.done
            lost = lost_worker(
                "closing_gracefully" if leaving else None,
                name in gang.retiring,
                running,
            )
            self.recovery.worker_left(gang, name, gang.hosts.get(name, ""), lost, time.monotonic())
            if lost:  # given lost-worker-grace to come back, then replaced (spark_dask.gangs.waits.watch_faults)
                msg = worker_lost_message(
                    where([(name, gang.hosts.get(name, ""))]),
                    self.connected(),
                    self.target,
                    gang.barrier,
                    self.recovery.grace,
                )
                self.events.note(msg) if gang.barrier else self.events.tell(msg)

    async def gang_ended(self, gang: Gang, spark, close) -> None:
        """A gang's Spark job ended. While the cluster runs (not at start or close): a
        stopped session closes the cluster (``close``); else say why the gang ended, and
        relaunch its workers where an executor or task was lost."""
        if not self.running:
            return  # the start-up wait or the teardown deals with it
        if session_closed(gang.error) or await blocking(is_stopped, spark):
            self.events.log("spark-dask: the SparkSession was stopped; closing the Dask cluster")
            await close()
            return
        self.ended(gang)

    def ended(self, gang: Gang) -> None:
        """What a gang's end means for the cluster (see :meth:`gang_ended`)."""
        outcome = gang.outcome()
        what = "Spark barrier stage" if gang.barrier else "Spark job"
        if outcome == "cancelled":
            gang.status = "cancelled"
        elif outcome == "retired":
            gang.status = "ended: its workers were retired"
        elif outcome == "closed":
            # Its workers left on purpose without a scale-down (client.retire_workers):
            # the cluster is that much smaller now.
            gang.status = "ended: its workers were closed"
            self.target = max(self.target - gang.wanted, 0)
            gang.wanted = 0
            self.events.log(f"spark-dask: the {what} {gang.tag} ended: its Dask workers were closed")
        elif outcome == "start-failed":
            self._start_failed(gang, what, gang.failure())
        else:  # a lost executor or task: relaunch this gang's workers (only these)
            reason = gang.failure()
            gang.status = f"failed: {reason}"
            self.recovery.forget(gang)
            workers = [(n, gang.hosts.get(n, "")) for n in sorted(gang.seen) if n not in gang.retiring]
            executor, yarn = lost_executor(str(gang.error)), yarn_loss(str(gang.error))
            lost = f"{executor} lost" if executor else ""
            lost = f"{lost}: {yarn}" if lost and yarn else (lost or yarn)
            what = f"the {what} {gang.tag} failed" + (f" ({lost})" if lost else "")
            self.recovery.gang_failed(
                what,
                f"{gang.tag}: {reason.lstrip(': ')}",
                workers[: gang.wanted],
                gang.wanted,
            )
            gang.wanted = 0
            if gang.workers:  # still registered: a lost host's may never say goodbye
                background(
                    self.driver_scheduler.remove_lost(list(gang.workers.values()), gang.tag),
                    f"removing the Dask workers of the failed {gang.tag} from the scheduler",
                )
            self.kick()

    def _start_failed(self, gang: Gang, what: str, reason: str) -> None:
        """Relaunching would fail the same way: the request is dropped."""
        gang.status = f"failed: {reason}"
        self.target = max(self.target - gang.wanted, 0)
        gang.wanted = 0
        self.recovery.start_failures += 1
        msg = (
            f"spark-dask: the {what} {gang.tag} for {plural(gang.plan.n_workers, 'more Dask worker')} failed: {reason}"
        )
        adaptive = self.adaptive()
        if self.recovery.start_failures >= 3 and adaptive is not None:
            stop_adaptive(adaptive, "spark-dask: gangs fail to start")
            msg += (
                f"\n{self.recovery.start_failures} gangs in a row could not start their workers: adaptive "
                "scaling is stopped. Fix the cause and call cluster.adapt(...) again."
            )
        self.events.warn(msg, python_warning=False)

    async def replace_missing(self) -> None:
        """Workers lost longer than ``lost-worker-grace`` ago: their gangs stop counting
        on them and the pool starts replacements. A gang left with no worker to keep is
        cancelled: its Spark job could still bring one back later (Spark runs a lost
        task again), beside the replacement."""
        due = [(n, g, h) for n, g, h in self.recovery.due(time.monotonic()) if g.give_up(n)]
        if due:
            self.recovery.given_up([(n, h) for n, _, h in due])
            for gang in {id(g): g for _, g, _ in due if g.wanted == 0 and not g.done}.values():
                await blocking(gang.cancel)
            self.kick()

    # ------------------------------------------------------------------ scaling
    def correcting(self) -> bool:
        """Whether the gangs are being brought to the target now (:meth:`kick`)."""
        return self._reconcile is not None and not self._reconcile.done()

    def kick(self) -> None:
        """Bring the gangs to the target (event loop; returns at once)."""
        if self.correcting():
            self._again = True
            return
        self._reconcile = asyncio.ensure_future(self._correct_state())

    def stop(self) -> None:
        """The cluster closes: no more scaling, losses no longer count."""
        self.running = False
        if self._reconcile is not None:
            self._reconcile.cancel()

    async def end(self, grace: float, spark) -> None:
        """The cluster closes (its workers were terminated): every gang at once ends by
        itself once its workers exited, the rest is cancelled after ``grace`` seconds. A
        stopped session: no Spark to wait for or to cancel through."""
        running = self.live()
        if running:
            stopped = await blocking(is_stopped, spark)
            await blocking(end_gangs, running, grace, stopped)
        for g in self.gangs:
            if g.status in ("starting", "running"):
                g.status = "ended: the cluster closed"

    async def _correct_state(self) -> None:
        """Submit gangs, cancel waiting ones or retire workers until the gangs hold the
        target number of workers; relaunch the workers of failed gangs."""
        async with self._lock:
            while True:
                self._again = False
                if not self.running:
                    return
                current = sum(g.wanted for g in self.live())
                rec = self.recovery
                rec.owed = min(rec.owed, max(self.target - current, 0))  # scaled down meanwhile
                try:
                    if self.target > current:
                        await self._grow(self.target - current)
                    elif self.target < current:
                        await self._shrink(current - self.target)
                except Exception as e:  # pragma: no cover - reported, the next call retries
                    logger.exception("spark-dask: scaling failed")
                    self.events.warn(
                        f"spark-dask: scaling to {plural(self.target, 'worker')} failed: {e}",
                        python_warning=False,
                    )
                    return
                if not self._again:
                    return

    def _relaunch_budget(self, n: int) -> tuple[int, int, str]:
        """Lost workers to relaunch: ``(n, lost, relaunch)`` after the relaunch budget
        (``relaunch_attempts``) is counted; ``relaunch`` names the attempt."""
        rec, attempts = self.recovery, self.options.relaunch_attempts
        lost, rec.lost = rec.lost, 0
        if self.relaunches < attempts:
            self.relaunches += 1
            self.status = f"relaunching ({self.relaunches})"
            rec.owed += lost
            return n, lost, f"relaunch {self.relaunches} of {attempts}"
        self.target = max(self.target - lost, 0)
        left = self.connected()
        self.status = f"failed: {rec.reason}" if not left else "running"
        self.events.error(
            f"spark-dask: a Spark {'barrier stage' if self.shape.barrier else 'job'} failed and "
            f"{self.relaunches} relaunches are used up: its {plural(lost, 'Dask worker')} {'is' if lost == 1 else 'are'} not "
            f"relaunched; the cluster has {plural(left, 'worker')}. "
            + ("Close it and start a new one. " if not left else "cluster.scale(n) adds workers again. ")
            + f"Cause: {rec.reason}"
        )
        return n - lost, 0, ""

    async def _grow(self, n: int) -> None:
        rec, relaunch, lost = self.recovery, "", 0
        if rec.lost:
            n, lost, relaunch = self._relaunch_budget(n)
            if n <= 0:
                return
        reason = "relaunch" if rec.owed else "scale"
        # A barrier stage starts only whole: relaunch what the executors left can hold
        # now, the rest once Spark has capacity again (spark_dask.gangs.waits.watch_faults).
        now = await blocking(self.placeable, n) if rec.owed and self.shape.barrier else n
        later = max(min(rec.owed, n) - now, 0)
        if lost or (later and not rec.owed_said):
            msg = loss_message(
                rec.what or "Dask workers were lost",
                "" if rec.what else rec.reason,
                rec.workers,
                self.connected(),
                self.target,
                now,
                later,
                relaunch,
            )
            self.events.tell(msg) if lost else self.events.note(msg)
            rec.owed_said = later > 0
        rec.owed = max(rec.owed - now, 0)
        rec.owed_said = rec.owed_said and rec.owed > 0
        for step in gang_steps(self.shape, now):
            self.submit(step, reason)

    async def _shrink(self, excess: int) -> None:
        live = self.live()
        # 1. gangs none of whose workers has connected: cancelled (newest first)
        for g in sorted((g for g in live if g.pending and not g.cancelled), key=lambda g: -g.index):
            if 0 < g.wanted <= excess:
                excess -= g.wanted
                g.wanted = 0
                await blocking(g.cancel)
        if excess <= 0:
            return
        # 2. connected workers, those Dask loses least by first (idle, little data), a
        #    Spark task's workers together
        leaving = {n for g in live for n in g.retiring}
        workers = self.driver_scheduler.scheduler.workers.values()
        others = sum(1 for ws in workers if self.gang_of(str(ws.name)) is None)  # other groups' workers
        names = [
            str(n)
            for n in self.driver_scheduler.scheduler.workers_to_close(
                n=excess + others, key=task_group, attribute="name"
            )
            if str(n) not in leaving and self.gang_of(str(n)) is not None
        ]
        chosen = names[: max(excess, 0)]
        excess -= len(chosen)
        # 3. workers not connected yet of gangs that are starting
        for g in sorted(live, key=lambda g: -g.index):
            while excess > 0 and g.wanted > g.connected and not g.done:
                g.retire([g.planned_names()[-1]])
                excess -= 1
        await self.retire(chosen)

    async def retire(self, names: list[str]) -> None:
        """Scale-down: lower the gangs' wanted counts, move the workers' data to the
        other workers (``retire_workers``), then end the workers (their tasks return)."""
        real: dict[str, Gang] = {}
        for name in names:
            gang = self.gang_of(name)
            if gang is None:
                continue
            for n in gang.retire([name]):
                real[n] = gang
        for g in self.live():
            if g.pending and g.wanted == 0 and not g.cancelled:
                await blocking(g.cancel)
        if real:
            await self.close_workers(real)

    async def close_workers(
        self, gangs: dict[str, Gang], timeout: float | None = None, say: bool = True, before_end=None
    ) -> list[str]:
        """Retire the workers ``gangs`` names in Dask (their data moves to the others,
        for at most ``timeout`` seconds), then terminate their nannies, once each (a
        nanny ended twice is waited for: a connection attempt to it): each worker's CLI
        exits at once and its Spark task returns its slot. Returns the names closed
        before Dask could move all their data (the ``timeout`` ran out); ``before_end()``
        is called then, before their nannies end them."""
        names = list(gangs)
        for n, g in gangs.items():
            g.retiring.add(n)
        scheduler = self.driver_scheduler.scheduler
        present = [n for n in names if any(str(ws.name) == n for ws in scheduler.workers.values())]
        late, retiring = await self._retire_in_dask(scheduler, present, timeout) if present else ([], None)
        if late and before_end is not None:
            before_end()
        await asyncio.gather(*(self._end_worker(n, gangs[n].nannies[n]) for n in names if n in gangs[n].nannies))
        if retiring is not None:  # given up: it ends by itself once the workers are gone (RetireWorker.done)
            await self._retirement_ended(retiring, late)
        if say:
            self.events.note(f"spark-dask: retired Dask workers {', '.join(names)}")
        return late

    async def _end_worker(self, name: str, nanny: str) -> None:
        """Terminate worker ``name`` through its nanny, waiting at most close-timeout for
        the answer: a frozen nanny (alive, its connection open) is said, and the worker
        ended through its Spark task instead (the scale, drain or relaunch goes on)."""
        await bounded(
            self.driver_scheduler.terminate_nanny(nanny),
            self.options.close_timeout,
            f"the nanny of Dask worker {name} ({nanny}) to end it",
            lambda: self.driver_scheduler.end_frozen(name),
            self.say,
        )

    def say(self, line: str) -> None:
        """One WARNING line, kept in the cluster's events."""
        self.events.warn(line, python_warning=False)

    async def drain(self, names: list[str], window: float | None, before_end=None) -> list[str]:
        """Spark is decommissioning the executor of the workers ``names``: retire them
        before it goes (Dask moves their data to the others for at most ``window``
        seconds), end their Spark tasks so that the executor can leave without failing
        their gangs, and owe as many workers, started once Spark has a free task slot
        (no relaunch attempt is spent). Returns the names closed before all their data
        was moved (``before_end()`` is called before they are)."""
        real: dict[str, Gang] = {}
        for name in names:
            gang = self.gang_of(name)
            if gang is not None and not gang.done:
                real.update((n, gang) for n in gang.retire([name]))
        if not real:
            return []
        for n, gang in real.items():
            gang.drained.add(n)
        self.recovery.owed += len(real)
        self.recovery.owed_said = True  # the drain's own line says what comes next
        late = await self.close_workers(real, timeout=window, say=False, before_end=before_end)
        self.kick()
        return late

    async def _retire_in_dask(
        self, scheduler, names: list[str], timeout: float | None = None
    ) -> tuple[list[str], asyncio.Task | None]:
        """Move the data of the workers ``names`` to the others and let each close
        itself; return once they left (at most close-timeout), so that their nannies are
        ended after the workers stopped their heartbeats: ended before, a worker killed
        mid-close left a heartbeat on its way, which the scheduler reports as "Received
        heartbeat from unregistered worker" (a WARNING a user sees). Returns ``([],
        None)``; after ``timeout`` seconds of moving data, the names and the retirement
        still under way: the caller ends the workers (what only they held is
        recomputed), then awaits it (:meth:`_retirement_ended`). Not cancelled:
        distributed logs a cancelled ``retire_workers`` as an ERROR with its traceback."""
        addresses = [a for a, ws in scheduler.workers.items() if str(ws.name) in names]
        loop = asyncio.get_running_loop()
        gone = [self._gone.setdefault(a, loop.create_future()) for a in addresses]
        # remove=False: the scheduler forgets each worker when its connection closes,
        # after the worker's own close has stopped its heartbeats
        retiring = asyncio.ensure_future(scheduler.retire_workers(names=names, close_workers=True, remove=False))
        if not await retirement_moved(scheduler, retiring, addresses, timeout, self.options.close_timeout, self.say):
            for a in addresses:
                self._gone.pop(a, None)
            return list(names), retiring
        retired = retiring.result()
        kept = sorted(set(names) - {str(info.get("name")) for info in retired.values()})
        if kept:
            self.events.warn(
                f"spark-dask: Dask could not move the data of {', '.join(kept)} to another worker "
                "(no worker left to take it); closing them anyway: what only they held is "
                "recomputed or lost",
                python_warning=False,
            )
        closing = [f for a, f in zip(addresses, gone) if a in retired]  # the rest: ended by their nannies
        if closing:
            await asyncio.wait(closing, timeout=self.options.close_timeout)
        for a in addresses:
            self._gone.pop(a, None)
        return [], None

    async def _retirement_ended(self, retiring: asyncio.Task, names: list[str]) -> None:
        """A retirement given up, its workers ended: it returns once they are gone (at
        most close-timeout)."""
        done, _ = await asyncio.wait({retiring}, timeout=self.options.close_timeout)
        if done and not retiring.cancelled() and retiring.exception() is not None:
            logger.debug("spark-dask: the retirement of %s ended with %r", names, retiring.exception())
        elif not done:  # pragma: no cover - the nannies did not end them
            retiring.cancel()

    def other_groups(self) -> list[tuple[str, int, int]]:
        """``(worker group, tasks, CPUs per task)`` the cluster's other groups hold
        (:func:`spark_dask.gangs.slots.pools_held`)."""
        return pools_held(self.context.pools, self.facts, but=self.group)

    def bound_reason(self) -> str:
        """Why the cluster cannot have more workers than its bound (for the scale note)."""
        shape = self.shape
        if self.facts.dynamic_allocation:
            return "; dynamic allocation: spark.dynamicAllocation.maxExecutors"
        if shape.pinned:
            return "; one Dask worker per GPU"
        if shape.uses_profile and shape.task_cpus and shape.task_cpus > self.facts.task_cpus:
            return (
                f"; each Dask worker's task takes {shape.task_cpus} of an executor's "
                f"{self.facts.executor_cores} cores, one per executor (start with task_profile=False "
                "for several per executor)"
            )
        if any(n for _, n, _ in self.other_groups()):
            return "; the cluster's other worker groups hold the executors' other cores"
        return ""

    async def scale(self, n: int) -> None:
        """Set the target to ``n`` workers (bounded by the free task slots, with a note
        when it is) and start bringing the gangs to it."""
        current = sum(g.wanted for g in self.live()) + self.recovery.lost
        if n > current:
            facts = await blocking(self.fresh_facts)
            bound = max_workers(facts, self.shape)
            per = max(self.shape.workers_per_task, 1)
            held = self.held() + tasks_for_workers(self.recovery.lost, per)
            step = scale_step(n, current, held, self.capacity(facts, bound), per, self.bound_reason())
            if step.note and step.note != self._last_scale_note:  # Adaptive asks every interval
                self.events.warn(step.note)
            self._last_scale_note = step.note
            self.target = step.target
            total = replace(self.shape, n_tasks=held + step.new_tasks, n_workers=step.target)
            warning = hog_warning(facts, total, self.context.other_clusters(), tuple(self.other_groups()))
            if warning and not self.slot_warning_said and not self.events.quiet:
                self.events.warn(warning)
                self.slot_warning_said = True  # said once (at start or at the first scale-up)
        else:
            scale_step(n, current, 0, None)  # checks n
            self.target = n
            self._last_scale_note = None
        self.kick()

    def capacity(self, facts: ClusterFacts, bound: int | None) -> int | None:
        """Task slots of the gangs' kind (``bound``: :func:`spark_dask.capacity.max_workers`),
        and with other worker groups beside this one, no more than the cores they leave
        (:func:`spark_dask.capacity.cpu_room`)."""
        slots = None if bound is None else bound // max(self.shape.workers_per_task, 1)
        beside = tuple((n, c) for _, n, c in self.other_groups())
        if not beside or facts.dynamic_allocation:
            return slots
        room = cpu_room(facts, task_cpus(self.shape, facts), beside)
        return room if slots is None or room is None else min(slots, room)

    async def scale_down(self, workers) -> None:
        """Adaptive's scale-down (after it retired ``workers``): drop them from their gangs."""
        async with self._lock:
            await self.retire([str(w) for w in workers])
            self.target = sum(g.wanted for g in self.live())

    async def retire_all(self) -> None:
        """The group is removed: no more gangs; waiting gangs are cancelled, every
        connected worker is retired (Dask moves its data to the other workers first)."""
        async with self._lock:
            self.target = 0
            self.recovery.owed = self.recovery.lost = 0
            real: dict[str, Gang] = {}
            for g in self.live():  # connected workers, and placeholders for the rest
                real.update((n, g) for n in g.retire(g.planned_names()))
            for g in self.live():
                if g.pending and not g.cancelled:
                    await blocking(g.cancel)
            if real:
                await self.close_workers(real)
            self.running = False
