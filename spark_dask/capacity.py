"""Task slots: what the Spark application has (:class:`ClusterFacts`), what a gang asks
of it (:class:`GangPlan`), and every count between the two, with the refusals and
warnings they lead to: the slots of a task resource request (:func:`profile_slots`,
:func:`gang_capacity`), the workers they hold (:func:`max_workers`), the cores other
gangs take on each executor (:func:`others_cpus`, :func:`cpu_room`), the slots Spark
jobs keep beside the gangs (:func:`spare_slots`, :func:`hog_warning`), a scale-up's
share of them (:func:`scale_step`, :func:`placeable`, :func:`adapt_maximum`) and a
hand-off's (:func:`transfer_slots`, :func:`no_slot_message`).

Pure: nothing here touches Spark, processes or the network. The decisions that use
these counts (how many workers, which task profile) are :mod:`spark_dask.plan`'s; who
holds slots now, and the watch over them while a cluster runs, :mod:`spark_dask.gangs.slots`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from spark_dask.errors import PlanError
from spark_dask.sizes import either, plural


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
    gpu_addresses : tuple of (str, str, tuple of str)
        ``(host, executor id, addresses)`` of every executor with GPUs, as the executors
        registered them (a host may appear once per executor on it); empty when the
        driver cannot tell (Spark Connect).
    max_executors : int or None
        Under dynamic allocation, ``spark.dynamicAllocation.maxExecutors`` (None:
        unbounded, Spark's default); without it, unused.
    executor_hosts : tuple of str
        The host of every registered executor (a host once per executor on it), as
        :attr:`gpu_addresses` names hosts; empty when the driver cannot tell (Spark Connect).
    container_room : int or None
        Where executors run in containers with a memory limit (YARN, Kubernetes): the
        bytes a container holds for processes other than the executor's JVM, that is
        its memory overhead beyond Spark's default overhead, which the JVM's own native
        memory and PySpark's Python workers use
        (:func:`spark_dask.spark.session.container_room`); the Dask workers of the
        executor share it. None elsewhere.
    pyspark_memory : int
        ``spark.executor.pyspark.memory`` in bytes; 0 when unset.
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
    executor_hosts: tuple = ()
    container_room: int | None = None
    pyspark_memory: int = 0

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
    then runs as a plain one-task Spark job (:func:`spark_dask.plan.gang_steps`).
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


def task_cpus(plan: GangPlan, facts: ClusterFacts) -> int:
    """CPUs each Spark task of ``plan`` takes: its profile's, else ``spark.task.cpus``."""
    return plan.task_cpus if plan.task_cpus is not None else facts.task_cpus


def workers_per_executor(facts: ClusterFacts, plan: GangPlan) -> int:
    """The most of ``plan``'s workers one executor holds: its task slots for the plan's
    tasks, no more than the plan's tasks, and (executors known) their fair share; for
    what the workers' memory would be where it is the executor's (a container's).

    >>> f = ClusterFacts(executors=2, executor_cores=2, executor_memory=0)
    >>> workers_per_executor(f, GangPlan("cpu", False, n_workers=2, n_tasks=2, task_cpus=2))
    1
    >>> dynamic = ClusterFacts(executors=0, executor_cores=1, executor_memory=0)  # none yet
    >>> workers_per_executor(dynamic, GangPlan("cpu", False, n_workers=2, n_tasks=2))
    1
    >>> one = ClusterFacts(executors=1, executor_cores=4, executor_memory=0)
    >>> workers_per_executor(one, GangPlan("cpu", False, n_workers=8, n_tasks=8))
    4
    """
    cpus = task_cpus(plan, facts)
    slots = max(facts.executor_cores // max(cpus, 1), 1)
    share = -(-plan.n_tasks // facts.executors) if facts.executors else plan.n_tasks
    return max(min(plan.n_tasks, slots, share), 1) * plan.workers_per_task


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
    spark_cpus = max(facts.task_cpus, 1)  # a Spark job's task
    gang_cpus = task_cpus(plan, facts)
    if plan.uses_profile:
        gang_gpus = plan.task_gpus or 0.0
    else:
        gang_gpus = facts.task_gpus * plan.workers_per_task if plan.workers_per_task > 1 else facts.task_gpus
    t, gpus = facts.task_gpus, int(facts.executor_gpus)
    taken, ks = others_cpus(facts.executors, others, plan.n_tasks)
    total = 0
    for i, k in enumerate(ks):
        free = max(facts.executor_cores - taken[i] - k * gang_cpus, 0) // spark_cpus
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


def hog_warning(
    facts: ClusterFacts,
    plan: GangPlan,
    others: tuple[tuple[str, int, int], ...] = (),
    groups: tuple[tuple[str, int, int], ...] = (),
) -> str | None:
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


def placeable(wanted: int, capacity: int | None, held: int, workers_per_task: int) -> int:
    """How many of ``wanted`` workers a new barrier stage can start now: whole tasks that
    fit in the application's ``capacity`` (task slots of the gang's kind, None when
    unknown: all of them) beside the ``held`` slots of the cluster's running gangs.
    A barrier stage larger than the free slots would wait (or, larger than all slots,
    fail after Spark's ten minutes of slot checks), so the rest waits for capacity.

    >>> placeable(2, 2, 1, 1), placeable(2, None, 5, 1), placeable(4, 3, 1, 2), placeable(1, 1, 1, 1)
    (1, 2, 4, 0)
    """
    if capacity is None:
        return wanted
    free_tasks = max(capacity - held, 0)
    return min(wanted, free_tasks * max(workers_per_task, 1))


def transfer_slots(facts: ClusterFacts, plan: GangPlan, cpu_only: bool, others: tuple = ()) -> int | None:
    """Task slots the transfer's Spark job has beside the running gang (None: unknown)
    and beside ``others``, the ``(job tag, tasks, CPUs per task)`` of the application's
    other spark-dask clusters.

    ``cpu_only``: the transfer's tasks run with a stage-level profile asking for one CPU
    and no GPU, so they need only the cores the gang leaves on each executor. Otherwise
    they are default-profile tasks (``spark.task.cpus``, and a GPU share when Spark's
    tasks use GPUs): :func:`spare_slots`.

    >>> f = ClusterFacts(executors=2, executor_cores=4, executor_memory=0, slots=8)
    >>> transfer_slots(f, GangPlan("cpu", False, 2, 2, 1, task_cpus=3), cpu_only=False)
    2
    >>> g = ClusterFacts(executors=1, executor_cores=4, executor_memory=0, executor_gpus=1,
    ...                  task_gpus=1, slots=1)
    >>> transfer_slots(g, GangPlan("cuda", True, 1, 1, 1, gpu_mode="exclusive"), cpu_only=False)
    0
    >>> transfer_slots(g, GangPlan("cuda", True, 1, 1, 1, gpu_mode="exclusive"), cpu_only=True)
    3
    >>> h = ClusterFacts(executors=2, executor_cores=2, executor_memory=0, slots=4)
    >>> transfer_slots(h, GangPlan("cpu", False, 1, 1, 1, task_cpus=2), False, (("spark-dask-a", 1, 2),))
    0
    """
    held = tuple((n, cpus) for _, n, cpus in others)
    if not cpu_only:
        return spare_slots(facts, plan, held)
    if facts.executors < 1 or facts.executor_cores < 1:
        return None
    gang_cpus = task_cpus(plan, facts)
    taken, ks = others_cpus(facts.executors, held, plan.n_tasks)
    return sum(max(facts.executor_cores - t - k * gang_cpus, 0) for t, k in zip(taken, ks))


def needs_cpu_profile(facts: ClusterFacts, profiles_available: bool) -> bool:
    """Whether the transfer's tasks ask for a CPU-only stage-level profile.

    Only when Spark's default task asks for a GPU (``spark.task.resource.gpu.amount``):
    the transfer needs none, and on GPU clusters where the gang holds the GPUs a
    default-profile task would never start. CPU clusters use the default profile.
    """
    return facts.task_gpus > 0 and profiles_available


def no_slot_message(facts: ClusterFacts, plan: GangPlan, direction: str, cpu_only: bool, others: tuple = ()) -> str:
    """Why the transfer cannot run now, and what to change (``others``: as for
    :func:`transfer_slots`, named)."""
    shape = executor_shape(facts)
    request = (
        "1 CPU, no GPU (a CPU-only task profile)"
        if cpu_only
        else (
            f"spark.task.cpus={facts.task_cpus}" + (f" and a {facts.task_gpus:g} GPU share" if facts.task_gpus else "")
        )
    )
    advice = []
    holders = f"its {plural(plan.n_tasks, 'barrier task')}"
    if others:
        holders += (
            " and the application's other spark-dask cluster"
            + ("s " if len(others) > 1 else " ")
            + ", ".join(f"{tag} ({plural(n, 'task')} of {plural(cpus, 'CPU')})" for tag, n, cpus in others)
        )
        advice.append("close the other spark-dask cluster" + ("s" if len(others) > 1 else ""))
    if plan.n_workers > 1:
        advice.append(f"start the Dask cluster with fewer workers (n_workers={plan.n_workers - 1})")
    advice.append("give the executors more cores (spark.executor.cores)")
    if facts.task_gpus and not cpu_only:
        advice.append(
            "use Spark >= 3.4 with stage-level scheduling (a CPU-only profile for the transfer; "
            "Spark Connect needs 4.0)"
        )
    advice.append("move the data before starting the cluster (Parquet, see docs/handoff.md)")
    return (
        f"spark-dask: {direction} needs Spark task slots ({request} each) beside the Dask cluster, but "
        f"{holders} {'holds' if plan.n_tasks == 1 and not others else 'hold'} every slot ({shape}): the transfer's Spark job would "
        "wait until the cluster closes. Nothing was started. To make room: " + either(advice) + "."
    )
