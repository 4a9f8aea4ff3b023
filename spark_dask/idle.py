"""Idle shutdown (``idle_timeout=``): when a cluster has had no work for that long.

Idle is what distributed's scheduler counts for its own ``idle-timeout``: no task
queued, processing or unrunnable, and no task changing state; here a client connecting
or leaving counts as activity too (a notebook that just joined is about to compute).
:class:`IdleClock` decides from snapshots of that (:func:`activity`), without a
scheduler; :func:`close_when_idle` feeds it from the cluster's scheduler and calls back once the
timeout passed.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Activity:
    """What the scheduler does at one moment.

    Parameters
    ----------
    transitions : int
        The scheduler's ``transition_counter`` (every task state change counts it up).
    busy : bool
        A task is queued, unrunnable or processing on a worker.
    clients : frozenset
        The ids of the connected clients.
    """

    transitions: int
    busy: bool
    clients: frozenset


def activity(scheduler) -> Activity:
    """A snapshot of ``scheduler`` (a :class:`distributed.Scheduler`)."""
    busy = bool(scheduler.queued or scheduler.unrunnable) or any(ws.processing for ws in scheduler.workers.values())
    return Activity(scheduler.transition_counter, busy, frozenset(scheduler.clients))


class IdleClock:
    """How long a cluster has been idle, from the snapshots it is shown.

    Parameters
    ----------
    timeout : float
        Seconds of idleness after which :meth:`expired` says so.
    now : float
        The start (``time.monotonic()``): a fresh cluster counts as active then.

    Examples
    --------
    >>> clock = IdleClock(10, now=0)
    >>> clock.observe(Activity(5, False, frozenset({"c1"})), now=4)    # first look: active
    0
    >>> clock.observe(Activity(5, False, frozenset({"c1"})), now=9)
    5
    >>> clock.observe(Activity(6, False, frozenset({"c1"})), now=12)   # a task changed state
    0
    >>> clock.observe(Activity(6, False, frozenset({"c1"})), now=23), clock.expired(23)
    (11, True)
    """

    def __init__(self, timeout: float, now: float):
        self.timeout = timeout
        self.since = now
        self.last: Activity | None = None

    def observe(self, seen: Activity, now: float) -> float:
        """Seconds idle as of ``now``, given the snapshot ``seen``."""
        if seen.busy or seen != self.last:
            self.since = now
        self.last = seen
        return now - self.since

    def expired(self, now: float) -> bool:
        """Whether the cluster has been idle for at least the timeout."""
        return now - self.since >= self.timeout


def poll_interval(timeout: float) -> float:
    """How often :func:`close_when_idle` looks: a twentieth of the timeout, within 0.25 to 5 s.

    >>> poll_interval(3), poll_interval(60), poll_interval(3600)
    (0.25, 3.0, 5.0)
    """
    return min(max(timeout / 20, 0.25), 5.0)


def duration_text(seconds: float) -> str:
    """A duration as people write it.

    >>> duration_text(1800), duration_text(90), duration_text(2.5), duration_text(5400)
    ('30m', '1m 30s', '2.5s', '1h 30m')
    """
    if seconds < 60:
        return f"{seconds:g}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs and not hours else ""]
    return " ".join(p for p in parts if p)


def closing_message(name: str, timeout: float) -> str:
    """What the owner reads when the idle timeout closes the cluster.

    >>> closing_message("team", 1800)
    "spark-dask: closing cluster 'team': no Dask tasks or client activity for 30m (idle_timeout); its Spark tasks end and their task slots return to Spark"
    """
    return (
        f"spark-dask: closing cluster {name!r}: no Dask tasks or client activity for "
        f"{duration_text(timeout)} (idle_timeout); its Spark tasks end and their task slots return to Spark"
    )


def closed_message(name: str, seconds: float) -> str:
    """The line once the idle cluster is closed.

    >>> closed_message("team", 2.04)
    "spark-dask: cluster 'team' closed after being idle (idle_timeout) in 2.0s: its Spark task slots are free"
    """
    return (
        f"spark-dask: cluster {name!r} closed after being idle (idle_timeout) in {seconds:.1f}s: "
        "its Spark task slots are free"
    )


async def close_when_idle(scheduler, timeout: float, on_idle) -> None:
    """Look at ``scheduler`` every :func:`poll_interval` seconds; once it has been idle
    for ``timeout`` seconds, await ``on_idle()`` and return. Cancelled with the cluster."""
    clock = IdleClock(timeout, time.monotonic())
    interval = poll_interval(timeout)
    while True:
        await asyncio.sleep(interval)
        now = time.monotonic()
        clock.observe(activity(scheduler), now)
        if clock.expired(now):
            await on_idle()
            return


__all__ = [
    "Activity",
    "IdleClock",
    "activity",
    "closed_message",
    "closing_message",
    "duration_text",
    "poll_interval",
    "close_when_idle",
]
