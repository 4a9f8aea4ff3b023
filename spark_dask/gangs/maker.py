"""How a cluster makes its gangs: :class:`GangMaker` builds the
:class:`~spark_dask.executor.task_spec.TaskSpec` every task of a worker group is handed
(once, from the options, the plan and the facts: :func:`task_spec`, with the RMM sizing
of dask-cuda workers, :func:`rmm_spec`, and the preload's source, :func:`preload_source`)
and makes each :class:`~spark_dask.gangs.gang.Gang` from it; :class:`WorkerCredentials` reads
the workers' Databricks credentials for each gang.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import replace

import distributed
from dask.utils import parse_bytes

from spark_dask import rapids
from spark_dask.capacity import ClusterFacts, GangPlan
from spark_dask.errors import PlanError
from spark_dask.events import Events
from spark_dask.executor import preload
from spark_dask.executor.task_spec import TaskSpec
from spark_dask.gangs.gang import Gang
from spark_dask.options import ClusterOptions
from spark_dask.options.groups import DEFAULT
from spark_dask.plan import alone_on_executor
from spark_dask.scheduler import DriverScheduler
from spark_dask.spark.databricks import worker_credentials
from spark_dask.spark.session import cluster_facts
from spark_dask.spark.session import conf as spark_conf
from spark_dask.worker_flags import TaskWarnings


def by_host(entries) -> dict[str, list[list[str]]]:
    """``{host: [addresses of each executor on it]}`` from ``ClusterFacts.gpu_addresses``.

    >>> by_host([("h1", "1", ["0", "1"]), ("h2", "2", ["0"]), ("h1", "3", ["2"])])
    {'h1': [['0', '1'], ['2']], 'h2': [['0']]}
    """
    out: dict[str, list[list[str]]] = {}
    for host, _executor, addresses in entries:
        out.setdefault(host, []).append(list(addresses))
    return out


def by_executor(entries) -> dict[str, list[str]]:
    """``{executor id: its addresses}`` from ``ClusterFacts.gpu_addresses``: what a task
    that knows its executor's id takes as that executor's GPUs, wherever several
    executors share a host.

    >>> by_executor([("h1", "1", ["0", "1"]), ("h1", "3", ["2", "3"])])
    {'1': ['0', '1'], '3': ['2', '3']}
    """
    return {str(executor): list(addresses) for _host, executor, addresses in entries}


def executor_counts(hosts) -> dict[str, int]:
    """``{host: executors on it}`` from ``ClusterFacts.executor_hosts``.

    >>> executor_counts(("h1", "h2", "h1"))
    {'h1': 2, 'h2': 1}
    """
    out: dict[str, int] = {}
    for host in hosts:
        out[host] = out.get(host, 0) + 1
    return out


def rmm_spec(spark_conf, gpu_mode: str | None, opts: ClusterOptions) -> tuple[dict, list[str]]:
    """RMM pool sizing for dask-cuda workers (the ``rapids_*`` options,
    ``spark-dask.rapids.*``), and the warnings when the Spark RAPIDS plugin's own pool
    would leave too little GPU memory for them (``spark_conf(key)`` reads the
    application's Spark conf)."""
    share = float(opts.rapids_dask_fraction)
    warnings = rapids.check_rapids(spark_conf, share)
    pool = opts.rapids_rmm_pool_size
    if pool is False:
        pool = None
    elif pool not in (None, "auto"):
        pool = parse_bytes(pool) if isinstance(pool, str) else int(pool)
    spill = opts.rapids_spill_fraction
    return {
        "pool": pool,
        "reserve": parse_bytes(str(opts.rapids_rmm_reserve)),
        "fraction": float(opts.rapids_rmm_fraction),
        "spill_fraction": None if spill in (None, False) else float(spill),
        # beside Spark's own GPU tasks an auto-sized pool leaves them the rest
        "share": share if gpu_mode == "shared" else None,
    }, warnings


def preload_source() -> str:
    """The text of :mod:`spark_dask.executor.preload`, which each task writes as a module file.

    Returns
    -------
    str
        The module's source, read on the driver (the executors need not have spark_dask).
    """
    return inspect.getsource(preload)


def task_spec(
    tag: str,
    scheduler_address: str,
    tls: dict | None,
    opts: ClusterOptions,
    plan: GangPlan,
    facts: ClusterFacts,
    env: dict,
    rmm: dict | None,
) -> TaskSpec:
    """The specification every task of cluster ``tag`` gets (see the module's text).

    Parameters
    ----------
    tag : str
        The cluster's tag.
    scheduler_address : str
        Where the workers connect.
    tls : dict or None
        The workers' credentials (``ca``, ``cert``, ``key``), or None.
    opts : dict
        The cluster's resolved options (:func:`spark_dask.options.resolve`).
    plan : GangPlan
        The cluster's first gang.
    facts : ClusterFacts
        The Spark application's executors.
    env : dict
        The workers' environment variables.
    rmm : dict or None
        RMM pool sizing (:func:`rmm_spec`), for dask-cuda workers.

    Returns
    -------
    TaskSpec
    """
    requires = [] if opts.worker_command else ["distributed"]
    if plan.kind == "cuda" and not opts.worker_command:
        requires.append("dask_cuda")
    return TaskSpec(
        cluster_id=tag,
        scheduler_address=scheduler_address,
        tls=tls,
        kind=plan.kind,
        pinned=plan.pinned,
        # allGather only when tasks may be given the same GPU (fractional amounts, no
        # profile) yet each must hold its own; a shared gang splits the executors'
        # GPUs by the placement that getTaskInfos() gives every task.
        gather=plan.gpu_mode == "exclusive" and not plan.uses_profile and facts.task_gpus < 1,
        gpu_mode=plan.gpu_mode,
        executor_gpus=by_host(facts.gpu_addresses),
        gpus_by_executor=by_executor(facts.gpu_addresses),
        gpus_per_executor=int(facts.executor_gpus),
        workers_per_task=plan.workers_per_task,
        multiprocessing_method=opts.multiprocessing_method,
        fork_nanny=bool(opts.fork_nanny),
        n_workers=plan.n_workers,
        requires=requires,
        threads_per_worker=opts.threads_per_worker,
        memory_limit=opts.memory_limit,
        executor_cores=facts.executor_cores,
        # a plain job's task alone on its executor (its CPUs more than half the
        # cores): its worker may use all of them, as a barrier gang's lone task does
        own_executor=alone_on_executor(plan, facts),
        executor_memory=facts.executor_memory,
        container_room=facts.container_room,
        executors_by_host=executor_counts(facts.executor_hosts),
        worker_options=opts.worker_options or {},
        worker_command=opts.worker_command,
        death_timeout=opts.death_timeout,
        kill_grace=opts.kill_grace,
        distributed_version=distributed.__version__,
        connect_timeout=opts.connect_timeout,
        env=env,
        rmm=rmm,
        preload=preload_source(),
    )


class WorkerCredentials:
    """The workers' Databricks credentials (``databricks_credentials``; ``{}`` when
    off), read again for each gang so that relaunched workers get a current token
    (:func:`spark_dask.spark.databricks.worker_credentials`, on the driver).

    Parameters
    ----------
    options : ClusterOptions
        The resolved options (``databricks_credentials``).
    events : Events
        Where a failed later read is said.
    """

    def __init__(self, options: ClusterOptions, events: Events):
        self.options = options
        self.events = events
        self.last: dict | None = None  # the last credentials read

    def read(self, reason: str = "start") -> dict:
        """The credentials for a ``reason`` gang. At the start a missing source is a
        :class:`~spark_dask.errors.PlanError`; later the gang gets the credentials read
        before, with a warning. The start's gangs use the read of the start's own check."""
        if not self.options.databricks_credentials:
            return {}
        if reason == "start" and self.last is not None:
            return self.last
        try:
            self.last = worker_credentials(os.environ)
        except PlanError:
            if self.last is None:
                raise
            self.events.warn(
                f"spark-dask: the Databricks credentials could not be read again for the workers of a "
                f"{reason} gang: they get those read before (a notebook token among them may have expired)",
                python_warning=reason != "relaunch",  # a relaunch: a log record while the cluster runs
            )
        return self.last


class GangMaker:
    """Makes the gangs of one worker group: the task specification, built (and checked)
    once from the options, the plan and the facts, and for gangs after the first the
    worker size the first workers got (each task sizes its workers from its own gang only).

    Parameters
    ----------
    spark : SparkSession
    tag : str
        The cluster's job tag (``spark-dask-<id>``).
    driver_scheduler : DriverScheduler
        The started scheduler side (its address and credentials).
    on_done : callable
        ``on_done(gang)``, from the launcher thread, when a gang's Spark job ends.
    group : str
        The worker group whose gangs it makes (:mod:`spark_dask.options.groups`).
    options : ClusterOptions
        The group's resolved options (:func:`spark_dask.options.groups.group_options`).
    env : dict
        Environment variables for the group's workers.
    plan : GangPlan
        The plan of the group's starting gang.
    facts : ClusterFacts
        The Spark facts read at start.
    worker_options : dict
        The worker options checked (:func:`spark_dask.worker_flags.check_worker_options`).
    credentials : WorkerCredentials
        Where each gang's Databricks credentials come from (warnings go to its events).
    log_dir : str, optional
        The cluster's log directory (:class:`spark_dask.logdir.KeptLogs`), or None.
    """

    def __init__(
        self,
        spark,
        tag: str,
        driver_scheduler: DriverScheduler,
        on_done,
        *,
        group: str = DEFAULT,
        options: ClusterOptions,
        env: dict,
        plan: GangPlan,
        facts: ClusterFacts,
        worker_options: dict,
        credentials: WorkerCredentials,
        log_dir: str | None = None,
    ):
        self.spark = spark
        self.tag = tag
        self.driver_scheduler = driver_scheduler
        self.on_done = on_done
        self.group = group
        self.options = options
        self.env = env
        self.plan = plan
        self.facts = facts
        self.worker_options = worker_options
        self.credentials = credentials
        self.log_dir = log_dir
        self.events = credentials.events
        self.spec: TaskSpec | None = None
        self.worker_size: tuple[int, int] | None = None  # (threads, memory) of the first workers

    def make(self, plan, reason: str, index: int, first: int) -> Gang:
        """A gang (Spark job) for ``plan``'s workers, not submitted yet."""
        if self.spec is None:
            self.spec = self.task_spec()
        spec = replace(self.spec, credentials=self.credentials.read(reason))
        if reason != "start" and self.plan.barrier and self.worker_size is not None:
            threads, memory = self.worker_size  # unless the user chose a size
            spec = replace(
                spec,
                threads_per_worker=spec.threads_per_worker or threads,
                memory_limit=memory if spec.memory_limit == "auto" else spec.memory_limit,
            )
        return Gang(
            self.spark,
            plan,
            spec,
            cluster_tag=self.tag,
            index=index,
            first=first,
            reason=reason,
            on_done=self.on_done,
            group=self.group,
        )

    def task_spec(self) -> TaskSpec:
        """What every task of the group is handed (:func:`task_spec`)."""
        opts, sec, scheduler = self.options, self.driver_scheduler.security, self.driver_scheduler.scheduler
        tls = {"ca": sec.tls_ca_file, "cert": sec.tls_worker_cert, "key": sec.tls_worker_key} if opts.tls else None
        # warnings the tasks attach to their workers (rmm missing, distributed patch level)
        if TaskWarnings.name not in scheduler.plugins:  # one for every worker group
            scheduler.add_plugin(TaskWarnings(self.events.warn))
        rmm = None
        if self.plan.kind == "cuda":
            rmm, notes = rmm_spec(lambda key: spark_conf(self.spark, key), self.plan.gpu_mode, opts)
            for msg in notes:
                self.events.warn(msg)
        opts = replace(opts, worker_options=self.worker_options)
        spec = task_spec(self.tag, scheduler.address, tls, opts, self.plan, self.facts, self.env, rmm)
        return replace(spec, log_directory=self.log_dir)

    def fresh_facts(self):
        """The session read again (executors come and go); the start's facts where it
        cannot be read quickly (Spark Connect without a countable master)."""
        try:
            facts = cluster_facts(self.spark, 0, None)
        except Exception:  # noqa: BLE001 - the start's facts serve
            return self.facts
        if self.spec is not None and facts.gpu_addresses:
            self.spec = replace(
                self.spec,
                executor_gpus=by_host(facts.gpu_addresses),
                gpus_by_executor=by_executor(facts.gpu_addresses),
            )
        if self.spec is not None and facts.executor_hosts:  # executors came or went
            self.spec = replace(self.spec, executors_by_host=executor_counts(facts.executor_hosts))
        return facts


__all__ = [
    "GangMaker",
    "WorkerCredentials",
    "by_executor",
    "by_host",
    "executor_counts",
    "preload_source",
    "rmm_spec",
    "task_spec",
]
