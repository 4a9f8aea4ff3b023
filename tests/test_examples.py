"""Every example in examples/ runs to completion on local-cluster (CPU). The notebooks of
examples/notebooks run in tests/test_notebooks.py, the Databricks job in
tests/test_databricks_specs.py, the Node.js client in tests/test_connection.py."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from spark_dask import cli

from .test_cli import no_workers_left

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
SPARK_SUBMIT = os.path.join(os.path.dirname(sys.executable), "spark-submit")

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
        # Spark writer: tests/test_delta_spark.py); 1000 rows, then DELETE x < 100
        ["table written by the deltalake package (no Delta jars on this Spark)",
         "latest version: 900 rows, sum per k [123300.0, 123525.0, 123750.0, 123975.0]",
         "version 0 (time travel): 1000 rows", "Dask's reads equal the pandas frames written of versions 1 and 0",
         "read by 1 Dask worker"]),
}  # fmt: skip


def test_every_example_is_covered():
    assert sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py")) == sorted(CASES)


def needs_modules(modules):
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must install the examples extra (missing {missing})")
        pytest.skip(f"pip install -e '.[examples]' to run this example (missing {missing})")


def example_env(tmp_path) -> dict:
    """An example's environment: this interpreter on the executors, not on Databricks, no
    Delta jars from the caller (delta_lake.py's auto writer: the deltalake package), and
    a temporary directory of its own (``tmp_path/tmp``, checked empty afterwards)."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("DATABRICKS_RUNTIME_VERSION", None)
    env.pop("SPARK_DASK_DELTA_JARS", None)
    env["TMPDIR"] = str(tmp_path / "tmp")
    os.mkdir(env["TMPDIR"])
    return env


def run_example(cmd: list[str], env: dict, tmp_path) -> tuple[subprocess.CompletedProcess, str]:
    """Run an example's command in ``tmp_path``, bounded; its process and its whole output."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, env=env, cwd=str(tmp_path))
    return proc, proc.stdout + proc.stderr


def assert_left_nothing(output: str, tmpdir: str) -> None:
    """No worker of the example's clusters runs on, and its temporary directory (its
    environment's ``TMPDIR``) holds no spark-dask scratch."""
    assert no_workers_left(output)
    left = [f for f in os.listdir(tmpdir) if f.startswith(("spark-dask-", "gpus-"))]
    assert not left, left


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_runs(name, tmp_path):
    args, modules, expected = CASES[name]
    needs_modules(modules)
    env = example_env(tmp_path)
    if args is None:  # the job-task script, driven by `spark-dask run` under spark-submit
        cmd = [
            SPARK_SUBMIT, "--master", "local-cluster[2,1,1024]", "--conf", "spark.ui.enabled=false",
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
    # turns it off at the session's start as well
    assert "pyspark/sql/pandas/functions.py" not in output, output[-4000:]
    if name == "quickstart.py":
        assert "FutureWarning" not in output and "UserWarning" not in output, output[-4000:]
    assert_left_nothing(output, env["TMPDIR"])
