"""The scheduler side of a cluster, on the Spark driver: the TLS credentials, the Dask
scheduler (with its dashboard), the watch on workers joining and leaving, and the
connections to the workers' nannies that end them; where a nanny does not answer
(frozen), the line of its Spark task (:data:`TASK_LINE`), which the driver cuts to have
the task end the worker's processes.

:class:`DriverScheduler` is what :class:`spark_dask.SparkCluster` holds of it; the
gangs (which Spark task a worker belongs to) are :mod:`spark_dask.gangs.pool`'s part.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from contextlib import suppress

from distributed import Scheduler
from distributed.core import Status
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol.pickle import dumps as dumps_pickle
from distributed.security import Security

from spark_dask.aio import blocking, bounded
from spark_dask.errors import ClusterError, PlanError
from spark_dask.executor.task_line import TASK_LINE
from spark_dask.options import ClusterOptions
from spark_dask.plan import encryption_problem
from spark_dask.spark import databricks
from spark_dask.spark.databricks import DashboardSettings
from spark_dask.spark.session import driver_host, spark_encrypted
from spark_dask.xlang import scheduler as xlang_scheduler

logger = logging.getLogger("spark_dask")

# The worker state in which a worker leaves on purpose: Dask retires it
# (``retire_workers`` moved its data away first). A worker that closes by itself
# (``closing``: its nanny got the Spark task's death signal, it lost its scheduler) or
# whose connection just broke (still ``running``) is lost.
LEAVING = frozenset({"closing_gracefully"})


class Credentials:
    """Each cluster's TLS credentials (``Security.temporary()``: a CA, key and certificate
    of its own), with the next cluster's made ahead in a background thread: making the
    RSA key is on the critical path of a start (docs/benchmarks.md). Each set is handed
    out once; the first start of a process makes its own."""

    def __init__(self):
        self._lock = threading.Lock()
        self._spare: concurrent.futures.Future | None = None

    def take(self) -> Security:
        """A fresh set of credentials (the spare, if one is ready), and a new spare."""
        with self._lock:
            spare, self._spare = self._spare, None
        security = None
        if spare is not None:
            with suppress(Exception):  # a failed spare: make one here, which raises if it fails again
                security = spare.result()
        if security is None:
            security = Security.temporary()
        self._make_spare()
        return security

    def _make_spare(self) -> None:
        future: concurrent.futures.Future = concurrent.futures.Future()

        def make():
            try:
                future.set_result(Security.temporary())
            except BaseException as e:  # noqa: BLE001 - handed to take()
                future.set_exception(e)

        with self._lock:
            if self._spare is not None:
                return
            self._spare = future
        threading.Thread(target=make, name="spark-dask-credentials", daemon=True).start()


credentials = Credentials()


class WorkerWatch(SchedulerPlugin):
    """Wakes the start-up wait whenever a worker joins, leaves or changes status, and
    tells the cluster (which gang's worker it is, which one leaves on purpose).

    Public hooks only: a status change is heard through ``log_event``, which the
    scheduler's event broker calls on every plugin for each event it logs, and
    ``handle_worker_status_change`` logs one (topic: the worker's address, action
    ``worker-status-change``) once ``ws.status`` is the new status (distributed 2024.8
    to 2026.8)."""

    name = "spark-dask-watch"

    def __init__(self, event: asyncio.Event, on_add=None, on_remove=None, on_leaving=None):
        self.event = event
        self.on_add = on_add
        self.on_remove = on_remove
        self.on_leaving = on_leaving
        self.roster = 0  # workers joined and left so far (DriverScheduler.roster)

    def add_worker(self, scheduler, worker):
        self.roster += 1
        self.event.set()
        if self.on_add is not None:
            self.on_add(scheduler, worker)

    def remove_worker(self, scheduler, worker, **kwargs):
        self.roster += 1
        self.event.set()
        if self.on_remove is not None:
            self.on_remove(worker)

    def log_event(self, topic, msg):
        if not isinstance(msg, dict) or msg.get("action") != "worker-status-change":
            return
        self.event.set()
        if msg.get("status") in LEAVING and isinstance(topic, str) and self.on_leaving is not None:
            self.on_leaving(topic)


def task_group(ws) -> tuple:
    """``worker_key`` of Adaptive and of scale-down: the workers of one Spark task (a
    task owning several GPUs starts one per GPU) leave together, so its slot is freed.
    Gangs are numbered per worker group: the group is part of the key."""
    facts = getattr(ws, "extra", {}).get("spark")
    if isinstance(facts, dict) and "gang" in facts:
        return (facts.get("group", "default"), facts.get("gang"), facts.get("partition"))
    return (None, ws.address)


class DriverScheduler:
    """The Dask scheduler of one cluster, in this process, and what ends its workers.

    ``changed`` is set whenever a worker joins, leaves or changes status (the
    start-up wait sleeps on it); :meth:`watch_workers` names who hears of a worker that
    joins, leaves, or is leaving on purpose (its removal is no loss, :mod:`spark_dask.gangs.faults`).
    """

    def __init__(self, changed: asyncio.Event, events=None):
        self.changed = changed
        self.events = events  # where a bound that passed is said (Events), else the log
        self.scheduler: Scheduler | None = None
        self.security: Security | None = None
        self.dashboard_settings: DashboardSettings | None = None
        self._nanny_comms: dict[str, asyncio.Future] = {}  # open_nanny_comms: a call per nanny
        self.lines: dict = {}  # worker name -> the comm of its Spark task's line

    async def start(self, spark, opts: ClusterOptions) -> Scheduler:
        """The refusal of unencrypted Spark RPC, the credentials and the scheduler (with
        its dashboard): everything of a start that needs no facts of the executors."""
        problem = encryption_problem(
            bool(opts.require_encryption),
            bool(opts.tls),
            await blocking(spark_encrypted, spark),
        )
        if problem:
            raise PlanError("spark-dask: " + problem)
        self.security = await blocking(credentials.take) if opts.tls else Security()
        _bind, host = await blocking(driver_host, spark, opts.scheduler_host)
        self.dashboard_settings = databricks.dashboard_settings(spark, host, opts.dashboard_prefix)
        self.scheduler = Scheduler(
            host=host,
            port=0,
            protocol="tls" if opts.tls else "tcp",
            security=self.security,
            dashboard=bool(opts.dashboard),
            dashboard_address=self.dashboard_settings.address,
            http_prefix=self.dashboard_settings.http_prefix,
            plugins=[WorkerWatch(self.changed)],
            validate=False,
        )
        await self.scheduler
        xlang_scheduler.install(self.scheduler)
        self.scheduler.handlers[TASK_LINE] = self.task_line
        return self.scheduler

    def say(self, line: str) -> None:
        """One WARNING line, kept in the cluster's events (``get_logs()["Cluster"]``)."""
        if self.events is not None:
            self.events.warn(line, python_warning=False)
        else:
            logger.warning(line)

    def task_line(self, comm, workers=()) -> None:
        """The :data:`TASK_LINE` handler: a Spark task's line, kept for its ``workers``
        (names) until :meth:`cut_line` (or the scheduler's close) ends it; the lines of
        tasks that ended are forgotten."""
        self.lines = {n: c for n, c in self.lines.items() if not c.closed()}
        for name in workers:
            self.lines[str(name)] = comm

    def cut_line(self, name: str) -> bool:
        """Cut the line of the Spark task of worker ``name``: what is left of its workers'
        process groups after kill-grace is killed (SIGKILL), frozen ones too. False where
        the task has no line open (it could not open one: no ``distributed`` in a custom
        ``worker_command``'s Python, or it ended)."""
        comm = self.lines.pop(name, None)
        if comm is None or comm.closed():
            return False
        comm.abort()
        return True

    def end_frozen(self, name: str) -> str:
        """What :func:`~spark_dask.aio.bounded` says happens to a worker whose nanny did
        not answer: its Spark task's line is cut (:meth:`cut_line`)."""
        if self.cut_line(name):
            return f"its Spark task ends the processes of {name} (SIGKILL after kill-grace)"
        return (
            f"its Spark task has no line to the driver: the processes of {name} stay until the task ends "
            "(a worker_command whose Python lacks distributed?)"
        )

    def watch_workers(self, on_add, on_remove, on_leaving) -> None:
        """Tell ``on_add(scheduler, address)`` and ``on_remove(address)`` of every worker
        that joins or leaves from now on, ``on_leaving(address)`` of one leaving on purpose."""
        watch = self.scheduler.plugins[WorkerWatch.name]
        watch.on_add, watch.on_remove, watch.on_leaving = on_add, on_remove, on_leaving

    def roster(self) -> int:
        """How many times a worker joined or left so far: a watch that keeps what it
        found of every worker looks again when this changed, not every round (the
        decommission watch: each worker's executor, 64 lookups a round at 64 workers)."""
        return self.scheduler.plugins[WorkerWatch.name].roster if self.scheduler is not None else 0

    def running_workers(self) -> int:
        """Workers in status ``running`` (connected and ready). Their status, not the
        scheduler's ``running`` set: the cross-language scheduler takes workers of other
        languages out of that set (no Python task is placed on them), and they count here
        (a start of Node.js workers waited for them in vain). n per call, n² over a start
        of n workers: 4,096 comparisons at 64, microseconds."""
        return sum(ws.status == Status.running for ws in self.scheduler.workers.values())

    def worker_infos(self) -> dict:
        """``{address: info}`` of the workers, as distributed's worker-status subscription
        sends them (``Scheduler.identity()``'s, less ``metrics`` and ``last_seen``)."""
        workers = self.scheduler.identity()["workers"] if self.scheduler is not None else {}
        return {a: {k: v for k, v in info.items() if k not in ("metrics", "last_seen")} for a, info in workers.items()}

    def worker_size(self, of=None) -> tuple[int, int] | None:
        """(threads, memory limit) of the cluster's workers (``of(name)``: those it
        says yes to), the smallest; None without any."""
        workers = self.scheduler.workers.values() if self.scheduler is not None else ()
        sizes = [(ws.nthreads, ws.memory_limit) for ws in workers if ws.nthreads and (of is None or of(str(ws.name)))]
        if not sizes:
            return None
        return min(t for t, _ in sizes), min(m for _, m in sizes)

    def names(self) -> set[str]:
        """Names of the workers that are not leaving (``Cluster.observed``)."""
        if self.scheduler is None:
            return set()
        return {str(ws.name) for ws in self.scheduler.workers.values() if ws.status != Status.closing_gracefully}

    async def remove_lost(self, addresses, why: str) -> list[str]:
        """Take the workers at ``addresses`` out of the scheduler now: Spark lost their
        tasks (a failed barrier stage). A worker whose host is cut off the network stays
        connected in the scheduler's eyes, silent, until distributed's worker-ttl (5
        minutes) or TCP gives up, and keeps being handed tasks; this is distributed's own
        ``Scheduler.remove_worker``, as for an unresponsive worker (its tasks recomputed
        or erred; ``close``: it is told to close, and shuts down by itself if it ever
        reaches the scheduler again). Returns the addresses removed (``why`` names the
        stimulus)."""
        scheduler = self.scheduler
        removed = []
        for address in addresses:
            if scheduler is not None and address in scheduler.workers:
                await scheduler.remove_worker(address, stimulus_id=f"spark-dask-lost-{why}-{time.time()}")
                removed.append(address)
        return removed

    def err_waiting_tasks(self, msg: str) -> None:
        """Every task waiting for a worker (queued or unrunnable) errs with ``msg``."""
        scheduler = self.scheduler
        exception = dumps_pickle(ClusterError(msg))
        stimulus = f"spark-dask-failed-{time.time()}"
        recommendations: dict = {}
        for ts in [*scheduler.unrunnable, *scheduler.queued]:
            if ts.state in ("no-worker", "queued"):
                recommendations.update(
                    scheduler.transition(
                        ts.key,
                        "erred",
                        exception=exception,
                        cause=ts.key,
                        stimulus_id=stimulus,
                    )
                )
        scheduler.transitions(recommendations, stimulus_id=stimulus)

    def open_nanny_comms(self, nannies) -> None:
        """Open the scheduler's connection to each nanny when its worker joins, so that
        closing the cluster finds it in the scheduler's connection pool (the TLS
        handshake is otherwise part of the teardown; docs/benchmarks.md)."""
        for address in nannies:
            if address and address not in self._nanny_comms:
                job = asyncio.ensure_future(self.scheduler.rpc(address).identity())
                job.add_done_callback(lambda f: f.cancelled() or f.exception())
                self._nanny_comms[address] = job

    async def terminate_nanny(self, address: str, fast: bool = False) -> None:
        """End one worker through its nanny; a closed comm is success (the nanny closes
        its end before it answers). ``fast``: the nanny runs spark-dask's preload, whose
        ``spark_dask_close`` stops the worker and ends the process at once."""
        opening = self._nanny_comms.pop(address, None)
        if opening is not None and not opening.done():  # its comm, once open, serves the close
            await asyncio.wait([opening], timeout=1.0)
        with suppress(Exception):
            if fast:
                await self.scheduler.rpc(address).spark_dask_close(reason="spark-dask cluster closed")
            else:
                await self.scheduler.rpc(address).terminate(reason="spark-dask cluster closed")

    async def close(self, timeout: float) -> None:
        """Nannies first (each stops its worker process and exits, so its Spark task
        returns), then the scheduler, which also closes any worker without a nanny.

        Each nanny gets ``timeout`` seconds to answer (all at once); one that does not
        (frozen) is said and its worker ended through its Spark task's line. The
        scheduler's own close gets ``timeout`` seconds too (a comm to a frozen worker
        whose buffers are full never flushes); past that its comms are aborted."""
        if self.scheduler is None:
            return
        nannies = [
            (str(ws.name), ws.nanny, bool((ws.extra.get("spark") or {}).get("fast_close")))
            for ws in self.scheduler.workers.values()
            if ws.nanny
        ]

        async def end(name: str, nanny: str, fast: bool) -> None:
            await bounded(
                self.terminate_nanny(nanny, fast),
                timeout,
                f"the nanny of Dask worker {name} ({nanny}) to end it as the cluster closes",
                lambda: self.end_frozen(name),
                self.say,
            )

        await asyncio.gather(*(end(*n) for n in nannies), return_exceptions=True)
        scheduler = self.scheduler
        with suppress(Exception):
            if not await bounded(
                scheduler.close(reason="spark-dask cluster closed"),
                timeout,
                "the Dask scheduler to close",
                "its connections are dropped",
                self.say,
            ):
                self._drop(scheduler)

    def _drop(self, scheduler) -> None:
        """The scheduler's close did not finish: drop its connections (workers, clients,
        the tasks' lines) and stop its listeners."""
        for name in list(self.lines):
            self.cut_line(name)
        for bcomm in list(scheduler.stream_comms.values()) + list(scheduler.client_comms.values()):
            with suppress(Exception):
                bcomm.abort()
        with suppress(Exception):
            scheduler.stop()
