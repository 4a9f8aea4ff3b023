"""The task specification: what every Spark task of a cluster is handed (scheduler
address, credentials, worker kind and size, GPU pinning, the workers' preload), one
frozen :class:`TaskSpec` built once on the driver (:func:`spark_dask.gangs.maker.task_spec`).
:func:`spark_dask.executor.gang_task.run_task` reads it on the executors; each gang sets its
own number and size (:class:`spark_dask.gangs.gang.Gang`, with :func:`dataclasses.replace`).

The class is pickled by value with the task code (the executors need not have
spark_dask installed), so its fields hold plain values only.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TaskSpec:
    """What every Spark task of a cluster is handed (see the module's text).

    Fields without a default are set by :func:`spark_dask.gangs.maker.task_spec` from the cluster's options,
    plan and facts; those with one are the gang's own (set by
    :class:`spark_dask.gangs.gang.Gang`) or the task's constants.

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
        ``{host: [GPU addresses of each executor on it]}`` (:func:`spark_dask.gangs.maker.by_host`), for a
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
        A user's worker command template (:func:`spark_dask.executor.command.worker_command`);
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
        RMM pool sizing of dask-cuda workers (:func:`spark_dask.gangs.maker.rmm_spec`).
    preload : str
        The source of the workers' preload (:mod:`spark_dask.executor.preload`), written by
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
        Seconds a task retries to claim its workers' GPUs (:func:`spark_dask.executor.gpu_claims.claim_gpus`).
    credentials : dict
        Databricks credentials for the workers' environment (``databricks_credentials``),
        set for each gang on the driver; out of the repr, like ``tls``.
    log_directory : str or None
        The cluster's log directory (:func:`spark_dask.logdir.cluster_directory`), where
        each task keeps its workers' whole logs when they end; None: not kept.
    group : str
        The worker group of the gang (:mod:`spark_dask.options.groups`), published in each
        worker's Spark facts: the group's pool takes the worker.
    executors_by_host : dict
        ``{host: executors on it}`` of the whole application (:func:`spark_dask.gangs.maker.executor_counts`),
        for ``memory_limit="auto"``: every executor JVM of a host takes its memory, whether
        it runs a task of the gang or not; empty where the driver cannot tell.
    gpus_by_executor : dict
        ``{executor id: its GPU addresses}`` (:func:`spark_dask.gangs.maker.by_executor`), for a
        shared gang: executors that share a host each own other GPUs (a standalone Worker
        or a YARN NodeManager hands each executor its own), which the host alone cannot tell
        apart; empty where the driver cannot tell.
    container_room : int or None
        Bytes the Dask workers of one executor have in its container (YARN, Kubernetes:
        :attr:`spark_dask.capacity.ClusterFacts.container_room`); None: no container
        limit, the host's memory is the bound.
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
    group: str = "default"
    executors_by_host: dict = field(default_factory=dict)
    gpus_by_executor: dict = field(default_factory=dict)
    container_room: int | None = None
