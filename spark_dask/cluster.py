"""``SparkCluster``: a Dask cluster whose scheduler runs on the Spark driver and whose
workers run inside one Spark barrier stage. ``start()``: the same, as a Client."""

from __future__ import annotations

import asyncio
import atexit
import datetime
import json
import logging
import sys
import threading
import time
import uuid
import warnings
import weakref

import distributed
from contextlib import ExitStack, suppress

from dask.utils import parse_bytes, parse_timedelta
from dask.widgets import get_template
from distributed import Client, Scheduler
from distributed.core import Status, rpc
from distributed.deploy.cluster import Cluster
from distributed.objects import SchedulerInfo
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.security import Security
from distributed.utils import Log, Logs, silence_logging_cmgr

from spark_dask import config, rapids, signals, widget
from spark_dask.databricks import DashboardSettings, dashboard_settings
from spark_dask.launcher import GangLauncher, session_closed, summarize_spark_error
from spark_dask.plan import (
    GPU_MODES,
    PlanError,
    check_request,
    encryption_problem,
    hog_warning,
    memory_problem,
    plan_gang,
    starved_stages,
)
from spark_dask.session import (
    active_session,
    cluster_facts,
    connect_session_problem,
    driver_host,
    is_connect,
    is_stopped,
    spark_encrypted,
)
from spark_dask.worker_cli import TaskWarnings, check_worker_options

logger = logging.getLogger("spark_dask")

_live_clusters: weakref.WeakSet = weakref.WeakSet()
_atexit_registered = False


async def _blocking(fn, *args):
    """Run a blocking call (py4j, thread joins) in a thread of its own.

    Not ``asyncio.to_thread``: its executor refuses work once the interpreter is
    shutting down, which is exactly when the atexit hook has to close clusters.
    """
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def run():
        try:
            result = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            error = e  # `e` is unbound when the except clause ends; the callback runs later
            loop.call_soon_threadsafe(lambda: future.done() or future.set_exception(error))
        else:
            loop.call_soon_threadsafe(lambda: future.done() or future.set_result(result))

    threading.Thread(target=run, name="spark-dask-blocking", daemon=True).start()
    return await future


def _task_request(plan, facts) -> str:
    """What each barrier task asks Spark for, as the widget and logs show it."""
    if plan.uses_profile:
        gpus = f", gpu={plan.task_gpus:g}" if plan.task_gpus else (", no GPU" if plan.gpu_mode else "")
        return f"cpus={plan.task_cpus or facts.task_cpus}{gpus}"
    gpus = f", gpu={facts.task_gpus * plan.workers_per_task:g}" if facts.task_gpus else ""
    return f"cpus={facts.task_cpus}{gpus} (default profile)"


def _by_host(entries) -> dict[str, list[list[str]]]:
    """``{host: [addresses of each executor on it]}`` from ``ClusterFacts.gpu_addresses``."""
    out: dict[str, list[list[str]]] = {}
    for host, addresses in entries:
        out.setdefault(host, []).append(list(addresses))
    return out


class SparkDaskError(RuntimeError):
    """The Dask cluster could not start (or broke); the message says why."""


def _close_all_at_exit() -> None:
    for cluster in list(_live_clusters):
        with suppress(Exception):
            cluster.close(timeout=30)


def _register_atexit() -> None:
    # Registered on first use, after pyspark's own exit hooks: handlers run last-in
    # first-out, so clusters close while the SparkContext still works.
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_close_all_at_exit)
        _atexit_registered = True


class _WorkerWatch(SchedulerPlugin):
    """Wakes the start-up wait whenever a worker joins or leaves."""

    name = "spark-dask-watch"

    def __init__(self, event: asyncio.Event):
        self.event = event

    def add_worker(self, scheduler, worker):
        self.event.set()

    def remove_worker(self, scheduler, worker, **kwargs):
        self.event.set()


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return type(shell).__name__ in ("ZMQInteractiveShell", "DatabricksShell")


class _Progress:
    """"2/4 Dask workers connected": a line per change in a terminal, one updated
    line in a notebook."""

    def __init__(self, enabled: bool, total: int):
        self.enabled = enabled
        self.total = total
        self.last = None
        self.handle = None

    def update(self, n: int) -> None:
        if not self.enabled or n == self.last:
            return
        self.last = n
        text = f"spark-dask: {n}/{self.total} Dask workers connected"
        if _in_notebook():
            from IPython.display import display

            if self.handle is None:
                self.handle = display({"text/plain": text}, raw=True, display_id=True)
            else:
                self.handle.update({"text/plain": text}, raw=True)
        else:
            print(text, file=sys.stderr, flush=True)


class SparkCluster(Cluster):
    """A Dask cluster inside a running Spark application.

    The scheduler runs in this (driver) process; the workers run in one Spark
    barrier-mode stage, one Dask worker per executor GPU (dask-cuda) or one per
    executor on CPU clusters. The stage holds its task slots while the cluster runs
    and ends when the cluster closes.

    Parameters
    ----------
    spark : SparkSession, optional
        Classic or Spark Connect session; defaults to the active session (looked up now).
        With Spark Connect the scheduler runs in this Python process, not on the
        Spark driver.
    n_workers : int, optional
        Number of Dask workers. Default: every executor GPU, or one per executor.
    worker : {"auto", "cuda", "cpu"}
        ``auto`` starts dask-cuda workers when the Spark tasks own GPUs.
    threads_per_worker : int, optional
        Default: the task's CPUs (the executor's cores when it hosts one gang task).
    memory_limit : int or str, optional
        ``"auto"``: host memory left after the executor JVMs, split over its workers.
    worker_options : dict, optional
        Extra worker command-line options, e.g. ``{"rmm_pool_size": "10GB"}``.
    worker_command : str or list, optional
        Command template replacing the default worker command (see the docs).
    timeout : str or float, optional
        How long to wait for every worker before failing (default ``180s``).
    tls : bool, optional
        Per-cluster TLS credentials (default True). False: plain TCP, with a warning.
    dashboard : bool, optional
        Serve the scheduler dashboard on a free port of the driver address (on
        Databricks: at the root of a free port in 9000-9999, linked through the driver
        proxy; see ``spark-dask.dashboard-prefix``).
    progress : bool, optional
        Show "n/N Dask workers connected" while starting.
    task_profile : {"auto", True, False}, optional
        Ask Spark for a stage-level task resource profile for the gang.
    gpu_mode : {"auto", "shared", "exclusive"}, optional
        GPU executors: ``shared`` runs the Dask workers beside Spark's own GPU tasks
        (the RAPIDS Accelerator), ``exclusive`` holds each worker's GPU whole in Spark.
        ``auto``: shared when Spark's task GPU amount is fractional or the RAPIDS SQL
        plugin is on (see the RAPIDS page of the docs).
    scheduler_host : str, optional
        Address of this machine the executors use to reach the scheduler (default:
        the Spark driver's address; with Spark Connect, this machine's address on the
        route to the Connect server). The scheduler listens on it.
    env : dict, optional
        Environment variables for the worker processes.
    require_encryption : bool, optional
        Refuse to start unless Spark encrypts its own RPC (``spark.network.crypto.enabled``
        or ``spark.ssl.enabled``), which carries the cluster's TLS key to the executors.
    relaunch_attempts : int, optional
        How often a failed barrier stage (a lost executor) is relaunched while the
        cluster runs (default 3).
    silence_logs : str or False, optional
        Level below which the in-process scheduler's log lines are not printed
        (default ``"warning"``, as LocalCluster); False prints everything.
    asynchronous : bool
        Use ``await SparkCluster(..., asynchronous=True)`` inside an event loop.

    Examples
    --------
    >>> cluster = SparkCluster(spark, n_workers=4)       # doctest: +SKIP
    >>> client = cluster.get_client()                    # doctest: +SKIP
    >>> cluster.close()                                  # doctest: +SKIP
    """

    _supports_scaling = False
    # Seconds close() lets the barrier job end by itself before cancelling it; None: the
    # close-timeout option (a closing signal handler sets a shorter one).
    close_grace: float | None = None
    # How the dashboard is served and linked (Databricks driver proxy); set in _start.
    _dashboard: DashboardSettings | None = None

    def __init__(
        self,
        spark=None,
        *,
        n_workers: int | None = None,
        worker: str | None = None,
        threads_per_worker: int | None = None,
        memory_limit: int | str | None = None,
        worker_options: dict | None = None,
        worker_command: str | list | None = None,
        timeout: str | float | None = None,
        tls: bool | None = None,
        dashboard: bool | None = None,
        progress: bool | None = None,
        task_profile: bool | str | None = None,
        gpu_mode: str | None = None,
        scheduler_host: str | None = None,
        env: dict | None = None,
        silence_logs: str | int | bool | None = None,
        require_encryption: bool | None = None,
        relaunch_attempts: int | None = None,
        asynchronous: bool = False,
        loop=None,
        name: str | None = None,
        quiet: bool = False,
    ):
        self.spark = active_session(spark)
        self.options = self._resolve_options(
            n_workers=n_workers,
            worker=worker,
            threads_per_worker=threads_per_worker,
            memory_limit=memory_limit,
            worker_options=worker_options,
            worker_command=worker_command,
            timeout=timeout,
            tls=tls,
            dashboard=dashboard,
            progress=progress,
            task_profile=task_profile,
            gpu_mode=gpu_mode,
            scheduler_host=scheduler_host,
            silence_logs=silence_logs,
            require_encryption=require_encryption,
            relaunch_attempts=relaunch_attempts,
        )
        if not self.options["tls"]:
            warnings.warn(
                "spark-dask: TLS is off (tls=False): anyone who can reach the driver's "
                "scheduler port can run code on this cluster",
                stacklevel=3 if type(self) is SparkCluster else 2,
            )
        self.env = dict(env or {})
        self.id = uuid.uuid4().hex[:10]
        self.tag = f"spark-dask-{self.id}"
        super().__init__(asynchronous=asynchronous, loop=loop, name=name or self.tag, quiet=quiet)
        self.scheduler: Scheduler | None = None
        self.launcher: GangLauncher | None = None
        self.gang = None
        self.facts = None
        self.security: Security | None = None
        self.task_rows: list[dict] = []
        self.timings: dict[str, float] = {}
        self._changed = asyncio.Event()
        self._start_task: asyncio.Task | None = None
        self._watch_task: asyncio.Task | None = None  # stage starvation / session stop
        self._spec: dict | None = None
        self.relaunches = 0
        self.gang_tags: list[str] = []  # job group / tag of every barrier stage submitted
        self.gang_status = "not started"
        self._torn_down = False
        self._connected = False
        self._exit_stack = ExitStack()
        if self.options["silence_logs"]:
            # Like LocalCluster: the scheduler runs in this process; keep its INFO lines
            # out of the notebook. get_logs() still has them.
            self._exit_stack.enter_context(silence_logging_cmgr(self.options["silence_logs"]))
        _live_clusters.add(self)
        _register_atexit()
        if not self.asynchronous:
            self._loop_runner.start()
            try:
                self.sync(self._start)
            except BaseException:
                # Also on KeyboardInterrupt: the start coroutine runs on in the loop
                # thread until close() cancels it and tears down what it made.
                with suppress(Exception):
                    self.close(timeout=60)
                raise
            self._register_signals()

    # ------------------------------------------------------------------ options
    @staticmethod
    def _resolve_options(**given) -> dict:
        opts = {k: config.get(k.replace("_", "-"), v) for k, v in given.items()}
        timeouts = ("close-timeout", "death-timeout", "executor-wait", "kill-grace", "slot-wait", "connect-timeout")
        for key in timeouts:
            opts[key.replace("-", "_")] = parse_timedelta(config.get(key))
        try:
            opts["timeout"] = parse_timedelta(opts["timeout"])
        except (ValueError, KeyError, TypeError) as e:
            raise PlanError(f"timeout must be seconds or a time string like '3m', got {given['timeout']!r}") from e
        tpw = opts["threads_per_worker"]
        if tpw is not None and (isinstance(tpw, bool) or not isinstance(tpw, int) or tpw < 1):
            raise PlanError(f"threads_per_worker must be a positive integer, got {tpw!r}")
        mem = opts["memory_limit"]
        if mem != "auto":
            try:
                opts["memory_limit"] = parse_bytes(mem) if isinstance(mem, str) else int(mem)
            except (ValueError, TypeError) as e:
                raise PlanError(
                    f"memory_limit must be 'auto', a number of bytes or a size like '8GiB', got {mem!r}"
                ) from e
            if opts["memory_limit"] <= 0:
                raise PlanError(f"memory_limit must be positive, got {mem!r}")
        if opts["worker_options"] is not None and not isinstance(opts["worker_options"], dict):
            raise PlanError(f"worker_options must be a dict, got {type(opts['worker_options']).__name__}")
        ra = opts["relaunch_attempts"]
        if isinstance(ra, bool) or not isinstance(ra, int) or ra < 0:
            raise PlanError(f"relaunch_attempts must be an integer >= 0, got {ra!r}")
        if opts["task_profile"] not in ("auto", True, False):
            raise PlanError(f"task_profile must be 'auto', True or False, got {opts['task_profile']!r}")
        if opts["gpu_mode"] not in GPU_MODES:
            raise PlanError(f"gpu_mode must be one of {GPU_MODES}, got {opts['gpu_mode']!r}")
        return opts

    # ------------------------------------------------------------------ lifecycle
    def __await__(self):
        async def _():
            if self.status == Status.created:
                await self._start()
            return self

        return _().__await__()

    async def _start(self):
        self.status = Status.starting
        self._start_task = asyncio.current_task()
        opts = self.options
        t0 = time.monotonic()
        try:
            if is_connect(self.spark):
                problem = await _blocking(connect_session_problem, self.spark, opts["scheduler_host"])
                if problem:
                    raise PlanError(problem)
            self.facts = await _blocking(
                cluster_facts, self.spark, opts["executor_wait"], opts["n_workers"]
            )
            self.timings["facts"] = time.monotonic() - t0
            self.gang = plan_gang(
                self.facts, opts["n_workers"], opts["worker"], opts["task_profile"], opts["gpu_mode"]
            )
            check_request(self.facts, opts["threads_per_worker"])
            opts["worker_options"] = check_worker_options(opts["worker_options"], self.gang.kind, opts["worker_command"])
            self._check_memory_here()
            for note in self.gang.notes + ((hog_warning(self.facts, self.gang),) if not self.quiet else ()):
                if note:
                    self._warn(note)
            problem = encryption_problem(
                bool(opts["require_encryption"]),
                bool(opts["tls"]),
                await _blocking(spark_encrypted, self.spark),
            )
            if problem:
                raise PlanError("spark-dask: " + problem)
            self.security = Security.temporary() if opts["tls"] else Security()
            bind, host = await _blocking(driver_host, self.spark, opts["scheduler_host"])
            self._dashboard = dashboard_settings(self.spark, host, config.get("dashboard-prefix"))
            self.scheduler = Scheduler(
                host=host,
                port=0,
                protocol="tls" if opts["tls"] else "tcp",
                security=self.security,
                dashboard=bool(opts["dashboard"]),
                dashboard_address=self._dashboard.address,
                http_prefix=self._dashboard.http_prefix,
                plugins=[_WorkerWatch(self._changed)],
                validate=False,
            )
            await self.scheduler
            self._watch_worker_status_changes()
            self.scheduler_comm = rpc(
                self.scheduler.address,
                connection_args=self.security.get_connection_args("client"),
            )
            await super()._start()
            self.status = Status.starting
            self.timings["scheduler"] = time.monotonic() - t0

            t_submit = time.monotonic()
            self._launch(self.tag)
            await self._wait_for_gang(opts["timeout"])
            now = time.monotonic()
            self.timings["workers"] = now - t_submit
            self.timings["start"] = now - t0
            self._connected = True
            self.gang_status = "running"
            self.status = Status.running
            if not self.launcher.connect:
                self._watch_task = asyncio.ensure_future(self._watch_starved_stages())
            else:
                # Connect: a stopped session does not end the collecting thread (the client
                # keeps retrying), so watch the session itself.
                self._watch_task = asyncio.ensure_future(self._watch_session_stop())
            self._register_signals()  # a no-op outside the main thread (sync start: __init__)
            self._log(
                f"spark-dask: {self.gang.n_workers} {self.gang.kind} workers connected to "
                f"{self.scheduler.address} in {self.timings['start']:.1f}s (Spark job tag {self.tag})"
            )
        except BaseException:
            await self._teardown(graceful=False)
            raise

    def _register_signals(self) -> None:
        signals.register(self, signals.close_on_sigterm(config.get("close-on-sigterm")))

    def _launch(self, tag: str) -> None:
        """Submit a barrier stage running the planned workers (first launch or relaunch)."""
        if self._spec is None:  # the same for every relaunch: built (and checked) once
            self._spec = self._task_spec()
        self.gang_tags.append(tag)
        self.launcher = GangLauncher(
            self.spark,
            self.gang,
            self._spec,
            tag=tag,
            description=f"spark-dask: {self.gang.n_workers} Dask workers for {self.scheduler.address}",
            on_done=self._gang_ended_threadsafe,
        )
        self.gang_status = "starting"
        self.launcher.start()

    def _task_spec(self) -> dict:
        opts, plan, sec = self.options, self.gang, self.security
        tls = None
        if opts["tls"]:
            tls = {"ca": sec.tls_ca_file, "cert": sec.tls_worker_cert, "key": sec.tls_worker_key}
        requires = [] if opts["worker_command"] else ["distributed"]
        if plan.kind == "cuda" and not opts["worker_command"]:
            requires.append("dask_cuda")
        # warnings the tasks attach to their workers (rmm missing, distributed patch level)
        self.scheduler.add_plugin(TaskWarnings(self._warn))
        return {
            "cluster_id": self.tag,
            "scheduler_address": self.scheduler.address,
            "tls": tls,
            "kind": plan.kind,
            "pinned": plan.pinned,
            # allGather only when tasks may be given the same GPU (fractional amounts, no
            # profile) yet each must hold its own; a shared gang splits the executors'
            # GPUs by the placement that getTaskInfos() gives every task.
            "gather": plan.gpu_mode == "exclusive" and not plan.uses_profile and self.facts.task_gpus < 1,
            "gpu_mode": plan.gpu_mode,
            "executor_gpus": _by_host(self.facts.gpu_addresses),
            "gpus_per_executor": int(self.facts.executor_gpus),
            "workers_per_task": plan.workers_per_task,
            "multiprocessing_method": config.get("multiprocessing-method"),
            "n_workers": plan.n_workers,
            "requires": requires,
            "threads_per_worker": opts["threads_per_worker"],
            "memory_limit": opts["memory_limit"],
            "executor_cores": self.facts.executor_cores,
            "executor_memory": self.facts.executor_memory,
            "worker_options": opts["worker_options"] or {},
            "worker_command": opts["worker_command"],
            "death_timeout": opts["death_timeout"],
            "kill_grace": opts["kill_grace"],
            "distributed_version": distributed.__version__,
            "connect_timeout": opts["connect_timeout"],
            "env": self.env,
            "log_lines": 30,
            "rmm": self._rmm_spec() if plan.kind == "cuda" else None,
        }

    def _rmm_spec(self) -> dict:
        """RMM pool sizing for dask-cuda workers (``spark-dask.rapids.*``); warns when the
        Spark RAPIDS plugin's own pool would leave too little GPU memory for them."""
        from spark_dask.session import conf as spark_conf

        share = float(config.get("rapids.dask-fraction"))
        for msg in rapids.check_rapids(lambda key: spark_conf(self.spark, key), share):
            self._warn(msg)
        pool = config.get("rapids.rmm-pool-size")
        if pool is False:
            pool = None
        elif pool not in (None, "auto"):
            pool = parse_bytes(pool) if isinstance(pool, str) else int(pool)
        spill = config.get("rapids.spill-fraction")
        return {
            "pool": pool,
            "reserve": parse_bytes(str(config.get("rapids.rmm-reserve"))),
            "fraction": float(config.get("rapids.rmm-fraction")),
            "spill_fraction": None if spill in (None, False) else float(spill),
            # beside Spark's own GPU tasks an auto-sized pool leaves them the rest
            "share": share if self.gang.gpu_mode == "shared" else None,
        }

    def _watch_worker_status_changes(self) -> None:
        """Wake the start-up wait when a worker turns from ``init`` to ``running``
        (the scheduler has no plugin hook for that, only the stream handler)."""
        handlers = self.scheduler.stream_handlers
        original = handlers["worker-status-change"]

        def status_changed(*args, **kwargs):
            try:
                return original(*args, **kwargs)
            finally:
                self._changed.set()

        handlers["worker-status-change"] = status_changed

    def _running_workers(self) -> int:
        return sum(ws.status == Status.running for ws in self.scheduler.workers.values())

    async def _wait_for_gang(self, timeout: float) -> None:
        """Return once every planned worker is connected; fail fast when the stage fails."""
        progress = _Progress(bool(self.options["progress"]) and not self.quiet, self.gang.n_workers)
        submitted = time.monotonic()
        deadline = submitted + timeout
        slots_seen = self.launcher.connect  # no stage information under Spark Connect
        while True:
            self._changed.clear()
            if self.launcher.done.is_set():
                raise self._gang_error("the Spark barrier stage ended before the workers connected")
            n = self._running_workers()
            progress.update(n)
            if n >= self.gang.n_workers:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SparkDaskError(
                    f"spark-dask: only {n} of {self.gang.n_workers} Dask workers connected to "
                    f"{self.scheduler.address} within {timeout:g}s. The Spark barrier stage "
                    f"(job group {self.tag}) is still running: look at its tasks in the Spark UI "
                    f"and at the executors' logs; raise the limit with timeout=... if the "
                    f"executors are just slow. Everything was cancelled."
                )
            if not slots_seen and time.monotonic() - submitted >= self.options["slot_wait"]:
                slots_seen = await self._check_gang_got_slots()
            wake = remaining if slots_seen else min(remaining, 1.0)
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wake)

    async def _check_gang_got_slots(self) -> bool:
        """True once a gang task runs; raises when the stage still has no slot at all.

        Spark checks a barrier stage against the application's *total* slots; when
        they exist but are busy (another spark-dask cluster, a long Spark job), the
        stage waits silently. Fail now instead, saying who holds the slots.
        """
        try:
            stages, ours = await _blocking(self.launcher.stage_snapshot)
        except Exception:
            return True
        if any(st["stageId"] in ours and st["numActiveTasks"] > 0 for st in stages) or self._running_workers():
            return True
        if not ours:  # the job is not submitted yet
            return False
        others = [
            f"stage {st['stageId']} '{st['name']}' ({st['numActiveTasks']} running tasks)"
            for st in stages
            if st["stageId"] not in ours and st["numActiveTasks"] > 0
        ]
        raise SparkDaskError(
            f"spark-dask: the Spark barrier stage of {self.gang.n_tasks} tasks got no free task "
            f"slots within {self.options['slot_wait']:g}s: the application's {self.facts.slots} slots "
            f"are busy" + (f" with {', '.join(others)}" if others else "")
            + ". Close the other spark-dask cluster or wait for those jobs, start with fewer "
            "workers (n_workers=...), or add executors. Nothing was left running."
        )

    async def _watch_starved_stages(self, every: float = 2.0, patience: float = 10.0) -> None:
        """Warn when a Spark stage waits for task slots that the gang holds.

        A Spark job run inside the ``with`` block needs free task slots; when the gang
        holds them all it waits until the Dask cluster closes. That must not be silent.
        """
        first_seen: dict[int, float] = {}
        warned: set[int] = set()
        while self.status == Status.running:
            try:
                stages, ours = await _blocking(self.launcher.stage_snapshot)
            except Exception:  # the context is stopping
                return
            now = time.monotonic()
            starved = {st["stageId"]: st for st in starved_stages(stages, ours)}
            for sid in list(first_seen):
                if sid not in starved:
                    del first_seen[sid]
            for sid, st in starved.items():
                first_seen.setdefault(sid, now)
                if sid not in warned and now - first_seen[sid] >= patience:
                    warned.add(sid)
                    self._warn(
                        f"spark-dask: Spark stage {sid} ({st['name']}) has waited "
                        f"{now - first_seen[sid]:.0f}s for a free task slot: the Dask cluster "
                        f"{self.tag} holds {self.gang.n_tasks} barrier task slots of "
                        f"{self.facts.slots}. It will run once the cluster closes (Ctrl-C / "
                        f"interrupting the cell cancels it); to run Spark and Dask side by side, "
                        f"start the cluster with fewer workers (n_workers=...) or give the "
                        f"executors more cores.",
                        python_warning=False,
                    )
            await asyncio.sleep(every)

    async def _watch_session_stop(self, every: float = 1.0) -> None:
        """Close the cluster when its (Spark Connect) session is stopped."""
        while self.status == Status.running:
            if await _blocking(is_stopped, self.spark):
                self._log("spark-dask: the SparkSession was stopped; closing the Dask cluster")
                asyncio.ensure_future(self._close())  # not awaited here: _teardown cancels us
                return
            await asyncio.sleep(every)

    def _warn(self, msg: str, python_warning: bool = True) -> None:
        """Tell the user once: a Python warning (start-up decisions) or a log record
        (events while the cluster runs); kept in ``get_logs()["Cluster"]`` either way."""
        self._cluster_manager_logs.append((datetime.datetime.now(), msg))
        if python_warning:
            warnings.warn(msg, stacklevel=2)
        else:
            logger.warning(msg)

    def _check_memory_here(self) -> None:
        """A memory limit above this host's memory, refused before anything is submitted
        where the executors run on this host (local and local-cluster masters); elsewhere
        each task checks its own host."""
        limit = self.options["memory_limit"]
        if limit == "auto" or not self.facts.master.startswith("local"):
            return
        from spark_dask.task import _host_memory

        problem = memory_problem(int(limit), _host_memory())
        if problem:
            raise PlanError("spark-dask: " + problem)

    def _gang_error(self, what: str) -> SparkDaskError:
        err = self.launcher.error
        if err is None:
            detail = "the tasks returned: " + json.dumps(self.launcher.rows)[:2000]
        else:
            detail = summarize_spark_error(err)
        return SparkDaskError(f"spark-dask: {what}.\n{detail}")

    def _gang_ended_threadsafe(self, launcher: GangLauncher) -> None:
        """Launcher thread: the barrier stage ended (normally at close, or not)."""
        self.task_rows = launcher.rows
        with suppress(RuntimeError):  # loop already closed
            self.loop.add_callback(self._gang_ended, launcher)

    async def _gang_ended(self, launcher: GangLauncher) -> None:
        self._changed.set()
        if self.status in (Status.closing, Status.closed) or not self._connected:
            return
        if launcher is not self.launcher:  # an earlier attempt, already replaced
            return
        if session_closed(launcher.error) or await _blocking(is_stopped, self.spark):
            self._log("spark-dask: the SparkSession was stopped; closing the Dask cluster")
            await self._close()
            return
        if launcher.error is None:
            self.gang_status = "ended: the workers were closed"
            self._log("spark-dask: the Spark barrier stage ended: its Dask workers were closed")
            return
        reason = summarize_spark_error(launcher.error)
        if self.relaunches >= self.options["relaunch_attempts"]:
            self.gang_status = f"failed: {reason}"
            msg = (
                f"spark-dask: the Spark barrier stage failed and {self.relaunches} relaunches are "
                f"used up; the cluster has no workers. Close it and start a new one. Cause: {reason}"
            )
            logger.error(msg)
            self._log(msg)
            return
        self.relaunches += 1
        msg = (
            f"spark-dask: the Spark barrier stage failed ({reason}); relaunching the "
            f"{self.gang.n_workers} Dask workers (relaunch {self.relaunches} of "
            f"{self.options['relaunch_attempts']})"
        )
        logger.warning(msg)
        self._log(msg)
        self._launch(f"{self.tag}-r{self.relaunches}")
        self.gang_status = f"relaunching ({self.relaunches})"
        asyncio.ensure_future(self._mark_running_when_full())

    async def _mark_running_when_full(self) -> None:
        launcher = self.launcher
        while self.status == Status.running and launcher is self.launcher and not launcher.done.is_set():
            if self._running_workers() >= self.gang.n_workers:
                self.gang_status = "running"
                self._log(f"spark-dask: all {self.gang.n_workers} Dask workers are back")
                return
            self._changed.clear()
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), 5)

    async def _close(self):
        if self.status == Status.closed:
            return
        task = self._start_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            with suppress(BaseException):
                await task
        await self._teardown(graceful=self._connected)

    async def _teardown(self, graceful: bool) -> None:
        """Close workers, let the barrier stage end (or cancel it), close the scheduler."""
        if self._torn_down:
            return
        self._torn_down = True
        t0 = time.monotonic()
        self.status = Status.closing
        if self._watch_task is not None:
            self._watch_task.cancel()
        with suppress(Exception):
            await Cluster._close(self)
        self.status = Status.closing
        handoff = getattr(self, "_handoff", None)
        if handoff is not None and self.scheduler is not None:
            # the files of to_dask / to_spark transfers, while the workers can remove them
            with suppress(Exception):
                await asyncio.wait_for(handoff.close(), self.options["close_timeout"])
        if self.scheduler is not None:
            # Nannies first: each stops its worker process and exits, so the Spark task
            # returns. Then the scheduler, which also closes any worker without a nanny.
            nannies = [ws.nanny for ws in self.scheduler.workers.values() if ws.nanny]
            with suppress(Exception):
                await asyncio.wait_for(
                    asyncio.gather(*(self._terminate_nanny(a) for a in nannies)),
                    self.options["close_timeout"],
                )
            with suppress(Exception):
                await self.scheduler.close(reason="spark-dask cluster closed")
        self.timings["close_scheduler"] = time.monotonic() - t0
        launcher = self.launcher
        if launcher is not None:
            ended = launcher.done.is_set()
            stopped = not ended and await _blocking(is_stopped, self.spark)
            if stopped:
                # No Spark to wait for or to cancel through: the workers were terminated
                # above; the daemon thread of the collect ends with the client.
                ended = await _blocking(launcher.join, 2)
            else:
                if not ended and graceful:
                    grace = self.options["close_timeout"] if self.close_grace is None else self.close_grace
                    ended = await _blocking(launcher.join, grace)
                if not ended:
                    await _blocking(launcher.cancel)
                    ended = await _blocking(launcher.join, 60)
            if not ended and not stopped:  # pragma: no cover - Spark did not end its own job
                logger.error("spark-dask: the Spark barrier job %s did not end after cancel", self.tag)
            self.task_rows = launcher.rows
        self.timings["close"] = time.monotonic() - t0
        self._exit_stack.close()
        self.status = Status.closed
        _live_clusters.discard(self)
        signals.unregister(self)

    async def _terminate_nanny(self, address: str) -> None:
        # The nanny closes its end before it answers: a closed comm is success here.
        with suppress(Exception):
            await self.scheduler.rpc(address).terminate(reason="spark-dask cluster closed")

    def get_logs(self, cluster=True, scheduler=True, workers=True):
        """Logs of the cluster manager, scheduler, workers and the Spark tasks.

        ``"Spark tasks"`` has a line per barrier task: its placement (executor id,
        host, GPUs) and status, with its Dask workers. While the stage runs that comes
        from the workers' Spark facts; after it ended, from the tasks' status rows (exit
        codes and log tails of every worker), which remain available after ``close()``.
        """
        if self.status == Status.closed:
            logs = Logs()
            if cluster:
                logs["Cluster"] = Log("\n".join(line for _, line in self._cluster_manager_logs))
                logs["Spark tasks"] = Log(self._task_log())
            return logs
        return super().get_logs(cluster=cluster, scheduler=scheduler, workers=workers)

    def close(self, timeout: float | None = None):
        """Close workers, the Spark barrier job and the scheduler. Idempotent."""
        if self.status == Status.closed:
            return super().close(timeout=timeout)
        out = super().close(timeout=timeout)
        if not self.asynchronous:
            with suppress(Exception):
                self._loop_runner.stop()
        signals.unregister(self)  # from the main thread the previous handlers come back
        return out

    # ------------------------------------------------------------------ contract
    def scale(self, n: int) -> None:
        raise NotImplementedError(
            "A SparkCluster is one fixed-size Spark barrier stage and cannot scale: close it "
            f"and start a new one with n_workers={n}."
        )

    def adapt(self, *args, **kwargs):
        raise NotImplementedError(
            "A SparkCluster is one fixed-size Spark barrier stage and cannot adapt: "
            "choose n_workers when starting it."
        )

    async def _get_logs(self, cluster=True, scheduler=True, workers=True):
        try:
            logs = await super()._get_logs(cluster=cluster, scheduler=scheduler, workers=workers)
        except Exception:  # scheduler already closed: what the cluster manager kept
            logs = Logs()
            if cluster:
                logs["Cluster"] = Log("\n".join(line for _, line in self._cluster_manager_logs))
        if cluster:
            logs["Spark tasks"] = Log(self._task_log())
        return logs

    def _task_log(self) -> str:
        return widget.task_log(f"Spark barrier stage {self.tag}: {self.gang_status}", self._spark_tasks()[0])

    def _spark_tasks(self) -> tuple[list[dict], str]:
        """Every barrier task's placement and status, and where that comes from."""
        launcher = self.launcher
        if launcher is not None and launcher.running and self.gang is not None and self.status != Status.closed:
            workers = dict((self.scheduler_info or {}).get("workers", {}))
            scheduler = self.scheduler
            status = {}
            if scheduler is not None:
                for address in workers:
                    ws = scheduler.workers.get(address)
                    status[address] = ws.status.name if ws is not None else "gone"
            return widget.live_tasks(self.gang.n_tasks, workers, status), "running"
        if self.task_rows:
            return widget.ended_tasks(self.task_rows), "ended"
        return [], "not running"

    @property
    def dashboard_link(self) -> str:
        """The dashboard's status page; on Databricks the driver-proxy URL."""
        settings = self._dashboard
        if settings is None or (settings.databricks is None and not settings.prefix):
            return super().dashboard_link
        try:
            port = self.scheduler_info["services"]["dashboard"]
        except (KeyError, TypeError):
            return ""
        if settings.port is not None and port != settings.port and not getattr(self, "_port_warned", False):
            # distributed listens on another port when the chosen one was taken meanwhile
            self._port_warned = True
            logger.warning(
                "spark-dask: the dashboard port %s was taken; the dashboard listens on %s, "
                "which the Databricks driver proxy may not pass",
                settings.port,
                port,
            )
        host = self.scheduler_address.split("://")[1].split("/")[0].rsplit(":", 1)[0].strip("[]")
        return settings.link(host, port)

    def spark_info(self) -> dict:
        """Spark-side facts of this cluster (for the widget, logs and the CLI)."""
        plan, facts = self.gang, self.facts
        info = {"job tag": self.tag}
        with suppress(Exception):
            if is_connect(self.spark):
                info["connect session"] = self.spark.session_id
                info["application"] = self.spark.conf.get("spark.app.id")
            else:
                info["application"] = self.spark.sparkContext.applicationId
        if plan is not None:
            info.update(
                {
                    "workers": f"{plan.n_workers} {plan.kind}" + (" (one per GPU)" if plan.pinned else ""),
                    "barrier tasks": plan.n_tasks,
                    "task request": _task_request(plan, facts),
                }
            )
            if plan.gpu_mode:
                info["GPU mode"] = plan.gpu_mode + (
                    " (beside Spark's GPU tasks)" if plan.gpu_mode == "shared" else " (whole GPUs)"
                )
        if facts is not None:
            info["executors"] = f"{facts.executors} x {facts.executor_cores} cores" + (
                f", {facts.executor_gpus:g} GPUs" if facts.executor_gpus else ""
            )
        gpus = sorted(
            str(w["spark"]["gpu"])
            for w in (self.scheduler_info or {}).get("workers", {}).values()
            if isinstance(w.get("spark"), dict) and w["spark"].get("gpu") is not None
        )
        if gpus or (plan is not None and plan.pinned):
            info["GPUs"] = f"{len(gpus)} ({', '.join(gpus)})" if gpus else str(plan.n_workers)
        db = self._dashboard.databricks if self._dashboard is not None else None
        if db is not None:
            name = db.cloud_name
            cloud = db.cloud if name.lower() in (db.cloud, "unknown") else f"{db.cloud} ({name})"
            info["Databricks"] = f"runtime {db.runtime_version}, cluster {db.cluster_id}, {cloud}"
        if "start" in self.timings:
            info["start-up"] = f"{self.timings['start']:.1f} s"
        return info

    def _repr_html_(self, cluster_status=None):
        """The notebook widget: distributed's cluster template with fresh worker totals
        (also in "Scheduler Info"), the Spark facts and a row per barrier task."""
        closed = self.status == Status.closed
        workers = {} if closed else dict((self.scheduler_info or {}).get("workers", {}))
        tasks, state = self._spark_tasks()
        rows = widget.spark_rows_html(self.spark_info(), tasks, state)
        if not isinstance(self.scheduler_info, SchedulerInfo):
            scheduler_info_repr = "Scheduler not started yet."
        else:
            info = SchedulerInfo(self.scheduler_info)
            info["workers"] = workers
            info.update(widget.scheduler_totals(workers))
            scheduler_info_repr = info._repr_html_()
        return get_template("cluster.html.j2").render(
            type=type(self).__name__,
            name=self.name,
            workers=workers,
            dashboard_link=self.dashboard_link,
            scheduler_info_repr=scheduler_info_repr,
            cluster_status=(cluster_status or "") + rows,
        )

    def __repr__(self):
        closed = self.status == Status.closed
        n = 0 if closed else len((self.scheduler_info or {}).get("workers", {}))
        addr = self.scheduler.address if self.scheduler is not None else None
        return f"SparkCluster({self.tag!r}, {addr!r}, workers={n}, status={self.status.name})"


class _ClusterClient(Client):
    """A Client that owns its SparkCluster: closing it closes the cluster."""

    _collected = False

    def close(self, timeout=None):
        try:
            if timeout is None:
                return super().close()
            return super().close(timeout=timeout)
        finally:
            cluster = self.cluster
            # Not from the garbage collector: it may run inside another cluster's
            # loop start-up, which holds the lock that stopping a loop needs.
            if cluster is not None and not self._collected:
                cluster.close()

    def __del__(self):
        self._collected = True
        super().__del__()


def start(spark=None, **kwargs) -> Client:
    """Start a Dask cluster in the Spark application and return a connected Client.

    Returns once every worker is connected. Leaving the ``with`` block (or
    ``client.close()``) closes the workers, the Spark barrier job and the scheduler.

    >>> with spark_dask.start(spark) as client:          # doctest: +SKIP
    ...     ddf.groupby("k").x.mean().compute()

    Keyword arguments are those of :class:`SparkCluster`.
    """
    cluster = SparkCluster(spark, **kwargs)
    try:
        return _ClusterClient(cluster)
    except BaseException:
        cluster.close()
        raise
