"""spark_dask.spark.pyspark_warnings: pyspark's pandas >= 3 FutureWarning off around spark-dask's
own calls, and nothing else (issue 42, point 8): not another message, not another
category, not the same text raised from outside pyspark, not after the block."""

from __future__ import annotations

import warnings

from spark_dask.spark.pyspark_warnings import pandas3_warning_off

PYSPARK_TEXT = (
    "PySpark does not yet fully support pandas >= 3.0.0. Some features may not work correctly. "
    "It is recommended to use pandas < 3.0.0 for now."
)


def _raise(text: str, category, module: str) -> None:
    warnings.warn_explicit(text, category, filename=module.replace(".", "/") + ".py", lineno=1, module=module,
                           registry={})  # fmt: skip


def _shown(text: str, category, module: str, off: bool) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if off:
            with pandas3_warning_off():
                _raise(text, category, module)
        else:
            _raise(text, category, module)
    return [str(w.message) for w in caught]


def test_only_pysparks_pandas3_warning_is_off_and_only_inside_the_block():
    assert _shown(PYSPARK_TEXT, FutureWarning, "pyspark.testing.utils", off=False) == [PYSPARK_TEXT]
    assert _shown(PYSPARK_TEXT, FutureWarning, "pyspark.testing.utils", off=True) == []
    assert _shown(PYSPARK_TEXT, FutureWarning, "pyspark.sql.pandas.functions", off=True) == []
    assert _shown(PYSPARK_TEXT, FutureWarning, "my_script", off=True) == [PYSPARK_TEXT]  # not pyspark's
    assert _shown(PYSPARK_TEXT, UserWarning, "pyspark.sql.pandas.functions", off=True) == [PYSPARK_TEXT]
    other = "pandas.DataFrame.swapaxes is deprecated"
    assert _shown(other, FutureWarning, "pyspark.pandas.frame", off=True) == [other]


def test_query_errors_quiet_drops_pysparks_error_lines_in_this_thread_only():
    """Issue 68, point 7: pyspark 4 logs each failed query at ERROR (JSON, kilobytes)
    before spark-dask's one line; quiet inside the block, in its thread, and nowhere else."""
    import logging
    import threading

    import pytest

    logger_module = pytest.importorskip("pyspark.logger")  # pyspark >= 4.0
    from spark_dask.spark.pyspark_warnings import QUERY_LOGGERS, query_errors_quiet

    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    logger = logger_module.PySparkLogger.getLogger(QUERY_LOGGERS[0])
    keep = Keep()
    logger.addHandler(keep)
    try:
        with query_errors_quiet():
            logger.error("inside", errorClass="X")  # pyspark's keywords still taken
            other = threading.Thread(target=lambda: logger.error("other thread", errorClass="X"))
            other.start()
            other.join(10)
        logger.error("after", errorClass="X")
    finally:
        logger.removeHandler(keep)
    assert seen == ["other thread", "after"]
