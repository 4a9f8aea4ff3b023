"""What a cluster decides when Spark loses an executor or a host: plain functions, no
Spark and no Dask, so that each rule is tested on its own (the cluster in
:mod:`spark_dask.cluster` acts on them).

The situations:

* a **barrier stage fails** (a lost executor or task): Spark ends every task of the
  stage, so the gang's workers on healthy hosts die with it; the cluster relaunches
  them, as many as the executors left can hold now (:func:`placeable`), the rest once
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

# The worker state in which a worker leaves on purpose: Dask retires it
# (``retire_workers`` moved its data away first). A worker that closes by itself
# (``closing``: its nanny got the Spark task's death signal, it lost its scheduler) or
# whose connection just broke (still ``running``) is lost.
LEAVING = frozenset({"closing_gracefully"})

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
    (:func:`spark_dask.plan.worker_name`): the new attempt's worker replaces the old.

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


def where(workers: Iterable[tuple[str, str]]) -> str:
    """``spark-1 on 198.18.0.12, spark-2 on 198.18.0.11``: workers and their hosts.

    >>> where([("spark-1", "198.18.0.12"), ("spark-0", "")])
    'spark-0, spark-1 on 198.18.0.12'
    """
    return ", ".join(f"{n} on {h}" if h else n for n, h in sorted(workers))


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
        f"spark-dask: the Dask cluster had 0 of its {target} workers for {waited:.0f} s "
        f"(no-workers-timeout {timeout:g} s): Spark had no free task slot for any of them.{cause} "
        "The cluster is closed; start a new one when the Spark cluster has executors again "
        "(raise spark-dask.no-workers-timeout to wait longer for replaced hosts)."
    )
