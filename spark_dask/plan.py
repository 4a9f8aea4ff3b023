"""Pure decisions on the driver: how many Spark tasks and Dask workers, which resource
profile, how many slots a gang needs and has, when to scale, which warning or error.

Nothing here touches Spark, processes or the network, so every rule is unit-tested
without a cluster. What each Spark task decides for itself (its workers' GPUs, names,
threads, memory, command line) is in :mod:`spark_dask.executor`, which this module uses
and which must not use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from spark_dask.errors import PlanError
from spark_dask.executor.sizing import thread_cores, worker_threads
from spark_dask.sizes import either, plural

KINDS = ("auto", "cuda", "cpu")
GPU_MODES = ("auto", "shared", "exclusive")


@dataclass(frozen=True)
class ClusterFacts:
    """What the driver knows about the Spark application, read once before launching.

    Parameters
    ----------
    executors : int
        Executors registered now.
    executor_cores : int
        ``spark.executor.cores`` (or what the master implies).
    executor_memory : int
        Bytes one executor JVM may use (heap plus overhead).
    executor_gpus : float
        ``spark.executor.resource.gpu.amount``; 0 without GPUs.
    task_cpus : int
        ``spark.task.cpus``.
    task_gpus : float
        ``spark.task.resource.gpu.amount``; 0 when unset.
    slots : int or None
        Concurrent barrier tasks the default resource profile allows; None when unknown.
    dynamic_allocation : bool
        ``spark.dynamicAllocation.enabled``.
    task_profiles : bool
        Whether stage-level task resource profiles can be used for the gang.
    master : str
        ``spark.master``, for messages.
    rapids_plugin : bool
        Whether the RAPIDS Accelerator (``com.nvidia.spark.SQLPlugin``) is in ``spark.plugins``.
    gpu_addresses : tuple of (str, tuple of str)
        ``(host, addresses)`` of every executor with GPUs, as the executors registered
        them (a host may appear once per executor on it); empty when the driver cannot
        tell (Spark Connect).
    max_executors : int or None
        Under dynamic allocation, ``spark.dynamicAllocation.maxExecutors`` (None:
        unbounded, Spark's default); without it, unused.
    """

    executors: int
    executor_cores: int
    executor_memory: int
    executor_gpus: float = 0
    task_cpus: int = 1
    task_gpus: float = 0
    slots: int | None = None
    dynamic_allocation: bool = False
    task_profiles: bool = False
    master: str = ""
    rapids_plugin: bool = False
    gpu_addresses: tuple = ()
    max_executors: int | None = None

    @property
    def local_mode(self) -> bool:
        """``local`` / ``local[N]``: the driver JVM runs the tasks (no executors)."""
        return self.master.startswith("local") and not self.master.startswith("local-cluster")


@dataclass(frozen=True)
class GangPlan:
    """The barrier stage to submit.

    ``task_cpus``/``task_gpus`` are the stage-level task resource request; both None
    means the stage runs with the application's default resource profile.

    ``gpu_mode`` is ``"exclusive"`` (each worker's GPU is held whole by its Spark task),
    ``"shared"`` (the gang holds at most one Spark task's share of a GPU per worker,
    Spark's own GPU tasks keep running on the same GPUs) or None (no GPUs). ``notes``
    are what the user should be told about the decision (warnings).

    ``barrier``: the tasks run as one barrier stage (all start together or none). False
    under dynamic allocation, which Spark refuses barrier stages under: each worker
    then runs as a plain one-task Spark job (:func:`gang_steps`).
    """

    kind: str  # "cuda" or "cpu": which worker program
    pinned: bool  # one worker per GPU, each with its own CUDA_VISIBLE_DEVICES
    n_workers: int
    n_tasks: int
    workers_per_task: int = 1
    task_cpus: int | None = None
    task_gpus: float | None = None
    gpu_mode: str | None = None
    notes: tuple = ()
    barrier: bool = True

    @property
    def uses_profile(self) -> bool:
        return self.task_cpus is not None or self.task_gpus is not None


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
        plan = _gpu_plan(facts, kind, n_workers or executors * int(facts.executor_gpus), profiles_ok, force_profile,
                         notes)  # fmt: skip
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
    """Decide the gangs of a worker group (:mod:`spark_dask.groups.spec`) beside the
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


def cpu_room(facts: ClusterFacts, cpus: int, beside: tuple[tuple[int, int], ...]) -> int | None:
    """Tasks of ``cpus`` CPUs the registered executors hold beside ``beside`` (the
    ``(tasks, CPUs per task)`` of other worker groups, spread round robin as Spark places
    barrier tasks); None when the executors are not known.

    >>> f = ClusterFacts(executors=2, executor_cores=8, executor_memory=0)
    >>> cpu_room(f, 4, ((2, 1),)), cpu_room(f, 4, ())
    (2, 4)
    """
    if facts.executors < 1 or facts.executor_cores < 1:
        return None
    taken, _ = others_cpus(facts.executors, beside, 0)
    return sum(max(facts.executor_cores - t, 0) // max(cpus, 1) for t in taken)


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


def profile_slots(facts: ClusterFacts, task_cpus: int, task_gpus: float | None) -> int:
    """Concurrent tasks a task resource request allows on the registered executors."""
    per_executor = facts.executor_cores // max(task_cpus, 1)
    if task_gpus:
        per_executor = min(per_executor, int(facts.executor_gpus // task_gpus))
    return facts.executors * per_executor


def gang_capacity(facts: ClusterFacts, plan: GangPlan) -> int | None:
    """Tasks of the gang's kind (its task resource request) the Spark application can
    run at once: every gang together cannot hold more task slots than this.

    Registered executors count; under dynamic allocation the most executors Spark may
    add (``spark.dynamicAllocation.maxExecutors``), or None when that is unbounded.
    None also when unknown (Spark Connect without a countable master).

    >>> f = ClusterFacts(executors=2, executor_cores=4, executor_memory=0, slots=8)
    >>> gang_capacity(f, GangPlan("cpu", False, 2, 2, 1, task_cpus=3)), gang_capacity(f, GangPlan("cpu", False, 2, 2))
    (2, 8)
    """
    if facts.dynamic_allocation:
        if facts.max_executors is None or facts.executor_cores < 1:
            return None
        return profile_slots(replace(facts, executors=facts.max_executors), facts.task_cpus, facts.task_gpus or None)
    if plan.uses_profile:
        return profile_slots(facts, plan.task_cpus or facts.task_cpus, plan.task_gpus)
    return facts.slots


def max_workers(facts: ClusterFacts, plan: GangPlan) -> int | None:
    """The most Dask workers of the gang's kind the application can hold (None: no bound).

    Task slots times workers per task; workers pinned to GPUs also at most one per GPU
    of the executors (every one of them under dynamic allocation).

    >>> f = ClusterFacts(executors=1, executor_cores=4, executor_memory=0, executor_gpus=2, task_gpus=0.5, slots=4)
    >>> max_workers(f, GangPlan("cuda", True, 2, 2, 1, gpu_mode="shared"))
    2
    """
    capacity = gang_capacity(facts, plan)
    bound = None if capacity is None else capacity * plan.workers_per_task
    if plan.pinned and facts.executor_gpus:
        executors = facts.max_executors if facts.dynamic_allocation else facts.executors
        if executors is not None:
            gpus = executors * int(facts.executor_gpus)
            bound = gpus if bound is None else min(bound, gpus)
    return bound


def tasks_for(workers: int, workers_per_task: int) -> int:
    """Spark tasks that start ``workers`` workers; a task owning several GPUs starts one
    worker per GPU, so steps are whole tasks (whole GPUs).

    >>> tasks_for(3, 2), tasks_for(0, 1)
    (2, 0)
    """
    return -(-max(workers, 0) // max(workers_per_task, 1))


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


@dataclass(frozen=True)
class ScaleStep:
    """What ``scale(n)`` does: the worker count the cluster is to reach (``target``),
    the workers and tasks to start now, and what the user is told."""

    target: int
    new_workers: int = 0
    new_tasks: int = 0
    note: str | None = None


def scale_step(
    requested: int,
    current: int,
    held_tasks: int,
    capacity: int | None,
    workers_per_task: int = 1,
    why_bounded: str = "",
) -> ScaleStep:
    """Decide a scale request: ``requested`` workers wanted, ``current`` workers the
    gangs hold or are starting, ``held_tasks`` task slots they hold, ``capacity`` task
    slots of the gang's kind the application has (None: no bound known).

    Growing only goes into free slots (a barrier stage that needs more slots than
    exist waits ten minutes in Spark and fails): beyond them the cluster grows as far
    as the slots allow and the note says so. Shrinking is always possible. Steps are
    whole tasks (``workers_per_task`` workers each, e.g. one per GPU of a task).

    >>> step = scale_step(4, 1, 1, 2)
    >>> step.target, step.new_workers, step.note.startswith("spark-dask: scale(4): the Spark application has task slots for 1 more")
    (2, 1, True)
    >>> scale_step(1, 3, 3, 4)
    ScaleStep(target=1, new_workers=0, new_tasks=0, note=None)
    """
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 0:
        raise PlanError(f"spark-dask: scale() needs a number of workers >= 0, got {requested!r}")
    per = max(workers_per_task, 1)
    if requested <= current:
        return ScaleStep(target=requested)
    want = tasks_for(requested - current, per)
    free = None if capacity is None else max(capacity - held_tasks, 0)
    tasks = want if free is None else min(want, free)
    target = current + tasks * per
    note = None
    if tasks < want:
        note = (
            f"spark-dask: scale({requested}): the Spark application has task slots for "
            f"{plural(tasks * per, 'more Dask worker')} ({plural(capacity, 'slot')} of this kind, {held_tasks} held by "
            f"the cluster{why_bounded}); growing to {plural(target, 'worker')}. Add executors (or free "
            "their slots) and scale again."
        )
    elif tasks * per + current != requested:
        note = (
            f"spark-dask: scale({requested}): each Spark task starts {per} Dask workers (one per "
            f"GPU it owns), so the cluster grows to {target}."
        )
    return ScaleStep(target=target, new_workers=tasks * per, new_tasks=tasks, note=note)


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


def adapt_maximum(maximum: float, bound: int | None) -> tuple[float, str | None]:
    """``adapt(maximum=...)`` bounded by the workers the application can hold.

    >>> adapt_maximum(float("inf"), 4)
    (4, None)
    >>> adapt_maximum(10, 4)[0]
    4
    """
    if bound is None:
        return maximum, None
    if maximum == float("inf"):
        return bound, None
    if maximum > bound:
        return bound, (
            f"spark-dask: adapt(maximum={maximum:g}): the Spark application holds at most {bound} "
            f"Dask workers of this kind; adapting between the minimum and {bound}."
        )
    return maximum, None


def check_slots(plan: GangPlan, facts: ClusterFacts, slots: int | None = None) -> None:
    """Raise :class:`PlanError` when the gang needs more task slots than exist."""
    if slots is None:
        slots = gang_capacity(facts, plan)
    if slots is None or plan.n_tasks <= slots:
        return
    what = f"n_workers={plan.n_workers}"
    if facts.dynamic_allocation:
        raise PlanError(
            f"spark-dask: {what} needs {plan.n_tasks} Spark task slots, but dynamic allocation gives the "
            f"application at most {slots} (spark.dynamicAllocation.maxExecutors={facts.max_executors} "
            f"x {facts.executor_cores} cores, spark.task.cpus={facts.task_cpus}). Use "
            f"n_workers<={max(slots, 1) * plan.workers_per_task} or raise maxExecutors."
        )
    raise PlanError(
        f"spark-dask: {what} needs {plan.n_tasks} Spark task slots at once (barrier mode), but the "
        f"application has {slots} ({facts.executors} executors x {facts.executor_cores} "
        f"cores, spark.task.cpus={plan.task_cpus or facts.task_cpus}"
        + (f", {facts.executor_gpus:g} GPUs per executor" if facts.executor_gpus else "")
        + f"). Use n_workers<={max(slots, 1) * plan.workers_per_task} or add executors."
    )


def others_cpus(executors: int, others: tuple[tuple[int, int], ...], n_tasks: int) -> tuple[list[int], list[int]]:
    """Per executor: the CPUs other clusters' tasks take, and the gang's task count
    (round robin, the others' tasks first).

    >>> others_cpus(2, ((1, 2),), 1)
    ([2, 0], [0, 1])
    """
    taken, ks, pos = [0] * executors, [0] * executors, 0
    for n, cpus in others:
        for _ in range(n):
            taken[pos % executors] += cpus
            pos += 1
    for j in range(n_tasks):
        ks[(pos + j) % executors] += 1
    return taken, ks


def spare_slots(facts: ClusterFacts, plan: GangPlan, others: tuple[tuple[int, int], ...] = ()) -> int | None:
    """Task slots that Spark jobs (default resource profile) still have beside the gang
    and beside ``others``: the ``(tasks, CPUs per task)`` that the application's other
    spark-dask clusters hold (their CPUs only: their GPUs are not counted).

    The tasks are spread over the executors as Spark places a barrier stage
    (round robin: one task per executor per pass; the other clusters' tasks first,
    the gang's continuing where they ended). On each executor the slots left are
    limited by the cores the gang leaves and, when Spark's tasks use GPUs, by the GPU
    capacity it leaves (``floor(1/amount)`` tasks per GPU for fractional amounts; a GPU
    holding any share of the gang cannot take a whole-GPU task). None when unknown.

    >>> f = ClusterFacts(executors=2, executor_cores=4, executor_memory=0, slots=8)
    >>> spare_slots(f, GangPlan("cpu", False, 2, 2, 1, task_cpus=3))
    2
    >>> spare_slots(f, GangPlan("cpu", False, 2, 2, 1, task_cpus=3), others=((2, 1),))
    0
    """
    if facts.slots is None or facts.executors < 1 or facts.executor_cores < 1:
        return None
    task_cpus = max(facts.task_cpus, 1)
    gang_cpus = plan.task_cpus if plan.task_cpus is not None else facts.task_cpus
    if plan.uses_profile:
        gang_gpus = plan.task_gpus or 0.0
    else:
        gang_gpus = facts.task_gpus * plan.workers_per_task if plan.workers_per_task > 1 else facts.task_gpus
    t, gpus = facts.task_gpus, int(facts.executor_gpus)
    taken, ks = others_cpus(facts.executors, others, plan.n_tasks)
    total = 0
    for i, k in enumerate(ks):
        free = max(facts.executor_cores - taken[i] - k * gang_cpus, 0) // task_cpus
        if t > 0 and gpus:
            if t < 1:
                per_gpu = int(1 / t + 1e-9)
                if gang_gpus >= 1:
                    used = k * int(gang_gpus) * per_gpu
                else:
                    used = k * -(-gang_gpus // t) if gang_gpus else 0
                free = min(free, max(gpus * per_gpu - int(used), 0))
            else:
                held = k * -(-gang_gpus // 1) if gang_gpus else 0
                free = min(free, max(gpus - int(held), 0) // int(t))
        total += free
    return total


def hog_warning(
    facts: ClusterFacts, plan: GangPlan, others: tuple[tuple[str, int, int], ...] = (),
    groups: tuple[tuple[str, int, int], ...] = (),
) -> str | None:  # fmt: skip
    """The warning given at start (and on a scale-up) when the gangs leave Spark jobs no
    task slot at all. Under dynamic allocation Spark adds executors for waiting jobs: only
    when the gangs hold every slot the most executors allowed would have. ``others``: the
    ``(job tag, tasks, CPUs per task)`` of the application's other spark-dask clusters,
    whose slots count too (and are named); ``groups``: the ``(name, tasks, CPUs per
    task)`` of the cluster's other worker groups, counted likewise.

    >>> f = ClusterFacts(executors=2, executor_cores=2, executor_memory=0, slots=4)
    >>> one = GangPlan("cpu", False, 1, 1, 1, task_cpus=2)
    >>> hog_warning(f, one) is None, "spark-dask-a (1 task of 2 CPUs)" in hog_warning(f, one, (("spark-dask-a", 1, 2),))
    (True, True)
    """
    if facts.dynamic_allocation:
        capacity = gang_capacity(facts, plan)
        if capacity is None or plan.n_tasks < capacity:
            return None
        return (
            f"spark-dask: the Dask cluster's {plural(plan.n_tasks, 'task')} {'takes' if plan.n_tasks == 1 else 'take'} every task slot of the "
            f"{facts.max_executors} executors dynamic allocation may add "
            f"(spark.dynamicAllocation.maxExecutors). A Spark job started while it runs waits "
            "until the cluster closes or shrinks (cluster.scale(n)). To leave room: fewer "
            "workers, or a higher maxExecutors."
        )
    spare = spare_slots(facts, plan, tuple((n, cpus) for _, n, cpus in (*groups, *others)))
    if spare is None or spare > 0:
        return None
    advice = []
    if others:
        advice.append("close the other spark-dask cluster" + ("s" if len(others) > 1 else ""))
    if plan.n_workers > 1:
        advice.append(f"start fewer workers (n_workers={plan.n_workers - 1})")
    if plan.gpu_mode == "exclusive" and facts.task_gpus > 0:
        fractional = facts.task_gpus < 1
        advice.append(
            "use gpu_mode='shared'"
            + ("" if fractional or facts.task_profiles else " with a fractional spark.task.resource.gpu.amount")
        )
    advice.append("give the executors more cores (spark.executor.cores)")
    advice.append("run the Spark work before starting the Dask cluster")
    shape = executor_shape(facts)
    beside = ""
    if others:
        beside = (
            " and the application's other spark-dask cluster"
            + ("s " if len(others) > 1 else " ")
            + ", ".join(f"{tag} ({plural(n, 'task')} of {plural(cpus, 'CPU')})" for tag, n, cpus in others)
        )
    if groups:
        beside = (
            " with its worker groups "
            + ", ".join(f"{name} ({plural(n, 'task')} of {plural(cpus, 'CPU')})" for name, n, cpus in groups)
            + beside
        )
    return (
        f"spark-dask: the Dask cluster's {plural(plan.n_tasks, ('barrier ' if plan.barrier else '') + 'task')}{beside} "
        f"{'takes' if plan.n_tasks == 1 and not others and not groups else 'take'} every task slot Spark jobs can use ({shape}). A Spark job started while it runs (spark.read.parquet, "
        f"df.collect(), ...) waits until the cluster closes or shrinks (cluster.scale(n)). To leave room: "
        + either(advice)
        + "."
    )


def executor_shape(facts: ClusterFacts) -> str:
    """The application's executors in words, for the slot refusals.

    >>> executor_shape(ClusterFacts(executors=2, executor_cores=4, executor_memory=0, executor_gpus=1, task_gpus=0.5))
    '2 executors x 4 cores, 1 GPU, spark.task.resource.gpu.amount=0.5'
    """
    shape = f"{plural(facts.executors, 'executor')} x {plural(facts.executor_cores, 'core')}"
    if facts.executor_gpus:
        gpus = f"{facts.executor_gpus:g} GPU{'' if facts.executor_gpus == 1 else 's'}"
        shape += f", {gpus}, spark.task.resource.gpu.amount={facts.task_gpus:g}"
    return shape


def starved_stages(stages: list[dict], gang_stages: set[int]) -> list[dict]:
    """Spark stages (other than the gang's) that have tasks to run but none running.

    While the gang holds the slots they need, such a stage waits until the Dask cluster
    closes: the caller tells the user instead of letting it hang silently. Each entry has
    ``stageId``, ``numTasks``, ``numActiveTasks``, ``numCompletedTasks``, ``numFailedTasks``;
    one marked ``gang`` is a spark-dask gang (another cluster's, which says itself that
    it waits) and is not counted.

    >>> waiting = {"numTasks": 2, "numActiveTasks": 0, "numCompletedTasks": 0}
    >>> [st["stageId"] for st in starved_stages([{"stageId": 1, **waiting}, {"stageId": 2, "gang": True, **waiting}], set())]
    [1]
    """
    out = []
    for st in stages:
        if st["stageId"] in gang_stages or st.get("gang"):
            continue
        pending = st["numTasks"] - st["numActiveTasks"] - st["numCompletedTasks"]
        if st["numActiveTasks"] == 0 and pending > 0:
            out.append(st)
    return out


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
    "others_cpus",
    "ClusterFacts",
    "GangPlan",
    "PlanError",
    "adapt_maximum",
    "check_gpu_mode",
    "gang_capacity",
    "gang_steps",
    "max_workers",
    "scale_step",
    "tasks_for",
    "workers_for",
    "plan_gang",
    "plan_group",
    "worker_threads",
    "alone_on_executor",
    "gang_threads",
    "thread_cores",
]
