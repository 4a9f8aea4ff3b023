"""Ship the package's code to executors and Dask workers by value.

Executors and Dask workers need not have spark_dask installed: the code that runs there
is pickled by value, with pyspark's cloudpickle (Spark's closures) and with cloudpickle
(Dask's tasks and plugins). :func:`ship_by_value` is the mechanism; each part of the
package names what it ships itself, as a ``SHIPPED`` tuple beside its code
(:data:`spark_dask.executor.SHIPPED`, the gang's task; the hand-off's and the Delta
reader's), which ``tools/structure.py`` holds to the executor boundary.

Registering a module is enough for Spark, whose closures cloudpickle pickles whole, and
for what Dask pickles on its own (``client.run``, a plugin). A function inside a Dask
graph (``client.submit``, ``delayed``, ``from_map``) is pickled with the standard
library's pickle first, by reference (``distributed.protocol.pickle.dumps`` turns to
cloudpickle only for an object whose own module is registered, not for what it holds),
so a worker without spark_dask could not load it: such functions go into graphs wrapped
by :func:`by_value`. :func:`spark_dumps` pickles as Spark does (the doctor measures the
gang's task with it).
"""

from __future__ import annotations

import threading
from types import ModuleType

_shipped: set[str] = set()
_lock = threading.Lock()


def spark_cloudpickle():
    """pyspark's cloudpickle module, or None where pyspark cannot be imported (a
    Dask-only use, e.g. ``read_delta``'s file reader)."""
    try:
        from pyspark import cloudpickle
    except ImportError:
        return None
    return cloudpickle


def spark_dumps(obj) -> bytes:
    """``obj`` pickled as Spark pickles a closure (pyspark's cloudpickle)."""
    from pyspark import cloudpickle

    return cloudpickle.dumps(obj)


def ship_by_value(*modules: ModuleType) -> None:
    """Have Spark's and Dask's pickling send ``modules`` by value (once per module)."""
    with _lock:
        todo = [m for m in modules if m.__name__ not in _shipped]
        if not todo:
            return
        import cloudpickle

        spark_pickler = spark_cloudpickle()  # Spark's closures; None without pyspark (read_delta's file reader)
        for module in todo:
            if spark_pickler is not None:
                spark_pickler.register_pickle_by_value(module)
            cloudpickle.register_pickle_by_value(module)
            _shipped.add(module.__name__)


class ByValue:
    """A function that any pickler sends by value (see the module's text): pickled, it
    is cloudpickle's bytes of the function, and unpickled it is the function itself, so
    the worker needs neither this class nor spark_dask. Calls go to the function."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "function")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self._payload: bytes | None = None

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __reduce__(self):
        import cloudpickle

        if self._payload is None:  # once per wrapper: a graph holds it in every task
            self._payload = cloudpickle.dumps(self.fn)
        return cloudpickle.loads, (self._payload,)

    def __dask_tokenize__(self):
        return ("spark_dask.spark.shipping.ByValue", self.fn.__module__, self.__qualname__)

    def __repr__(self) -> str:
        return f"by_value({self.fn.__module__}.{self.__qualname__})"


def by_value(fn) -> ByValue:
    """``fn`` for a Dask graph, sent by value; its module is shipped
    (:func:`ship_by_value`) before the graph is."""
    return ByValue(fn)


__all__ = ["ByValue", "by_value", "ship_by_value", "spark_cloudpickle", "spark_dumps"]
