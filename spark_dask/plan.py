"""Pure decisions on the driver: how many Spark tasks and Dask workers, which resource
profile, how big a worker may be (``memory_limit``, threads), how a scale step splits
into Spark jobs, which warning or error.

Nothing here touches Spark, processes or the network, so every rule is unit-tested
without a cluster. The task slots the decisions count (what the application has, what
a gang holds, what Spark jobs keep) are :mod:`spark_dask.capacity`'s. What each Spark
task decides for itself (its workers' GPUs, names, threads, memory, command line) is in
:mod:`spark_dask.executor`, which this module uses and which must not use it.
"""

from __future__ import annotations

import math
from dataclasses import replace

from dask.utils import parse_bytes

from spark_dask.capacity import ClusterFacts, GangPlan, check_slots, cpu_room, executor_shape, tasks_for
from spark_dask.errors import PlanError
from spark_dask.executor.sizing import (
    container_advice,
    pyspark_memory_advice,
    small_memory_problem,
    thread_cores,
    worker_threads,
)
from spark_dask.sizes import plural

KINDS = ("auto", "cuda", "cpu")
GPU_MODES = ("auto", "shared", "exclusive")


def _check_n_workers(n_workers) -> None:
    if n_workers is None:
        return
    if isinstance(n_workers, bool) or not isinstance(n_workers, int):
        raise PlanError(
            f"spark-dask: n_workers must be a positive integer or None (one per executor or GPU), got {n_workers!r}"
        )
    if n_workers < 1:
        raise PlanError(f"spark-dask: n_workers must be at least 1, got {n_workers}")


def check_gpu_mode(gpu_mode) -> None:
    """Raise :class:`PlanError` unless ``gpu_mode`` is one of :data:`GPU_MODES` (the one
    rule: ``options.resolve()`` checks the option with it, :func:`plan_gang` its argument)."""
    if gpu_mode not in GPU_MODES:
        raise PlanError(f"spark-dask: gpu_mode must be one of {GPU_MODES}, got {gpu_mode!r}")


def gpu_sharing(facts: ClusterFacts, gpu_mode: str, profiles_ok: bool) -> tuple[str, str | None]:
    """(mode, note): whether the gang shares the executors' GPUs with Spark's own tasks.

    ``auto`` shares when Spark's tasks use GPU *shares* themselves (a fractional
    ``spark.task.resource.gpu.amount``) or the RAPIDS Accelerator is on; otherwise each
    worker's GPU is held whole (``exclusive``). Sharing with whole-GPU Spark tasks
    (amount 1, the Databricks default) needs a CPU-only stage-level task profile for
    the gang: where Spark cannot give one, ``auto`` falls back to exclusive and says so.
    ``gpu_mode`` is one of :data:`GPU_MODES` (:func:`check_gpu_mode`).
    """
    fractional = 0 < facts.task_gpus < 1
    if gpu_mode == "exclusive" or (gpu_mode == "auto" and not (fractional or facts.rapids_plugin)):
        return "exclusive", None
    if fractional or profiles_ok:
        return "shared", None
    why = (
        f"Spark tasks take whole GPUs (spark.task.resource.gpu.amount={facts.task_gpus:g}) and "
        "stage-level task profiles are not available here (Spark >= 3.4 on standalone, 3.5 on "
        "YARN/Kubernetes, dynamic allocation off; Spark Connect needs 4.0)"
    )
    if gpu_mode == "shared":
        raise PlanError(
            f"spark-dask: gpu_mode='shared' cannot work: {why}, so every Dask worker's Spark task would hold "
            "a whole GPU. Use a fractional spark.task.resource.gpu.amount (e.g. 0.25), or "
            "gpu_mode='exclusive'."
        )
    return "exclusive", (
        "spark-dask: the Dask workers hold their GPUs whole in Spark's accounting: " + why + ". "
        "Spark GPU tasks (the RAPIDS Accelerator) wait while the Dask cluster runs. Set "
        "spark.task.resource.gpu.amount to a fraction (e.g. 0.25) to run both side by side."
    )


def plan_gang(
    facts: ClusterFacts,
    n_workers: int | None = None,
    worker: str = "auto",
    task_profile: bool | str = "auto",
    gpu_mode: str = "auto",
    barrier: bool | str = "auto",
) -> GangPlan:
    """Decide the barrier stage for a cluster request, or raise :class:`PlanError`.

    Rules
    -----
    * GPU executors: one Dask worker per executor GPU by default, each pinned to its
      GPU (see :func:`gpu_sharing` for the two modes).

      - ``shared``: the gang's tasks are ordinary Spark GPU tasks (the default
        profile: one task's GPU share and CPUs) when Spark's task GPU amount is
        fractional, or CPU-only tasks (a stage-level profile) when Spark's tasks take
        whole GPUs. Spark's own GPU tasks keep running on the same GPUs. The tasks on
        an executor split its GPUs among themselves (:func:`assign_shared`).
      - ``exclusive``: each task asks for one whole GPU (a stage-level profile when
        ``spark.task.resource.gpu.amount`` is not 1), so fractional GPU amounts never
        put two workers on one GPU.
    * CPU executors: one worker per executor by default. Where task profiles work
      and the executor has several cores, each task asks for ``cores // 2 + 1``
      CPUs, so no two gang tasks share an executor and the other cores stay with
      Spark (the rule xgboost.spark uses).
    * The gang needs ``n_tasks`` task slots at once; more than the cluster has is an
      error now, not Spark's ten minutes of retries.
    """
    check_barrier(barrier, facts.dynamic_allocation)
    if worker not in KINDS:
        raise PlanError(f"spark-dask: worker must be one of {KINDS}, got {worker!r}")
    check_gpu_mode(gpu_mode)
    _check_n_workers(n_workers)
    dyn = facts.dynamic_allocation
    if facts.executors < 1 and not dyn:
        raise PlanError(
            f"spark-dask: no Spark executors are registered (master {facts.master!r}); "
            "start the cluster's workers or wait until executors join"
        )
    profiles_ok = facts.task_profiles and task_profile is not False and not dyn
    force_profile = task_profile is True
    has_gpus = facts.executor_gpus > 0
    # Under dynamic allocation the executors present now may be none at all: the
    # defaults count at least one, and Spark adds executors for the waiting tasks.
    executors = max(facts.executors, 1) if dyn else facts.executors
    if worker == "cuda" and not has_gpus:
        raise PlanError(
            "spark-dask: worker='cuda' but the executors have no GPUs: set "
            "spark.executor.resource.gpu.amount (and a discovery script) on the Spark "
            "application, or use worker='cpu'"
        )
    mode, note = gpu_sharing(facts, gpu_mode, profiles_ok) if has_gpus else ("exclusive", None)
    shared = has_gpus and mode == "shared"
    gpu_tasks = has_gpus and (facts.task_gpus > 0 or profiles_ok)  # tasks can own GPUs
    kind = "cuda" if worker == "cuda" or (worker == "auto" and (gpu_tasks or shared)) else "cpu"
    notes = (note,) if note and kind == "cuda" else ()

    if shared:
        plan = _shared_plan(facts, kind, n_workers, executors, notes)
    elif gpu_tasks:
        plan = _gpu_plan(
            facts, kind, n_workers or executors * int(facts.executor_gpus), profiles_ok, force_profile, notes
        )
    else:
        plan = _cpu_plan(facts, kind, n_workers or executors, profiles_ok, force_profile)
    if dyn or barrier is False:  # each worker's task a plain Spark job of its own
        plan = replace(plan, barrier=False)
    check_slots(plan, facts)
    return plan


def _shared_plan(facts: ClusterFacts, kind: str, n_workers: int | None, executors: int, notes: tuple) -> GangPlan:
    """:func:`plan_gang` in gpu_mode ``shared``: one worker per GPU at most, beside
    Spark's own GPU tasks."""
    total = executors * int(facts.executor_gpus)
    n = n_workers or total
    if facts.dynamic_allocation:
        total = facts.max_executors * int(facts.executor_gpus) if facts.max_executors else n
    if n > total:
        raise PlanError(
            f"spark-dask: n_workers={n}, but the executors have {total} GPUs and gpu_mode='shared' "
            f"starts one Dask worker per GPU: use n_workers<={total}"
        )
    if 0 < facts.task_gpus < 1:
        # Each gang task is an ordinary Spark GPU task (default profile).
        return GangPlan(kind, True, n, n, 1, gpu_mode="shared", notes=notes)
    # Spark's tasks take whole GPUs: the gang holds none, only CPUs.
    return GangPlan(kind, True, n, n, 1, facts.task_cpus, None, gpu_mode="shared", notes=notes)


def _gpu_plan(facts: ClusterFacts, kind: str, n: int, profiles_ok: bool, force_profile: bool, notes: tuple) -> GangPlan:
    """:func:`plan_gang` for ``n`` workers whose tasks own their GPUs (``exclusive``)."""
    if profiles_ok and (facts.task_gpus != 1 or force_profile):
        return GangPlan(kind, True, n, n, 1, facts.task_cpus, 1.0, "exclusive", notes)
    if facts.task_gpus >= 1:
        per_task = int(facts.task_gpus)
        if n % per_task:
            raise PlanError(
                f"spark-dask: each Spark task owns {per_task} GPUs (spark.task.resource.gpu.amount), "
                f"so n_workers must be a multiple of {per_task}, got {n}"
            )
        return GangPlan(kind, True, n, n // per_task, per_task, gpu_mode="exclusive", notes=notes)
    # Fractional GPU amount and no task profiles: tasks agree at run time that
    # each physical GPU gets one worker; a shortfall is reported by the tasks.
    return GangPlan(kind, True, n, n, 1, gpu_mode="exclusive", notes=notes)


def _cpu_plan(facts: ClusterFacts, kind: str, n: int, profiles_ok: bool, force_profile: bool) -> GangPlan:
    """:func:`plan_gang` for ``n`` CPU workers (or ``cuda`` ones asked for where tasks get no GPUs: an error)."""
    if kind == "cuda":
        raise PlanError(
            "spark-dask: worker='cuda' but Spark tasks get no GPUs: set "
            "spark.task.resource.gpu.amount=1, or run Spark >= 3.4 with stage-level "
            "scheduling (standalone, YARN or Kubernetes, dynamic allocation off)"
        )
    cpus = facts.executor_cores // 2 + 1
    if profiles_ok and n <= facts.executors and (cpus > facts.task_cpus or force_profile):
        return GangPlan(kind, False, n, n, 1, max(cpus, facts.task_cpus), None)
    return GangPlan(kind, False, n, n, 1)


def plan_group(
    facts: ClusterFacts,
    worker: str,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    task_profile: bool | str = "auto",
    gpu_mode: str = "auto",
    barrier: bool | str = "auto",
    beside: tuple[tuple[int, int], ...] = (),
) -> GangPlan:
    """Decide the gangs of a worker group (:mod:`spark_dask.options.groups`) beside the
    cluster's other groups, or raise :class:`PlanError`.

    Rules
    -----
    * ``cuda``: as :func:`plan_gang` decides for ``worker='cuda'`` (one worker per
      executor GPU, pinned).
    * ``cpu``: one worker per executor by default; each of its Spark tasks asks for
      ``threads_per_worker`` CPUs (default ``spark.task.cpus``) and *no GPU*. Where the
      application's tasks take GPUs (``spark.task.resource.gpu.amount`` > 0), or the CPUs
      differ from ``spark.task.cpus``, that needs a CPU-only stage-level task profile:
      where Spark cannot give one, the group is refused (its tasks would hold GPUs, or
      the wrong number of CPUs).
    * ``beside``: the ``(tasks, CPUs per task)`` the other groups hold; a ``cpu`` group
      fits only into the cores they leave on each executor (spread as Spark places
      barrier tasks, round robin).

    >>> f = ClusterFacts(executors=2, executor_cores=8, executor_memory=0, executor_gpus=2,
    ...                  task_gpus=1, slots=4, task_profiles=True)
    >>> p = plan_group(f, "cpu", threads_per_worker=4, beside=((4, 1),))
    >>> p.kind, p.n_workers, p.task_cpus, p.task_gpus
    ('cpu', 2, 4, None)
    >>> plan_group(replace(f, task_profiles=False), "cpu")
    Traceback (most recent call last):
    ...
    spark_dask.errors.PlanError: spark-dask: a 'cpu' worker group needs Spark tasks of 1 CPU and no GPU (a stage-level task profile: the application's tasks take spark.task.resource.gpu.amount=1 GPU), but stage-level task profiles are not available here (Spark >= 3.4 on standalone, 3.5 on YARN/Kubernetes, dynamic allocation off; Spark Connect needs 4.0)
    >>> plan_group(f, "cpu", n_workers=3, threads_per_worker=8, beside=((4, 1),))
    Traceback (most recent call last):
    ...
    spark_dask.errors.PlanError: spark-dask: a 'cpu' worker group of 3 workers needs 3 Spark tasks of 8 CPUs, but the cores the cluster's other groups leave on the executors hold 0 (2 executors x 8 cores); use fewer workers or threads_per_worker
    """
    if worker not in ("cpu", "cuda"):
        raise PlanError(f"spark-dask: a worker group's worker must be 'cpu' or 'cuda', got {worker!r}")
    if worker == "cuda":
        return plan_gang(facts, n_workers, "cuda", task_profile, gpu_mode, barrier)
    check_barrier(barrier, facts.dynamic_allocation)
    _check_n_workers(n_workers)
    check_request(facts, threads_per_worker)
    dyn = facts.dynamic_allocation
    if facts.executors < 1 and not dyn:
        raise PlanError(f"spark-dask: no Spark executors are registered (master {facts.master!r})")
    cpus = threads_per_worker or max(facts.task_cpus, 1)
    n = n_workers or max(facts.executors, 1)
    if facts.task_gpus > 0 or cpus != facts.task_cpus:
        if not facts.task_profiles or task_profile is False or dyn:
            why = (
                f"the application's tasks take spark.task.resource.gpu.amount={facts.task_gpus:g} GPU"
                if facts.task_gpus > 0
                else f"spark.task.cpus={facts.task_cpus}"
            )
            raise PlanError(
                f"spark-dask: a 'cpu' worker group needs Spark tasks of {plural(cpus, 'CPU')} and no GPU (a stage-level "
                f"task profile: {why}), but stage-level task profiles are not available here (Spark >= 3.4 "
                "on standalone, 3.5 on YARN/Kubernetes, dynamic allocation off; Spark Connect needs 4.0)"
            )
        plan = GangPlan("cpu", False, n, n, 1, cpus, None)
    else:
        plan = GangPlan("cpu", False, n, n, 1)
    if dyn or barrier is False:
        plan = replace(plan, barrier=False)
    room = cpu_room(facts, cpus, beside)
    if room is not None and n > room and not dyn:
        raise PlanError(
            f"spark-dask: a 'cpu' worker group of {plural(n, 'worker')} needs {plural(n, 'Spark task')} of "
            f"{plural(cpus, 'CPU')}, but the cores the cluster's other groups leave on the executors "
            f"hold {room} ({executor_shape(replace(facts, executor_gpus=0))}); use fewer workers or "
            "threads_per_worker"
        )
    return plan


def check_barrier(barrier: bool | str, dynamic_allocation: bool) -> None:
    """Refuse a ``barrier`` request that cannot be: ``"auto"`` runs a barrier stage
    except under dynamic allocation (Spark refuses one there, SPARK-24942); ``False``
    runs every worker as a Spark job of one task (:func:`gang_steps`), started as
    executors become free, so that a lost executor fails only its own workers' jobs;
    ``True`` under dynamic allocation is refused.

    >>> check_barrier(True, True)
    Traceback (most recent call last):
    ...
    spark_dask.errors.PlanError: spark-dask: barrier=True, but dynamic allocation is on and Spark runs no barrier stages under it (SPARK-24942): use barrier='auto' or False (each Dask worker a Spark job of its own), or turn off spark.dynamicAllocation.enabled
    """
    if barrier not in ("auto", True, False):
        raise PlanError(f"spark-dask: barrier must be 'auto', True or False, got {barrier!r}")
    if barrier is True and dynamic_allocation:
        raise PlanError(
            "spark-dask: barrier=True, but dynamic allocation is on and Spark runs no barrier stages under it "
            "(SPARK-24942): use barrier='auto' or False (each Dask worker a Spark job of its own), "
            "or turn off spark.dynamicAllocation.enabled"
        )


def check_request(facts: ClusterFacts, threads_per_worker: int | None) -> None:
    """Refuse worker sizes the executors cannot give (before anything starts)."""
    if threads_per_worker is not None and facts.executor_cores and threads_per_worker > facts.executor_cores:
        raise PlanError(
            f"spark-dask: threads_per_worker={threads_per_worker} exceeds the {facts.executor_cores} cores of "
            f"each Spark executor (spark.executor.cores); use threads_per_worker<={facts.executor_cores}"
        )


def check_memory_limit(value, group: str | None = None) -> int | str:
    """``memory_limit`` checked: ``"auto"``, or the bytes of each Dask worker (a number of
    bytes or a size Dask reads, ``"8GiB"``), at least what a worker needs; else
    :class:`PlanError`. The one rule for the cluster's option and each worker group's
    (``group``: its name, said in the message; None, the default, is ``"auto"`` there).

    >>> check_memory_limit("1GiB"), check_memory_limit("auto"), check_memory_limit(None, "gpu")
    (1073741824, 'auto', 'auto')
    >>> check_memory_limit("lots", "gpu")
    Traceback (most recent call last):
    ...
    spark_dask.errors.PlanError: spark-dask: worker group 'gpu': memory_limit must be 'auto', bytes or a size like '8GiB', got 'lots'
    """
    if value == "auto" or (group is not None and value is None):
        return "auto"
    where = "" if group is None else f"worker group {group!r}: "
    try:
        limit = parse_bytes(value) if isinstance(value, str) else int(value)
    except (ValueError, TypeError) as e:
        bytes_ = "a number of bytes" if group is None else "bytes"
        raise PlanError(
            f"spark-dask: {where}memory_limit must be 'auto', {bytes_} or a size like '8GiB', got {value!r}"
        ) from e
    if limit <= 0:
        raise PlanError(f"spark-dask: {where}memory_limit must be positive, got {value!r}")
    problem = small_memory_problem(value, limit)
    if problem:
        raise PlanError("spark-dask: " + where + problem)
    return limit


def encryption_problem(require: bool, tls: bool, spark_encrypted: bool) -> str | None:
    """Why the cluster's credentials must not be shipped, or None.

    The per-cluster TLS key travels to the executors inside the Spark task. With
    ``require_encryption`` that is allowed only when Spark encrypts its own RPC
    (``spark.network.crypto.enabled`` or ``spark.ssl.enabled``).
    """
    if not require:
        return None
    if not tls:
        return "require_encryption=True needs tls=True (the Dask traffic itself would be in clear)"
    if not spark_encrypted:
        return (
            "require_encryption=True, but Spark's own RPC is not encrypted, so the cluster's TLS "
            "key would reach the executors in clear. Start the Spark application with "
            "spark.network.crypto.enabled=true (and spark.authenticate=true), or spark.ssl.enabled=true; "
            "or accept the risk with require_encryption=False."
        )
    return None


def gang_steps(shape: GangPlan, n_workers: int) -> list[GangPlan]:
    """The gangs (Spark jobs) that add ``n_workers`` workers of the cluster's shape.

    A barrier gang is one stage for all of them (all start together or none); without
    barrier mode (dynamic allocation) every task is a Spark job of its own, so that a
    worker waiting for an executor can be cancelled alone and Spark's dynamic allocation
    sees each waiting task. A step is whole tasks: ``n_workers`` is rounded up to a
    multiple of the workers per task.

    >>> [(g.n_tasks, g.n_workers) for g in gang_steps(GangPlan("cpu", False, 1, 1), 3)]
    [(3, 3)]
    >>> [(g.n_tasks, g.barrier) for g in gang_steps(GangPlan("cpu", False, 1, 1, barrier=False), 2)]
    [(1, False), (1, False)]
    """
    tasks = tasks_for(n_workers, shape.workers_per_task)
    if tasks < 1:
        return []
    if shape.barrier:
        return [replace(shape, n_tasks=tasks, n_workers=tasks * shape.workers_per_task, notes=())]
    one = replace(shape, n_tasks=1, n_workers=shape.workers_per_task, notes=())
    return [one] * tasks


def workers_for(
    n: int = 0,
    cores: int | None = None,
    memory: int | None = None,
    threads_per_worker: int | None = None,
    memory_per_worker: int | None = None,
) -> int:
    """Workers for ``scale(n, cores=..., memory=...)``: the most of the three, as
    distributed's ``SpecCluster.scale`` counts them.

    >>> workers_for(1, cores=8, threads_per_worker=4), workers_for(0, memory=3 * 2**30, memory_per_worker=2**30)
    (2, 3)
    """
    if cores is not None:
        if not threads_per_worker:
            raise PlanError(
                "spark-dask: scale(cores=...) needs the threads of a worker: none is known yet; use scale(n)"
            )
        n = max(n, math.ceil(cores / threads_per_worker))
    if memory is not None:
        if not memory_per_worker:
            raise PlanError(
                "spark-dask: scale(memory=...) needs a worker's memory limit: none is known yet; use scale(n)"
            )
        n = max(n, math.ceil(memory / memory_per_worker))
    return n


# --------------------------------------------------------------------------------------
# Task side: what each barrier task decides once it knows where the whole gang landed.
# --------------------------------------------------------------------------------------


def alone_on_executor(plan: GangPlan, facts: ClusterFacts) -> bool:
    """Whether each of the plan's tasks asks for more than half of an executor's cores,
    so no other task (of the gang or of Spark) runs next to it."""
    return bool(plan.task_cpus and 2 * plan.task_cpus > facts.executor_cores)


def gang_threads(facts: ClusterFacts, plan: GangPlan, override: int | None) -> tuple[int, int]:
    """(fewest, most) threads per worker that the plan's tasks will give their workers:
    :func:`worker_threads` as each task calls it (``spark_dask.executor.gang_task``), for each number
    of the gang's tasks that an executor gets.

    Spark hands a stage's tasks to idle executors round-robin (one task per executor and
    pass, over a shuffled list), so each executor gets ``n_tasks // executors`` tasks or
    one more; which executors get one more is decided at run time. Where the counts
    differ and the rule gives different threads, the two differ too: 3 tasks on
    ``local-cluster[2,4,1024]`` are two sharing an executor (1 thread each) and one
    alone (its executor's 4 cores). Other jobs' tasks on the executors can change it.
    """
    task_cpus = int(plan.task_cpus or facts.task_cpus or 1)
    cores = thread_cores(facts.executor_cores, plan.gpu_mode, plan.barrier, alone_on_executor(plan, facts))
    base, extra = divmod(plan.n_tasks, max(facts.executors, 1))
    counts = ([base] if base else []) + ([base + 1] if extra else [])
    values = [worker_threads(override, task_cpus, cores, k, plan.workers_per_task, plan.kind) for k in counts]
    return min(values), max(values)


__all__ = [
    "KINDS",
    "GPU_MODES",
    "PlanError",
    "alone_on_executor",
    "check_barrier",
    "check_gpu_mode",
    "check_memory_limit",
    "check_request",
    "encryption_problem",
    "gang_steps",
    "gang_threads",
    "gpu_sharing",
    "plan_gang",
    "plan_group",
    "workers_for",
]


def memory_advice(facts: ClusterFacts, limit: int | str, workers: int) -> list[tuple[str, str]]:
    """What to say of the workers' memory, ``(what, fix)`` each: where ``limit`` for
    ``workers`` Dask workers per executor does not fit the executors' containers (YARN,
    Kubernetes), and where PySpark's address-space limit reaches them. The start warns
    of each, the doctor reports each.

    >>> f = ClusterFacts(executors=2, executor_cores=2, executor_memory=0, master="yarn", container_room=0)
    >>> [fix.split(" when")[0] for _, fix in memory_advice(f, "auto", 1)]
    ['Raise spark.executor.memoryOverhead']
    >>> memory_advice(ClusterFacts(executors=2, executor_cores=2, executor_memory=0), "auto", 1)
    []
    """
    found = [
        container_advice(limit, facts.container_room, workers, facts.master),
        pyspark_memory_advice(facts.pyspark_memory, facts.executor_cores),
    ]
    return [a for a in found if a]
