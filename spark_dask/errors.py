"""Every exception spark_dask raises, in one place (the package's ``__init__`` exports
them), all under :class:`SparkDaskError`; the cross-language ones,
:class:`spark_dask.xlang.XLangError` and :class:`~spark_dask.xlang.XLangTaskError`,
derive from it in their own module. Leaf module: it imports nothing of the package, so
the task code shipped to the executors (:data:`spark_dask.executor.SHIPPED`) can
carry it."""

from __future__ import annotations


class SparkDaskError(Exception):
    """Every failure of spark_dask: ``except spark_dask.SparkDaskError`` catches them all.

    Never raised itself: each subclass is also the builtin exception that fits
    (``ValueError``, ``TypeError``, ``TimeoutError`` or ``RuntimeError``), so code that
    catches the builtin catches it too.
    """


class ClusterError(SparkDaskError, RuntimeError):
    """The Dask cluster could not start (or broke); the message says why."""


class ClusterTimeoutError(ClusterError, TimeoutError):
    """A bounded wait passed: the workers did not connect within the start timeout, or a
    cluster found by name did not answer in time (also a ``RuntimeError``, as before)."""


class PlanError(SparkDaskError, ValueError):
    """A request that cannot work on this Spark cluster; the message says what to change."""


class UnknownKeywordError(SparkDaskError, TypeError):
    """A keyword argument that is no option of ``start()`` / ``SparkCluster()`` (a
    misspelling, as Python's own ``TypeError`` would say); the message names the closest
    option."""


class WorkerStartError(SparkDaskError, RuntimeError):
    """A Dask worker could not start inside a Spark task (carries its log tail)."""


class TaskFailed(SparkDaskError, RuntimeError):
    """A task of a plain (non-barrier) job could not start its worker; it returned a
    ``failed`` row instead of raising, so that Spark does not retry it."""


class HandoffError(SparkDaskError, RuntimeError):
    """Data could not move between Spark and Dask; the message says why."""


class HandoffTypeError(SparkDaskError, TypeError):
    """A column whose type cannot move between Spark and Dask; the message names it."""


class DeltaError(SparkDaskError, RuntimeError):
    """A Delta table that cannot be read (or written) as asked: a table feature the
    file reader does not implement, a version that no longer exists, a corrupt log or
    deletion vector. The message names it and what works instead."""


class DoctorError(SparkDaskError, RuntimeError):
    """``spark-dask doctor`` could not check the executors: its Spark job failed there
    or got no task slots in time. The message says which and what to do."""
