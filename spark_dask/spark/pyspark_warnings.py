"""pyspark's pandas >= 3 ``FutureWarning``, off exactly where spark-dask makes the call
that raises it.

pyspark 4.x says "PySpark does not yet fully support pandas >= 3.0.0" (a
``FutureWarning``, ``pyspark/sql/pandas/utils.py``, ``require_minimum_pandas_version``)
wherever it readies its pandas conversion: at a classic session's first JVM call (py4j's
``NumpyArrayConverter`` imports ``pyspark.testing.utils``, which checks pandas), at the
import of Spark Connect's client, and where ``mapInArrow`` builds its UDF. spark-dask
moves rows as Arrow batches and never through pyspark's pandas conversion, so where
spark-dask itself makes such a call (the session that ``spark-dask run``, ``serve`` and
``info`` create, a transfer's ``mapInArrow``) the warning says nothing about what
happens, and is off around that call only: a filter for that message, that category,
raised from pyspark's modules, and nothing else.

A script's own ``SparkSession.builder.getOrCreate()`` raises it before spark-dask takes
part: that is pyspark telling the script about the script's own pandas use
(``toPandas``, pandas UDFs, ``createDataFrame`` of a pandas frame), and spark-dask leaves
it alone (``docs/troubleshooting.md``, "While the cluster runs", has the one line a
script adds to turn it off itself).

pyspark 4.x also logs every SQL error that carries a query context at ERROR, as it
converts the error (``pyspark/errors/exceptions/base.py``, ``_log_exception``: a JSON
line of the whole message, kilobytes, on stderr), whether the caller catches it or not.
Where spark-dask asks Spark something it expects may fail (is this name a table, which
version is it at) and answers in one line of its own, :func:`query_errors_quiet` keeps
those two loggers quiet in that thread for that call.
"""

from __future__ import annotations

import logging
import threading
import warnings
from contextlib import contextmanager

# the start of pyspark's text (a regular expression, as warnings.filterwarnings takes it)
PANDAS3_MESSAGE = r"PySpark does not yet fully support pandas >= 3\.0\.0"
# the modules it is raised from (the caller of require_minimum_pandas_version): pyspark's
PYSPARK_MODULES = r"pyspark\."


@contextmanager
def pandas3_warning_off():
    """While the block runs: pyspark's pandas >= 3 ``FutureWarning`` is ignored, every
    other warning shown as before (the process's filters come back after it)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=PANDAS3_MESSAGE, category=FutureWarning, module=PYSPARK_MODULES)
        yield


# pyspark's loggers of SQL errors with a query context (pyspark >= 4.0)
QUERY_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
_quiet = threading.local()


class _QuietHere(logging.Filter):
    """Drops the records logged in a thread inside :func:`query_errors_quiet`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_quiet, "depth", 0)


_FILTER = _QuietHere()


def _query_loggers() -> list[logging.Logger]:
    """pyspark's query-context loggers, made as pyspark makes them (``PySparkLogger``,
    whose ``exception`` takes pyspark's keywords: a plain ``Logger`` of that name would
    fail pyspark's own call); none before pyspark 4.0, which has no such loggers."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:
        return []
    return [PySparkLogger.getLogger(name) for name in QUERY_LOGGERS]


@contextmanager
def query_errors_quiet():
    """While the block runs, in this thread: pyspark's ERROR lines for SQL errors with a
    query context are not logged (the errors are raised as before); other threads and
    other loggers as before."""
    for logger in _query_loggers():
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    _quiet.depth = getattr(_quiet, "depth", 0) + 1
    try:
        yield
    finally:
        _quiet.depth -= 1


__all__ = ["PANDAS3_MESSAGE", "PYSPARK_MODULES", "QUERY_LOGGERS", "pandas3_warning_off", "query_errors_quiet"]
