"""What a :class:`~spark_dask.cluster.SparkCluster` is made of, for the package's own
modules (the CLI, named clusters, the hand-off, the report, the GPU check) and the
tests: :func:`parts_of` a cluster, not attributes of the user-facing class, whose public
surface is ``distributed.deploy.Cluster``'s and what the docs describe.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

_of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # cluster -> its ClusterParts


@dataclass(eq=False)
class ClusterParts:
    """The parts, made by the cluster (``pool``, ``facts`` and ``connect`` once its start
    has them).

    Attributes
    ----------
    options : spark_dask.options.ClusterOptions
    env : dict
        The workers' environment variables.
    events : spark_dask.events.Events
    side : spark_dask.scheduler.DriverScheduler
    maker : spark_dask.cluster.GangMaker
    entry : spark_dask.named.Entry
        The cluster's entry in the state directory.
    log_keeper : spark_dask.logdir.KeptLogs
    pool : spark_dask.pool.GangPool or None
        The default worker group's pool.
    pools : dict
        Every worker group's pool by the group's name (:mod:`spark_dask.groups.spec`), the
        default group first.
    facts : spark_dask.plan.ClusterFacts or None
    timings : dict
        Seconds of each start-up step.
    connect : bool
        Whether the session is Spark Connect.
    drains : list of dict
        What each drain of a decommissioned executor did (:func:`spark_dask.drain.drain_executor`).
    """

    options: Any
    env: dict
    events: Any
    side: Any
    maker: Any = None
    entry: Any = None
    log_keeper: Any = None
    pool: Any = None
    pools: dict = field(default_factory=dict)
    facts: Any = None
    timings: dict = field(default_factory=dict)
    connect: bool = False
    drains: list = field(default_factory=list)

    @property
    def gangs(self) -> list:
        """Every gang (Spark job) submitted, in order, group by group."""
        if not self.pools:
            return self.pool.gangs if self.pool is not None else []
        return [g for pool in self.pools.values() for g in pool.gangs]

    @property
    def relaunches(self) -> int:
        """Gangs relaunched after a failure, so far."""
        return self.pool.relaunches if self.pool is not None else 0

    @property
    def recovery(self):
        """What the cluster lost and owes (:class:`spark_dask.faults.Recovery`)."""
        return self.pool.recovery if self.pool is not None else None

    @property
    def dashboard_settings(self):
        """How the dashboard is served and linked (Databricks driver proxy); None before
        the scheduler side exists."""
        return self.side.dashboard_settings if self.side is not None else None


def attach(cluster, made: ClusterParts) -> None:
    """Called by the cluster once, when it makes its parts."""
    _of[cluster] = made


def parts_of(cluster) -> ClusterParts:
    """The parts of ``cluster`` (a :class:`~spark_dask.cluster.SparkCluster`)."""
    return _of[cluster]


def parts_if_any(cluster) -> ClusterParts | None:
    """The parts of ``cluster`` when it is a SparkCluster of this process; None for
    anything else (a handle found by name, a stand-in)."""
    try:
        return _of.get(cluster)
    except TypeError:  # not weakly referenceable: not a cluster of this process
        return None


__all__ = ["ClusterParts", "attach", "parts_if_any", "parts_of"]
