"""The RAPIDS Accelerator's real plugin on the executors (fake GPUs, no CUDA).

The jar (``tests/support/jars.py``, group ``rapids-3.5``: rapids-4-spark_2.12 25.04.0) has shims
for Spark 3.2.0-3.5.5 only, so this module runs on pyspark 3.5.5 (CI's pyspark-3.5 run,
``.venv35``) and skips elsewhere. Without a GPU the plugin starts only in its
``explainOnly`` mode and with ``spark.rapids.skipGpuArchitectureCheck=true``: its
executor plugin asks CUDA for the GPU's architecture before anything else, and exits
the executor when that fails (docs/rapids.md, "The RAPIDS Accelerator's jar in CI").
In ``explainOnly`` the plugin plans every query for the GPU, logs what would run there,
and runs it on the CPU; its GPU and memory setup (``GpuDeviceManager.initializeGpu``,
the pool) is skipped, so what this module cannot show is the plugin's GPU pool itself.

local-cluster[1,2,1024]: one executor with two cores and one fake GPU (the plugin
supports one GPU per executor), one GPU per Spark task: ``gpu_mode="auto"`` shares
only because the plugin is in ``spark.plugins``. The executors run the stand-in
``dask cuda worker`` of ``tests/support/gpus.py``.
"""

from __future__ import annotations

import os
import re
import warnings
import zipfile

import pytest

import spark_dask
from spark_dask import rapids
from spark_dask.commands import doctor as diagnosis
from spark_dask.executor import rmm
from tests.support.gpus import FAKE_CUDA_ENV, fake_dask_cuda, gpu_conf, worker_argv, worker_flag
from tests.support.jars import require
from tests.support.spark import assert_no_leftovers, make_spark, stop_spark

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(300)]

# The jar's shims (its top-level spark3xy/ directories), the Apache Spark releases it
# loads on; Databricks (spark330db, ...) and Cloudera (spark321cdh, ...) shims left out.
RAPIDS_SHIMS = (
    "320", "321", "322", "323", "324", "330", "331", "332", "333", "334",
    "340", "341", "342", "343", "344", "350", "351", "352", "353", "354", "355",
)  # fmt: skip

SQL_PLUGIN = "com.nvidia.spark.SQLPlugin"


def rapids_shim(version: str) -> str | None:
    """The jar's shim for a pyspark version, or None when the jar has none.

    >>> rapids_shim("3.5.5"), rapids_shim("3.5.9"), rapids_shim("4.0.1"), rapids_shim("3.4.1.dev0")
    ('spark355', None, None, 'spark341')
    """
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if m is None:
        return None
    digits = "".join(m.groups())
    return f"spark{digits}" if digits in RAPIDS_SHIMS else None


def test_rapids_shim():
    assert rapids_shim("3.5.5") == "spark355"
    assert rapids_shim("3.2.0") == "spark320"
    assert rapids_shim("3.5.6") is None  # newer than the jar
    assert rapids_shim("4.3.0") is None  # no Scala 2.12 Spark 4; the 2.13 jars stop at spark420
    assert rapids_shim("3.1.3") is None
    assert rapids_shim("nonsense") is None


# The plugin's memory confs, as docs/rapids.md (Cluster configuration) says to set them.
MEMORY_CONF = {
    "spark.rapids.memory.gpu.allocFraction": "0.6",
    "spark.rapids.memory.gpu.maxAllocFraction": "0.6",
    "spark.rapids.memory.gpu.minAllocFraction": "0.25",
    "spark.rapids.memory.gpu.reserve": "640m",
}


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    return fake_dask_cuda(tmp_path_factory.mktemp("fake-dask-cuda"))


@pytest.fixture(scope="module")
def spark(fake):
    import pyspark

    if rapids_shim(pyspark.__version__) is None:
        pytest.skip(
            f"the RAPIDS Accelerator jar (rapids-4-spark_2.12 25.04.0) loads on Spark "
            f"3.2.0-3.5.5 (shims {', '.join(RAPIDS_SHIMS)}), not on pyspark {pyspark.__version__}"
        )
    (jar,) = require("rapids-3.5")
    conf = gpu_conf(1, "1", **{
        "spark.jars": jar,
        "spark.plugins": SQL_PLUGIN,
        "spark.rapids.sql.mode": "explainOnly",
        "spark.rapids.skipGpuArchitectureCheck": "true",
        **MEMORY_CONF,
        "spark.executorEnv.PYTHONPATH": fake["path"],
    })  # fmt: skip
    s = make_spark("local-cluster[1,2,1024]", **conf)
    yield s
    stop_spark(s)


def _executor_logs(spark) -> list[str]:
    """The stderr of the executors that run a small job: a Python task's working
    directory is its standalone executor's, where the executor writes ``stderr``."""

    def read(_):
        with open(os.path.join(os.getcwd(), "stderr"), errors="replace") as f:
            yield f.read()

    return spark.sparkContext.parallelize(range(1), 1).mapPartitions(read).collect()


def test_the_plugin_runs_on_the_driver_and_the_executors(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.plugins") == SQL_PLUGIN
    # the driver plugin's init adds the plugin's SQL extension to the application's conf
    assert "com.nvidia.spark.rapids.SQLExecPlugin" in (conf.get("spark.sql.extensions") or "")
    (log,) = _executor_logs(spark)
    assert f"Initialized executor component for plugin {SQL_PLUGIN}" in log
    assert "Exception in the executor plugin" not in log
    # and it plans SQL for the GPU: its explain API, on the plugin's own classes
    df = spark.range(100).selectExpr("id % 3 AS k").groupBy("k").count()
    plan = spark._jvm.com.nvidia.spark.rapids.ExplainPlan.explainPotentialGpuPlan(df._jdf, "ALL")
    assert "will run on GPU" in plan and "HashAggregateExec" in plan


def _plugin_memory(spark, sparkconf) -> tuple:
    """The plugin's own reading of its GPU memory fractions and reserve (its ``RapidsConf``).

    Its ``rmmPool()`` is left out: for ``ASYNC`` it asks the CUDA driver whether the
    allocator works there (ARENA otherwise), which fails without one.
    """
    rc = spark._jvm.com.nvidia.spark.rapids.RapidsConf(sparkconf)
    return (rc.rmmAllocFraction(), rc.rmmAllocMaxFraction(), rc.rmmAllocMinFraction(), rc.rmmAllocReserve())


def _dask_reading(mem: rapids.RapidsMemory) -> tuple:
    return (mem.alloc_fraction, mem.max_alloc_fraction, mem.min_alloc_fraction, mem.reserve)


def test_spark_dask_reads_the_memory_confs_as_the_plugin_does(spark):
    jvm = spark._jvm
    rc = jvm.com.nvidia.spark.rapids.RapidsConf
    # the conf names and defaults are those docs/rapids.md and spark_dask.rapids assume
    entries = {
        rapids.POOL: rc.RMM_POOL(),
        rapids.ALLOC_FRACTION: rc.RMM_ALLOC_FRACTION(),
        rapids.MAX_ALLOC_FRACTION: rc.RMM_ALLOC_MAX_FRACTION(),
        rapids.MIN_ALLOC_FRACTION: rc.RMM_ALLOC_MIN_FRACTION(),
        rapids.RESERVE: rc.RMM_ALLOC_RESERVE(),
    }
    assert {key: entry.key() for key, entry in entries.items()} == {key: key for key in entries}
    assert entries[rapids.POOL].defaultValue() == rapids.DEFAULT_POOL == "ASYNC"
    defaults = _plugin_memory(spark, jvm.org.apache.spark.SparkConf(False))
    assert defaults == (1.0, 1.0, 0.25, 640 * 2**20)
    default_read = rapids.read_rapids(lambda key: None)
    assert _dask_reading(default_read) == defaults and default_read.pool == "ASYNC"
    # and the application's confs (docs/rapids.md, Cluster configuration) read alike
    conf = spark.sparkContext.getConf()
    mem = rapids.read_rapids(conf.get)
    assert mem.enabled and mem.pooled and mem.spark_fraction == 0.6
    assert _dask_reading(mem) == _plugin_memory(spark, spark.sparkContext._jsc.sc().conf())
    assert _dask_reading(mem) == (0.6, 0.6, 0.25, 640 * 2**20)
    # the plugin's default pool (all of the GPU) is what spark-dask warns about
    full = spark.sparkContext.getConf().set(rapids.ALLOC_FRACTION, "1.0").set(rapids.MAX_ALLOC_FRACTION, "1.0")
    (warning,) = rapids.check_rapids(full.get)
    assert f"--conf {rapids.ALLOC_FRACTION}=0.6" in warning


def test_auto_shares_with_the_plugin_and_spark_sql_runs_beside_the_cluster(spark):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        client = spark_dask.start(spark, progress=False, env=FAKE_CUDA_ENV)
    with client:
        cluster = client.cluster
        gang = cluster.gang_plan
        # whole-GPU Spark tasks: shared only because the plugin is in spark.plugins
        assert gang.kind == "cuda" and gang.gpu_mode == "shared" and gang.n_workers == 1
        assert gang.uses_profile and gang.task_gpus is None  # the gang holds no GPU in Spark
        info = cluster.spark_info()
        assert info["GPU mode"] == "shared (beside Spark's GPU tasks)"
        assert info["task request"] == "cpus=1, no GPU"

        # memory: the plugin's pool at most 0.6 of the GPU leaves the 0.4 Dask needs (no
        # warning), and the worker's auto-sized pool is capped at 0.4 of the GPU's 40 GiB
        # (the fake NVML's 30 GiB free would give 27.5 GiB)
        assert not [str(w.message) for w in record if "RAPIDS Accelerator" in str(w.message)]
        assert rapids.check_rapids(lambda key: spark.sparkContext.getConf().get(key)) == []
        cap = 16 * 2**30
        assert rmm.rmm_pool_size(30 * 2**30, 2**30, 0.95) > cap
        (argv,) = worker_argv(client).values()
        assert worker_flag(argv, "--rmm-pool-size") == str(cap)
        assert worker_flag(argv, "--device-memory-limit") == str(int(cap * 0.8))

        # a Spark SQL job (planned by the plugin) runs while the Dask cluster does, on the
        # executor whose plugin accepted the gang's CPU-only task profile
        df = spark.range(10_000).selectExpr("id % 7 AS k").groupBy("k").count()
        assert sorted(tuple(r) for r in df.collect()) == [(k, 1429 if k < 4 else 1428) for k in range(7)]
        assert client.submit(lambda x: x + 1, 1).result(timeout=30) == 2
        assert len(client.scheduler_info()["workers"]) == 1  # the gang was not disturbed
        (log,) = _executor_logs(spark)
        assert "Exception in the executor plugin" not in log
    notes = [n for row in cluster.task_rows for n in row.get("notes", [])]  # the task's status row
    assert any("at most 40% of the GPU (shared with Spark)" in n for n in notes), notes
    assert_no_leftovers(spark, cluster)


def test_the_doctor_reads_the_real_jars_shims_against_this_spark(spark):
    """``spark-dask doctor`` on this application: the real jar has this Spark's shim
    (``spark355``), so no finding about it; a Spark the jar lacks would be named."""
    found = spark_dask.doctor(spark)
    assert not [f for f in found.findings if "RAPIDS Accelerator jar" in f.text], found.render()
    assert found.ready, found.render()
    assert found.spark["gpu_mode_auto"] == "shared"  # the plugin is on
    (jar,) = require("rapids-3.5")
    with zipfile.ZipFile(jar) as z:
        names = z.namelist()
    said = diagnosis.rapids_jar_problem(names, "3.5.6", databricks=False)
    assert said.startswith("has no shim for Spark 3.5.6 (it has spark320, spark321,") and "spark355" in said
    assert diagnosis.rapids_jar_problem(names, "3.5.0", databricks=True) is None  # spark350db143: DBR 14.3
