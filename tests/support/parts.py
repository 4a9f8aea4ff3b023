"""The parts of a cluster for the tests and benchmarks (:class:`spark_dask.parts.ClusterParts`):
what the cluster holds itself, also after it closed (the package's own modules are handed
them, or find a running cluster's in :mod:`spark_dask.registry`)."""

from __future__ import annotations


def parts_of(cluster):
    """The :class:`~spark_dask.parts.ClusterParts` of ``cluster`` (a SparkCluster)."""
    return cluster._parts
