"""Who waits for whose Spark task slots, in words: the checks a cluster makes while its
gangs start and run, as plain functions and one small state object (no Spark calls:
the cluster hands in the stages it read from Spark's status tracker); and what the
application's live clusters hold (:func:`other_clusters`, :func:`held_slots`). The
counts of slots themselves are :mod:`spark_dask.capacity`'s.

* a gang that got no slot at all within ``slot-wait`` at start: :func:`no_slots_message`;
* workers that did not connect within ``timeout``: :func:`start_timeout_message`;
* while running, a Spark stage waiting for slots the gangs hold, or a scale-up gang
  waiting for slots Spark jobs hold: :class:`SlotWatch`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

from spark_dask import registry
from spark_dask.capacity import needs_cpu_profile, no_slot_message, task_cpus, transfer_slots
from spark_dask.executor.placement import task_number
from spark_dask.options.groups import DEFAULT
from spark_dask.sizes import plural
from spark_dask.spark.conf import application_id


def pools_held(pools: dict, facts, but: str = DEFAULT) -> list[tuple[str, int, int]]:
    """``(worker group, tasks, CPUs per task)`` the gangs of a cluster's worker groups
    (``pools``: its ``ClusterParts.pools``) hold (or wait for), all but the group ``but``."""
    return [(name, pool.held(), task_cpus(pool.shape, facts)) for name, pool in pools.items() if name != but]


def held_slots(tag: str, parts, but: str | None = None) -> list[tuple[str, int, int]]:
    """``(name, tasks, CPUs per task)`` of each worker group of the cluster of job tag
    ``tag`` (``parts``: its ClusterParts) that holds task slots, all but the group ``but``,
    named as the slot texts name them: the default group by the job tag, another group
    ``"<tag> (<group>)"``.

    >>> from types import SimpleNamespace as S
    >>> pool = lambda held, cpus: S(held=lambda: held, shape=S(task_cpus=cpus))
    >>> parts = S(facts=S(task_cpus=1), pools={"default": pool(2, 1), "io": pool(0, 1), "cpu": pool(3, 2)})
    >>> held_slots("t", parts)
    [('t', 2, 1), ('t (cpu)', 3, 2)]
    >>> held_slots("t", parts, but="default")
    [('t (cpu)', 3, 2)]
    """
    if parts.facts is None:  # not started
        return []
    held = pools_held(parts.pools, parts.facts, but="" if but is None else but)
    return [(tag if name == DEFAULT else f"{tag} ({name})", n, cpus) for name, n, cpus in held if n]


def other_clusters(spark, tag: str) -> tuple[tuple[str, int, int], ...]:
    """``(job tag, tasks, CPUs per task)`` of every live spark-dask cluster of this process
    but the one of job tag ``tag``, in the Spark application of ``spark`` (same session
    object, or same application id), that holds task slots: what the slot checks count
    beside the cluster's own gangs."""
    app = None
    out = []
    for other in registry.live():
        if other.tag == tag or getattr(other, "spark", None) is None:
            continue
        if other.spark is not spark:
            app = app or application_id(spark)
            if app is None or application_id(other.spark) != app:
                continue
        parts = registry.parts_of(other)
        if parts is not None:
            out.extend(held_slots(other.tag, parts))
    return tuple(out)


def transfer_room(parts, spark, tag: str, profiles_supported: bool, direction: str) -> tuple[bool, str | None]:
    """The one slot question of a hand-off (``direction``: ``to_dask`` or ``to_spark``)
    on the cluster of ``parts`` (its :class:`~spark_dask.parts.ClusterParts`; job tag
    ``tag``, session ``spark``): whether its Spark job's tasks need the CPU-only profile
    (Spark's tasks ask for GPUs; ``profiles_supported``: Spark takes task profiles), and
    its refusal when the cluster's gangs, its other worker groups and the application's
    other clusters leave it no task slot (None: it has slots)."""
    facts, pool = parts.facts, parts.pools[DEFAULT]
    # the cluster's other worker groups hold slots too, named as other clusters' groups are
    others = other_clusters(spark, tag) + tuple(held_slots(tag, parts, but=DEFAULT))
    plan = replace(pool.shape, n_tasks=pool.held() or pool.shape.n_tasks)  # after scale()
    cpu_only = needs_cpu_profile(facts, profiles_supported)
    slots = transfer_slots(facts, plan, cpu_only, others)
    if slots is not None and slots < 1:
        return cpu_only, no_slot_message(facts, plan, direction, cpu_only, others)
    return cpu_only, None


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


# Call sites that say nothing to a user: a DataFrame query's stages submitted from
# Spark's own threads (Spark 4: "$anonfun$withThreadLocalCaptured$1 at
# CompletableFuture.java:1768"), reflection frames.
INTERNAL_NAME = re.compile(
    r"^\$|\$anonfun\$| at (CompletableFuture|NativeMethodAccessorImpl|ThreadPoolExecutor|Thread)\.java:"
)


def stage_name(st: dict) -> str:
    """What a stage of :func:`spark_dask.spark.launcher.stage_snapshot` is, for a user: its
    job's description, else Spark's name for it unless that is Spark's internal call
    site.

    >>> stage_name({"name": "$anonfun$withThreadLocalCaptured$1 at CompletableFuture.java:1768"})
    'a DataFrame or SQL query'
    >>> stage_name({"name": "collect at etl.py:12"}), stage_name({"name": "x", "description": "nightly load"})
    ('collect at etl.py:12', 'nightly load')
    """
    if st.get("description"):
        return st["description"]
    return "a DataFrame or SQL query" if INTERNAL_NAME.search(st["name"]) else st["name"]


def busy_stages(stages: list[dict], ours: set[int]) -> list[str]:
    """The running stages that are not the cluster's, in words.

    >>> busy_stages([{"stageId": 3, "name": "collect", "numActiveTasks": 2}], {1})
    ["stage 3 'collect' (2 running tasks)"]
    """
    return [
        f"stage {st['stageId']} '{stage_name(st)}' ({plural(st['numActiveTasks'], 'running task')})"
        for st in stages
        if st["stageId"] not in ours and st["numActiveTasks"] > 0
    ]


# The starved stages said already, per Spark application (application id): the slot
# watch of each cluster of the application reads and adds to the same set, so a stage
# that waits for several clusters' slots is said once, by the first watch to see it.
SAID: dict[str, set[int]] = {}


def said_stages(app: str | None) -> set[int]:
    """The shared set of :data:`SAID` for application ``app`` (None: a set of one's own)."""
    return set() if app is None else SAID.setdefault(app, set())


def no_slots_message(n_tasks: int, slot_wait: float, slots: int, others: list[str], own: str | None = None) -> str:
    """A barrier stage whose slots exist but are busy: the start fails now, naming them.
    Where every busy stage is a gang of the cluster ``own`` (its tag: adding a worker
    group to a cluster whose workers hold every slot), the advice is about that cluster.

    >>> said = no_slots_message(1, 15, 2, ["stage 4 'spark-dask: gang spark-dask-ab (start)' (2 running tasks)"], "spark-dask-ab")
    >>> said[said.index("tasks)") + 8 :]
    "this cluster's own Dask workers hold them: scale it down (cluster.scale(n)), add fewer workers, or add executors. Nothing was left running."
    """
    mine = bool(others) and own is not None and all(own in stage for stage in others)
    advice = (
        ": this cluster's own Dask workers hold them: scale it down (cluster.scale(n)), add fewer workers, or add executors"
        if mine
        else ". Close the other spark-dask cluster or wait for those jobs, start with fewer workers (n_workers=...), "
        "or add executors"
    )
    return (
        f"spark-dask: the Spark barrier stage of {plural(n_tasks, 'task')} got no free task "
        f"slots within {slot_wait:g}s: the application's {slots} slots are busy"
        + (f" with {', '.join(others)}" if others else "")
        + advice
        + ". Nothing was left running."
    )


def silent_tasks(names, gangs, missing: int) -> list[int] | None:
    """The Spark tasks of ``gangs`` whose workers did not all connect: their numbers in
    the cluster's worker names (``spark-<n>...``).

    Parameters
    ----------
    names : iterable of str
        The connected workers' names.
    gangs : list of tuple
        ``(first task number, tasks, workers per task)`` of each gang waited for.
    missing : int
        How many workers did not connect.

    Returns
    -------
    list of int or None
        None where the tasks short of workers do not add up to ``missing`` (tasks
        that share GPUs agree at run time which of them starts which worker).

    >>> silent_tasks({"spark-0", "spark-2"}, [(0, 3, 1)], 1)
    [1]
    >>> silent_tasks({"spark-4-gpu0"}, [(4, 2, 2)], 3)
    [4, 5]
    >>> print(silent_tasks({"spark-0-gpu0", "spark-0-gpu1"}, [(0, 3, 1)], 1))  # task 0 started two
    None
    """
    count = Counter(task_number(name) for name in names)
    short = {t: per - count[t] for first, n, per in gangs for t in range(first, first + n) if count[t] < per}
    return sorted(short) if sum(short.values()) == missing else None


def number_ranges(numbers: list[int]) -> str:
    """Sorted whole numbers in short: runs as ``a-b``.

    >>> number_ranges([1, 2, 3, 7, 9, 10])
    '1-3, 7, 9-10'
    """
    runs: list[list[int]] = []
    for k in numbers:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def silent_text(silent: list[int] | None, log_dir: str | None) -> str:
    """The sentence of :func:`start_timeout_message` that names the tasks whose workers
    did not connect, and where their workers' own logs will be.

    ``log_dir``: the cluster's log directory, where the tasks end by themselves as the
    cluster closes (barrier gangs with a worker connected); None elsewhere.

    >>> print(silent_text([48], "/logs/c"))
     Workers of Spark task 48 (names spark-48...) did not connect: its executor's log says why, and its workers' own logs are in /logs/c/workers once its task ends.
    >>> print(silent_text([1, 2], None))
     Workers of Spark tasks 1-2 (names spark-1..., spark-2...) did not connect: their executors' logs say why.
    """
    if not silent:
        return ""
    one = len(silent) == 1
    names = ", ".join(f"spark-{t}..." for t in silent[:3]) + (", ..." if len(silent) > 3 else "")
    tasks = f"task {silent[0]}" if one else f"tasks {number_ranges(silent)}"
    why = "its executor's log says why" if one else "their executors' logs say why"
    text = f" Workers of Spark {tasks} (names {names}) did not connect: {why}"
    if log_dir:
        own, end = ("its", "its task ends") if one else ("their", "their tasks end")
        text += f", and {own} workers' own logs are in {log_dir}/workers once {end}"
    return text + "."


def start_timeout_message(
    n: int,
    want: int,
    address: str,
    timeout: float,
    tag: str,
    barrier: bool,
    dynamic: bool,
    max_executors,
    silent: str = "",
) -> str:
    """Only ``n`` of ``want`` workers connected within ``timeout``: where to look
    (``silent``: :func:`silent_text`, which tasks)."""
    if barrier:
        where = (
            f"The Spark barrier stage (job group {tag}) is still running: look at its "
            "tasks in the Spark UI and at the executors' logs"
        )
    elif dynamic:
        where = (
            f"Under dynamic allocation each worker is a Spark job of one task that waits "
            f"until Spark has an executor for it: Spark did not add enough executors in "
            f"time (spark.dynamicAllocation.maxExecutors="
            f"{max_executors if max_executors is not None else 'unbounded'}; on Databricks the cluster's "
            "autoscaling maximum and how long new nodes take). Look at the Spark UI's "
            "executors and at the jobs of group " + tag
        )
    else:
        where = (
            f"Each worker is a Spark job of one task (barrier=False) that waits for a free task "
            f"slot: look at the jobs of group {tag} in the Spark UI and at the executors' logs"
        )
    return (
        f"spark-dask: only {n} of {plural(want, 'Dask worker')} connected to {address} within {timeout:g}s."
        f"{silent} {where}; raise the limit with timeout=... if the executors are just slow. Everything "
        "was cancelled."
    )


def holding(
    tag: str, held: int, capacity: int | None, barrier: bool, cpus: tuple[int, int] | None, others: tuple
) -> str:
    """What the gangs of a cluster (and of the application's other clusters) hold, in words.

    >>> holding("spark-dask-b", 1, 4, True, (2, 4), (("spark-dask-a", 1, 2),))
    "the Dask cluster spark-dask-b holds 1 barrier task (2 of the application's 4 cores), the other spark-dask cluster spark-dask-a 1 task of 2 CPUs"
    """
    kind = "barrier task" if barrier else "task"
    if cpus is None:
        text = f"the Dask cluster {tag} holds {plural(held, kind)} of {capacity} task slots"
    else:
        text = (
            f"the Dask cluster {tag} holds {plural(held, kind)} ({held * cpus[0]} of the application's {cpus[1]} cores)"
        )
    if others:
        text += (
            ", the other spark-dask cluster"
            + ("s " if len(others) > 1 else " ")
            + ", ".join(f"{t} {plural(n, 'task')} of {plural(c, 'CPU')}" for t, n, c in others)
        )
    return text


class SlotWatch:
    """What a running cluster says about slots, each thing once (a loop calls
    :meth:`notes` every few seconds with Spark's active stages).

    Parameters
    ----------
    tag : str
        The cluster's job tag (named in the messages).
    patience : float
        Seconds a Spark stage may wait for the gangs' slots before it is said.
    slot_wait : float
        Seconds a scale-up gang may wait for free slots before it is said.
    said : set of int, optional
        The starved stages said already by any cluster of the application
        (:func:`said_stages`); each is said once.
    """

    def __init__(self, tag: str, patience: float, slot_wait: float, said: set[int] | None = None):
        self.tag = tag
        self.patience = patience
        self.slot_wait = slot_wait
        self.first_seen: dict[int, float] = {}
        self.warned: set[int] = set() if said is None else said
        self.warned_gangs: set[int] = set()

    def notes(
        self,
        stages,
        ours,
        gangs,
        held: int,
        capacity: int | None,
        barrier: bool,
        now: float,
        cpus: tuple[int, int] | None = None,
        others: tuple = (),
    ) -> list[str]:
        """Messages due now: Spark stages starved by the gangs' ``held`` slots (of the
        application's ``capacity``; under dynamic allocation only when the gangs hold
        every slot it can ever have), then scale-up gangs waiting for slots. ``cpus``:
        (CPUs per gang task, the application's cores), said instead of the capacity;
        ``others``: the other spark-dask clusters' ``(tag, tasks, CPUs per task)``."""
        starved = {st["stageId"]: st for st in starved_stages(stages, ours)}
        if capacity is None or (not barrier and held < capacity) or not held:
            starved = {}
        for sid in [s for s in self.first_seen if s not in starved]:
            del self.first_seen[sid]
        out = []
        for sid, st in starved.items():
            waited = now - self.first_seen.setdefault(sid, now)
            if sid not in self.warned and waited >= self.patience:
                self.warned.add(sid)
                out.append(
                    f"spark-dask: Spark stage {sid} ({stage_name(st)}) has waited {waited:.0f}s for a free "
                    f"task slot: {holding(self.tag, held, capacity, barrier, cpus, others)}. It will run once the cluster closes or shrinks "
                    f"(cluster.scale(n)); Ctrl-C / interrupting the cell cancels it. To run Spark "
                    f"and Dask side by side, use fewer workers (cluster.scale(...), "
                    f"cluster.adapt(...)) or give the executors more cores."
                )
        for g in gangs:  # a scale-up gang waiting for slots that Spark jobs hold
            if not g.barrier or not g.pending or g.reason != "scale" or g.index in self.warned_gangs:
                continue
            if g.submitted_at is not None and now - g.submitted_at >= self.slot_wait:
                self.warned_gangs.add(g.index)
                others = busy_stages(stages, ours)
                out.append(
                    f"spark-dask: {g.tag}, the barrier stage for {plural(g.wanted, 'more Dask worker')}, has "
                    f"waited {now - g.submitted_at:.0f}s for {plural(g.plan.n_tasks, 'free task slot')} at once"
                    + (f"; busy: {', '.join(others)}" if others else "")
                    + ". It starts when they are free; cluster.scale(n) with fewer workers cancels it."
                )
        return out
