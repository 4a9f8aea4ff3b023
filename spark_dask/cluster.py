"""``SparkCluster``: a Dask cluster whose scheduler runs on the Spark driver and whose
workers run inside Spark jobs (barrier stages: "gangs", :mod:`spark_dask.gang`).
``start()``: the same, as a Client.

This module is the Dask-facing side: the scheduler, the start-up wait, ``scale`` /
``adapt`` (distributed's ``Adaptive``), teardown, logs and the widget. Which gangs to
submit is decided in :mod:`spark_dask.plan`; submitting, cancelling and following them
is :mod:`spark_dask.gang`'s part.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import datetime
import json
import logging
import math
import sys
import threading
import time
import uuid
import warnings
import weakref
from contextlib import ExitStack, suppress
from dataclasses import replace

from dask.utils import parse_bytes, parse_timedelta
from dask.widgets import get_template
from distributed import Client, Scheduler
from distributed.core import Status, rpc
from distributed.deploy.adaptive import Adaptive
from distributed.deploy.cluster import Cluster
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.objects import SchedulerInfo
from distributed.protocol.pickle import dumps as dumps_pickle
from distributed.security import Security
from distributed.utils import Log, Logs, silence_logging_cmgr

from spark_dask import config, databricks, options, signals, widget
from spark_dask.databricks import DashboardSettings
from spark_dask.errors import SparkDaskError
from spark_dask.faults import (
    LEAVING,
    Recovery,
    loss_message,
    lost_executor,
    lost_worker,
    no_workers_message,
    no_workers_warning,
    placeable,
    where,
    worker_lost_message,
)
from spark_dask.gang import Gang, end_gangs, gang_of_placeholder
from spark_dask.launcher import session_closed, stage_snapshot, summarize_spark_error
from spark_dask.plan import (
    GPU_MODES,
    PlanError,
    adapt_maximum,
    check_barrier,
    check_request,
    encryption_problem,
    gang_capacity,
    gang_steps,
    hog_warning,
    max_workers,
    memory_problem,
    plan_gang,
    scale_step,
    tasks_for,
    workers_for,
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
from spark_dask.session import conf as spark_conf
from spark_dask.slots import (
    SlotWatch,
    busy_stages,
    no_slots_message,
    start_timeout_message,
)
from spark_dask.spec import by_host, rmm_spec, task_spec
from spark_dask.worker_cli import TaskWarnings, check_worker_options

logger = logging.getLogger("spark_dask")

_live_clusters: weakref.WeakSet = weakref.WeakSet()


class _Credentials:
    """Each cluster's TLS credentials (``Security.temporary()``: a CA, key and certificate
    of its own), with the next cluster's made ahead in a background thread: the RSA key
    takes 30-180 ms on a 2-core machine, on the critical path of a start. Each set is
    handed out once; the first start of a process makes its own."""

    def __init__(self):
        self._lock = threading.Lock()
        self._spare: concurrent.futures.Future | None = None

    def take(self) -> Security:
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


_credentials = _Credentials()
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


def _task_number(name: str) -> int | None:
    """The task number in a worker name (``spark-3-gpu1`` -> 3)."""
    parts = str(name).split("-")
    return int(parts[1]) if len(parts) > 1 and parts[0] == "spark" and parts[1].isdigit() else None


def live_clusters() -> list[SparkCluster]:
    """The clusters of this process that are not closed yet, oldest first."""
    return list(_live_clusters)


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
    """Wakes the start-up wait whenever a worker joins or leaves, and tells the cluster
    (which gang's worker it is)."""

    name = "spark-dask-watch"

    def __init__(self, event: asyncio.Event, on_add=None, on_remove=None):
        self.event = event
        self.on_add = on_add
        self.on_remove = on_remove

    def add_worker(self, scheduler, worker):
        self.event.set()
        if self.on_add is not None:
            self.on_add(scheduler, worker)

    def remove_worker(self, scheduler, worker, **kwargs):
        self.event.set()
        if self.on_remove is not None:
            self.on_remove(worker)


def _task_group(ws) -> tuple:
    """``worker_key`` of Adaptive and of scale-down: the workers of one Spark task (a
    task owning several GPUs starts one per GPU) leave together, so its slot is freed."""
    facts = getattr(ws, "extra", {}).get("spark")
    if isinstance(facts, dict) and "gang" in facts:
        return (facts.get("gang"), facts.get("partition"))
    return (None, ws.address)


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
        change it later. Default: one per executor GPU, else one per executor. The gang
        needs one Spark task slot per barrier task at once; more than the application
        has is a ``PlanError`` at once (instead of Spark's ten minutes of retries).
        Under dynamic allocation the default is one per executor present now (at least
        one). (``spark-dask.n-workers``; CLI ``--n-workers``)
    worker : {'auto', 'cuda', 'cpu'}, optional
        Worker program: ``cuda`` (dask-cuda), ``cpu`` (nanny + worker); ``auto``:
        ``cuda`` when the Spark tasks own GPUs. Default: ``'auto'``. ``cuda`` runs
        ``python -m dask cuda worker`` (one worker per GPU, pinned with
        ``CUDA_VISIBLE_DEVICES``); ``cpu`` runs ``python -m
        distributed.cli.dask_worker`` under a nanny. Both with the Spark task's own
        interpreter (``sys.executable``), never a script from ``PATH``.
        (``spark-dask.worker``; CLI ``--worker``)
    threads_per_worker : int, optional
        Threads per worker. Default: dask-cuda: 1; CPU: the task's CPUs (executor cores
        with one gang task per executor). dask-cuda workers get dask-cuda's own default,
        1: tasks on one worker share its GPU, and more threads make them compete for
        device memory rather than run faster. CPU workers get the CPUs of their Spark
        task, or the executor's cores when the gang has one task on that executor,
        divided over the task's workers. More than ``spark.executor.cores`` is a
        ``PlanError``. (``spark-dask.threads-per-worker``; CLI ``--threads-per-worker``)
    memory_limit : int or str, optional
        Memory per worker: bytes, a size such as ``8GiB``, or ``auto``. Default:
        ``'auto'``. ``auto``: the host's memory (cgroup-aware) left after the executor
        JVMs placed on it, split over the Dask workers on that host, at least 256 MiB. A
        number of bytes or a string such as ``"8GiB"`` sets it for every worker; more
        than the host has is refused (before anything is submitted on
        ``local``/``local-cluster`` masters, else by the task on its host).
        (``spark-dask.memory-limit``; CLI ``--memory-limit``)
    worker_options : dict, optional
        Extra worker command-line options, e.g. ``{"rmm_pool_size": "10GB"}`` →
        ``--rmm-pool-size 10GB``. Default: ``{}``. Checked on the driver against the
        worker program (``dask worker``, or ``dask cuda worker``) before anything
        starts: an unknown option, a value of the wrong shape, or an option spark-dask
        sets itself (``name``, ``nthreads``, TLS, ...) is a ``PlanError`` naming the
        keyword to use instead. Not checked with a ``worker_command`` template. The
        rules (switches, lists, ``resources``, ``preload``, ``nanny=False``) are in the
        *Workers* page of the docs. (``spark-dask.worker-options``; CLI
        ``--worker-option``)
    worker_command : str or list, optional
        A command template (string or list) that replaces the default worker command.
        Default: ``None``. Any program that speaks Dask's protocol. Placeholders:
        ``{python}`` ``{scheduler_address}`` ``{name}`` ``{nthreads}``
        ``{memory_limit}`` ``{local_directory}`` ``{tls_ca_file}`` ``{tls_cert}``
        ``{tls_key}`` ``{preload}`` ``{death_timeout}``; ``worker_options`` are appended
        as flags. See the *Workers* page of the docs. (``spark-dask.worker-command``;
        CLI ``--worker-command``)
    env : dict, optional
        Environment variables for the worker processes. Default: none. Workers pinned to
        a GPU also get ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (a
        ``CUDA_DEVICE_ORDER`` of yours wins). (CLI ``--env``)
    task_profile : {'auto', True, False}, optional
        Ask Spark for a stage-level task resource profile for the gang. Default:
        ``'auto'``. ``auto``: where Spark supports it (Spark ≥ 3.4 on
        standalone/``local-cluster``, ≥ 3.5 on YARN/Kubernetes, dynamic allocation off;
        Spark Connect ≥ 4.0): whole GPUs per task (exclusive GPU mode), a CPU-only
        profile (shared GPU mode with whole-GPU Spark tasks), or ``cores // 2 + 1`` CPUs
        per task on CPU clusters, which puts one gang task on each executor and leaves
        the other cores to Spark. ``true`` asks for one even where it changes nothing;
        ``false`` never. (``spark-dask.task-profile``; CLI ``--task-profile``)
    barrier : {'auto', True, False}, optional
        Run the workers as one Spark barrier stage (``true``) or each as a Spark job of
        its own (``false``). Default: ``'auto'``. ``true``: one barrier stage per start
        or scale-up: its tasks start together or not at all, and one lost task or
        executor fails the whole stage, so Spark also ends the workers on healthy hosts
        (the cluster relaunches them). ``false``: every worker is a Spark job of one
        task, all started together at start-up (every worker connected within
        ``timeout``, or everything cancelled); a lost executor or host then costs only
        its own workers and their data, the cluster replaces them. ``auto``: ``true``,
        except under dynamic allocation, where Spark runs no barrier stages. See the
        design page's "Faults" section for the trade-off. (``spark-dask.barrier``; CLI
        ``--barrier``)
    timeout : str or float, optional
        How long ``start()`` waits for every worker before it fails. Default:
        ``'180s'``. Seconds or a Dask time string (``"5m"``). On expiry ``start()``
        raises with what is known (the barrier stage's job group, where to look) and
        nothing is left running. (``spark-dask.timeout``; CLI ``--timeout``)
    relaunch_attempts : int, optional
        How often failed gangs (a lost executor) are relaunched while the cluster runs;
        each relaunch replaces only the failed gang's workers. Default: ``3``. A lost
        task or executor fails the whole barrier stage; the cluster notices at once,
        logs it and submits a new stage for the workers. Running Dask computations
        continue once the workers are back. (``spark-dask.relaunch-attempts``; CLI
        ``--relaunch-attempts``)
    tls : bool, optional
        TLS with fresh per-cluster credentials between scheduler, workers and clients.
        Default: ``True``. ``false``: plain TCP, with a warning: anyone who can reach
        the driver's scheduler port can run code on the cluster. (``spark-dask.tls``;
        CLI ``--tls / --no-tls``)
    require_encryption : bool, optional
        Refuse to start unless Spark encrypts its own RPC. Default: ``False``. The
        cluster's TLS key reaches the executors inside the Spark task, i.e. over Spark's
        RPC. ``true`` refuses unless ``spark.network.crypto.enabled`` (with
        ``spark.authenticate``) or ``spark.ssl.enabled`` is on, and needs ``tls=True``.
        (``spark-dask.require-encryption``; CLI ``--require-encryption /
        --no-require-encryption``)
    scheduler_host : str, optional
        Address of this machine that the executors use to reach the scheduler (it
        listens there). Default: the driver's address; Connect: this machine's address
        towards the server. Unset: the Spark driver's address; with Spark Connect, this
        machine's address on the route to the Connect server (a connected UDP socket
        picks it; nothing is sent). It must be an address of this machine (not a NAT or
        port-forwarded one). See the *Spark Connect* page of the docs.
        (``spark-dask.scheduler-host``; CLI ``--scheduler-host``)
    dashboard : bool, optional
        Serve the scheduler's dashboard. Default: ``True``. Off Databricks: on the
        driver address, a port the OS picks. On Databricks: at the root of a free port
        in 9000-9999 on all driver interfaces (the driver proxy connects to the driver's
        IP; 9000-9999 is the range Ray-on-Spark uses behind the proxy, which refuses
        8787), linked through the driver proxy. See the *Databricks* page of the docs.
        (``spark-dask.dashboard``; CLI ``--dashboard / --no-dashboard``)
    progress : bool, optional
        Show "2/4 Dask workers connected" while starting (terminal and notebook).
        Default: ``True``. (``spark-dask.progress``; CLI ``--progress / --no-progress``)
    silence_logs : str or False, optional
        Level below which the scheduler's log lines are not printed; ``false`` prints
        them all. Default: ``'warning'``. The scheduler runs in this (driver) process,
        as with ``LocalCluster``. ``get_logs()`` keeps the lines either way.
        (``spark-dask.silence-logs``; CLI ``--silence-logs``)
    gpu_mode : {'auto', 'shared', 'exclusive'}, optional
        GPU executors: run the workers beside Spark's own GPU tasks (``shared``) or hold
        their GPUs whole (``exclusive``). Default: ``'auto'``. ``shared``: the Dask
        workers (one per GPU) run beside Spark's own GPU tasks (the RAPIDS Accelerator):
        the gang holds one Spark task's GPU share per worker (fractional
        ``spark.task.resource.gpu.amount``) or no GPU at all (whole-GPU Spark tasks,
        through a CPU-only task profile). ``exclusive``: each worker's Spark task holds
        its GPU whole. ``auto``: shared when Spark's task GPU amount is fractional or
        the RAPIDS SQL plugin is on, else exclusive. See the *RAPIDS* page of the docs.
        (``spark-dask.gpu-mode``; CLI ``--gpu-mode``)
    asynchronous : bool
        Use ``await SparkCluster(..., asynchronous=True)`` inside an event loop.
    loop : IOLoop, optional
        The event loop to run on (as for any ``distributed.deploy.Cluster``).
    name : str, optional
        The cluster's name; default its Spark job tag ``spark-dask-<id>``.
    quiet : bool
        No progress line and no slot warning.

    Notes
    -----
    Every keyword defaults to its ``dask.config`` key ``spark-dask.<name>`` (``_`` as
    ``-``), set in ``spark_dask/spark_dask.yaml``, by ``dask.config.set`` or by an
    environment variable such as ``DASK_SPARK_DASK__TIMEOUT=5m``; an explicit argument
    wins. Keys without a keyword argument: ``multiprocessing-method``, ``fork-nanny``,
    ``executor-wait``, ``slot-wait``, ``close-timeout``, ``death-timeout``,
    ``kill-grace``, ``lost-worker-grace``, ``no-workers-timeout``, ``close-on-sigterm``,
    ``connect-timeout``, ``dashboard-prefix``, ``rapids.rmm-pool-size``,
    ``rapids.rmm-reserve``, ``rapids.rmm-fraction``, ``rapids.spill-fraction``,
    ``rapids.dask-fraction``. The configuration page of the docs describes each one
    (generated, like this section, from ``spark_dask/options.py``).

    Examples
    --------
    >>> cluster = SparkCluster(spark, n_workers=4)       # doctest: +SKIP
    >>> client = cluster.get_client()                    # doctest: +SKIP
    >>> cluster.scale(2)                                 # doctest: +SKIP
    >>> cluster.adapt(minimum=1, maximum=8)              # doctest: +SKIP
    >>> cluster.close()                                  # doctest: +SKIP
    """

    _supports_scaling = True
    # Seconds close() lets the barrier job end by itself before cancelling it; None: the
    # close-timeout option (a closing signal handler sets a shorter one).
    close_grace: float | None = None
    # How the dashboard is served and linked (Databricks driver proxy); set in _start.
    dashboard_settings: DashboardSettings | None = None

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
        barrier: bool | str | None = None,
        asynchronous: bool = False,
        loop=None,
        name: str | None = None,
        quiet: bool = False,
    ):
        self.spark = active_session(spark)
        self.options = options.resolve(
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
            barrier=barrier,
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
        # The plan of the starting gang: the shape every later gang takes (worker kind,
        # GPU pinning and mode, task resource request, barrier or plain jobs).
        self.gang = None
        self.gangs: list[Gang] = []  # every gang (Spark job) submitted, in order
        self.connect = False  # a Spark Connect session
        self.facts = None
        self.security: Security | None = None
        self.timings: dict[str, float] = {}
        self._nanny_comms: dict[str, asyncio.Future] = {}  # _open_nanny_comms: a call per nanny
        self._changed = asyncio.Event()
        self._start_task: asyncio.Task | None = None
        self._watchers: list[asyncio.Task] = []  # faults; stage starvation or session stop
        self._spec: dict | None = None
        self.relaunches = 0
        self.gang_tags: list[str] = []  # job group / tag of every gang submitted
        self.gang_status = "not started"
        self._target = 0  # workers the cluster is to have (scale)
        self._next_task = 0  # the cluster-wide number of the next gang's first task
        self._worker_size: tuple[int, int] | None = None  # (threads, memory) of the first workers
        self._by_address: dict[str, Gang] = {}
        self._reconcile: asyncio.Task | None = None
        self._reconcile_again = False
        self._scale_lock: asyncio.Lock | None = None
        self._hogging = False  # the slot warning was given
        self._last_scale_note: str | None = None
        self.recovery = Recovery(self.options["lost_worker_grace"], self.options["no_workers_timeout"])
        self._torn_down = False
        self._connected = False
        self._exit_stack = ExitStack()
        self._close_hooks: list = []  # add_close_hook
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

    # ------------------------------------------------------------------ connection files
    def write_connection(self, directory=None) -> str:
        """Write the files another process needs to join this cluster; the path of
        ``scheduler.json``.

        ``directory`` (created with mode 0700 if missing; default: a new private
        temporary directory) receives:

        - ``scheduler.json``, distributed's scheduler-file format (``address``, ``id``,
          ``services``, ...): ``Client(scheduler_file=...)``, ``dask worker
          --scheduler-file`` and clients in other languages read it;
        - with TLS (the default), the client credentials ``ca.pem``,
          ``client-cert.pem``, ``client-key.pem`` (mode 0600);
        - ``spark-dask-client.yaml``, a Dask config file with ``scheduler-address``,
          ``distributed.comm.require-encryption`` and ``distributed.comm.tls.ca-file`` /
          ``client.cert`` / ``client.key``.

        With ``DASK_CONFIG=<directory>`` in its environment, a plain
        ``distributed.Client()`` in any other process on a machine that can reach the
        scheduler joins the cluster. The files (and a directory this call created) are
        removed when the cluster closes. ``spark-dask run`` does this for its script and
        sets ``DASK_CONFIG`` for the script's child processes.

        Parameters
        ----------
        directory : str or os.PathLike, optional
            Where to write the files.

        Returns
        -------
        str
            The path of ``scheduler.json``.

        Examples
        --------
        >>> path = cluster.write_connection("/tmp/my-cluster")       # doctest: +SKIP
        >>> # in another process: DASK_CONFIG=/tmp/my-cluster python -c \\
        >>> #     "from distributed import Client; print(Client())"
        """
        from spark_dask.connection import write_connection

        return write_connection(self, directory)

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
        scheduler_job = None
        try:
            if is_connect(self.spark):
                problem = await _blocking(connect_session_problem, self.spark, opts["scheduler_host"])
                if problem:
                    raise PlanError(problem)
            self.connect = is_connect(self.spark)
            # The facts (Spark calls) and the scheduler (credentials, listening sockets,
            # dashboard) do not depend on each other: both at once.
            facts_job = asyncio.ensure_future(
                _blocking(cluster_facts, self.spark, opts["executor_wait"], opts["n_workers"])
            )
            scheduler_job = asyncio.ensure_future(self._start_scheduler(t0))
            try:
                done, _ = await asyncio.wait({facts_job, scheduler_job}, return_when=asyncio.FIRST_EXCEPTION)
                for job in (facts_job, scheduler_job):  # a failure of either, facts' first
                    if job in done and job.exception() is not None:
                        raise job.exception()
                self.facts = await facts_job
            except BaseException:
                if not facts_job.done():
                    facts_job.add_done_callback(lambda j: j.cancelled() or j.exception())
                raise
            self.timings["facts"] = time.monotonic() - t0
            self.gang = plan_gang(self.facts, *(opts[k] for k in ("n_workers", "worker", "task_profile", "gpu_mode", "barrier")))
            check_request(self.facts, opts["threads_per_worker"])
            opts["worker_options"] = check_worker_options(opts["worker_options"], self.gang.kind, opts["worker_command"])
            self._check_memory_here()
            for note in self.gang.notes + ((hog_warning(self.facts, self.gang),) if not self.quiet else ()):
                if note:
                    self._warn(note)
            self._hogging = hog_warning(self.facts, self.gang) is not None
            await scheduler_job
            self.status = Status.starting

            t_submit = time.monotonic()
            self._scale_lock = asyncio.Lock()
            self._target = self.gang.n_workers
            if not self.gang.barrier and self.facts.dynamic_allocation:
                self._log(
                    "spark-dask: dynamic allocation is on, where Spark runs no barrier stages: each "
                    "Dask worker runs as a Spark job of one task, started as Spark finds (or adds) "
                    "an executor for it"
                )
            gangs = [self._submit_gang(step, "start") for step in gang_steps(self.gang, self.gang.n_workers)]
            await self._wait_for_gangs(gangs, opts["timeout"])
            now = time.monotonic()
            self.timings["workers"] = now - t_submit
            self.timings["start"] = now - t0
            self._connected = True
            self.gang_status = "running"
            self._worker_size = self._observed_worker_size()
            self.status = Status.running
            # Connect: a stopped session does not end the collecting thread (the client
            # keeps retrying), so watch the session itself.
            watch = self._watch_session_stop() if self.connect else self._watch_starved_stages()
            self._watchers = [asyncio.ensure_future(self._watch_faults()), asyncio.ensure_future(watch)]
            self._register_signals()  # a no-op outside the main thread (sync start: __init__)
            self._log(
                f"spark-dask: {self.gang.n_workers} {self.gang.kind} workers connected to "
                f"{self.scheduler.address} in {self.timings['start']:.1f}s (Spark job tag {self.tag})"
            )
        except BaseException:
            if scheduler_job is not None:
                # the teardown closes the scheduler: let its start finish (or fail) first,
                # also when the plan refused after the facts (the scheduler may still start)
                with suppress(BaseException):
                    await scheduler_job
            await self._teardown(graceful=False)
            raise

    async def _start_scheduler(self, t0: float) -> None:
        """The refusal of unencrypted Spark RPC, the credentials and the scheduler (with
        its dashboard): everything of the start that needs no facts of the executors."""
        opts = self.options
        problem = encryption_problem(
            bool(opts["require_encryption"]),
            bool(opts["tls"]),
            await _blocking(spark_encrypted, self.spark),
        )
        if problem:
            raise PlanError("spark-dask: " + problem)
        self.security = await _blocking(_credentials.take) if opts["tls"] else Security()
        bind, host = await _blocking(driver_host, self.spark, opts["scheduler_host"])
        self.dashboard_settings = databricks.dashboard_settings(self.spark, host, config.get("dashboard-prefix"))
        self.scheduler = Scheduler(
            host=host,
            port=0,
            protocol="tls" if opts["tls"] else "tcp",
            security=self.security,
            dashboard=bool(opts["dashboard"]),
            dashboard_address=self.dashboard_settings.address,
            http_prefix=self.dashboard_settings.http_prefix,
            plugins=[_WorkerWatch(self._changed, self._worker_added, self._worker_removed)],
            validate=False,
        )
        await self.scheduler
        self._watch_worker_status_changes()
        self.scheduler_comm = rpc(
            self.scheduler.address,
            connection_args=self.security.get_connection_args("client"),
        )
        await super()._start()
        self.status = Status.starting  # Cluster._start says running: not before the workers
        self.timings["scheduler"] = time.monotonic() - t0

    def _register_signals(self) -> None:
        signals.register(self, signals.close_on_sigterm(config.get("close-on-sigterm")))

    def _submit_gang(self, plan, reason: str) -> Gang:
        """Submit a gang (Spark job) for ``plan``'s workers: at start, to scale up, or to
        relaunch the workers of a failed gang. Its workers are named from the next task
        number of the cluster, so names never repeat."""
        if self._spec is None:  # the same for every gang: built (and checked) once
            self._spec = self._task_spec()
        spec = self._spec
        if reason != "start" and self.gang.barrier and self._worker_size is not None:
            # Later gangs' workers take the size the first workers got (each task sizes
            # its workers from its own gang only), unless the user chose one.
            threads, memory = self._worker_size
            spec = replace(
                spec,
                threads_per_worker=spec.threads_per_worker or threads,
                memory_limit=memory if spec.memory_limit == "auto" else spec.memory_limit,
            )
        gang = Gang(
            self.spark,
            plan,
            spec,
            cluster_tag=self.tag,
            index=len(self.gangs),
            first=self._next_task,
            reason=reason,
            on_done=self._gang_ended_threadsafe,
        )
        self._next_task += plan.n_tasks
        self.gangs.append(gang)
        self.gang_tags.append(gang.tag)
        if self.gang_status in ("not started", "running") and reason == "start":
            self.gang_status = "starting"
        return gang.submit()

    @property
    def launcher(self):
        """The launcher of the newest gang (None before the first)."""
        return self.gangs[-1].launcher if self.gangs else None

    @property
    def task_rows(self) -> list[dict]:
        """The status rows of every ended gang's tasks (exit codes, log tails, notes)."""
        return [r for g in self.gangs for r in g.rows]

    def _live_gangs(self) -> list[Gang]:
        return [g for g in self.gangs if not g.done]

    def _gang_of(self, name: str) -> Gang | None:
        tag = gang_of_placeholder(name)
        for g in self.gangs:
            if (tag is not None and g.tag == tag) or (tag is None and name in g.seen):
                return g
        return None

    def _worker_added(self, scheduler, address: str) -> None:
        """Scheduler plugin (event loop): a worker joined; note it in its gang."""
        ws = scheduler.workers.get(address)
        facts = ws.extra.get("spark") if ws is not None else None
        if not isinstance(facts, dict) or facts.get("cluster") != self.tag:
            return
        index = facts.get("gang", 0)
        gang = self.gangs[index] if isinstance(index, int) and 0 <= index < len(self.gangs) else None
        if gang is None:
            return
        self._by_address[address] = gang
        was = gang.status
        name = str(ws.name)
        gang.worker_joined(name, address, ws.nanny, str(facts.get("host") or ""), str(facts.get("executor_id") or ""))
        for old in self.recovery.worker_back(gang, name):
            self._note(f"spark-dask: Dask worker {old} is back" + (f" (as {name})" if old != name else ""))
        if ws.nanny:
            self._open_nanny_comms([ws.nanny])
        if was == "starting" and gang.status == "running":
            self.recovery.start_failures = 0
            if gang.reason == "relaunch":
                starting = any(g.reason == "relaunch" and g.status == "starting" for g in self._live_gangs())
                if not starting and not self.recovery.owed:  # back to full size
                    self.gang_status = "running"
                self._log(f"spark-dask: all {gang.wanted} Dask workers are back ({gang.tag})")
            elif gang.reason == "scale":
                self._note(f"spark-dask: {gang.tag}: {gang.wanted} more Dask workers connected")
        extra = gang.surplus()
        if extra and self._connected:
            asyncio.ensure_future(self._close_workers(gang, extra))

    def _worker_removed(self, address: str) -> None:
        gang = self._by_address.pop(address, None)
        leaving = address in self.recovery.leaving
        self.recovery.leaving.discard(address)
        for name in [n for n, a in (gang.workers.items() if gang else ()) if a == address]:
            gang.worker_left(name)
            running = self.status == Status.running and self._connected and not gang.done
            lost = lost_worker("closing_gracefully" if leaving else None, name in gang.retiring, running)
            self.recovery.worker_left(gang, name, gang.hosts.get(name, ""), lost, time.monotonic())
            if lost:  # given lost-worker-grace to come back, then replaced (_watch_faults)
                msg = worker_lost_message(where([(name, gang.hosts.get(name, ""))]), self._connected_workers(),
                                          self._target, gang.barrier, self.recovery.grace)  # fmt: skip
                self._note(msg) if gang.barrier else self._tell(msg)

    async def _replace_missing(self) -> None:
        """Workers lost longer than ``lost-worker-grace`` ago: their gangs stop counting
        on them and the cluster starts replacements. A gang left with no worker to keep
        is cancelled: its Spark job could still bring one back later (Spark runs a lost
        task again), beside the replacement."""
        due = [(n, g, h) for n, g, h in self.recovery.due(time.monotonic()) if g.give_up(n)]
        if due:
            self.recovery.given_up([(n, h) for n, _, h in due])
            for gang in {id(g): g for _, g, _ in due if g.wanted == 0 and not g.done}.values():
                await _blocking(gang.cancel)
            self._kick()

    def _task_spec(self) -> dict:
        opts, sec = self.options, self.security
        tls = {"ca": sec.tls_ca_file, "cert": sec.tls_worker_cert, "key": sec.tls_worker_key} if opts["tls"] else None
        # warnings the tasks attach to their workers (rmm missing, distributed patch level)
        self.scheduler.add_plugin(TaskWarnings(self._warn))
        rmm = None
        if self.gang.kind == "cuda":
            rmm, notes = rmm_spec(lambda key: spark_conf(self.spark, key), self.gang.gpu_mode)
            for msg in notes:
                self._warn(msg)
        return task_spec(self.tag, self.scheduler.address, tls, opts, self.gang, self.facts, self.env, rmm)

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
                status, worker = kwargs.get("status"), kwargs.get("worker")
                if isinstance(worker, str) and str(getattr(status, "name", status)) in LEAVING:
                    self.recovery.leaving.add(worker)  # its removal is no loss (spark_dask.faults)

        handlers["worker-status-change"] = status_changed

    def _running_workers(self) -> int:
        return sum(ws.status == Status.running for ws in self.scheduler.workers.values())

    async def _wait_for_gangs(self, gangs: list[Gang], timeout: float) -> None:
        """Return once every worker of ``gangs`` is connected; fail fast when a gang fails."""
        want = sum(g.wanted for g in gangs)
        progress = _Progress(bool(self.options["progress"]) and not self.quiet, want)
        submitted = time.monotonic()
        deadline = submitted + timeout
        barrier = all(g.barrier for g in gangs)
        slots_seen = self.connect or not barrier  # no stage information under Spark Connect
        while True:
            self._changed.clear()
            ended = [g for g in gangs if g.done]
            if ended:
                what = "barrier stage" if ended[0].barrier else "job"
                raise self._gang_error(ended[0], f"the Spark {what} ended before the workers connected")
            n = self._running_workers()
            progress.update(n)
            if n >= want:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                f = self.facts
                raise SparkDaskError(start_timeout_message(
                    n, want, self.scheduler.address, timeout, self.tag, barrier, f.dynamic_allocation, f.max_executors,
                ))  # fmt: skip
            if not slots_seen and time.monotonic() - submitted >= self.options["slot_wait"]:
                slots_seen = await self._check_gang_got_slots(gangs)
            wake = remaining if slots_seen else min(remaining, 1.0)
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wake)

    async def _check_gang_got_slots(self, gangs: list[Gang]) -> bool:
        """True once a gang task runs; raises when the stage still has no slot at all.

        Spark checks a barrier stage against the application's *total* slots; when
        they exist but are busy (another spark-dask cluster, a long Spark job), the
        stage waits silently. Fail now instead, saying who holds the slots.
        """
        try:
            stages, ours = await _blocking(stage_snapshot, self.spark, [g.tag for g in gangs])
        except Exception:
            return True
        if any(st["stageId"] in ours and st["numActiveTasks"] > 0 for st in stages) or self._running_workers():
            return True
        if not ours:  # the job is not submitted yet
            return False
        n_tasks = sum(g.plan.n_tasks for g in gangs)
        others = busy_stages(stages, ours)
        raise SparkDaskError(no_slots_message(n_tasks, self.options["slot_wait"], self.facts.slots, others))

    async def _watch_starved_stages(self, every: float = 2.0, patience: float = 10.0) -> None:
        """Warn when a Spark stage waits for task slots that the gangs hold, and when a
        scale-up gang waits for slots that Spark jobs hold (:class:`~spark_dask.slots.SlotWatch`).

        A Spark job run inside the ``with`` block needs free task slots; when the gangs
        hold them all it waits until the Dask cluster closes (or shrinks). That must not
        be silent. Under dynamic allocation Spark adds executors for waiting stages: only
        said when the gangs hold every slot the application can ever have.
        """
        watch = SlotWatch(self.tag, patience, self.options["slot_wait"])
        while self.status == Status.running:
            live = self._live_gangs()
            try:
                stages, ours = await _blocking(stage_snapshot, self.spark, [g.tag for g in live])
            except Exception:  # the context is stopping
                return
            capacity = self.facts.slots
            if not self.gang.barrier:
                bound = max_workers(self.facts, self.gang)
                capacity = None if bound is None else bound // max(self.gang.workers_per_task, 1)
            held = sum(g.tasks_held() for g in live)
            for msg in watch.notes(stages, ours, live, held, capacity, self.gang.barrier, time.monotonic()):
                self._warn(msg, python_warning=False)
            await asyncio.sleep(every)

    async def _watch_faults(self, every: float = 1.0) -> None:
        """While the cluster runs: replace workers lost longer than ``lost-worker-grace``,
        start what no executor could hold once one can (every 2 s), say when the cluster
        has no worker at all, and fail it after ``no-workers-timeout`` of that."""
        rec, next_check = self.recovery, 0.0
        while self.status == Status.running:
            await self._replace_missing()
            now = time.monotonic()
            if rec.owed and now >= next_check and (self._reconcile is None or self._reconcile.done()):
                next_check = now + 2.0
                self._kick()
            verdict = rec.no_workers(len(self.scheduler.workers), self._target, now)
            if verdict == "warn":
                self._warn(no_workers_warning(self._target, self.gang_status, rec.timeout), python_warning=False)
            elif verdict == "fail":
                msg = no_workers_message(self._target, now - rec.no_workers_since, rec.timeout, rec.reason)
                asyncio.ensure_future(self._fail(msg))  # not awaited here: _teardown cancels us
                return
            await asyncio.sleep(every)

    async def _fail(self, msg: str) -> None:
        """The cluster cannot go on: computations waiting for a worker fail with ``msg``
        (clients see it), then everything is closed; ``status`` is ``failed``."""
        self.recovery.failure = msg
        self.gang_status = "failed: no Dask workers"
        logger.error(msg)
        self._log(msg)
        with suppress(Exception):
            self._err_waiting_tasks(msg)
        await self._close()
        self.status = Status.failed

    def _err_waiting_tasks(self, msg: str) -> None:
        """Every task waiting for a worker (queued or unrunnable) errs with ``msg``."""
        scheduler = self.scheduler
        exception = dumps_pickle(SparkDaskError(msg))
        stimulus = f"spark-dask-failed-{time.time()}"
        recommendations: dict = {}
        for ts in [*scheduler.unrunnable, *scheduler.queued]:
            if ts.state in ("no-worker", "queued"):
                recommendations.update(
                    scheduler.transition(ts.key, "erred", exception=exception, cause=ts.key, stimulus_id=stimulus)
                )
        scheduler.transitions(recommendations, stimulus_id=stimulus)

    async def _watch_session_stop(self, every: float = 1.0) -> None:
        """Close the cluster when its (Spark Connect) session is stopped."""
        while self.status == Status.running:
            if await _blocking(is_stopped, self.spark):
                self._log("spark-dask: the SparkSession was stopped; closing the Dask cluster")
                asyncio.ensure_future(self._close())  # not awaited here: _teardown cancels us
                return
            await asyncio.sleep(every)

    def _note(self, msg: str) -> None:
        """An event kept in ``get_logs()["Cluster"]`` and logged at INFO, not printed
        (scaling happens often under ``adapt``)."""
        self._cluster_manager_logs.append((datetime.datetime.now(), msg))
        logger.info(msg)

    def _tell(self, msg: str) -> None:
        """An event the user must see while the cluster runs: logged at WARNING (shown
        even where logging is not set up; not printed too) and kept in the cluster's logs."""
        self._cluster_manager_logs.append((datetime.datetime.now(), msg))
        logger.warning(msg)

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
        from spark_dask.task import host_memory

        problem = memory_problem(int(limit), host_memory())
        if problem:
            raise PlanError("spark-dask: " + problem)

    def _gang_error(self, gang: Gang, what: str) -> SparkDaskError:
        err = gang.error
        if err is None:
            detail = "the tasks returned: " + json.dumps(gang.launcher.rows)[:2000]
        else:
            detail = summarize_spark_error(err)
        return SparkDaskError(f"spark-dask: {what}.\n{detail}")

    def _gang_ended_threadsafe(self, gang: Gang) -> None:
        """Launcher thread: a gang's Spark job ended (normally, cancelled, or failed)."""
        with suppress(RuntimeError):  # loop already closed
            self.loop.add_callback(self._gang_ended, gang)

    async def _gang_ended(self, gang: Gang) -> None:
        self._changed.set()
        if self.status in (Status.closing, Status.closed) or not self._connected:
            return  # the start-up wait or the teardown deals with it
        if session_closed(gang.error) or await _blocking(is_stopped, self.spark):
            self._log("spark-dask: the SparkSession was stopped; closing the Dask cluster")
            await self._close()
            return
        outcome = gang.outcome()
        what = "Spark barrier stage" if gang.barrier else "Spark job"
        if outcome == "cancelled":
            gang.status = "cancelled"
            return
        if outcome == "retired":
            gang.status = "ended: its workers were retired"
            return
        if outcome == "closed":
            # Its workers left without a scale-down (client.retire_workers, a worker
            # closed from Dask): the cluster is that much smaller now.
            gang.status = "ended: its workers were closed"
            self._target = max(self._target - gang.wanted, 0)
            gang.wanted = 0
            self._log(f"spark-dask: the {what} {gang.tag} ended: its Dask workers were closed")
            return
        reason = gang.failure()
        gang.status = f"failed: {reason}"
        if outcome == "start-failed":
            # Relaunching would fail the same way: the request is dropped.
            self._target = max(self._target - gang.wanted, 0)
            gang.wanted = 0
            self.recovery.start_failures += 1
            msg = f"spark-dask: the {what} {gang.tag} for {gang.plan.n_workers} more Dask workers failed: {reason}"
            if self.recovery.start_failures >= 3 and self._adaptive is not None:
                self._adaptive.stop(reason="spark-dask: gangs fail to start")
                msg += (
                    f"\n{self.recovery.start_failures} gangs in a row could not start their workers: adaptive "
                    "scaling is stopped. Fix the cause and call cluster.adapt(...) again."
                )
            self._warn(msg, python_warning=False)
            return
        # A lost executor or task: relaunch this gang's workers (only these).
        self.recovery.forget(gang)
        workers = [(n, gang.hosts.get(n, "")) for n in sorted(gang.seen) if n not in gang.retiring]
        executor = lost_executor(str(gang.error))
        what = f"the {what} {gang.tag} failed" + (f" ({executor} lost)" if executor else "")
        self.recovery.gang_failed(what, f"{gang.tag}: {reason.lstrip(': ')}", workers[: gang.wanted], gang.wanted)
        gang.wanted = 0
        self._kick()

    # ------------------------------------------------------------------ scaling
    def _kick(self) -> None:
        """Bring the gangs to the target (event loop; returns at once)."""
        if self._reconcile is not None and not self._reconcile.done():
            self._reconcile_again = True
            return
        self._reconcile = asyncio.ensure_future(self._correct_state())

    async def _correct_state(self) -> None:
        """Submit gangs, cancel waiting ones or retire workers until the gangs hold the
        target number of workers; relaunch the workers of failed gangs."""
        async with self._scale_lock:
            while True:
                self._reconcile_again = False
                if self.status != Status.running:
                    return
                current = sum(g.wanted for g in self._live_gangs())
                rec = self.recovery
                rec.owed = min(rec.owed, max(self._target - current, 0))  # scaled down meanwhile
                try:
                    if self._target > current:
                        await self._grow(self._target - current)
                    elif self._target < current:
                        await self._shrink(current - self._target)
                except Exception as e:  # pragma: no cover - reported, the next call retries
                    logger.exception("spark-dask: scaling failed")
                    self._warn(f"spark-dask: scaling to {self._target} workers failed: {e}", python_warning=False)
                    return
                if not self._reconcile_again:
                    return

    async def _grow(self, n: int) -> None:
        rec, reason, relaunch, lost = self.recovery, "scale", "", 0
        if rec.lost:
            attempts = self.options["relaunch_attempts"]
            lost, rec.lost = rec.lost, 0
            if self.relaunches >= attempts:
                self._target = max(self._target - lost, 0)
                n -= lost
                left = self._connected_workers()
                self.gang_status = f"failed: {rec.reason}" if not left else "running"
                msg = (
                    f"spark-dask: a Spark {'barrier stage' if self.gang.barrier else 'job'} failed and "
                    f"{self.relaunches} relaunches are used up: its {lost} Dask workers are not "
                    f"relaunched; the cluster has {left} workers. "
                    + ("Close it and start a new one. " if not left else "cluster.scale(n) adds workers again. ")
                    + f"Cause: {rec.reason}"
                )
                logger.error(msg)
                self._log(msg)
                if n <= 0:
                    return
                lost = 0
            else:
                self.relaunches += 1
                relaunch = f"relaunch {self.relaunches} of {attempts}"
                self.gang_status = f"relaunching ({self.relaunches})"
                rec.owed += lost
        reason = "relaunch" if rec.owed else reason
        # A barrier stage starts only whole: relaunch what the executors left can hold
        # now, the rest once Spark has capacity again (_watch_faults).
        now = await _blocking(self._placeable, n) if rec.owed and self.gang.barrier else n
        later = max(min(rec.owed, n) - now, 0)
        if lost or (later and not rec.owed_said):
            msg = loss_message(rec.what or "Dask workers were lost", "" if rec.what else rec.reason, rec.workers,
                               self._connected_workers(), self._target, now, later, relaunch)  # fmt: skip
            self._tell(msg) if lost else self._note(msg)
            rec.owed_said = later > 0
        rec.owed = max(rec.owed - now, 0)
        rec.owed_said = rec.owed_said and rec.owed > 0
        for step in gang_steps(self.gang, now):
            self._submit_gang(step, reason)

    def _connected_workers(self) -> int:
        return sum(g.connected for g in self._live_gangs())

    def _placeable(self, wanted: int) -> int:
        """Workers of ``wanted`` a new barrier stage can start now (blocking: Spark calls)."""
        facts = self._fresh_facts()
        held = sum(g.tasks_held() for g in self._live_gangs())
        return placeable(wanted, gang_capacity(facts, self.gang), held, self.gang.workers_per_task)

    async def _shrink(self, excess: int) -> None:
        live = self._live_gangs()
        # 1. gangs none of whose workers has connected: cancelled (newest first)
        for g in sorted((g for g in live if g.pending and not g.cancelled), key=lambda g: -g.index):
            if 0 < g.wanted <= excess:
                excess -= g.wanted
                g.wanted = 0
                await _blocking(g.cancel)
        if excess <= 0:
            return
        # 2. connected workers, those Dask loses least by first (idle, little data), a
        #    Spark task's workers together
        leaving = {n for g in live for n in g.retiring}
        names = [
            n
            for n in self.scheduler.workers_to_close(n=excess, key=_task_group, attribute="name")
            if str(n) not in leaving and self._gang_of(str(n)) is not None
        ]
        chosen = []
        for name in map(str, names):
            if excess <= 0:
                break
            chosen.append(name)
            excess -= 1
        # 3. workers not connected yet of gangs that are starting
        for g in sorted(live, key=lambda g: -g.index):
            while excess > 0 and g.wanted > g.connected and not g.done:
                g.retire([g.planned_names()[-1]])
                excess -= 1
        await self._retire(chosen)

    async def _retire(self, names: list[str]) -> None:
        """Scale-down: lower the gangs' wanted counts, move the workers' data to the
        other workers (``retire_workers``), then end the workers (their tasks return)."""
        real: dict[str, Gang] = {}
        for name in names:
            gang = self._gang_of(name)
            if gang is None:
                continue
            for n in gang.retire([name]):
                real[n] = gang
        for g in self._live_gangs():
            if g.pending and g.wanted == 0 and not g.cancelled:
                await _blocking(g.cancel)
        if real:
            await self._close_workers(None, list(real), gangs=real)

    async def _close_workers(self, gang: Gang | None, names: list[str], gangs: dict | None = None) -> None:
        """Retire ``names`` in Dask (their data moves to the others), then terminate their
        nannies: each worker's CLI exits at once and its Spark task returns its slot."""
        gangs = gangs or {n: gang for n in names}
        for n, g in gangs.items():
            g.retiring.add(n)
        present = [n for n in names if any(str(ws.name) == n for ws in self.scheduler.workers.values())]
        if present:
            retired = await self.scheduler.retire_workers(names=present, close_workers=True, remove=True)
            kept = sorted(set(present) - {str(info.get("name")) for info in retired.values()})
            if kept:
                self._warn(
                    f"spark-dask: Dask could not move the data of {', '.join(kept)} to another worker "
                    "(no worker left to take it); closing them anyway: what only they held is "
                    "recomputed or lost",
                    python_warning=False,
                )
        await asyncio.gather(*(self._terminate_nanny(gangs[n].nannies[n]) for n in names if n in gangs[n].nannies))
        self._note(f"spark-dask: retired Dask workers {', '.join(names)}")

    def _observed_worker_size(self) -> tuple[int, int] | None:
        """(threads, memory limit) of the cluster's workers, the smallest; None without any."""
        sizes = [
            (ws.nthreads, ws.memory_limit)
            for ws in (self.scheduler.workers.values() if self.scheduler is not None else ())
            if ws.nthreads
        ]
        if not sizes:
            return None
        return min(t for t, _ in sizes), min(m for _, m in sizes)

    def _fresh_facts(self):
        """The session read again (executors come and go); the start's facts where it
        cannot be read quickly (Spark Connect without a countable master)."""
        try:
            facts = cluster_facts(self.spark, 0, None)
        except Exception:
            return self.facts
        if self._spec is not None and facts.gpu_addresses:
            self._spec = replace(self._spec, executor_gpus=by_host(facts.gpu_addresses))
        return facts

    def _bound_reason(self) -> str:
        shape = self.gang
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
        return ""

    async def _scale(self, n: int) -> None:
        if self.status != Status.running:
            raise SparkDaskError(f"spark-dask: the cluster is {self.status.name}; it cannot scale")
        live = self._live_gangs()
        current = sum(g.wanted for g in live) + self.recovery.lost
        if n > current:
            facts = await _blocking(self._fresh_facts)
            bound = max_workers(facts, self.gang)
            per = max(self.gang.workers_per_task, 1)
            held = sum(g.tasks_held() for g in live) + tasks_for(self.recovery.lost, per)
            step = scale_step(n, current, held, None if bound is None else bound // per, per, self._bound_reason())
            if step.note and step.note != self._last_scale_note:  # Adaptive asks every interval
                self._warn(step.note)
            self._last_scale_note = step.note
            self._target = step.target
            total = replace(self.gang, n_tasks=held + step.new_tasks, n_workers=step.target)
            warning = hog_warning(facts, total)
            if warning and not self._hogging and not self.quiet:
                self._warn(warning)
                self._hogging = True  # said once (at start or at the first scale-up)
        else:
            scale_step(n, current, 0, None)  # checks n
            self._target = n
            self._last_scale_note = None
        self._kick()

    async def _scale_down(self, workers) -> None:
        """Adaptive's scale-down (after it retired ``workers``): drop them from their gangs."""
        if self.status != Status.running:
            return
        names = [str(w) for w in workers]
        async with self._scale_lock:
            await self._retire(names)
            self._target = sum(g.wanted for g in self._live_gangs())

    def _size_per_worker(self) -> tuple[int | None, int | None]:
        size = self._observed_worker_size() or self._worker_size
        threads = self.options["threads_per_worker"] or (size[0] if size else None)
        memory = self.options["memory_limit"]
        if memory == "auto":
            memory = size[1] if size else None
        return threads, memory

    # ------------------------------------------------------------------ contract
    def scale(self, n: int = 0, memory=None, cores=None):
        """Scale the cluster to ``n`` workers (or enough for ``cores`` threads or
        ``memory`` bytes).

        Growing submits a gang (a Spark barrier stage; under dynamic allocation a Spark
        job per worker) for the new workers, into free Spark task slots only: beyond
        them the cluster grows as far as the slots allow and a warning says so.
        Shrinking retires workers: Dask moves their data to the others first, then
        their Spark tasks return and their slots serve Spark jobs again. Returns at
        once; ``cluster.wait_for_workers(n)`` waits for the workers.
        """
        threads, per_memory = self._size_per_worker()
        if isinstance(memory, str):
            memory = parse_bytes(memory)
        n = workers_for(n, cores, memory, threads, per_memory)
        return self.sync(self._scale, n)

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
        **kwargs,
    ):
        """Let distributed's ``Adaptive`` scale the cluster with the workload.

        ``maximum`` is bounded by the workers the Spark application can hold (its task
        slots for the gangs' tasks; one worker per GPU; under dynamic allocation the
        executors ``spark.dynamicAllocation.maxExecutors`` allows). Other keyword
        arguments go to ``Adaptive`` (``interval``, ``wait_count``, ``target_duration``);
        the workers of one Spark task are retired together.
        """
        threads, per_memory = self._size_per_worker()
        if minimum_cores is not None:
            minimum = max(minimum, workers_for(0, minimum_cores, None, threads, None))
        if minimum_memory is not None:
            minimum = max(minimum, workers_for(0, None, parse_bytes(minimum_memory), None, per_memory))
        if maximum_cores is not None:
            if not threads:
                raise PlanError("adapt(maximum_cores=...) needs a worker's threads: none is known yet")
            maximum = min(maximum, math.floor(maximum_cores / threads))
        if maximum_memory is not None:
            if not per_memory:
                raise PlanError("adapt(maximum_memory=...) needs a worker's memory limit: none is known yet")
            maximum = min(maximum, math.floor(parse_bytes(maximum_memory) / per_memory))
        maximum, note = adapt_maximum(maximum, max_workers(self.facts, self.gang))
        if note:
            self._warn(note)
        if minimum > maximum:
            raise PlanError(f"adapt(): minimum={minimum} is above the maximum {maximum:g}")
        kwargs.setdefault("worker_key", _task_group)
        return super().adapt(Adaptive=Adaptive, minimum=minimum, maximum=maximum, **kwargs)

    @property
    def plan(self) -> set:
        """Names of the workers the gangs are to hold: connected ones, and a placeholder
        (``<gang>/pending-<i>``) for each that has not connected yet (for ``Adaptive``)."""
        return {n for g in self._live_gangs() for n in g.planned_names()}

    @property
    def requested(self) -> set:
        return self.plan

    @property
    def observed(self) -> set:
        if self.scheduler is None:
            return set()
        return {str(ws.name) for ws in self.scheduler.workers.values() if ws.status != Status.closing_gracefully}

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
        for watcher in self._watchers:
            if watcher is not None and watcher is not asyncio.current_task():
                watcher.cancel()
        if self._reconcile is not None:
            self._reconcile.cancel()
        with suppress(Exception):
            await Cluster._close(self)
        self.status = Status.closing
        if self.scheduler is not None:
            await self._run_close_hooks()
        if self.scheduler is not None:
            # Nannies first: each stops its worker process and exits, so the Spark task
            # returns. Then the scheduler, which also closes any worker without a nanny.
            nannies = [
                (ws.nanny, bool((ws.extra.get("spark") or {}).get("fast_close")))
                for ws in self.scheduler.workers.values()
                if ws.nanny
            ]
            with suppress(Exception):
                await asyncio.wait_for(
                    asyncio.gather(*(self._terminate_nanny(a, fast) for a, fast in nannies)),
                    self.options["close_timeout"],
                )
            with suppress(Exception):
                await self.scheduler.close(reason="spark-dask cluster closed")
        self.timings["close_scheduler"] = time.monotonic() - t0
        running = [g for g in self.gangs if not g.done]
        if running:
            # Every gang at once: each ends by itself once its workers exited; the rest
            # is cancelled after the grace. A stopped session: no Spark to wait for or to
            # cancel through (the workers were terminated above).
            stopped = await _blocking(is_stopped, self.spark)
            grace = self.options["close_timeout"] if self.close_grace is None else self.close_grace
            await _blocking(end_gangs, running, grace if graceful else 0, stopped)
        for g in self.gangs:
            if g.status in ("starting", "running"):
                g.status = "ended: the cluster closed"
        self.timings["close"] = time.monotonic() - t0
        self._exit_stack.close()
        self.status = Status.closed
        _live_clusters.discard(self)
        signals.unregister(self)

    def add_close_hook(self, hook) -> None:
        """Call ``hook()`` when the cluster closes, while its workers still run (the
        hand-off removes its files then; :meth:`write_connection` its connection files).
        A coroutine function is awaited, for at most the ``close-timeout``; a hook that
        fails does not stop the teardown."""
        self._close_hooks.append(hook)

    async def _run_close_hooks(self) -> None:
        for hook in reversed(self._close_hooks):
            with suppress(Exception):
                result = hook()
                if asyncio.iscoroutine(result):
                    await asyncio.wait_for(result, self.options["close_timeout"])
        self._close_hooks.clear()

    def _open_nanny_comms(self, nannies) -> None:
        """Open the scheduler's connection to each nanny when its worker joins, so that
        closing the cluster finds it in the scheduler's connection pool: the TLS handshake
        at close took ~35 ms of a 2-worker teardown (local-cluster[2,1,1024], a close 1 s
        after the start: 0.155-0.184 s without, 0.104-0.125 s with)."""
        for address in nannies:
            if address and address not in self._nanny_comms:
                job = asyncio.ensure_future(self.scheduler.rpc(address).identity())
                job.add_done_callback(lambda f: f.cancelled() or f.exception())
                self._nanny_comms[address] = job

    async def _terminate_nanny(self, address: str, fast: bool = False) -> None:
        # The nanny closes its end before it answers: a closed comm is success here.
        # ``fast``: the nanny runs spark-dask's preload, whose spark_dask_close stops the
        # worker and then ends the nanny process at once (no interpreter shutdown).
        opening = self._nanny_comms.pop(address, None)
        if opening is not None and not opening.done():  # its comm, once open, serves the close
            await asyncio.wait([opening], timeout=1.0)
        with suppress(Exception):
            if fast:
                await self.scheduler.rpc(address).spark_dask_close(reason="spark-dask cluster closed")
            else:
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

    # ------------------------------------------------------------------ logs
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
        if not self.gangs:
            return f"Spark barrier stage {self.tag}: {self.gang_status}"
        return widget.gangs_log((g.describe(), tasks) for g, tasks in self._gang_tasks())

    def _gang_tasks(self) -> list[tuple[Gang, list[dict]]]:
        """Each gang with its tasks' placement and status: from the workers while its
        job runs, from the tasks' status rows after it ended."""
        closed = self.status == Status.closed
        workers = {} if closed else dict((self.scheduler_info or {}).get("workers", {}))
        status = {}
        if self.scheduler is not None and not closed:
            for address in workers:
                ws = self.scheduler.workers.get(address)
                status[address] = ws.status.name if ws is not None else "gone"
        out = []
        for g in self.gangs:
            if not g.done and not closed:
                tasks = widget.live_tasks(g.plan.n_tasks, workers, status, gang=g.index, base=g.first)
                for t in tasks:
                    if not t["workers"] and any(_task_number(n) == t["partition"] for n in g.retiring):
                        t["status"] = "returned: its workers were retired"
                    elif not t["workers"] and g.pending:
                        t["status"] = "waiting for a task slot"
            else:
                tasks = widget.ended_tasks(g.rows)
            for t in tasks:
                t["gang"] = g.tag
            out.append((g, tasks))
        return out

    def _spark_tasks(self) -> tuple[list[dict], str]:
        """Every gang task's placement and status, and whether any gang runs."""
        tasks = [t for _, ts in self._gang_tasks() for t in ts]
        if any(not g.done for g in self.gangs) and self.status != Status.closed:
            state = "running"
        elif tasks:
            state = "ended"
        else:
            state = "not running"
        if len(self.gangs) <= 1:  # one gang: the table has no Gang column
            for t in tasks:
                t.pop("gang", None)
        return tasks, state

    @property
    def dashboard_link(self) -> str:
        """The dashboard's status page; on Databricks the driver-proxy URL."""
        settings = self.dashboard_settings
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
            live = self._live_gangs()
            target = self._target if self.gangs else plan.n_workers
            held = sum(g.tasks_held() for g in live) if self.gangs else plan.n_tasks
            info.update(
                {
                    "workers": f"{target} {plan.kind}" + (" (one per GPU)" if plan.pinned else ""),
                    ("barrier tasks" if plan.barrier else "Spark tasks (plain jobs)"): held,
                    "task request": _task_request(plan, facts),
                }
            )
            if len(self.gangs) > 1 or not plan.barrier:
                info["gangs"] = f"{len(live)} running, {len(self.gangs)} submitted"
            if self._adaptive is not None and getattr(self._adaptive, "state", "") == "running":
                info["adaptive"] = f"{self._adaptive.minimum}..{self._adaptive.maximum} workers"
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
        db = self.dashboard_settings.databricks if self._dashboard is not None else None
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
        label = "Spark barrier tasks" if self.gang is None or self.gang.barrier else "Spark tasks"
        rows = widget.spark_rows_html(self.spark_info(), tasks, state, label)
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
    Keyword arguments are those of ``SparkCluster``.

    Examples
    --------
    >>> with spark_dask.start(spark) as client:          # doctest: +SKIP
    ...     ddf.groupby("k").x.mean().compute()
    """
    cluster = SparkCluster(spark, **kwargs)
    try:
        return _ClusterClient(cluster)
    except BaseException:
        cluster.close()
        raise
