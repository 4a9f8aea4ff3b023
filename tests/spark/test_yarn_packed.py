"""The executors' Python on YARN from a packed environment (docs/yarn.md, "The workers'
Python"): a ``venv-pack``-style archive (:func:`tests.support.packed_env.pack_env`:
distributed, pandas, pyarrow and what they need, ~100 MB) shipped with
``spark.archives``, unpacked by YARN in each container, ``PYSPARK_PYTHON`` pointing into
it when the session starts; and the same application with the executors on a Python
that lacks the packages, which ``spark-dask doctor`` must say at once."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import distributed
import pandas
import pyarrow
import pytest

import spark_dask
from spark_dask.commands.run import environment
from spark_dask.errors import DoctorError
from tests.support.packed_env import pack_env
from tests.support.spark import assert_no_leftovers
from tests.support.yarn_fixtures import session_on, yarn_bed

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

PACKAGES = ["distributed", "pandas", "pyarrow"]
ENV_PYTHON = "./env/bin/python"  # relative: each container's working directory


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    with yarn_bed(str(tmp_path_factory.mktemp("yarn"))) as b:
        yield b


@contextlib.contextmanager
def executors_python(python: str, bed, **conf):
    """A session on ``bed`` whose executors run ``python``: ``PYSPARK_PYTHON`` in this
    process's environment while its SparkContext starts (pyspark reads only that), as a
    notebook would set it; back as it was after."""
    conf = {"spark.pyspark.python": python, "spark.executorEnv.PYSPARK_PYTHON": python, **conf}
    with environment(PYSPARK_PYTHON=python), session_on(bed, **conf) as spark:
        yield spark


def _make_where():
    def where(*_):  # a closure: pickled by value (tests is not in the packed environment)
        import sys

        import distributed

        return sys.executable, distributed.__file__

    return where


_where = _make_where()


def test_the_workers_run_in_a_packed_environment(bed, tmp_path):
    archive = pack_env(str(tmp_path / "env.tar.gz"), PACKAGES)
    conf = {"spark.archives": f"{archive}#env", "spark.executor.memoryOverhead": "1536m"}  # the workers' room
    with executors_python(ENV_PYTHON, bed, **conf) as spark:
        found = spark_dask.doctor(spark)
        assert found.ready, found.render()
        assert not [f for f in found.findings if f.problem], found.render()
        assert len([e for h in found.hosts.values() for e in h["executors"]]) == 2, found.render()
        for answer in found.hosts.values():
            # the container's own copy, unpacked by YARN: .../container_.../env/bin/python
            assert "/container_" in answer["executable"] and answer["executable"].endswith("/env/bin/python"), answer
            want = {
                "distributed": distributed.__version__,
                "pandas": pandas.__version__,
                "pyarrow": pyarrow.__version__,
            }
            assert {k: answer["versions"][k] for k in want} == want, answer
        with spark_dask.start(spark, n_workers=2, progress=False) as client:
            import dask.array as da

            assert int(da.arange(100_000, chunks=10_000).sum().compute()) == 4_999_950_000
            for executable, module in client.run(_where).values():
                assert "/container_" in executable and executable.endswith("/env/bin/python"), executable
                assert "/container_" in module and "/env/lib/" in module, module  # not the driver's venv
            cluster = client.cluster
        assert_no_leftovers(spark, cluster)


def test_executors_on_a_python_without_the_packages_are_named_at_once(bed, tmp_path):
    """A Python with nothing installed (a fresh venv: a node's own ``python3``): the
    doctor's check job fails at once, and says what to do."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True, timeout=60)
    with executors_python(str(tmp_path / "bare/bin/python"), bed) as spark:
        with pytest.raises(DoctorError) as e:
            spark_dask.doctor(spark)
        text = str(e.value)
        assert "the doctor's check job failed on the executors" in text and "No module named" in text, text
        assert "PYSPARK_PYTHON" in text, text
