"""``SparkCluster``: a Dask cluster whose scheduler runs on the Spark driver and whose
workers run inside Spark jobs (barrier stages: "gangs", :mod:`spark_dask.gangs.gang`).
``start()``: the same, as a Client.

This module is the Cluster contract (distributed's ``Cluster``: ``scale``, ``adapt``,
``close``, ``get_logs``, the widget). The parts it holds (:mod:`spark_dask.parts`): the
scheduler side (:mod:`spark_dask.scheduler`), the start-up sequence and its watchers
(:mod:`spark_dask.startup`), every worker group's pool of gangs and the policy that keeps
them at their target (:mod:`spark_dask.gangs.pools`, :mod:`spark_dask.gangs.pool`), the gangs'
making and task specification (:mod:`spark_dask.gangs.maker`) and what the widget and logs
show (:mod:`spark_dask.report`).
"""

from __future__ import annotations

import asyncio
import atexit
import math
import time
import uuid
import warnings
import weakref
from contextlib import ExitStack, suppress
from functools import partial

from dask.utils import parse_bytes
from distributed import Scheduler
from distributed.core import Status, rpc
from distributed.deploy.adaptive import Adaptive
from distributed.deploy.cluster import Cluster
from distributed.security import Security
from distributed.utils import Log

from spark_dask import connection, logdir, named, options, registry, report, signals
from spark_dask.aio import CloseHooks, StartedOnAwait
from spark_dask.capacity import GangPlan
from spark_dask.errors import ClusterError, PlanError
from spark_dask.events import SILENCE, Events, outside_package
from spark_dask.gangs import Gang, GangTargets, GroupPools, WorkerCredentials, ending_grace, logs_within, other_clusters
from spark_dask.options.groups import DEFAULT, WorkerGroup, chosen_group
from spark_dask.parts import ClusterParts
from spark_dask.plan import workers_for
from spark_dask.scheduler import DriverScheduler, task_group
from spark_dask.spark.session import active_session, release_local_executors
from spark_dask.startup import Startup
from spark_dask.tracking import Tracking

_atexit_registered = False
_sessions_used: weakref.WeakSet = weakref.WeakSet()  # the sessions clusters of this process ran on


def live_clusters() -> list[SparkCluster]:
    """The clusters of this process that are not closed yet."""
    return registry.clusters()


def _close_all_at_exit() -> None:
    """The interpreter exits: close the clusters left open, then let local-cluster's
    executors go before Spark's JVM shuts down (:func:`spark_dask.spark.session.release_local_executors`)."""
    for cluster in registry.clusters():
        with suppress(Exception):
            cluster.close(timeout=30)
    for spark in list(_sessions_used):
        with suppress(Exception):
            release_local_executors(spark)


def _register_atexit() -> None:
    # Registered on first use, after pyspark's own exit hooks: handlers run last-in
    # first-out, so clusters close while the SparkContext still works.
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_close_all_at_exit)
        _atexit_registered = True


def make_parts(cluster: SparkCluster, opts: options.ClusterOptions, env: dict, changed: asyncio.Event) -> ClusterParts:
    """A new cluster's parts, before its start fills in the rest (facts, pools); ``changed``
    is set when a worker joins or leaves, or a gang ends."""
    events = Events(cluster._cluster_manager_logs, cluster.quiet)
    return ClusterParts(
        options=opts,
        env=env,
        events=events,
        driver_scheduler=DriverScheduler(changed, events),
        credentials=WorkerCredentials(opts, events),
        entry=named.Entry(cluster.name, cluster.tag, named.configured_root(), events.warn),  # from_name finds it there
        log_keeper=logdir.KeptLogs(
            logdir.cluster_directory(opts.log_directory, cluster.name, cluster.id),
            events,
            cluster._task_log,
            lambda: cluster.task_rows,
        ),
        tracking=Tracking(opts.mlflow),  # in the thread that starts the cluster: MLflow's active run is its
    )


class SparkCluster(StartedOnAwait, GangTargets, Cluster):
    """A Dask cluster inside a running Spark application.

    The scheduler runs in this (driver) process; the workers run in Spark barrier-mode
    stages ("gangs"), one Dask worker per executor GPU (dask-cuda) or one per executor
    on CPU clusters. A gang holds its task slots while its workers run and ends when
    they leave. ``scale(n)`` adds gangs (into free task slots) or retires workers
    (their data moves to the others first, then their tasks return their slots to
    Spark); ``adapt(minimum=, maximum=)`` lets distributed's ``Adaptive`` do it. Under
    dynamic allocation (autoscaling clusters), where Spark refuses barrier stages, each
    worker runs as a plain one-task Spark job and Spark adds executors for waiting ones.

    Parameters
    ----------
    spark : SparkSession, optional
        Classic or Spark Connect session; defaults to the active session (looked up
        now). With Spark Connect the scheduler runs in this Python process, not on the
        Spark driver.
    n_workers : int, optional
        Number of Dask workers at start; ``cluster.scale(n)`` / ``cluster.adapt(...)``
        change it later. Default: one per executor GPU, else one per executor.
        (``spark-dask.n-workers``; CLI ``--n-workers``)
    worker : {'auto', 'cuda', 'cpu'}, optional
        Worker program: ``cuda`` (dask-cuda), ``cpu`` (nanny + worker); ``auto``:
        ``cuda`` when the Spark tasks own GPUs. Default: ``'auto'``.
        (``spark-dask.worker``; CLI ``--worker``)
    threads_per_worker : int, optional
        Threads per worker. Default: dask-cuda: 1; CPU: the task's CPUs (executor cores
        with one gang task per executor). (``spark-dask.threads-per-worker``; CLI
        ``--threads-per-worker``)
    memory_limit : int or str, optional
        Memory per worker: bytes, a size such as ``8GiB``, or ``auto``. Default:
        ``'auto'``. (``spark-dask.memory-limit``; CLI ``--memory-limit``)
    worker_options : dict, optional
        Extra worker command-line options, e.g. ``{"rmm_pool_size": "10GB"}`` →
        ``--rmm-pool-size 10GB``. Default: ``{}``. (``spark-dask.worker-options``; CLI
        ``--worker-option``)
    worker_command : str or list, optional
        A command template (string or list) that replaces the default worker command.
        Default: ``None``. (``spark-dask.worker-command``; CLI ``--worker-command``)
    env : dict, optional
        Environment variables for the worker processes. Default: none. (CLI ``--env``)
    worker_groups : dict, optional
        More kinds of worker beside the default ones: ``{name: {worker, n_workers,
        ...}}``. Default: none. (``spark-dask.worker-groups``; CLI ``--worker-group``)
    task_profile : {'auto', True, False}, optional
        Ask Spark for a stage-level task resource profile for the gang. Default:
        ``'auto'``. (``spark-dask.task-profile``; CLI ``--task-profile``)
    barrier : {'auto', True, False}, optional
        Run the workers as one Spark barrier stage (``true``) or each as a Spark job of
        its own (``false``). Default: ``'auto'``. (``spark-dask.barrier``; CLI
        ``--barrier``)
    timeout : str or float, optional
        How long ``start()`` waits for every worker before it fails. Default:
        ``'180s'``. (``spark-dask.timeout``; CLI ``--timeout``)
    name : str, optional
        The cluster's name: other Python processes of this user on this host join it
        with ``SparkCluster.from_name(name)``; ``spark-dask list`` shows it. Default:
        the Spark job tag, ``spark-dask-<id>``. (``spark-dask.name``; CLI ``--name``)
    idle_timeout : str or float, optional
        Close the cluster after this long without Dask tasks or work from its clients;
        its Spark task slots return to Spark. Default: ``None``.
        (``spark-dask.idle-timeout``; CLI ``--idle-timeout``)
    relaunch_attempts : int, optional
        How often failed gangs (a lost executor) are relaunched while the cluster runs;
        each relaunch replaces only the failed gang's workers. Default: ``3``.
        (``spark-dask.relaunch-attempts``; CLI ``--relaunch-attempts``)
    tls : bool, optional
        TLS with fresh per-cluster credentials between scheduler, workers and clients.
        Default: ``True``. (``spark-dask.tls``; CLI ``--tls / --no-tls``)
    require_encryption : bool, optional
        Refuse to start unless Spark encrypts its own RPC. Default: ``False``.
        (``spark-dask.require-encryption``; CLI ``--require-encryption /
        --no-require-encryption``)
    scheduler_host : str, optional
        Address of this machine that the executors use to reach the scheduler (it
        listens there). Default: the driver's address; Connect: this machine's address
        towards the server. (``spark-dask.scheduler-host``; CLI ``--scheduler-host``)
    databricks_credentials : bool, optional
        Give the workers the notebook's Databricks workspace host and token
        (``DATABRICKS_HOST``, ``DATABRICKS_TOKEN``), for MLflow and the Databricks SDK
        in Dask tasks. Default: ``False``. (``spark-dask.databricks-credentials``; CLI
        ``--databricks-credentials / --no-databricks-credentials``)
    dashboard : bool, optional
        Serve the scheduler's dashboard. Default: ``True``. (``spark-dask.dashboard``;
        CLI ``--dashboard / --no-dashboard``)
    log_directory : str, optional
        A directory where the scheduler's, the workers' and the Spark tasks' logs are
        kept, also after the cluster closed or a worker crashed. Default: ``None``.
        (``spark-dask.log-directory``; CLI ``--log-directory``)
    progress : bool, optional
        Show "2/4 Dask workers connected" while starting (terminal and notebook).
        Default: ``True``. (``spark-dask.progress``; CLI ``--progress / --no-progress``)
    silence_logs : str or False, optional
        Level below which the scheduler's log lines are not printed; ``false`` prints
        them all. Default: ``'warning'``. (``spark-dask.silence-logs``; CLI
        ``--silence-logs``)
    mlflow : {'auto', True, False}, optional
        Keep what the cluster did in the MLflow run: its workers and versions (params),
        its workers, memory, tasks and GPUs over time (metrics), its performance report
        and logs (artifacts at close). Default: ``'auto'``. (``spark-dask.mlflow``; CLI
        ``--mlflow``)
    gpu_mode : {'auto', 'shared', 'exclusive'}, optional
        GPU executors: run the workers beside Spark's own GPU tasks (``shared``) or hold
        their GPUs whole (``exclusive``). Default: ``'auto'``. (``spark-dask.gpu-mode``;
        CLI ``--gpu-mode``)
    asynchronous : bool
        Use ``await SparkCluster(..., asynchronous=True)`` inside an event loop.
    loop : IOLoop, optional
        The event loop to run on (as for any ``distributed.deploy.Cluster``).
    quiet : bool
        No progress line and no slot warning.

    Notes
    -----
    Every keyword defaults to its ``dask.config`` key ``spark-dask.<name>`` (``_`` as
    ``-``), set in ``spark_dask/spark_dask.yaml``, by ``dask.config.set`` or by an
    environment variable such as ``DASK_SPARK_DASK__TIMEOUT=5m``; an explicit argument
    wins. Keys without a keyword argument: ``multiprocessing-method``, ``fork-nanny``,
    ``executor-wait``, ``slot-wait``, ``close-timeout``, ``death-timeout``,
    ``kill-grace``, ``lost-worker-grace``, ``no-workers-timeout``, ``drain-timeout``,
    ``close-on-sigterm``, ``state-dir``, ``connect-timeout``, ``dashboard-prefix``,
    ``mlflow-interval``, ``rapids.rmm-pool-size``, ``rapids.rmm-reserve``,
    ``rapids.rmm-fraction``, ``rapids.spill-fraction``, ``rapids.dask-fraction``. The
    configuration page of the docs describes each one (generated, like this section,
    from ``spark_dask/options/table.py``).

    Examples
    --------
    >>> cluster = SparkCluster(spark, n_workers=4)       # doctest: +SKIP
    >>> client = cluster.get_client()                    # doctest: +SKIP
    >>> cluster.scale(2)                                 # doctest: +SKIP
    >>> cluster.adapt(minimum=1, maximum=8)              # doctest: +SKIP
    >>> cluster.close()                                  # doctest: +SKIP
    """

    _supports_scaling = True
    from_name = staticmethod(named.from_name)  # another process's cluster of that name
    # Seconds close() lets the barrier job end by itself before cancelling it; None: the
    # close-timeout option (a closing signal handler sets a shorter one).
    close_grace: float | None = None

    @options.keywords_checked("SparkCluster()")
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
        worker_groups: dict | None = None,
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
        barrier: bool | str | None = None,
        asynchronous: bool = False,
        loop=None,
        name: str | None = None,
        idle_timeout: str | float | None = None,
        log_directory: str | None = None,
        databricks_credentials: bool | None = None,
        mlflow: bool | str | None = None,
        quiet: bool = False,
    ):
        opts = options.resolve(**options.given(locals()))
        self.spark = active_session(spark)
        if not opts.tls:
            warnings.warn(
                "spark-dask: TLS is off (tls=False): anyone who can reach the driver's "
                "scheduler port can run code on this cluster",
                **outside_package(),
            )
        self.id = uuid.uuid4().hex[:10]
        self.tag = f"spark-dask-{self.id}"
        super().__init__(asynchronous=asynchronous, loop=loop, name=opts.name or self.tag, quiet=quiet)
        self._changed = asyncio.Event()
        self._parts = make_parts(self, opts, dict(env or {}), self._changed)
        self._init_state()
        registry.add(self, self._parts)
        _sessions_used.add(self.spark)
        _register_atexit()
        if not self.asynchronous:
            self._loop_runner.start()
            try:
                with self._parts.events.hold():  # the start's warnings point at the caller's line
                    self.sync(self._start)
            except BaseException:
                # Also on KeyboardInterrupt: the start coroutine runs on in the loop
                # thread until close() cancels it and tears down what it made.
                with suppress(Exception):
                    self.close(timeout=60)
                raise
            self._register_signals()

    def _init_state(self) -> None:
        p = self._parts
        self._start_task: asyncio.Task | None = None
        others = partial(other_clusters, self.spark, self.tag)  # what the application's other clusters hold
        self._groups = GroupPools(p, self.spark, self.tag, self._gang_ended_threadsafe, lambda: self._adaptive, others)
        self._failed: str | None = None  # gang status after a failure
        self._torn_down = False
        self._close_hooks = CloseHooks()  # add_close_hook
        self._exit_stack = ExitStack()
        self._startup = Startup(p, self._groups, self.spark, self.tag, self.quiet, self._exit_stack)
        if p.options.silence_logs:
            # Like LocalCluster: the scheduler runs in this process; keep its INFO lines
            # out of the notebook. get_logs() still has them.
            self._exit_stack.enter_context(SILENCE.hold(p.options.silence_logs))

    # ------------------------------------------------------------------ what it holds
    @property
    def scheduler(self) -> Scheduler | None:
        """The Dask scheduler (in this process); None before the start made it."""
        return self._parts.driver_scheduler.scheduler

    @property
    def security(self) -> Security | None:
        """The cluster's TLS credentials (``Security()`` without TLS)."""
        return self._parts.driver_scheduler.security

    @property
    def gang_plan(self) -> GangPlan | None:
        """The default group's starting gang's plan: the shape of its gangs (None before the plan)."""
        pool = self._parts.pools.get(DEFAULT)
        return pool.shape if pool is not None else None

    @property
    def gang_tags(self) -> list[str]:
        """The job group / tag of every gang submitted."""
        return [g.tag for g in self._parts.gangs]

    @property
    def gang_status(self) -> str:
        """The gangs' state in words (``starting``, ``running``, ``relaunching (1)``, ...)."""
        if self._failed is not None:
            return self._failed
        pool = self._parts.pools.get(DEFAULT)
        return pool.status if pool is not None else "not started"

    @property
    def task_rows(self) -> list[dict]:
        """The status rows of every ended gang's tasks (exit codes, log tails, notes)."""
        return [r for g in self._parts.gangs for r in g.rows]

    # ------------------------------------------------------------------ connection files
    def write_connection(self, directory=None) -> str:
        """Write the files another process needs to join this cluster (``scheduler.json``,
        the client credentials, a Dask config file); the path of ``scheduler.json``. See
        :func:`spark_dask.connection.write_connection`."""
        link = connection.proxied_dashboard_link(self._parts.dashboard_settings, self.dashboard_link)
        return connection.write_connection(self, directory, link)

    def add_close_hook(self, hook) -> None:
        """Call ``hook()`` when the cluster closes, while its workers still run (the
        hand-off removes its files then; :meth:`write_connection` its connection files).
        A coroutine function is awaited, for at most the ``close-timeout``; a hook that
        fails does not stop the teardown."""
        self._close_hooks.add(hook)

    # ------------------------------------------------------------------ lifecycle
    async def _start(self):
        self.status = Status.starting
        self._start_task = asyncio.current_task()
        try:
            await self._startup.run(time.monotonic(), self._open_contract)
            self._started()
        except BaseException:
            await self._teardown(graceful=False)
            raise

    async def _open_contract(self) -> None:
        """The scheduler listens: the contract's rpc to it and its worker-status
        subscription (``Cluster._start``), the workers still to come."""
        self.scheduler_comm = rpc(self.scheduler.address, connection_args=self.security.get_connection_args("client"))
        await super()._start()
        self.status = Status.starting  # Cluster._start said running: the workers are to come

    def _started(self) -> None:
        """Every starting worker connected: the cluster runs, its watchers start."""
        p = self._parts
        # the contract's view of the workers (Cluster.scheduler_info, what the cluster's
        # repr counts) as the subscription's messages, which may still be in flight, make it
        self.scheduler_info["workers"].update(p.driver_scheduler.worker_infos())
        self.status = Status.running
        self._startup.watch(self._fail, self._close, self.name)
        self._register_signals()  # a no-op outside the main thread (sync start: __init__)
        p.tracking.begin(self, p)  # in the background: the start never waits on MLflow
        p.events.log(self._startup.started_line(self.name))
        p.entry.publish(self, p)

    def _register_signals(self) -> None:
        signals.register(self, signals.close_on_sigterm(self._parts.options.close_on_sigterm))

    # ------------------------------------------------------------------ gangs
    def _gang_ended_threadsafe(self, gang: Gang) -> None:
        """Launcher thread: a gang's Spark job ended (normally, cancelled, or failed)."""
        with suppress(RuntimeError):  # loop already closed
            self.loop.add_callback(self._gang_ended, gang)

    async def _gang_ended(self, gang: Gang) -> None:
        self._changed.set()
        pool = self._parts.pools.get(gang.group)
        if pool is not None:  # None: the group was removed
            await pool.gang_ended(gang, self.spark, self._close)
        self._parts.log_keeper.save()  # cluster.log, spark-tasks.log

    async def _fail(self, msg: str) -> None:
        """The cluster cannot go on: computations waiting for a worker fail with ``msg``
        (clients see it), then everything is closed; ``status`` is ``failed``."""
        for pool in self._parts.pools.values():
            pool.recovery.failure = msg
        self._failed = "failed: no Dask workers"
        self._parts.events.error(msg)
        with suppress(Exception):
            self._parts.driver_scheduler.err_waiting_tasks(msg)
        await self._close()
        self.status = Status.failed

    # ------------------------------------------------------------------ scaling
    async def _scale(self, n: int, group: str | None = None) -> None:
        if self.status != Status.running:
            raise ClusterError(f"spark-dask: the cluster is {self.status.name}; it cannot scale")
        await self._groups.pool_of(group).scale(n)

    async def _scale_down(self, workers) -> None:
        """Adaptive's scale-down (after it retired ``workers``): drop them from their gangs."""
        if self.status == Status.running:
            await self._groups.scale_down(list(workers))

    # ------------------------------------------------------------------ contract
    def scale(self, n: int = 0, memory=None, cores=None, group: str | None = None, worker_group: str | None = None):
        """Scale the cluster to ``n`` workers (or enough for ``cores`` threads or
        ``memory`` bytes); with ``group``, only that worker group (the other groups keep
        their workers; default: the ``default`` group). ``worker_group``: ``group`` as
        dask-kubernetes names it.

        Growing submits a gang (a Spark barrier stage; under dynamic allocation a Spark
        job per worker) for the new workers, into free Spark task slots only: beyond
        them the cluster grows as far as the slots allow and a warning says so.
        Shrinking retires workers: Dask moves their data to the others first, then
        their Spark tasks return and their slots serve Spark jobs again. Returns at
        once; ``cluster.wait_for_workers(n)`` waits for the workers.
        """
        group = chosen_group(group, worker_group)
        threads, per_memory = self._groups.size_per_worker(self._groups.pool_of(group))
        if isinstance(memory, str):
            memory = parse_bytes(memory)
        n = workers_for(n, cores, memory, threads, per_memory)
        with self._parts.events.hold():
            return self.sync(self._scale, n, group)

    def scale_up(self, n: int):
        """Scale up to ``n`` workers (what ``Adaptive`` calls)."""
        return self.scale(n)

    def scale_down(self, workers):
        """Remove ``workers`` (names; what ``Adaptive`` calls after retiring them): their
        Spark tasks return, waiting gangs of theirs are cancelled."""
        return self.sync(self._scale_down, list(workers))

    def adapt(
        self,
        Adaptive=Adaptive,
        minimum: int = 0,
        maximum: float = math.inf,
        minimum_cores: int | None = None,
        maximum_cores: int | None = None,
        minimum_memory: str | None = None,
        maximum_memory: str | None = None,
        group: str | None = None,
        worker_group: str | None = None,
        **kwargs,
    ):
        """Let distributed's ``Adaptive`` scale the cluster with the workload.

        ``maximum`` is bounded by the workers the Spark application can hold (its task
        slots for the gangs' tasks; one worker per GPU; under dynamic allocation the
        executors ``spark.dynamicAllocation.maxExecutors`` allows). Other keyword
        arguments go to ``Adaptive`` (``interval``, ``wait_count``, ``target_duration``);
        the workers of one Spark task are retired together.

        With worker groups (``group``, or a cluster that has groups beside the default
        one) each group adapts on its own (:class:`~spark_dask.gangs.adapt.GroupAdaptive`):
        to the tasks restricted to its Dask resource (the default group: to the tasks
        with no resource restriction), retiring only its own workers; ``group=None`` is
        the default group (``worker_group``: the same, as dask-kubernetes names it).
        Returns the group's adaptive, whose ``stop()`` ends it.
        """
        group = chosen_group(group, worker_group)
        per_group = self._groups.per_group(group)
        minimum, maximum = self._groups.adapt_bounds(
            group, minimum, maximum, minimum_cores, maximum_cores, minimum_memory, maximum_memory
        )
        if per_group:
            return self._groups.adapt(self, group, minimum=minimum, maximum=maximum, **kwargs)
        kwargs.setdefault("worker_key", task_group)
        return super().adapt(Adaptive=Adaptive, minimum=minimum, maximum=maximum, **kwargs)

    # ------------------------------------------------------------------ worker groups
    def add_worker_group(
        self,
        name: str,
        n_workers: int | None = None,
        worker: str = "cpu",
        threads_per_worker: int | None = None,
        memory_limit: int | str = "auto",
        resources: dict | None = None,
        worker_options: dict | None = None,
        env: dict | None = None,
    ) -> None:
        """Start a worker group beside the cluster's workers and return once its
        workers are connected.

        Parameters
        ----------
        name : str
            1 to 32 letters, digits or ``_``: names the group's gangs and its Dask
            resource ``group-<name>`` (one unit on each of its workers).
        n_workers : int, optional
            Workers at start. Default: one per executor (``cuda``: one per executor GPU).
        worker : {'cpu', 'cuda'}
            The worker program. A ``cpu`` group's Spark tasks ask for CPUs only (a
            stage-level task profile), never GPUs.
        threads_per_worker : int, optional
            Threads per worker; for ``cpu`` also the CPUs of each Spark task. Default:
            ``spark.task.cpus`` (``cuda``: 1).
        memory_limit : int or str
            Memory per worker (``auto``: as for the default group).
        resources : dict, optional
            Dask resources of each worker beside the group's own.
        worker_options : dict, optional
            Extra worker command-line options, over the cluster's.
        env : dict, optional
            Environment variables of the workers, over the cluster's.

        Raises
        ------
        PlanError
            A bad or taken name, a bad value, or executors that cannot hold the group.
        ClusterError
            Its Spark job ended, or its workers did not connect within ``timeout``:
            nothing of the group is left running.
        """
        spec = {key: value for key, value in locals().items() if key not in ("self", "name")}  # the group's options
        group = self._groups.check_new(name, spec)
        with self._parts.events.hold():
            return self.sync(self._add_worker_group, group)

    async def _add_worker_group(self, group: WorkerGroup) -> None:
        if self.status != Status.running:
            raise ClusterError(f"spark-dask: the cluster is {self.status.name}; it cannot add a worker group")
        self._startup.watch_faults(await self._groups.add(group, self.spark))

    def remove_worker_group(self, name: str) -> None:
        """Retire every worker of the worker group ``name`` (Dask moves their data to
        the other workers first), end its Spark jobs and forget the group. The default
        group cannot be removed (``scale(0)`` empties it)."""
        if name == DEFAULT:
            raise PlanError("spark-dask: the default worker group cannot be removed; cluster.scale(0) empties it")
        self._groups.pool_of(name)
        return self.sync(self._remove_worker_group, name)

    async def _remove_worker_group(self, name: str) -> None:
        if self.status != Status.running:
            raise ClusterError(f"spark-dask: the cluster is {self.status.name}; it cannot remove a worker group")
        await self._groups.end(name, self._parts.options.close_timeout, self.spark)
        self._parts.events.log(f"spark-dask: worker group {name} removed: its workers were retired")

    def _planned_names(self) -> set:
        return self._groups.planned_names()

    def _observed_names(self) -> set:
        return self._parts.driver_scheduler.names()

    async def _close(self):
        if self.status == Status.closed:
            return
        task = self._start_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            with suppress(BaseException):
                await task
        await self._teardown(graceful=self._startup.connected)

    async def _teardown(self, graceful: bool) -> None:
        """Close workers, let the barrier stage end (or cancel it), close the scheduler."""
        if self._torn_down:
            return
        self._torn_down = True
        t0 = time.monotonic()
        self.status = Status.closing
        self._parts.events.closing(self.name, len(self.scheduler.workers) if self.scheduler else 0)  # before the hooks
        self._startup.stop_watchers()
        self._groups.stop()
        with suppress(Exception):
            await Cluster._close(self)
        self.status = Status.closing
        if self.scheduler is not None:
            await self._close_hooks.run(self._parts.options.close_timeout)
        await self._parts.driver_scheduler.close(self._parts.options.close_timeout)
        self._parts.timings["close_scheduler"] = time.monotonic() - t0
        grace = self._parts.options.close_timeout if self.close_grace is None else self.close_grace
        await self._groups.end_all(ending_grace(grace, graceful, float(self._parts.options.kill_grace)))
        self._parts.timings["close"] = time.monotonic() - t0
        self._exit_stack.close()
        self.status = Status.closed
        registry.discard(self)
        signals.unregister(self)

    def get_logs(self, cluster=True, scheduler=True, workers=True):
        """Logs of the cluster manager, scheduler, workers and the Spark tasks.

        ``"Spark tasks"`` has a line per barrier task: its placement (executor id,
        host, GPUs) and status, with its Dask workers. While the stage runs that comes
        from the workers' Spark facts; after it ended, from the tasks' status rows (exit
        codes and log tails of every worker), which remain available after ``close()``.
        With ``log_directory`` that reads the kept files, each worker's log under its name.
        """
        if self.status == Status.closed:
            return report.kept_logs(self._parts.log_keeper.read(cluster, scheduler, workers))
        return super().get_logs(cluster=cluster, scheduler=scheduler, workers=workers)

    def close(self, timeout: float | None = None):
        """Close workers, the Spark barrier job and the scheduler. Idempotent; after the
        cluster closed by itself (``idle_timeout``, a failure) it ends the event loop."""
        out = super().close(timeout=timeout)
        if not self.asynchronous:
            with suppress(Exception):
                self._loop_runner.stop()
        signals.unregister(self)  # from the main thread the previous handlers come back
        return out

    # ------------------------------------------------------------------ logs and widget
    async def _get_logs(self, cluster=True, scheduler=True, workers=True):
        get = partial(Cluster._get_logs, self, cluster=cluster, scheduler=scheduler)
        try:
            logs = await logs_within(get, workers, self._parts.options.close_timeout, self._parts.events)
        except Exception:  # noqa: BLE001 - scheduler already closed: what the cluster manager kept
            return report.kept_logs(self._parts.log_keeper.read(cluster, scheduler, workers))
        if cluster:
            logs["Spark tasks"] = Log(self._task_log())
        return logs

    def _task_log(self) -> str:
        scheduler = None if self.status == Status.closed else self.scheduler
        return report.task_log(self.tag, self.gang_status, self._parts.gangs, self.scheduler_info, scheduler)

    @property
    def dashboard_link(self) -> str:
        """The dashboard's status page; on Databricks the driver-proxy URL."""
        settings = self._parts.dashboard_settings
        if settings is None or (settings.databricks is None and not settings.prefix):
            return super().dashboard_link
        return report.dashboard_link(settings, self.scheduler_info, self.scheduler_address)

    def spark_info(self) -> dict:
        """Spark-side facts of this cluster (for the widget, logs and the CLI)."""
        return report.spark_info(self, self._parts, self._adaptive)

    def _repr_html_(self, cluster_status=None):
        """The notebook widget: distributed's cluster template with fresh worker totals
        (also in "Scheduler Info"), the Spark facts and a row per barrier task."""
        return report.widget_html(self, self._parts.gangs, cluster_status)

    def __repr__(self):
        return report.cluster_repr(self, self._parts.pools)
