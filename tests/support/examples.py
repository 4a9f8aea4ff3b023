"""Running the examples of ``examples/`` as a user would: their environment, a bounded
run, and what they must leave behind (nothing)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from tests.support.paths import ROOT
from tests.support.processes import no_workers_left

EXAMPLES = os.path.join(ROOT, "examples")
SPARK_SUBMIT = os.path.join(os.path.dirname(sys.executable), "spark-submit")


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
