"""Ship the package's code to executors and Dask workers by value.

Executors and Dask workers need not have spark_dask installed: the task code (the
gang's Dask-worker tasks, the hand-off's transfer tasks and everything they import
from the package) is pickled by value, with pyspark's cloudpickle (Spark's closures)
and with cloudpickle (Dask's tasks and plugins). :func:`ship_by_value` is the one
place a module is registered; :data:`TASK_CODE` is the package's list.
"""

from __future__ import annotations

import threading
from types import ModuleType

from spark_dask import arrow_types, errors, handoff_plan, handoff_task, logdir, plan, rapids, sizes, spec, task

# Every module of the package whose code runs in a Spark task or on a Dask worker.
TASK_CODE: tuple[ModuleType, ...] = (
    errors,
    sizes,
    logdir,
    plan,
    rapids,
    spec,
    task,
    arrow_types,
    handoff_plan,
    handoff_task,
)

_shipped: set[str] = set()
_lock = threading.Lock()


def ship_by_value(*modules: ModuleType) -> None:
    """Have Spark's and Dask's pickling send ``modules`` by value (once per module)."""
    with _lock:
        todo = [m for m in modules if m.__name__ not in _shipped]
        if not todo:
            return
        import cloudpickle

        try:  # Spark's closures; a Dask-only use (read_delta's file reader) has no pyspark
            from pyspark import cloudpickle as spark_cloudpickle
        except ImportError:
            spark_cloudpickle = None
        for module in todo:
            if spark_cloudpickle is not None:
                spark_cloudpickle.register_pickle_by_value(module)
            cloudpickle.register_pickle_by_value(module)
            _shipped.add(module.__name__)


def ship_task_code() -> None:
    """Ship :data:`TASK_CODE` by value (see the module's docstring)."""
    ship_by_value(*TASK_CODE)


__all__ = ["TASK_CODE", "ship_by_value", "ship_task_code"]
