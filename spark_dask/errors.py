"""Every exception spark_dask raises, in one place (the package's ``__init__`` exports
them). Leaf module: it imports nothing of the package, so the task code shipped to the
executors (:func:`spark_dask.shipping.ship_task_code`) can carry it."""

from __future__ import annotations


class SparkDaskError(RuntimeError):
    """The Dask cluster could not start (or broke); the message says why."""


class PlanError(ValueError):
    """A request that cannot work on this Spark cluster; the message says what to change."""


class WorkerStartError(RuntimeError):
    """A Dask worker could not start inside a Spark task (carries its log tail)."""


class TaskFailed(RuntimeError):
    """A task of a plain (non-barrier) job could not start its worker; it returned a
    ``failed`` row instead of raising, so that Spark does not retry it."""


class HandoffError(RuntimeError):
    """Data could not move between Spark and Dask; the message says why."""


class HandoffTypeError(TypeError):
    """A column whose type cannot move between Spark and Dask; the message names it."""


class DeltaError(SparkDaskError):
    """A Delta table that cannot be read (or written) as asked: a table feature the
    file reader does not implement, a version that no longer exists, a corrupt log or
    deletion vector. The message names it and what works instead."""
