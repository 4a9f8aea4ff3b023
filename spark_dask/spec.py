"""The task specification: what every Spark task of a cluster is handed (scheduler
address, credentials, worker kind and size, GPU pinning), built once on the driver
from the cluster's options, plan and facts. :func:`spark_dask.task.run_task` reads it
on the executors; each gang adds its own number and size
(:class:`spark_dask.gang.Gang`).
"""

from __future__ import annotations

import distributed
from dask.utils import parse_bytes

from spark_dask import config, rapids
from spark_dask.plan import ClusterFacts, GangPlan


def by_host(entries) -> dict[str, list[list[str]]]:
    """``{host: [addresses of each executor on it]}`` from ``ClusterFacts.gpu_addresses``.

    >>> by_host([("h1", ["0", "1"]), ("h2", ["0"]), ("h1", ["2"])])
    {'h1': [['0', '1'], ['2']], 'h2': [['0']]}
    """
    out: dict[str, list[list[str]]] = {}
    for host, addresses in entries:
        out.setdefault(host, []).append(list(addresses))
    return out


def rmm_spec(spark_conf, gpu_mode: str | None) -> tuple[dict, list[str]]:
    """RMM pool sizing for dask-cuda workers (``spark-dask.rapids.*``), and the warnings
    when the Spark RAPIDS plugin's own pool would leave too little GPU memory for them
    (``spark_conf(key)`` reads the application's Spark conf)."""
    share = float(config.get("rapids.dask-fraction"))
    warnings = rapids.check_rapids(spark_conf, share)
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
        "share": share if gpu_mode == "shared" else None,
    }, warnings


def task_spec(
    tag: str, scheduler_address: str, tls: dict | None, opts: dict, plan: GangPlan, facts: ClusterFacts,
    env: dict, rmm: dict | None,
) -> dict:  # fmt: skip
    """The specification every task of cluster ``tag`` gets (see the module's text);
    ``tls``: the workers' credential files (``ca``, ``cert``, ``key``) or None."""
    requires = [] if opts["worker_command"] else ["distributed"]
    if plan.kind == "cuda" and not opts["worker_command"]:
        requires.append("dask_cuda")
    return {
        "cluster_id": tag,
        "scheduler_address": scheduler_address,
        "tls": tls,
        "kind": plan.kind,
        "pinned": plan.pinned,
        # allGather only when tasks may be given the same GPU (fractional amounts, no
        # profile) yet each must hold its own; a shared gang splits the executors'
        # GPUs by the placement that getTaskInfos() gives every task.
        "gather": plan.gpu_mode == "exclusive" and not plan.uses_profile and facts.task_gpus < 1,
        "gpu_mode": plan.gpu_mode,
        "executor_gpus": by_host(facts.gpu_addresses),
        "gpus_per_executor": int(facts.executor_gpus),
        "workers_per_task": plan.workers_per_task,
        "multiprocessing_method": config.get("multiprocessing-method"),
        "fork_nanny": bool(config.get("fork-nanny")),
        "n_workers": plan.n_workers,
        "requires": requires,
        "threads_per_worker": opts["threads_per_worker"],
        "memory_limit": opts["memory_limit"],
        "executor_cores": facts.executor_cores,
        # a plain job's task alone on its executor (its CPUs more than half the
        # cores): its worker may use all of them, as a barrier gang's lone task does
        "own_executor": bool(plan.task_cpus and 2 * plan.task_cpus > facts.executor_cores),
        "executor_memory": facts.executor_memory,
        "worker_options": opts["worker_options"] or {},
        "worker_command": opts["worker_command"],
        "death_timeout": opts["death_timeout"],
        "kill_grace": opts["kill_grace"],
        "distributed_version": distributed.__version__,
        "connect_timeout": opts["connect_timeout"],
        "env": env,
        "log_lines": 30,
        "rmm": rmm,
    }
