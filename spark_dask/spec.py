"""The task specification: what every Spark task of a cluster is handed (scheduler
address, credentials, worker kind and size, GPU pinning, the workers' preload), one
frozen :class:`TaskSpec` built once on the driver from the cluster's options, plan and
facts (:func:`task_spec`). :func:`spark_dask.task.run_task` reads it on the executors;
each gang sets its own number and size (:class:`spark_dask.gang.Gang`, with
:func:`dataclasses.replace`).

The class is pickled by value with the task code (the executors need not have
spark_dask installed), so its fields hold plain values only.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import distributed
from dask.utils import parse_bytes

from spark_dask import preload, rapids
from spark_dask.plan import ClusterFacts, GangPlan, alone_on_executor


@dataclass(frozen=True)
class TaskSpec:
    """What every Spark task of a cluster is handed (see the module's text).

    Fields without a default are set by :func:`task_spec` from the cluster's options,
    plan and facts; those with one are the gang's own (set by
    :class:`spark_dask.gang.Gang`) or the task's constants.

    Attributes
    ----------
    cluster_id : str
        The cluster's tag: names the workers' directories and GPU claims, and is
        published in each worker's Spark facts.
    scheduler_address : str
        The address the workers connect to.
    tls : dict or None
        The workers' credentials as PEM texts (``ca``, ``cert``, ``key``); None: plain TCP.
    kind : str
        ``"cpu"`` or ``"cuda"``: which worker program.
    pinned : bool
        One worker per GPU, each with its own ``CUDA_VISIBLE_DEVICES``.
    gather : bool
        Whether the tasks agree on their GPUs with ``allGather`` (tasks may be given the
        same GPU, yet each must hold its own); otherwise every task learns the gang from
        ``getTaskInfos()``.
    gpu_mode : str or None
        ``"exclusive"`` or ``"shared"`` (the gang shares the executors' GPUs with Spark).
    executor_gpus : dict
        ``{host: [GPU addresses of each executor on it]}`` (:func:`by_host`), for a
        shared gang.
    gpus_per_executor : int
        GPUs of each executor.
    workers_per_task : int
        Dask workers each task starts.
    n_workers : int
        Dask workers of the gang.
    multiprocessing_method : str or None
        How a CPU worker's nanny starts its worker process
        (``spark-dask.multiprocessing-method``).
    fork_nanny : bool
        Whether a CPU worker's nanny may be forked from the task's process
        (``spark-dask.fork-nanny``).
    requires : list of str
        The modules the executors' Python must import (``distributed``, ``dask_cuda``).
    distributed_version : str
        The driver's distributed release, compared with the executors'.
    threads_per_worker : int or None
        The user's choice; None: sized from the task's CPUs.
    memory_limit : int or str
        Bytes per worker, or ``"auto"``.
    executor_cores : int
        Cores of each executor.
    own_executor : bool
        A plain job's task alone on its executor (its CPUs more than half the cores):
        its worker may use all of them.
    executor_memory : int
        Memory of each executor in bytes (0: unknown).
    worker_options : dict
        Extra options of the worker command.
    worker_command : str, list of str or None
        A user's worker command template (:func:`spark_dask.plan.worker_command`);
        None: the default command.
    death_timeout : float
        Seconds a worker waits for the scheduler before it exits.
    kill_grace : float
        Seconds between SIGTERM and SIGKILL of a worker's process group.
    connect_timeout : float
        Seconds each task waits for its test connection to the scheduler.
    env : dict
        Environment variables of the workers.
    rmm : dict or None
        RMM pool sizing of dask-cuda workers (:func:`rmm_spec`).
    preload : str
        The source of the workers' preload (:mod:`spark_dask.preload`), written by
        each task into its workers' directory.
    gang : int
        The gang's number in the cluster.
    name_base : int
        The cluster-wide number of the gang's first task: its workers are named from it.
    barrier : bool
        A barrier stage; False: a plain Spark job of one task (dynamic allocation).
    log_lines : int
        Lines of each worker's log in the task's status row.
    claim_wait : float
        Seconds a task retries to claim its workers' GPUs (:func:`spark_dask.task.claim_gpus`).
    credentials : dict
        Databricks credentials for the workers' environment (``databricks_credentials``),
        set for each gang on the driver; out of the repr, like ``tls``.
    log_directory : str or None
        The cluster's log directory (:func:`spark_dask.logdir.cluster_directory`), where
        each task keeps its workers' whole logs when they end; None: not kept.
    """

    cluster_id: str
    scheduler_address: str
    tls: dict | None = field(repr=False)  # key material: kept out of logs
    kind: str
    pinned: bool
    gather: bool
    gpu_mode: str | None
    executor_gpus: dict[str, list[list[str]]]
    gpus_per_executor: int
    workers_per_task: int
    n_workers: int
    multiprocessing_method: str | None
    fork_nanny: bool
    requires: list[str]
    distributed_version: str
    threads_per_worker: int | None
    memory_limit: int | str
    executor_cores: int
    own_executor: bool
    executor_memory: int
    worker_options: dict
    worker_command: str | list[str] | None
    death_timeout: float
    kill_grace: float
    connect_timeout: float
    env: dict
    rmm: dict | None
    preload: str = field(repr=False)
    gang: int = 0
    name_base: int = 0
    barrier: bool = True
    log_lines: int = 30
    claim_wait: float = 10.0
    credentials: dict = field(default_factory=dict, repr=False)  # secrets: kept out of logs
    log_directory: str | None = None


def by_host(entries) -> dict[str, list[list[str]]]:
    """``{host: [addresses of each executor on it]}`` from ``ClusterFacts.gpu_addresses``.

    >>> by_host([("h1", ["0", "1"]), ("h2", ["0"]), ("h1", ["2"])])
    {'h1': [['0', '1'], ['2']], 'h2': [['0']]}
    """
    out: dict[str, list[list[str]]] = {}
    for host, addresses in entries:
        out.setdefault(host, []).append(list(addresses))
    return out


def rmm_spec(spark_conf, gpu_mode: str | None, opts: dict) -> tuple[dict, list[str]]:
    """RMM pool sizing for dask-cuda workers (the ``rapids_*`` options,
    ``spark-dask.rapids.*``), and the warnings when the Spark RAPIDS plugin's own pool
    would leave too little GPU memory for them (``spark_conf(key)`` reads the
    application's Spark conf)."""
    share = float(opts["rapids_dask_fraction"])
    warnings = rapids.check_rapids(spark_conf, share)
    pool = opts["rapids_rmm_pool_size"]
    if pool is False:
        pool = None
    elif pool not in (None, "auto"):
        pool = parse_bytes(pool) if isinstance(pool, str) else int(pool)
    spill = opts["rapids_spill_fraction"]
    return {
        "pool": pool,
        "reserve": parse_bytes(str(opts["rapids_rmm_reserve"])),
        "fraction": float(opts["rapids_rmm_fraction"]),
        "spill_fraction": None if spill in (None, False) else float(spill),
        # beside Spark's own GPU tasks an auto-sized pool leaves them the rest
        "share": share if gpu_mode == "shared" else None,
    }, warnings




def preload_source() -> str:
    """The text of :mod:`spark_dask.preload`, which each task writes as a module file.

    Returns
    -------
    str
        The module's source, read on the driver (the executors need not have spark_dask).
    """
    return inspect.getsource(preload)


def task_spec(
    tag: str, scheduler_address: str, tls: dict | None, opts: dict, plan: GangPlan, facts: ClusterFacts,
    env: dict, rmm: dict | None,
) -> TaskSpec:  # fmt: skip
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
    requires = [] if opts["worker_command"] else ["distributed"]
    if plan.kind == "cuda" and not opts["worker_command"]:
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
        gpus_per_executor=int(facts.executor_gpus),
        workers_per_task=plan.workers_per_task,
        multiprocessing_method=opts["multiprocessing_method"],
        fork_nanny=bool(opts["fork_nanny"]),
        n_workers=plan.n_workers,
        requires=requires,
        threads_per_worker=opts["threads_per_worker"],
        memory_limit=opts["memory_limit"],
        executor_cores=facts.executor_cores,
        # a plain job's task alone on its executor (its CPUs more than half the
        # cores): its worker may use all of them, as a barrier gang's lone task does
        own_executor=alone_on_executor(plan, facts),
        executor_memory=facts.executor_memory,
        worker_options=opts["worker_options"] or {},
        worker_command=opts["worker_command"],
        death_timeout=opts["death_timeout"],
        kill_grace=opts["kill_grace"],
        distributed_version=distributed.__version__,
        connect_timeout=opts["connect_timeout"],
        env=env,
        rmm=rmm,
        preload=preload_source(),
    )
