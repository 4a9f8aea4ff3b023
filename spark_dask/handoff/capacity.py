"""Whether a hand-off's Spark tasks find free slots beside the cluster's gangs, decided
on the driver before anything starts, and the refusal's text when they do not.
"""

from __future__ import annotations

from spark_dask.plan import ClusterFacts, GangPlan, executor_shape, others_cpus, spare_slots
from spark_dask.sizes import either, plural


def transfer_slots(facts: ClusterFacts, plan: GangPlan, cpu_only: bool, others: tuple = ()) -> int | None:
    """Task slots the transfer's Spark job has beside the running gang (None: unknown)
    and beside ``others``, the ``(job tag, tasks, CPUs per task)`` of the application's
    other spark-dask clusters.

    ``cpu_only``: the transfer's tasks run with a stage-level profile asking for one CPU
    and no GPU, so they need only the cores the gang leaves on each executor. Otherwise
    they are default-profile tasks (``spark.task.cpus``, and a GPU share when Spark's
    tasks use GPUs): :func:`spark_dask.plan.spare_slots`.

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
    gang_cpus = plan.task_cpus if plan.task_cpus is not None else facts.task_cpus
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
        advice.append("use Spark >= 3.4 with stage-level scheduling (a CPU-only profile for the transfer; "
                      "Spark Connect needs 4.0)")  # fmt: skip
    advice.append("move the data before starting the cluster (Parquet, see docs/handoff.md)")
    return (
        f"spark-dask: {direction} needs Spark task slots ({request} each) beside the Dask cluster, but "
        f"{holders} {'holds' if plan.n_tasks == 1 and not others else 'hold'} every slot ({shape}): the transfer's Spark job would "
        "wait until the cluster closes. Nothing was started. To make room: " + either(advice) + "."
    )
