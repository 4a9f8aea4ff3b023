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
