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
"""

from __future__ import annotations

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


__all__ = ["PANDAS3_MESSAGE", "PYSPARK_MODULES", "pandas3_warning_off"]
