"""The cluster's waits and watchers: the start-up wait for the gangs' workers (failing
fast when a gang ends or gets no task slot) and, while the cluster runs, the watch on a
group's lost workers (:func:`watch_faults`) and, over every group's gangs, the watch on
stages starved of slots (or, with Spark Connect, on the session's stop). What they say
is worded in :mod:`spark_dask.gangs.slots`; they read Spark's status tracker through
:func:`spark_dask.spark.launcher.stage_snapshot`, in the thread of the cluster's
:class:`SparkReads`.

Also the named, bounded wait (:func:`bounded`) of what answers over the network while
the cluster runs (a nanny, a worker, the scheduler's close): a process that is alive but
frozen (SIGSTOP, a hang holding the GIL) keeps its connections open, so only a bound
ends such a wait; when it passes, one line says what was waited for and what happens
instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import queue
import sys
import threading
import time
from contextlib import suppress
from functools import partial

from distributed.metrics import time as metrics_time

from spark_dask.aio import background, blocking, bounded, gave_up_message, run_and_hand_over
from spark_dask.capacity import max_workers, task_cpus
from spark_dask.errors import ClusterError, ClusterTimeoutError
from spark_dask.gangs.faults import no_workers_message, no_workers_warning
from spark_dask.gangs.gang import Gang
from spark_dask.gangs.slots import (
    SlotWatch,
    busy_stages,
    no_slots_message,
    said_stages,
    silent_tasks,
    silent_text,
    start_timeout_message,
)
from spark_dask.sizes import plural
from spark_dask.spark.conf import application_id
from spark_dask.spark.launcher import stage_snapshot, summarize_spark_error
from spark_dask.spark.session import is_stopped

logger = logging.getLogger("spark_dask")


def in_notebook() -> bool:
    """True in a Jupyter or Databricks notebook."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return type(shell).__name__ in ("ZMQInteractiveShell", "DatabricksShell")


class Progress:
    """ "2/4 Dask workers connected": a line per change in a terminal, one updated
    line in a notebook."""

    def __init__(self, enabled: bool, total: int):
        self.enabled = enabled
        self.total = total
        self.last = None
        self.handle = None

    def update(self, n: int) -> None:
        """Show ``n`` connected workers, if that changed."""
        if not self.enabled or n == self.last:
            return
        self.last = n
        text = f"spark-dask: {n}/{plural(self.total, 'Dask worker')} connected"
        if in_notebook():
            from IPython.display import display

            if self.handle is None:
                self.handle = display({"text/plain": text}, raw=True, display_id=True)
            else:
                self.handle.update({"text/plain": text}, raw=True)
        else:
            print(text, file=sys.stderr, flush=True)


def gang_error(gang: Gang, what: str) -> ClusterError:
    """The error of a gang whose Spark job ended: ``what`` happened, and Spark's cause
    (or, without one, the rows its tasks returned)."""
    err = gang.error
    if err is None:
        detail = "the tasks returned: " + json.dumps(gang.launcher.rows)[:2000]
    else:
        detail = summarize_spark_error(err)
    return ClusterError(f"spark-dask: {what}.\n{detail}")


async def logs_within(get, workers: bool, timeout: float, events) -> dict:
    """distributed's logs of a cluster (``get(workers=...)``: ``Cluster._get_logs``),
    the workers' waited for at most ``timeout`` seconds: a frozen worker never sends its
    own; past that, the logs come without the workers' (said on ``events``)."""
    got = {}

    async def collect(with_workers: bool) -> None:
        got["logs"] = await get(workers=with_workers)

    say = partial(events.warn, python_warning=False)
    if not await bounded(
        collect(workers), timeout, "every Dask worker to send its log", "the logs come without the workers'", say
    ):
        await collect(False)
    return got["logs"]


class StartWait:
    """The start-up wait of one cluster: until every worker of its gangs runs.

    Parameters
    ----------
    spark : SparkSession
        The cluster's session (for the stage snapshot).
    driver_scheduler : DriverScheduler
        The scheduler; its ``changed`` event wakes the wait.
    facts : ClusterFacts
        The Spark facts (slots, dynamic allocation) for the error texts.
    slot_wait : float
        Seconds after which a barrier stage with no running task is checked.
    connect : bool
        A Spark Connect session (no stage information).
    progress : bool
        Show "n/N Dask workers connected".
    count : callable, optional
        ``count()``: the connected workers of the gangs waited for; default the
        scheduler's running workers (at start they are all the gangs'). A worker group
        added to a running cluster counts its own gangs' workers.
    log_dir : str, optional
        The cluster's log directory, named in the timeout's error.
    """

    def __init__(
        self,
        spark,
        driver_scheduler,
        facts,
        slot_wait: float,
        connect: bool,
        progress: bool,
        count=None,
        log_dir: str | None = None,
    ):
        self.spark = spark
        self.driver_scheduler = driver_scheduler
        self.facts = facts
        self.slot_wait = slot_wait
        self.connect = connect
        self.progress = progress
        self.count = count or driver_scheduler.running_workers
        self.log_dir = log_dir

    async def wait(self, gangs: list[Gang], timeout: float, tag: str) -> None:
        """Return once every worker of ``gangs`` is connected; fail fast when a gang fails."""
        want = sum(g.wanted for g in gangs)
        progress = Progress(self.progress, want)
        submitted = time.monotonic()
        deadline = submitted + timeout
        barrier = all(g.barrier for g in gangs)
        slots_seen = self.connect or not barrier  # no stage information under Spark Connect
        changed = self.driver_scheduler.changed
        while True:
            changed.clear()
            ended = [g for g in gangs if g.done]
            if ended:
                what = "barrier stage" if ended[0].barrier else "job"
                raise gang_error(ended[0], f"the Spark {what} ended before the workers connected")
            n = self.count()
            progress.update(n)
            if n >= want:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                f = self.facts
                shape = [(g.first, g.plan.n_tasks, g.plan.workers_per_task) for g in gangs]
                # logs are kept where the tasks end by themselves as the cluster closes
                # (a barrier gang past its barrier); a gang with no worker is cancelled
                kept = self.log_dir if barrier and n else None
                silent = silent_text(silent_tasks(self.driver_scheduler.names(), shape, want - n), kept)
                raise ClusterTimeoutError(
                    start_timeout_message(
                        n,
                        want,
                        self.driver_scheduler.scheduler.address,
                        timeout,
                        tag,
                        barrier,
                        f.dynamic_allocation,
                        f.max_executors,
                        silent,
                    )
                )
            if not slots_seen and time.monotonic() - submitted >= self.slot_wait:
                slots_seen = await self.got_slots(gangs)
            wake = remaining if slots_seen else min(remaining, 1.0)
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), wake)

    async def got_slots(self, gangs: list[Gang]) -> bool:
        """True once a gang task runs; raises when the stage still has no slot at all.

        Spark checks a barrier stage against the application's *total* slots; when
        they exist but are busy (another spark-dask cluster, a long Spark job), the
        stage waits silently. Fail now instead, saying who holds the slots.
        """
        try:
            stages, ours = await blocking(stage_snapshot, self.spark, [g.tag for g in gangs])
        except Exception:  # noqa: BLE001 - no snapshot: nothing to say yet
            return True
        if any(st["stageId"] in ours and st["numActiveTasks"] > 0 for st in stages) or self.count():
            return True
        if not ours:  # the job is not submitted yet
            return False
        n_tasks = sum(g.plan.n_tasks for g in gangs)
        others = busy_stages(stages, ours)
        own = getattr(gangs[0], "cluster_tag", None)  # a worker group added beside the cluster's own gangs
        raise ClusterError(no_slots_message(n_tasks, self.slot_wait, self.facts.slots, others, own))


# Seconds a SparkReads thread waits for the next read before it ends (the next read
# starts another): the watches read every half second, so only a cluster never closed
# leaves it waiting.
READS_IDLE = 60.0


class SparkReads:
    """The cluster's watches' reads of Spark (py4j calls): one at a time, in one thread
    that lives as long as the watches (``await reads(fn, *args)``, as
    :func:`~spark_dask.aio.blocking`).

    Not :func:`~spark_dask.aio.blocking`'s thread per read: PySpark's pinned-thread
    mode gives each Python thread a py4j connection of its own, and the JVM a thread for
    it, so each read also opened and closed both, 0.3 ms of this process's CPU and 1 ms
    of the JVM's, where a read on a kept connection takes 0.05 ms and 0.1 ms (the
    watches read two and a half times a second). ``fn`` runs in a copy of the caller's
    context; a read whose awaiting watch was cancelled is finished and dropped.
    :meth:`close` ends the thread after the read it is in.
    """

    def __init__(self, name: str = "spark-dask-reads"):
        self.name = name
        self.lock = threading.Lock()
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.serving = False  # a thread serves self.jobs

    async def __call__(self, fn, *args):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self.lock:
            self.jobs.put((loop, future, contextvars.copy_context(), fn, args))
            if not self.serving:
                self.serving = True
                threading.Thread(target=self.serve, args=(self.jobs,), name=self.name, daemon=True).start()
        return await future

    def close(self) -> None:
        """The thread ends after the read it is in; a later read starts another."""
        with self.lock:
            if self.serving:
                self.jobs.put(None)
                self.jobs, self.serving = queue.SimpleQueue(), False

    def serve(self, jobs: queue.SimpleQueue) -> None:
        """The thread: the reads of ``jobs`` in turn, until :meth:`close` (or
        :data:`READS_IDLE` seconds without one)."""
        while True:
            try:
                job = jobs.get(timeout=READS_IDLE)
            except queue.Empty:
                with self.lock:
                    if jobs is self.jobs and jobs.empty():
                        self.serving = False
                        return
                continue
            if job is None:
                return
            run_and_hand_over(*job)


class OwnStages:
    """The stage ids of the cluster's live gangs, as the slot watch's last full read
    found them (:meth:`saw`). While every active stage of Spark is among them and no gang
    waits for its slots, a round has nothing to say (no other stage can be starved, no
    scale-up gang waits) and reads no more than the active stage ids (``active``:
    :func:`~spark_dask.spark.launcher.active_stage_ids`, two py4j calls; a full
    snapshot takes 18 and more, 7 for each active stage)."""

    def __init__(self, active):
        self.active = active
        self.tags: list[str] | None = None
        self.ours: set[int] = set()

    def saw(self, tags: list[str], ours: set[int]) -> None:
        """A full read of the gangs ``tags`` found their stages ``ours``."""
        self.tags, self.ours = list(tags), set(ours)

    async def only_ours(self, read, spark, live: list) -> bool:
        """Whether Spark's active stages are all the ``live`` gangs' (as last seen) and
        none of them waits for slots: one read of the active stage ids."""
        if [g.tag for g in live] != self.tags or any(g.pending for g in live):
            return False
        return await read(self.active, spark) <= self.ours


def running(pools: dict) -> bool:
    """Whether a pool of ``pools`` (a cluster's ``ClusterParts.pools``) runs."""
    return any(pool.running for pool in list(pools.values()))


async def watch_starved_stages(
    spark,
    pools: dict,
    tag: str,
    slot_wait: float,
    every: float = 2.0,
    patience: float = 10.0,
    snapshot=stage_snapshot,
    read=blocking,
    active=None,
):
    """Warn when a Spark stage waits for task slots that the gangs hold, and when a
    scale-up gang waits for slots that Spark jobs hold (:class:`~spark_dask.gangs.slots.SlotWatch`).

    A Spark job run inside the ``with`` block needs free task slots; when the gangs
    hold them all it waits until the Dask cluster closes (or shrinks). That must not
    be silent. Under dynamic allocation Spark adds executors for waiting stages: only
    said when the gangs hold every slot the application can ever have. ``pools``: the
    cluster's pools by worker group (``ClusterParts.pools``, groups added later too):
    the gangs of every group count. Runs while a pool runs; a round that fails (Spark's
    status tracker unreadable) is logged and the next one tries again. ``snapshot``:
    :func:`~spark_dask.spark.launcher.stage_snapshot`; ``read``: how a blocking read is
    awaited (the cluster's :class:`SparkReads`); ``active``: where given
    (:func:`~spark_dask.spark.launcher.active_stage_ids`), read first each round: while
    Spark's active stages are all the gangs' own, the round ends there (:class:`OwnStages`).
    """
    watch = SlotWatch(tag, patience, slot_wait, said_stages(await read(application_id, spark)))
    own = None if active is None else OwnStages(active)
    failed = False  # the last round
    while running(pools):
        try:
            await starved_round(spark, list(pools.values()), watch, snapshot, read, own)
            failed = False
        except Exception as e:  # noqa: BLE001 - logged; the next round tries again
            with suppress(Exception):
                if await read(is_stopped, spark):
                    return  # the context is stopping
            if running(pools):
                (logger.debug if failed else logger.warning)(
                    "spark-dask: the watch on Spark stages waiting for task slots failed (%s: %s); "
                    "it tries again every %gs",
                    type(e).__name__,
                    e,
                    every,
                    exc_info=not failed,
                )
            failed = True
        await asyncio.sleep(every)


async def starved_round(
    spark, pools: list, watch: SlotWatch, snapshot, read=blocking, own: OwnStages | None = None
) -> None:
    """One round of :func:`watch_starved_stages`: read the stages, say what waits. The
    first pool (the default group's) words the capacity; the tasks held are every
    group's, their cores said where every group's tasks take as many CPUs. With ``own``,
    a round where Spark runs no stage but the gangs' ends after reading their ids."""
    shape, facts = pools[0].shape, pools[0].facts
    live = [g for pool in pools for g in pool.live()]
    if own is not None and await own.only_ours(read, spark, live):
        watch.first_seen.clear()  # no stage waits now: none has waited since
        return
    tags = [g.tag for g in live]
    stages, ours = await read(snapshot, spark, tags)
    if own is not None:
        own.saw(tags, ours)
    barrier = all(pool.shape.barrier for pool in pools)
    capacity = facts.slots
    if not barrier:
        bound = max_workers(facts, shape)
        capacity = None if bound is None else bound // max(shape.workers_per_task, 1)
    held = sum(g.tasks_held() for g in live)
    cpus = {task_cpus(pool.shape, facts) for pool in pools}
    cores = (
        (cpus.pop(), facts.executors * facts.executor_cores)
        if barrier and facts.executor_cores and len(cpus) == 1
        else None
    )
    others = pools[0].context.other_clusters()
    for msg in watch.notes(stages, ours, live, held, capacity, barrier, time.monotonic(), cores, others):
        pools[0].events.warn(msg, python_warning=False)


async def watch_session_stop(spark, pools: dict, log, close, every: float = 1.0, read=blocking) -> None:
    """Spark Connect: ``close()`` the cluster when its session is stopped (a stopped
    session does not end the gangs' collecting threads: the client keeps retrying).
    Runs while a pool of ``pools`` (``ClusterParts.pools``) runs; ``read``: how the
    blocking read is awaited (the cluster's :class:`SparkReads`)."""
    while running(pools):
        if await read(is_stopped, spark):
            log("spark-dask: the SparkSession was stopped; closing the Dask cluster")
            # not awaited here: the teardown cancels us
            background(close(), "closing the cluster of the stopped session")
            return
        await asyncio.sleep(every)


async def watch_faults(pool, fail, every: float = 1.0) -> None:
    """While the cluster runs: replace the workers of ``pool`` (a
    :class:`~spark_dask.gangs.pool.GangPool`) lost longer than ``lost-worker-grace``, start what
    no executor could hold once one can (every 2 s), say when the cluster has no worker
    at all, and ``fail(msg)`` it after ``no-workers-timeout`` of that."""
    rec, next_check = pool.recovery, 0.0
    while pool.running:
        await pool.replace_missing()
        now = time.monotonic()
        if rec.owed and now >= next_check and not pool.correcting():
            next_check = now + 2.0
            pool.kick()
        verdict = rec.no_workers(len(pool.driver_scheduler.scheduler.workers), pool.target, now)
        if verdict == "warn":
            pool.events.warn(
                no_workers_warning(pool.target, pool.status, rec.timeout),
                python_warning=False,
            )
        elif verdict == "fail":
            msg = no_workers_message(pool.target, now - rec.no_workers_since, rec.timeout, rec.reason)
            background(fail(msg), "failing the cluster")  # not awaited here: the teardown cancels us
            return
        await asyncio.sleep(every)


# seconds between the checks of a retirement for workers gone silent
SILENCE_POLL = 0.5


async def retirement_moved(
    scheduler, retiring: asyncio.Task, addresses: list[str], timeout: float | None, silence: float, say
) -> bool:
    """Wait for a retirement (``retire_workers``) for at most ``timeout`` seconds
    (None: no bound while its workers answer); True when it ended. A retiring worker
    that sends no heartbeat for close-timeout is frozen (its connection stays open,
    its data cannot be fetched): it is said and removed from the scheduler (what only
    it held is recomputed), so that the retirement of the others goes on. ``silence``: the
    close-timeout; ``say(line)``: the pool's WARNING line."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while True:
        left = None if deadline is None else max(deadline - loop.time(), 0.0)
        done, _ = await asyncio.wait({retiring}, timeout=SILENCE_POLL if left is None else min(SILENCE_POLL, left))
        if done:
            return True
        if left is not None and left <= SILENCE_POLL:
            return False
        now = metrics_time()
        for a in addresses:
            ws = scheduler.workers.get(a)
            if ws is not None and now - ws.last_seen > silence:
                say(
                    gave_up_message(
                        f"Dask worker {ws.name} ({a}) to hand its data to the other workers",
                        silence,
                        "it is removed from the scheduler: what only it held is recomputed",
                    )
                )
                await scheduler.remove_worker(a, stimulus_id=f"spark-dask-frozen-{now}", close=False)
