"""pyspark's own cloudpickle, which pickles Spark's closures (a copy vendored in pyspark,
registered apart from the ``cloudpickle`` that Dask uses).

:mod:`spark_dask.shipping` registers the modules it ships by value with it, and the
doctor (:mod:`spark_dask.diagnosis`) measures the gang's task as Spark sends it.
"""

from __future__ import annotations

__all__ = ["spark_cloudpickle", "spark_dumps"]


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
