"""What the Spark tasks of a gang are handed, built on the driver: the
:class:`~spark_dask.executor.task_spec.TaskSpec` from the cluster's options, plan and facts
(:func:`task_spec`), the RMM sizing of dask-cuda workers (:func:`rmm_spec`) and the
preload's source (:func:`preload_source`).
"""

from __future__ import annotations

import inspect

import distributed
from dask.utils import parse_bytes

from spark_dask import rapids
from spark_dask.executor import preload
from spark_dask.executor.task_spec import TaskSpec
from spark_dask.options import ClusterOptions
from spark_dask.plan import ClusterFacts, GangPlan, alone_on_executor


def by_host(entries) -> dict[str, list[list[str]]]:
    """``{host: [addresses of each executor on it]}`` from ``ClusterFacts.gpu_addresses``.

    >>> by_host([("h1", ["0", "1"]), ("h2", ["0"]), ("h1", ["2"])])
    {'h1': [['0', '1'], ['2']], 'h2': [['0']]}
    """
    out: dict[str, list[list[str]]] = {}
    for host, addresses in entries:
        out.setdefault(host, []).append(list(addresses))
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
    tag: str, scheduler_address: str, tls: dict | None, opts: ClusterOptions, plan: GangPlan, facts: ClusterFacts,
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
