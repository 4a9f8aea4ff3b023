"""Gangs: the Spark jobs that run a :class:`~spark_dask.cluster.SparkCluster`'s Dask
workers. This is the Spark-facing side of the cluster; :mod:`spark_dask.cluster` is the
Dask-facing one (scheduler, ``scale``/``adapt``, logs, widget).

A gang is one Spark job submitted for some of the cluster's workers:

* a **barrier stage** of ``n`` tasks (the default): all tasks start together or none,
  one failed task fails them all;
* under **dynamic allocation**, where Spark refuses barrier stages, a **plain job of
  one task** (one per worker, as Ray-on-Spark's autoscaling mode does): it starts when
  Spark has a slot for it, and Spark's dynamic allocation adds executors for it.

The cluster starts with one gang (or one per worker without barrier mode); each
scale-up adds gangs for the new workers; a gang that fails while running (a lost
executor) is replaced by a new gang for the workers it still had (a relaunch), the other
gangs running on untouched. A gang knows what it submitted, which of its workers have
connected, how many it should keep (``wanted``: scale-down lowers it before its workers
are retired), its status, and cancels itself.

Every gang's worker names continue one count over the cluster's tasks
(:func:`spark_dask.executor.placement.worker_name`): names never repeat, across scale-ups and
relaunches. Everything here runs on the cluster's event loop, except the launcher
thread, which reports through ``on_done``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from spark_dask.capacity import GangPlan, tasks_for
from spark_dask.executor.processes import KILL_WAIT
from spark_dask.executor.task_spec import TaskSpec
from spark_dask.options.groups import DEFAULT
from spark_dask.sizes import plural
from spark_dask.spark.launcher import GangLauncher, summarize_spark_error

logger = logging.getLogger("spark_dask")

PLACEHOLDER = "/pending-"  # "<gang tag>/pending-<i>": a wanted worker that has not connected


class Gang:
    """One Spark job running some of a cluster's Dask workers.

    Parameters
    ----------
    spark : SparkSession
    plan : GangPlan
        This gang's tasks (``n_tasks``, ``n_workers``, resource request, barrier or not).
    spec : TaskSpec
        What every task of the cluster needs (scheduler address, credentials, sizing);
        the gang sets its own number, its first task number and its size.
    cluster_tag : str
        The cluster's tag; the job group of each gang is :func:`gang_tag`.
    index : int
        The gang's number in the cluster (0, 1, ...).
    first : int
        The cluster-wide number of its first task: its workers are named from it.
    reason : str
        ``"start"``, ``"scale"`` or ``"relaunch"`` (shown in the logs and the widget).
    on_done : callable
        Called with the gang from the launcher thread once its Spark job has ended.
    group : str
        The worker group (:mod:`spark_dask.options.groups`) whose workers the gang runs.
    """

    def __init__(
        self,
        spark,
        plan: GangPlan,
        spec: TaskSpec,
        *,
        cluster_tag: str,
        index: int,
        first: int,
        reason: str = "start",
        on_done: Callable[[Gang], None] | None = None,
        group: str = DEFAULT,
    ):
        self.index = index
        self.group = group
        self.cluster_tag = cluster_tag
        self.tag = gang_tag(cluster_tag, group, index)
        self.plan = plan
        self.first = first
        self.reason = reason
        self.wanted = plan.n_workers  # workers this gang is to keep; scale-down lowers it
        self.workers: dict[str, str] = {}  # connected now: name -> address
        self.nannies: dict[str, str] = {}  # every worker that connected: name -> nanny address
        self.seen: set[str] = set()  # every name that ever connected
        self.hosts: dict[str, str] = {}  # every worker that connected: name -> "host (executor id)"
        self.retiring: set[str] = set()  # asked to leave (scale-down)
        self.drained: set[str] = set()  # of those, the workers of an executor Spark decommissioned
        self.closed: set[str] = set()  # left on purpose without a scale-down (client.retire_workers)
        self.status = "created"
        self.cancelled = False
        self.submitted_at: float | None = None
        self.running_at: float | None = None
        self.ended_at: float | None = None
        self._on_done = on_done
        kind = "barrier stage" if plan.barrier else "Spark job"
        spec = replace(
            spec,
            gang=index,
            name_base=first,
            barrier=plan.barrier,
            n_workers=plan.n_workers,
            workers_per_task=plan.workers_per_task,
            group=group,
        )
        self.launcher = GangLauncher(
            spark,
            plan,
            spec,
            tag=self.tag,
            description=(
                f"spark-dask: {kind} {self.tag} ({reason}): {plural(plan.n_workers, 'Dask worker')} for "
                f"{spec.scheduler_address}"
            ),
            on_done=self._ended,
        )

    # ---------------------------------------------------------------- Spark side
    def submit(self) -> Gang:
        """Submit the Spark job (from a thread of its own); returns at once."""
        self.status = "starting"
        self.submitted_at = time.monotonic()
        self.launcher.start()
        return self

    def cancel(self) -> None:
        """Cancel the Spark job: Spark kills the tasks, the workers die with them."""
        self.cancelled = True
        self.launcher.cancel()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the Spark job to end; True if it has."""
        return self.launcher.join(timeout)

    def _ended(self, _launcher) -> None:
        self.ended_at = time.monotonic()
        if self._on_done is not None:
            self._on_done(self)

    @property
    def done(self) -> bool:
        return self.launcher.done.is_set()

    @property
    def error(self) -> BaseException | None:
        return self.launcher.error

    @property
    def rows(self) -> list[dict]:
        """The tasks' status rows (once the job has ended), each with the gang's number."""
        return [{**r, "gang": self.index} for r in self.launcher.rows]

    @property
    def barrier(self) -> bool:
        return self.plan.barrier

    def outcome(self) -> str:
        """Why the job ended: ``cancelled``, ``retired`` (every worker scaled down),
        ``closed`` (its workers left on purpose otherwise: ``client.retire_workers``),
        ``start-failed`` (a worker could not start: relaunching would fail the same way)
        or ``lost`` (an executor or task was lost while running, or its workers ended by
        themselves, e.g. cut off from the scheduler: relaunch)."""
        if self.cancelled:
            return "cancelled"
        if self.error is None:
            if self.wanted == 0:
                return "retired"
            return "closed" if self.seen <= self.closed | self.retiring else "lost"
        if "WorkerStartError" in str(self.error) or self.running_at is None and not self.seen:
            return "start-failed"
        return "lost"

    # ----------------------------------------------------------------- Dask side
    def worker_joined(self, name: str, address: str, nanny: str | None, host: str = "", executor: str = "") -> None:
        self.workers[name] = address
        self.seen.add(name)
        if host:
            self.hosts[name] = host + (f" (executor {executor})" if executor else "")
        if nanny:
            self.nannies[name] = nanny
        if self.status == "starting" and self.connected >= self.wanted:
            self.status = "running"
            self.running_at = time.monotonic()

    def worker_left(self, name: str, on_purpose: bool = False) -> None:
        """``name`` left; ``on_purpose``: it was leaving (``closing_gracefully``)."""
        self.workers.pop(name, None)
        if on_purpose:
            self.closed.add(name)

    def give_up(self, name: str) -> bool:
        """A worker that was lost and did not come back: the gang stops counting on it
        (``wanted`` goes down by one), so that the cluster replaces it elsewhere. False
        when the gang has ended or no longer counts on it anyway."""
        if self.done or name in self.retiring or name in self.workers or self.wanted <= self.connected:
            return False
        self.wanted -= 1
        return True

    @property
    def connected(self) -> int:
        """Workers connected now, those asked to leave not counted (asked each time a
        worker joins: as many steps as workers leaving, not as workers connected)."""
        return len(self.workers) - sum(1 for n in self.retiring if n in self.workers)

    @property
    def pending(self) -> bool:
        """Submitted, but no worker has connected yet (its tasks may not run yet)."""
        return not self.done and not self.seen

    def surplus(self) -> list[str]:
        """Connected workers beyond ``wanted`` (a scale-down reached the gang before they
        connected): the newest first."""
        extra = self.connected - self.wanted
        if extra <= 0:
            return []
        live = [n for n in sorted(self.workers) if n not in self.retiring]
        return live[-extra:]

    def retire(self, names: Iterable[str]) -> list[str]:
        """Mark workers of this gang as leaving; ``wanted`` goes down by each (placeholders
        count too). Returns the real names (to retire in Dask)."""
        real = []
        for name in names:
            if name in self.retiring:
                continue
            if PLACEHOLDER in name:
                self.wanted = max(self.wanted - 1, 0)
                continue
            if name in self.seen:
                self.retiring.add(name)
                self.wanted = max(self.wanted - 1, 0)
                real.append(name)
        return real

    def planned_names(self) -> list[str]:
        """The names of the workers this gang is to have: connected ones, then one
        placeholder per worker that has not connected yet."""
        if self.done:
            return []
        live = [n for n in sorted(self.workers) if n not in self.retiring][: self.wanted]
        return live + [f"{self.tag}{PLACEHOLDER}{i}" for i in range(self.wanted - len(live))]

    def tasks_held(self) -> int:
        """Task slots the gang holds (or waits for) for its wanted workers."""
        if self.done:
            return 0
        return tasks_for(self.wanted, self.plan.workers_per_task)

    # --------------------------------------------------------------------- words
    def describe(self, now: float | None = None) -> str:
        """``Spark barrier stage <tag>: running`` (the first line of its task log)."""
        kind = "Spark barrier stage" if self.barrier else "Spark job"
        state = self.status
        if self.status == "starting" and self.submitted_at is not None and self.pending:
            waited = (now or time.monotonic()) - self.submitted_at
            if waited >= 5:
                state = f"waiting for Spark task slots ({waited:.0f} s)"
        extra = "" if self.reason == "start" else f" ({self.reason})"
        if self.group != DEFAULT:
            extra += f" (worker group {self.group})"
        return f"{kind} {self.tag}{extra}: {state}"

    def failure(self) -> str:
        if self.error is not None:
            return summarize_spark_error(self.error)
        if self.seen - self.closed - self.retiring:
            return SELF_ENDED
        return ""

    def __repr__(self) -> str:
        return f"<Gang {self.tag} {self.status}: {self.connected}/{self.wanted} workers, {self.plan.n_tasks} tasks>"


# Why a gang whose Spark job ended without an error is relaunched: its workers ended
# without being asked (a Dask worker that loses its scheduler for long closes itself).
SELF_ENDED = "its Dask workers ended without being asked to (cut off from the scheduler, or closed from inside)"


def gang_tag(cluster_tag: str, group: str, index: int) -> str:
    """The Spark job group of gang ``index`` of a worker group: unique over the cluster.
    The default group's first gang has the cluster's tag itself.

    >>> gang_tag("spark-dask-ab", "default", 0), gang_tag("spark-dask-ab", "default", 2)
    ('spark-dask-ab', 'spark-dask-ab-g2')
    >>> gang_tag("spark-dask-ab", "cpu", 0)
    'spark-dask-ab-cpu-g0'
    """
    if group == DEFAULT:
        return cluster_tag if index == 0 else f"{cluster_tag}-g{index}"
    return f"{cluster_tag}-{group}-g{index}"


def gang_of_placeholder(name: str) -> str | None:
    """The gang tag in a placeholder name, else None.

    >>> gang_of_placeholder("spark-dask-ab-g2/pending-0"), gang_of_placeholder("spark-3")
    ('spark-dask-ab-g2', None)
    """
    if PLACEHOLDER not in str(name):
        return None
    return str(name).split(PLACEHOLDER, 1)[0]


def ending_grace(grace: float, graceful: bool, kill_grace: float) -> float:
    """How long the gangs of a closing cluster may take to end by themselves.

    A close: ``grace`` (the workers were told to exit). A failed start: the gangs with
    a worker connected passed their barrier, so every task of theirs holds a line to
    the scheduler, which was just cut; each ends its workers within kill-grace (frozen
    and never-connected ones too) and keeps their logs. Gangs with no worker are
    cancelled at once in either case (:func:`end_gangs`).

    >>> ending_grace(10.0, True, 5.0), ending_grace(10.0, False, 2.0), ending_grace(3.0, False, 5.0)
    (10.0, 7.0, 3.0)
    """
    return grace if graceful else min(grace, kill_grace + KILL_WAIT)


def end_gangs(gangs: list[Gang], grace: float, stopped: bool = False) -> bool:
    """End the Spark jobs of ``gangs``, all at once: let them finish by themselves
    within ``grace`` seconds (their workers were told to exit), then cancel the rest and
    wait for Spark to end them. Gangs whose workers never connected are cancelled at once
    (nothing of theirs would exit by itself). Returns True when every job has ended.

    Blocking (thread joins, py4j): call it from a thread, not the event loop.
    """
    if stopped:  # no Spark to wait for or to cancel through
        deadline = time.monotonic() + 2
        return all(g.join(max(deadline - time.monotonic(), 0)) for g in gangs)
    for g in gangs:
        if g.pending:
            g.cancel()
    deadline = time.monotonic() + grace
    for g in gangs:
        g.join(max(deadline - time.monotonic(), 0))
    late = [g for g in gangs if not g.done]
    for g in late:
        g.launcher.cancel()
    deadline = time.monotonic() + 60
    for g in late:
        g.join(max(deadline - time.monotonic(), 0))
    left = [g.tag for g in gangs if not g.done]
    if left:  # pragma: no cover - Spark did not end its own job
        logger.error("spark-dask: the Spark jobs %s did not end after cancel", ", ".join(left))
    deadline = time.monotonic() + 2
    for g in gangs:  # ended: also in Spark's status tracker, which learns it a little later
        if g.done:
            g.launcher.wait_job_listed_ended(max(deadline - time.monotonic(), 0))
    return not left
