"""Installing without pyspark (Databricks runtimes ship theirs outside pip's metadata).

The package must import without pyspark, ``start()`` / ``SparkCluster()`` / the CLI
must say what to install, and the distribution must not require pyspark
unconditionally (``%pip install spark-dask`` would fetch PyPI's pyspark over the
runtime's). Each check runs in a fresh interpreter whose ``import pyspark`` fails.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap

import pytest
from packaging.requirements import Requirement

pytestmark = [pytest.mark.core, pytest.mark.timeout(120)]

# Makes every import of pyspark (and its submodules) fail, as on a machine without it.
BLOCK_PYSPARK = textwrap.dedent(
    """
    import importlib.abc, sys

    class _NoPySpark(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "pyspark" or name.startswith("pyspark."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoPySpark())
    """
)


def run_without_pyspark(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_PYSPARK + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_the_blocker_blocks():
    p = run_without_pyspark("import pyspark")
    assert p.returncode == 1 and "No module named 'pyspark'" in p.stderr


def test_every_module_imports_without_pyspark():
    p = run_without_pyspark(
        """
        import spark_dask, spark_dask.cli, spark_dask.cluster, spark_dask.spark.session
        import spark_dask.spark.launcher, spark_dask.executor.gang_task, spark_dask.plan, spark_dask.rapids
        import spark_dask.spark.databricks, spark_dask.options.config
        import spark_dask.handoff, spark_dask.handoff.files, spark_dask.handoff.transfer, spark_dask.handoff.arrow_types
        assert "pyspark" not in sys.modules
        print("imported", spark_dask.__version__)
        """
    )
    assert p.returncode == 0, p.stderr
    assert "imported" in p.stdout


@pytest.mark.parametrize("call", ["spark_dask.start()", "spark_dask.SparkCluster()", "spark_dask.start(object())"])
def test_start_without_pyspark_says_what_to_install(call):
    p = run_without_pyspark(
        f"""
        import spark_dask
        try:
            {call}
        except ImportError as e:
            print(type(e).__name__, "|", e)
        else:
            print("no error")
        """
    )
    assert p.returncode == 0, p.stderr
    kind, message = p.stdout.strip().split(" | ", 1)
    assert kind == "ImportError"
    assert "spark-dask needs pyspark" in message
    assert "pip install 'spark-dask[spark]'" in message
    assert "Databricks Runtime" in message and "built in" in message
    assert "\n" not in message and len(message) < 400


@pytest.mark.parametrize("argv", [["info"], ["run", "job.py"], ["serve"]])
def test_cli_without_pyspark_is_one_line_and_exit_1(argv):
    p = run_without_pyspark("from spark_dask.cli import main; main(prog_name='spark-dask')", *argv)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("Error: spark-dask needs pyspark")
    assert "spark-dask[spark]" in p.stderr


def test_cli_help_works_without_pyspark():
    p = run_without_pyspark("from spark_dask.cli import main; main(prog_name='spark-dask')", "--help")
    assert p.returncode == 0, p.stderr
    assert "run" in p.stdout and "info" in p.stdout


def test_cli_list_works_without_pyspark(tmp_path):
    """``spark-dask list`` reads the state directory only: no Spark needed."""
    code = "import os; os.environ['DASK_SPARK_DASK__STATE_DIR'] = os.sys.argv[1]; from spark_dask.cli import main; main(['list'], prog_name='spark-dask')"
    p = run_without_pyspark(code, str(tmp_path / "state"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("no spark-dask cluster of this user runs on this host"), p.stdout


def test_distribution_never_requires_pyspark_unconditionally():
    requires = [Requirement(r) for r in importlib.metadata.requires("spark-dask") or []]
    pyspark = [r for r in requires if r.name == "pyspark"]
    assert pyspark, requires  # the extras do name it
    for r in pyspark:
        # an unconditional requirement has no marker, or one that holds without extras
        assert r.marker is not None and not r.marker.evaluate({"extra": ""}), str(r)
    extras = {e for r in pyspark for e in ("spark", "connect") if r.marker.evaluate({"extra": e})}
    assert extras == {"spark", "connect"}


def test_cuda_extras_refuse_rapids_older_than_26_04():
    """RAPIDS 26.04+ needs Python >= 3.11: the lower bound makes pip fail on 3.10 instead
    of resolving RAPIDS 26.02 or older (checked with pip install --dry-run)."""
    requires = [Requirement(r) for r in importlib.metadata.requires("spark-dask") or []]
    rapids = {"dask-cuda", "dask-cudf-cu12", "cudf-cu12", "dask-cudf-cu13", "cudf-cu13"}
    for extra, suffix in (("cuda12", "cu12"), ("cuda13", "cu13")):
        reqs = [r for r in requires if r.marker is not None and r.marker.evaluate({"extra": extra})]
        named = {r.name for r in reqs}
        assert {"dask-cuda", f"dask-cudf-{suffix}", f"cudf-{suffix}", "nvidia-ml-py"} <= named, named
        assert next(r for r in reqs if r.name == "dask-cuda").extras == {suffix}
        for r in reqs:
            if r.name in rapids:
                assert not r.specifier.contains("26.2.1") and r.specifier.contains("26.4.0"), str(r)
    alias = [r for r in requires if r.marker is not None and r.marker.evaluate({"extra": "cuda"})]
    assert [(r.name, r.extras) for r in alias] == [("spark-dask", {"cuda12"})]
