"""Dask workers whose Python cannot import spark_dask (executors where it is not
installed): the hand-off both ways, the Delta reader and a cross-language graph's Python
tasks still run, because what they run on the workers travels by value
(:func:`spark_dask.spark.shipping.by_value`), not as a reference to spark_dask's modules.

The workers get ``PYTHONPATH`` with a ``sitecustomize`` that makes every import of
spark_dask fail (the cluster's ``env`` option) and are started as a fresh
``python -m distributed.cli.dask_worker`` (``spark-dask.fork-nanny: false``: a nanny forked from
the Spark task would inherit the task's modules).
"""

from __future__ import annotations

import dask
import pytest

import spark_dask
from spark_dask import xlang
from tests.support.spark import without_module

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def client(spark, tmp_path_factory):
    blocker = tmp_path_factory.mktemp("no-spark-dask")
    (blocker / "sitecustomize.py").write_text(without_module("spark_dask"))
    with dask.config.set({"spark-dask.fork-nanny": False}):
        cluster = spark_dask.SparkCluster(spark, n_workers=1, env={"PYTHONPATH": str(blocker)})
    with cluster, cluster.get_client() as client:
        yield client


def test_the_workers_cannot_import_spark_dask(client):
    def probe():
        try:
            import spark_dask  # noqa: F401
        except ImportError as e:
            return f"missing: {e}"
        return "imported"

    (answer,) = client.run(probe).values()
    assert answer == "missing: No module named 'spark_dask'"


def test_the_hand_off_both_ways(spark, client):
    df = spark.range(0, 1000, 1, 4).selectExpr("id", "id % 3 as k", "cast(id as string) as s")
    ddf = spark_dask.to_dask(df)
    assert int(ddf.id.sum().compute()) == sum(range(1000))
    back = spark_dask.to_spark(ddf[ddf.k == 1])
    rows = back.selectExpr("count(*) as n", "sum(id) as total").collect()[0]
    assert (rows.n, rows.total) == (333, sum(i for i in range(1000) if i % 3 == 1))


def test_the_delta_reader(client, tmp_path):
    deltalake = pytest.importorskip("deltalake")
    import pandas as pd

    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, pd.DataFrame({"id": range(100), "k": [i % 4 for i in range(100)]}))
    ddf = spark_dask.read_delta(path, client=client, via="files")
    assert int(ddf.id.sum().compute()) == sum(range(100)) and ddf.npartitions >= 1


def test_a_python_task_of_a_cross_language_graph(client):
    assert client.gather(xlang.submit(client, "python", "math.factorial", 5)) == 120
