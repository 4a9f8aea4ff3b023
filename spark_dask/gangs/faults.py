"""What a cluster decides when Spark loses an executor or a host: plain functions, no
Spark and no Dask, so that each rule is tested on its own (the cluster in
:mod:`spark_dask.cluster` acts on them).

The situations:

* a **barrier stage fails** (a lost executor or task): Spark ends every task of the
  stage, so the gang's workers on healthy hosts die with it; the cluster relaunches
  them, as many as the executors left can hold now (:func:`spark_dask.capacity.placeable`), the rest once
  Spark has capacity again;
* a **worker's connection breaks** while its Spark task still runs (the host cut off
  from the network, its process killed): its nanny usually brings it back within
  seconds; one that stays away longer than ``lost-worker-grace`` is replaced
  (:func:`lost_worker`);
* **no worker at all** for longer than ``no-workers-timeout`` while the cluster wants
  some: the cluster fails, and says why (:func:`no_workers_message`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from spark_dask.options.groups import DEFAULT
from spark_dask.scheduler import LEAVING
from spark_dask.sizes import plural

_EXECUTOR_LOST = (
    re.compile(r"ExecutorLostFailure \(executor (\S+?)\)? exited"),
    re.compile(r"[Ll]ost executor (\S+) on ([^\s:]+)"),
    re.compile(r"executor (\S+)\)? exited"),
)


def lost_worker(last_status: str | None, retiring: bool, cluster_running: bool) -> bool:
    """Whether a worker that left the scheduler was lost (to be replaced if it does not
    come back), rather than sent away or closing by itself.

    >>> lost_worker("running", False, True), lost_worker("closing_gracefully", False, True)
    (True, False)
    >>> lost_worker("running", True, True), lost_worker("paused", False, False)
    (False, False)
    """
    return cluster_running and not retiring and (last_status or "running") not in LEAVING


def worker_slot(name: str) -> str:
    """A worker's name without the attempt suffix that a task Spark ran again adds
    (:func:`spark_dask.executor.placement.worker_name`): the new attempt's worker replaces the old.

    >>> worker_slot("spark-3-a1"), worker_slot("spark-3-gpu1-a2"), worker_slot("spark-3")
    ('spark-3', 'spark-3-gpu1', 'spark-3')
    """
    return re.sub(r"-a\d+$", "", str(name))


def lost_executor(error: str) -> str:
    """The executor (and host) a Spark job failure names, in words; ``""`` if none.

    >>> lost_executor("... ExecutorLostFailure (executor 1 exited caused by one of the running tasks) ...")
    'executor 1'
    >>> lost_executor("Lost executor 3 on 198.18.0.12: Remote RPC client disassociated.")
    'executor 3 on 198.18.0.12'
    >>> lost_executor("Python worker exited unexpectedly")
    ''
    """
    for pattern in _EXECUTOR_LOST:
        m = pattern.search(error or "")
        if m:
            host = f" on {m.group(2)}" if pattern.groups > 1 else ""
            return f"executor {m.group(1).rstrip(')')}{host}"
    return ""


# YARN's ContainerExitStatus (hadoop-yarn-api 3.3.4 and 3.5.0: the same values), in
# words, for the executor-loss reasons Spark's YarnAllocator writes with "Exit status: N"
_YARN_EXIT = {
    -100: "YARN released its container (ABORTED: its node was lost or decommissioned, or the container was released)",
    -101: "its node's disks failed (YARN's DISKS_FAILED)",
    -102: "YARN preempted its container (PREEMPTED: the queue's capacity went to another application)",
    -103: "YARN killed its container for exceeding its virtual memory (KILLED_EXCEEDED_VMEM)",
    -104: "YARN killed its container for exceeding its physical memory (KILLED_EXCEEDED_PMEM)",
    -105: "Spark's application master killed its container (KILLED_BY_APPMASTER)",
    -106: "the ResourceManager killed its container (KILLED_BY_RESOURCEMANAGER)",
    -107: "YARN killed its container after the application ended (KILLED_AFTER_APP_COMPLETION)",
    -108: "YARN's container scheduler killed its container (KILLED_BY_CONTAINER_SCHEDULER: an opportunistic container)",
    -109: "YARN killed its container for writing too many logs (KILLED_FOR_EXCESS_LOGS)",
}
_MEMORY_ADVICE = (
    "the executor's JVM, its Python workers and the Dask workers share the container; give it more "
    "(spark.executor.memoryOverhead) or the Dask workers less (memory_limit)"
)
_YARN_MEMORY = re.compile(
    r"Container killed by YARN for exceeding (physical|virtual) memory limits\.\s*(\S+ \S+ of \S+ \S+)?"
)
_YARN_PREEMPTED = re.compile(
    r"Container \S+ (?:on host: \S+ )?was preempted|because of a YARN event \(e\.g\., preemption\)"
)
_EXIT_STATUS = re.compile(r"Exit status: (-?\d+)")


def yarn_loss(error: str) -> str:
    """Why YARN took an executor, in words, from the loss reason Spark's YarnAllocator
    writes into the failure (``Container killed by YARN for exceeding physical memory
    limits``, ``... was preempted``, ``Exit status: -100``); ``""`` when the failure
    says nothing of YARN's.

    >>> print(yarn_loss("Reason: Container killed by YARN for exceeding physical memory limits. "
    ...                 "1.6 GB of 1.5 GB physical memory used. Consider boosting spark.executor.memoryOverhead."))
    YARN killed its container for exceeding its physical memory limit (1.6 GB of 1.5 GB physical memory used); the executor's JVM, its Python workers and the Dask workers share the container; give it more (spark.executor.memoryOverhead) or the Dask workers less (memory_limit)
    >>> yarn_loss("Container container_1_0001_01_000002 on host: 10.0.0.2 was preempted.")
    "YARN preempted its container (PREEMPTED: the queue's capacity went to another application)"
    >>> yarn_loss("Container marked as failed: container_1 on host: h. Exit status: -100. Diagnostics: ...")
    'YARN released its container (ABORTED: its node was lost or decommissioned, or the container was released)'
    >>> yarn_loss("Container from a bad node: c on host: h. Exit status: 137. Possible causes: ...")
    'its container exited with status 137 (killed by signal 9: out of memory, or killed by its NodeManager)'
    >>> yarn_loss("Remote RPC client disassociated.")
    ''
    """
    error = error or ""
    m = _YARN_MEMORY.search(error)
    if m:
        used = f" ({m.group(2)} {m.group(1)} memory used)" if m.group(2) else ""
        vmem = "; or have YARN's virtual memory check off (yarn.nodemanager.vmem-check-enabled)"
        advice = _MEMORY_ADVICE + (vmem if m.group(1) == "virtual" else "")
        return f"YARN killed its container for exceeding its {m.group(1)} memory limit{used}; {advice}"
    if _YARN_PREEMPTED.search(error):
        return _YARN_EXIT[-102]
    m = _EXIT_STATUS.search(error)
    if not m:
        return ""
    status = int(m.group(1))
    if status in _YARN_EXIT:
        return _YARN_EXIT[status]
    if status > 128:
        signal = status - 128
        why = ": out of memory, or killed by its NodeManager" if signal == 9 else ""
        return f"its container exited with status {status} (killed by signal {signal}{why})"
    return f"its container exited with status {status}"


def where(workers: Iterable[tuple[str, str]]) -> str:
    """``spark-1 on 198.18.0.12, spark-2 on 198.18.0.11``: workers and their hosts.

    >>> where([("spark-1", "198.18.0.12"), ("spark-0", "")])
    'spark-0, spark-1 on 198.18.0.12'
    """
    return ", ".join(f"{n} on {h}" if h else n for n, h in sorted(workers))


def loss_message(
    what: str,
    cause: str,
    lost: Iterable[tuple[str, str]],
    left: int,
    target: int,
    now: int,
    later: int,
    relaunch: str,
) -> str:
    """The one line said when workers are lost: what happened, which workers (and
    hosts), what the cluster has and what it does next.

    >>> print(loss_message("the Spark barrier stage spark-dask-a failed (executor 1 on 10.0.0.2)",
    ...       "", [("spark-0", "10.0.0.1"), ("spark-1", "10.0.0.2")], 0, 2, 1, 1, "relaunch 1 of 3"))
    spark-dask: the Spark barrier stage spark-dask-a failed (executor 1 on 10.0.0.2): 2 Dask workers lost (spark-0 on 10.0.0.1, spark-1 on 10.0.0.2); the cluster has 0 of 2; starting 1 now (relaunch 1 of 3), 1 more once Spark has a free task slot for it
    """
    lost = list(lost)
    names = f" ({where(lost)})" if lost else ""
    steps = []
    if now:
        steps.append(f"starting {now} now" + (f" ({relaunch})" if relaunch else ""))
    if later:
        steps.append(f"{later} more once Spark has a free task slot for {'it' if later == 1 else 'them'}")
    plan = ", ".join(steps) if steps else "nothing to start"
    detail = f": {cause}" if cause else ""
    n = len(lost)
    return (
        f"spark-dask: {what}{detail}: {n} Dask worker{'s' if n != 1 else ''} lost{names}; "
        f"the cluster has {left} of {target}; {plan}"
    )


def no_workers_message(target: int, waited: float, timeout: float, reason: str) -> str:
    """What a cluster that had no worker for too long says when it fails.

    >>> no_workers_message(2, 600, 600, "spark-dask-a: ExecutorLostFailure")[:81]
    'spark-dask: the Dask cluster had 0 of its 2 workers for 600 s (no-workers-timeout'
    """
    cause = f" The last loss: {reason}." if reason else ""
    return (
        f"spark-dask: the Dask cluster had 0 of its {plural(target, 'worker')} for {waited:.0f} s "
        f"(no-workers-timeout {timeout:g} s): Spark had no free task slot for any of them.{cause} "
        "The cluster is closed; start a new one when the Spark cluster has executors again "
        "(raise spark-dask.no-workers-timeout to wait longer for replaced hosts)."
    )


def worker_lost_message(worker: str, connected: int, target: int, barrier: bool, grace: float) -> str:
    """The line said when one worker's connection broke (``worker``: name and host).

    >>> worker_lost_message("spark-1 on 10.0.0.2 (executor 1)", 1, 2, False, 20)[:70]
    'spark-dask: Dask worker spark-1 on 10.0.0.2 (executor 1) was lost (its'
    """
    then = (
        "the barrier stage's other workers run on" if barrier else "Spark runs its task again where it has a free slot"
    )
    return (
        f"spark-dask: Dask worker {worker} was lost (its connection broke); the cluster has {connected} of "
        f"{plural(target, 'worker')}; {then}; it is replaced if not back within {grace:g} s"
    )


def no_workers_warning(target: int, status: str, timeout: float) -> str:
    """The line said once when a running cluster has no worker at all."""
    return (
        f"spark-dask: the Dask cluster has 0 of its {plural(target, 'worker')}: they wait for Spark task slots "
        f"({status}); it fails if none is back within {timeout:g} s (spark-dask.no-workers-timeout)"
    )


class Recovery:
    """What a running cluster owes after losses, and when to act: the state behind
    the rules above, apart from the cluster that acts (no Spark, no Dask here).

    Parameters
    ----------
    grace : float
        ``lost-worker-grace``: seconds a lost worker may take to come back.
    timeout : float
        ``no-workers-timeout``: seconds with no worker before the cluster fails.

    Attributes
    ----------
    missing : dict
        Workers whose connection broke: name -> (gang, "host (executor)", since when).
    leaving : set
        Addresses of workers that said they are being retired (no loss when they go).
    lost : int
        Workers of failed gangs (or given up) not yet relaunched.
    owed : int
        Workers relaunched in name only: no executor could hold them yet.
    """

    def __init__(self, grace: float, timeout: float):
        self.grace = grace
        self.timeout = timeout
        self.missing: dict = {}
        self.leaving: set[str] = set()
        self.lost = 0
        self.owed = 0
        self.owed_said = False
        self.reason = ""  # the last loss, in words (the relaunch-attempts message says it)
        self.what = ""  # the last loss, for the line that says what happens next
        self.workers: list[tuple[str, str]] = []  # the workers of the last loss, with hosts
        self.no_workers_since: float | None = None
        self.no_workers_said = False
        self.failure: str | None = None
        self.start_failures = 0  # gangs in a row whose workers could not start

    def worker_left(self, gang, name: str, host: str, lost: bool, now: float) -> None:
        if lost:
            self.missing[name] = (gang, host, now)

    def worker_back(self, gang, name: str) -> list[str]:
        """Lost workers that ``name`` (same gang, same task: its nanny restarted it or
        Spark ran its task again) brings back; they are no longer missing."""
        back = [n for n, (g, _, _) in self.missing.items() if g is gang and worker_slot(n) == worker_slot(name)]
        for n in back:
            del self.missing[n]
        return back

    def forget(self, gang) -> None:
        """``gang`` failed as a whole: its lost workers are relaunched with it."""
        for n in [n for n, (g, _, _) in self.missing.items() if g is gang]:
            del self.missing[n]

    def due(self, now: float) -> list[tuple[str, object, str]]:
        """Missing workers whose grace is over: (name, gang, host), no longer missing."""
        out = [(n, g, h) for n, (g, h, t) in self.missing.items() if now - t >= self.grace]
        for n, _, _ in out:
            del self.missing[n]
        return out

    def given_up(self, workers: list[tuple[str, str]]) -> None:
        """``workers`` (name, host) did not come back: to be replaced."""
        one = len(workers) == 1
        self.lost += len(workers)
        self.workers = workers
        self.what = ""
        self.reason = (
            f"{where(workers)}: the connection to {'it' if one else 'them'} broke and "
            f"{'it has' if one else 'they have'} not come back within {self.grace:g} s"
        )

    def gang_failed(self, what: str, reason: str, workers: list[tuple[str, str]], wanted: int) -> None:
        """A gang's Spark job failed while running: its ``wanted`` workers are lost."""
        self.lost += wanted
        self.what, self.reason, self.workers = what, reason, workers

    def no_workers(self, n_workers: int, target: int, now: float) -> str:
        """``"fail"`` after ``timeout`` without any worker while ``target`` > 0,
        ``"warn"`` once after 5 s of it, else ``""``."""
        if target <= 0 or n_workers > 0:
            self.no_workers_since, self.no_workers_said = None, False
            return ""
        self.no_workers_since = self.no_workers_since or now
        waited = now - self.no_workers_since
        if waited >= self.timeout:
            return "fail"
        if waited >= 5 and not self.no_workers_said:
            self.no_workers_said = True
            return "warn"
        return ""


def relaunched_message(started: int, connected: int, target: int, whole: bool, tag: str, group: str = DEFAULT) -> str:
    """What a user reads when a relaunched gang's workers all connected (``group``: the
    worker group whose gang it is; a group other than the default says so).

    >>> relaunched_message(2, 2, 2, True, "g1")
    'spark-dask: the cluster is back to full size: all 2 Dask workers are connected (relaunched: g1)'
    >>> relaunched_message(1, 1, 1, True, "g1")
    'spark-dask: the cluster is back to full size: its 1 Dask worker is connected (relaunched: g1)'
    >>> relaunched_message(1, 1, 2, False, "g1")
    'spark-dask: 1 relaunched Dask worker connected (g1); the cluster has 1 of 2'
    >>> relaunched_message(2, 2, 2, True, "t-io-g1", "io")
    'spark-dask: worker group io is back to full size: all 2 of its Dask workers are connected (relaunched: t-io-g1)'
    """
    whose = "the cluster" if group == DEFAULT else f"worker group {group}"
    if whole:
        if group == DEFAULT:
            connected_all = "its 1 Dask worker is" if target == 1 else f"all {plural(target, 'Dask worker')} are"
        else:
            connected_all = "its 1 Dask worker is" if target == 1 else f"all {target} of its Dask workers are"
        return f"spark-dask: {whose} is back to full size: {connected_all} connected (relaunched: {tag})"
    return (
        f"spark-dask: {plural(started, 'relaunched Dask worker')} connected ({tag}); "
        f"{whose} has {connected} of {target}"
    )
