"""Every example in examples/ runs to completion on local-cluster (CPU). The notebooks of
examples/notebooks run in tests/spark/test_notebooks.py, the Databricks job in
tests/spark/test_databricks_specs.py, the Node.js client in tests/spark/test_connection.py."""

from __future__ import annotations

import os
import sys
import time

import pytest

from spark_dask import cli
from tests.support.examples import EXAMPLES, SPARK_SUBMIT, assert_left_nothing, example_env, needs_modules, run_example
from tests.support.spark import submit_confs

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

# example: (command after the interpreter, modules it needs, lines its output must have)
CASES = {
    "quickstart.py": (["quickstart.py"], [], ["groupby mean per k:", "to_dask: 100000 rows in ",
                                              "Spark count next to Dask: 500", "Spark jobs still active: []"]),
    "job_task.py": (None, [], ["connected to tls://", "dask rows: 50000", "spark rows: 50000",
                               "Spark barrier job ended: yes); exit status 0"]),
    "spark_dask_xgboost.py": (
        ["spark_dask_xgboost.py", "--rows", "50000"], ["xgboost"],
        ["spark -> dask: 50000 rows in 8 partitions (to_dask)", "xgboost on 2 Dask workers: test rmse",
         "dask -> spark: ", "Spark jobs still active: []"]),
    "delta_lake.py": (
        ["delta_lake.py"], ["deltalake", "pyroaring"],
        # the newest pyspark has no Delta Lake release: the deltalake package writes (the
        # Spark writer: tests/spark/test_delta_spark.py); 1000 rows, then DELETE x < 100
        ["table written by the deltalake package (no Delta jars on this Spark)",
         "latest version: 900 rows, sum per k [123300.0, 123525.0, 123750.0, 123975.0]",
         "version 0 (time travel): 1000 rows", "Dask's reads equal the pandas frames written of versions 1 and 0",
         "read by 1 Dask worker"]),
}  # fmt: skip


def test_every_example_is_covered():
    assert sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_runs(name, tmp_path):
    args, modules, expected = CASES[name]
    needs_modules(modules)
    env = example_env(tmp_path)
    if args is None:  # the job-task script, driven by `spark-dask run` under spark-submit
        cmd = [
            SPARK_SUBMIT, *submit_confs(), "--master", "local-cluster[2,1,1024]", "--conf", "spark.ui.enabled=false",
            "--conf", "spark.log.level=WARN", cli.__file__, "run", "--n-workers", "1",
            os.path.join(EXAMPLES, "job_task.py"), "--rows", "50000",
        ]  # fmt: skip
    else:
        cmd = [sys.executable, os.path.join(EXAMPLES, args[0]), *args[1:]]
    proc, output = run_example(cmd, env, tmp_path)
    assert proc.returncode == 0, output[-4000:]
    for line in expected:
        assert line in output, (line, output[-4000:])
    # spark-dask's warnings point at the example's own lines, never into spark_dask (issue 24)
    into_package = [ln for ln in output.splitlines() if "Warning:" in ln and f"{os.sep}spark_dask{os.sep}" in ln]
    assert not into_package, into_package
    # pyspark's pandas >= 3 FutureWarning: not at a transfer's mapInArrow; the quick start
    # and the Delta example (issue 42, point 8) turn it off at the session's start as well
    assert "pyspark/sql/pandas/functions.py" not in output, output[-4000:]
    if name in ("quickstart.py", "delta_lake.py"):
        assert "FutureWarning" not in output and "UserWarning" not in output, output[-4000:]
    assert_left_nothing(output, env["TMPDIR"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flags, says", [
    # the default writer (auto) picks the deltalake package here (no Delta jars), which
    # writes no deletion vectors: the flag was ignored (issue 42, point 9)
    (["--deletion-vectors"], "--deletion-vectors needs the Spark writer: the deltalake package writes this table "
                             "(--writer auto chose it"),
    (["--writer", "deltalake", "--deletion-vectors"], "its DELETE rewrites the files, it writes no deletion vectors"),
    (["--writer", "spark", "--jars", "/j/delta-spark.jar", "--deletion-vectors", "--path", "{table}"],
     "--deletion-vectors acts when the example writes the table, and "),
    (["--writer", "deltalake", "--jars", "/j/delta-spark.jar"], "--jars loads Delta Lake's Spark connector, which "
                                                                "--writer deltalake does not use"),
])  # fmt: skip
def test_the_delta_example_refuses_a_flag_it_would_not_act_on(tmp_path, flags, says):
    """A flag the run would not act on is refused before Spark starts (exit status 2, in seconds)."""
    needs_modules(["deltalake"])
    table = tmp_path / "table"
    (table / "_delta_log").mkdir(parents=True)  # a table that is there already
    cmd = [sys.executable, os.path.join(EXAMPLES, "delta_lake.py"), *[f.format(table=table) for f in flags]]
    t0 = time.monotonic()
    proc, output = run_example(cmd, example_env(tmp_path), tmp_path)
    assert proc.returncode == 2 and says in output, output[-4000:]
    assert "SparkContext" not in output and "log4j" not in output, output[-4000:]  # no JVM started
    assert time.monotonic() - t0 < 30
