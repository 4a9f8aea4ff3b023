"""Ship the package's code to executors and Dask workers by value.

Executors and Dask workers need not have spark_dask installed: the code that runs there
is pickled by value, with pyspark's cloudpickle (Spark's closures) and with cloudpickle
(Dask's tasks and plugins). :func:`ship_by_value` is the mechanism; each part of the
package names what it ships itself, as a ``SHIPPED`` tuple beside its code
(:data:`spark_dask.executor.SHIPPED`, the gang's task; the hand-off's and the Delta
reader's), which ``tools/structure.py`` holds to the executor boundary.
"""

from __future__ import annotations

import threading
from types import ModuleType

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


__all__ = ["ship_by_value"]
