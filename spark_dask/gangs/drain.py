"""A graceful drain when Spark decommissions an executor (spot reclaims, scale-down).

With ``spark.decommission.enabled`` Spark tells an executor that it will go and lets its
running tasks finish; the driver polls Spark's state of it
(:mod:`spark_dask.spark.decommission`) for the executors that run this cluster's workers
(:func:`watch_decommission`). For each
executor that Spark decommissions, the workers on it are retired in Dask (their data
moves to the other workers, for at most the drain window: :func:`drain_window`), then
their Spark tasks return: the executor leaves without failing the barrier stage of the
workers elsewhere (an executor lost while a barrier task runs fails the whole stage).
As many workers start again once Spark has a free task slot (:meth:`GangPool.drain
<spark_dask.gangs.pool.GangPool.drain>`).

A Spark Connect session has no access to the driver's scheduler: there the workers of
a decommissioned executor are lost with it, as without decommissioning.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import suppress
from functools import partial

from dask.utils import format_bytes

from spark_dask.aio import blocking
from spark_dask.events import Events
from spark_dask.gangs.faults import where
from spark_dask.sizes import plural
from spark_dask.spark.compat import jvm_reachable
from spark_dask.spark.decommission import decommissioning, decommissions, kill_timeouts

logger = logging.getLogger("spark_dask")

MARGIN = 5.0  # seconds kept before Spark's own kill for the Spark tasks to return
GIVE_UP = 3  # failed reads of the driver's scheduler in a row after which the watch ends
# Executors asked about per round (two py4j reads each): every half second at most 8
# reads, whatever the number of executors; each is asked at least every ceil(E / 4)
# rounds (32 executors: every 4 s; a spot reclaim's notice is 30 s to 2 minutes, and the
# drain's window counts from when Spark began, not from when the watch saw it)
PER_ROUND = 4


def unreadable_message(error: str) -> str:
    """What the watch says when the driver's scheduler cannot be read (a Databricks
    access mode that blocks py4j).

    >>> unreadable_message("Py4JSecurityException: ...")[:80]
    "spark-dask: Spark decommissions executors here, but the driver's scheduler canno"
    """
    return (
        "spark-dask: Spark decommissions executors here, but the driver's scheduler cannot be read "
        f"({error}): the Dask workers of a decommissioned executor are lost with it (their Spark tasks "
        "relaunched). Dedicated compute (single user) lets spark-dask drain them."
    )


def drain_window(drain_timeout: float, force_kill: float | None, kill_interval: float | None) -> float:
    """Seconds Dask may move a decommissioned executor's data: ``drain-timeout``, or
    less where Spark kills the executor sooner (``forceKillTimeout`` / ``killInterval``
    less :data:`MARGIN`), never below 0.

    >>> drain_window(30, None, None), drain_window(30, 20, None), drain_window(30, 60, 12), drain_window(30, 3, None)
    (30, 15.0, 7.0, 0.0)
    """
    bounds = [drain_timeout] + [max(b - MARGIN, 0.0) for b in (force_kill, kill_interval) if b is not None]
    return min(bounds)


def spark_window(spark, drain_timeout: float) -> float | None:
    """The drain window for ``spark`` (blocking: reads its conf), or None where Spark
    does not decommission (``spark.decommission.enabled`` off)."""
    if not decommissions(spark):
        return None
    return drain_window(drain_timeout, *kill_timeouts(spark))


def executors_of(scheduler, tag: str) -> dict[str, list[tuple[str, str]]]:
    """``{executor id: [(worker name, host), ...]}``: where cluster ``tag``'s connected
    workers run, from the Spark facts each worker reports."""
    out: dict[str, list[tuple[str, str]]] = {}
    for ws in scheduler.workers.values():
        facts = ws.extra.get("spark")
        if isinstance(facts, dict) and facts.get("cluster") == tag and facts.get("executor_id"):
            out.setdefault(str(facts["executor_id"]), []).append((str(ws.name), str(facts.get("host") or "")))
    return out


def keys_on(scheduler, names: list[str]) -> dict[str, int]:
    """``{key: bytes}`` of the results that only the workers ``names`` hold."""
    workers = {ws for ws in scheduler.workers.values() if str(ws.name) in names}
    return {ts.key: ts.get_nbytes() for ws in workers for ts in ws.has_what if not (ts.who_has or set()) - workers}


def still_held(scheduler, keys, names: list[str]) -> list:
    """The ``keys`` that a worker other than ``names`` holds now."""
    return [
        k
        for k in keys
        if (ts := scheduler.tasks.get(k)) is not None and any(str(ws.name) not in names for ws in ts.who_has or ())
    ]


def drained_message(
    executor: str,
    workers: list[tuple[str, str]],
    moved: int,
    nbytes: int,
    lost: int,
    seconds: float,
    window: float | None,
) -> str:
    """The one line a drain says: the executor, its workers, what Dask moved (or could
    not: within the drain ``window``, None where it did not run out, or at all) and what
    comes next.

    >>> print(drained_message("1", [("spark-1", "10.0.0.2")], 12, 3 << 20, 0, 1.23, 30))
    spark-dask: Spark is decommissioning executor 1: Dask worker spark-1 on 10.0.0.2 retired in 1.2 s, its 12 keys (3.00 MiB) moved to the other workers; a new worker starts once Spark has a free task slot
    >>> print(drained_message("1", [("spark-1", ""), ("spark-2", "")], 0, 0, 5, 30.0, 30))  # doctest: +ELLIPSIS
    spark-dask: ... executor 1: ... spark-1, spark-2 closed after the drain window (30 s, spark-dask.drain-timeout) with 5 keys not moved (recomputed when needed); 2 new workers start once ...
    >>> print(drained_message("1", [("spark-1", "")], 0, 0, 5, 0.2, None))  # doctest: +ELLIPSIS
    spark-dask: ... spark-1 closed with 5 keys not moved (no other worker to take them; recomputed when needed); ...
    """
    one = len(workers) == 1
    who = f"Dask worker{'' if one else 's'} {where(workers)}"
    if lost and window is not None:
        done = (
            f"{who} closed after the drain window ({window:g} s, spark-dask.drain-timeout) with "
            f"{plural(lost, 'key')} not moved (recomputed when needed)"
        )
    elif lost:
        done = (
            f"{who} closed with {plural(lost, 'key')} not moved (no other worker to take them; recomputed when needed)"
        )
    else:
        done = f"{who} retired in {seconds:.1f} s"
        if moved:
            done += f", {'its' if one else 'their'} {plural(moved, 'key')} ({format_bytes(nbytes)}) moved to the other workers"
    new = "a new worker starts" if one else f"{len(workers)} new workers start"
    return f"spark-dask: Spark is decommissioning executor {executor}: {done}; {new} once Spark has a free task slot"


async def drain_executor(
    executor: str, workers: list[tuple[str, str]], pools, scheduler, window: float, events: Events
) -> dict:
    """Retire the ``workers`` of a decommissioned ``executor`` (each through the pool
    that holds it) and say what happened; returns the figures (for tests and benchmarks)."""
    names = [n for n, _ in workers]
    held = keys_on(scheduler, names)
    kept: set = set()  # the keys on other workers when the window ran out
    t0 = time.monotonic()
    late = []
    for pool in pools:
        mine = [n for n in names if pool.gang_of(n) is not None]
        if mine:
            late += await pool.drain(mine, window, lambda: kept.update(still_held(scheduler, held, names)))
    seconds = time.monotonic() - t0
    if not late:
        kept = set(still_held(scheduler, held, names))
    lost = sum(1 for k in held if k not in kept and k in scheduler.tasks)  # not released meanwhile
    figures = {
        "executor": executor,
        "workers": names,
        "keys": len(held),
        "moved": len(kept),
        "bytes": sum(held[k] for k in kept),
        "lost": lost,
        "seconds": seconds,
    }
    msg = drained_message(executor, workers, len(kept), figures["bytes"], lost, seconds, window if late else None)
    events.tell(msg)
    return figures


async def watch_decommission(
    spark,
    tag: str,
    scheduler,
    pools,
    drain_timeout: float,
    events: Events,
    drained,
    every: float = 0.5,
    read=blocking,
    roster=None,
) -> None:
    """While the cluster runs: drain each executor of this cluster's workers that Spark
    begins to decommission (:func:`drain_executor`, several at once). Returns at once
    where Spark does not decommission or the driver cannot be read (Spark Connect).
    ``pools()``: the cluster's gang pools; ``drained(figures)``: called after each drain;
    ``read``: how a blocking read is awaited (the cluster's
    :class:`~spark_dask.gangs.waits.SparkReads`); ``roster()``: a number that changes
    whenever a worker joins or leaves (the executors of the workers are looked up again
    then, not each round); None: each round."""
    if not jvm_reachable(spark):
        if await read(decommissions, spark):
            events.log(
                "spark-dask: Spark decommissions executors here, but a Spark Connect session cannot see it: "
                "the Dask workers of a decommissioned executor are lost with it (their Spark tasks relaunched)"
            )
        return
    window = await read(spark_window, spark, drain_timeout)
    if window is None:
        return
    draining: dict[str, asyncio.Task] = {}
    places, seen = {}, None  # the executors of the workers, at roster() == seen
    try:
        failed, turn = 0, 0  # rounds in a row; where the next round's executors begin
        while any(p.running for p in pools()):
            now = None if roster is None else roster()
            if now is None or now != seen:
                places, seen = executors_of(scheduler, tag), now
            ids, turn = in_turn(sorted(e for e in places if e not in draining), turn)
            try:
                found = await read(decommissioning, spark, ids) if ids else {}
                failed = 0
            except Exception as e:  # noqa: BLE001 - the next round tries again, twice
                failed, found = failed + 1, {}
                if failed >= GIVE_UP:
                    events.tell(unreadable_message(f"{type(e).__name__}: {e}"))
                    return
                logger.debug("spark-dask: reading Spark's decommissioned executors failed: %r", e)
            for executor, age in found.items():
                job = drain_executor(executor, places[executor], pools(), scheduler, max(window - age, 0.0), events)
                draining[executor] = asyncio.ensure_future(job)
                draining[executor].add_done_callback(partial(_drain_ended, executor, drained))
            await asyncio.sleep(every)
    finally:
        for task in draining.values():
            task.cancel()
        for task in draining.values():
            with suppress(BaseException):
                await task


def in_turn(ids: list[str], turn: int, k: int = PER_ROUND) -> tuple[list[str], int]:
    """The ``k`` of ``ids`` from position ``turn`` on (wrapping round), and where the
    next round begins: all of them when they are ``k`` or fewer.

    >>> in_turn(["1", "2", "3"], 0)
    (['1', '2', '3'], 0)
    >>> in_turn(list("abcdef"), 0, 4)
    (['a', 'b', 'c', 'd'], 4)
    >>> in_turn(list("abcdef"), 4, 4)
    (['e', 'f', 'a', 'b'], 2)
    """
    if len(ids) <= k:
        return list(ids), 0
    turn %= len(ids)
    return [ids[(turn + i) % len(ids)] for i in range(k)], (turn + k) % len(ids)


def _drain_ended(executor: str, drained, task: asyncio.Task) -> None:
    if task.cancelled():
        return
    if task.exception() is not None:
        e = task.exception()
        logger.warning("spark-dask: draining executor %s failed: %s: %s", executor, type(e).__name__, e, exc_info=e)
        return
    drained(task.result())
