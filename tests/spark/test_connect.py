"""spark_dask.start on a Spark Connect session: ``remote("local-cluster[2,1,1024]")``.

The same behaviour as tests/spark/test_cluster.py, launched through the DataFrame API
(``mapInArrow(..., barrier=True)``) instead of RDDs. A local remote starts an in-process
Spark Connect server (and a classic SparkContext behind it), so this module needs the
process free of classic sessions: the other modules stop theirs at module end, and this
one stops its server at module end.

Core tests: they run on pyspark 3.5 too (tests/run-all.sh), where pyspark ships no
Connect server: the fixture puts Maven Central's ``spark-connect_2.12`` of the same
patch on ``spark.jars`` (fetched by ``python -m tests.support.jars fetch connect-3.5``).
"""

from __future__ import annotations

import glob
import os
import sys
import time
from dataclasses import replace

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from distributed.utils import open_port

import spark_dask
from spark_dask import PlanError, SparkCluster, SparkDaskError
from spark_dask.gangs.maker import GangMaker
from spark_dask.handoff import driver as handoff
from spark_dask.handoff.files import DIR_PREFIX
from spark_dask.handoff.transfer import host_info
from tests.support import jars
from tests.support.parts import parts_of
from tests.support.processes import dask_processes, port_open, wait_until
from tests.support.spark import DEFAULT_SPARK, fresh_jvm, test_jvm_conf

pytest.importorskip("grpc", reason="needs the connect extra (pyspark[connect])")

pytestmark = [pytest.mark.spark, pytest.mark.core, pytest.mark.timeout(240)]


def server_jars() -> dict[str, str]:
    """The Connect server's jar for a local remote: pyspark >= 4 carries it, 3.5 does not."""
    import pyspark

    if int(pyspark.__version__.split(".")[0]) >= 4:
        return {}
    (jar,) = jars.require("connect-3.5")
    if not jar.endswith(f"-{pyspark.__version__}.jar"):
        pytest.fail(f"{jar} is not the Connect server of pyspark {pyspark.__version__} (tests/support/jars.py)")
    # spark.jars alone reaches the executors' task class loader after the task is read:
    # the server's lambdas fail to deserialize there (ClassCastException: SerializedLambda)
    return {"spark.jars": jar, "spark.executor.extraClassPath": jar}


@pytest.fixture(scope="module")
def spark():
    """One in-process Spark Connect server for the module, on a free port."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client import core

    DEFAULT_SPARK.release()  # the modules before may have left the shared classic session running
    if SparkContext._active_spark_context is not None or SparkSession._instantiatedSession is not None:
        pytest.fail("a classic SparkSession is still active: a local Spark Connect server cannot start")
    extra = server_jars()
    fresh_jvm()
    port = open_port("127.0.0.1")
    # pyspark 4: DefaultChannelBuilder; 3.5: ChannelBuilder holds the default port
    builder = getattr(core, "DefaultChannelBuilder", None) or core.ChannelBuilder
    with pytest.MonkeyPatch.context() as mp:
        # The client of a local remote connects to the default port (15002) unless
        # SPARK_TESTING is set; use our own port so parallel runs cannot collide.
        mp.setattr(builder, "default_port", staticmethod(lambda: port))
        s = (
            SparkSession.builder.remote("local-cluster[2,1,1024]")
            .appName("spark-dask-connect-tests")
            .config("spark.connect.grpc.binding.port", str(port))
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
            .config("spark.sql.shuffle.partitions", "4")
            .config(map=test_jvm_conf())
            .config(map=extra)
            .getOrCreate()
        )
        try:
            yield s
        finally:
            s.stop()
            fresh_jvm()
    assert SparkContext._active_spark_context is None
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ


def jvm_active_jobs() -> list[int]:
    """Jobs of the in-process server's SparkContext (a local remote only)."""
    from pyspark.sql import SparkSession

    return list(SparkSession._instantiatedSession.sparkContext.statusTracker().getActiveJobsIds())


def assert_no_leftovers(spark, cluster) -> None:
    assert wait_until(lambda: not dask_processes(cluster.tag)), [p.info for p in dask_processes(cluster.tag)]
    assert wait_until(lambda: not jvm_active_jobs()), jvm_active_jobs()
    assert spark.interruptTag(cluster.tag) == []  # no operation carries the cluster's tag
    assert cluster.tag not in spark.getTags()
    assert not port_open(cluster.scheduler_address)


def test_is_a_connect_session(spark):
    from spark_dask.spark.session import is_connect

    assert is_connect(spark)
    with pytest.raises(Exception):  # noqa: B017
        spark.sparkContext  # noqa: B018 - what makes the classic path impossible


def test_start_computes_and_leaves_nothing(spark):
    t0 = time.monotonic()
    with spark_dask.start(spark) as client:
        cluster = client.cluster
        up = time.monotonic() - t0
        assert parts_of(cluster).gangs[-1].launcher.connect
        info = client.scheduler_info()["workers"]
        assert len(info) == 2
        assert client.scheduler.address.startswith("tls://")
        assert port_open(cluster.scheduler_address)
        assert len(dask_processes(cluster.tag)) >= 2  # nanny + worker per task
        assert jvm_active_jobs()  # the barrier stage holds the workers

        pdf = pd.DataFrame({"k": np.arange(1000) % 7, "x": np.arange(1000, dtype=float)})
        ddf = dd.from_pandas(pdf, npartitions=8)
        got = ddf.groupby("k").x.sum().compute().sort_index()
        pd.testing.assert_series_equal(got, pdf.groupby("k").x.sum().sort_index())

        arr = np.random.default_rng(0).random((2000, 200))
        assert np.isclose(da.from_array(arr, chunks=(250, 200)).sum().compute(), arr.sum())

        pids = set(client.run(os.getpid).values())
        assert os.getpid() not in pids and len(pids) == 2
        t1 = time.monotonic()

    down = time.monotonic() - t1
    assert cluster.status.name == "closed"
    assert_no_leftovers(spark, cluster)
    rows = cluster.task_rows
    assert sorted(r["partition"] for r in rows) == [0, 1]
    assert all(w["exit_code"] == 0 for r in rows for w in r["workers"])
    # mapInArrow's task has pyarrow (native threads) loaded: the nanny is forked all the same
    assert [r["forked"] for r in rows] == [[True], [True]]
    print(
        f"\nconnect first cluster: up {up:.2f}s (workers {parts_of(cluster).timings['workers']:.2f}s), down {down:.2f}s"
    )

    t0 = time.monotonic()
    with spark_dask.start(spark) as client:
        up2 = time.monotonic() - t0
        cluster = client.cluster
        assert client.submit(lambda x: x + 1, 1).result() == 2
        t1 = time.monotonic()
    down2 = time.monotonic() - t1
    assert_no_leftovers(spark, cluster)
    print(
        f"connect second cluster: up {up2:.2f}s (workers {parts_of(cluster).timings['workers']:.2f}s), down {down2:.2f}s"
    )
    assert up2 < 60 and down2 < 30  # generous: a shared machine


def test_workers_carry_spark_facts_and_sizes(spark):
    with spark_dask.start(spark, threads_per_worker=1, memory_limit="1GiB") as client:
        workers = client.scheduler_info()["workers"].values()
        assert sorted(w["name"] for w in workers) == ["spark-0", "spark-1"]
        for w in workers:
            assert w["nthreads"] == 1  # threads above the executor cores are refused
            assert w["memory_limit"] == 2**30
            assert w["spark"]["cluster"] == client.cluster.tag
        assert {w["spark"]["executor_id"] for w in workers} == {"0", "1"}


def test_exception_in_block_propagates_and_tears_down(spark):
    class Boom(Exception):
        pass

    with pytest.raises(Boom, match="inside"):
        with spark_dask.start(spark) as client:
            cluster = client.cluster
            raise Boom("inside")
    assert cluster.status.name == "closed"
    assert_no_leftovers(spark, cluster)


@pytest.mark.newest  # task profiles are Spark >= 4.0
def test_cluster_contract_with_a_task_profile(spark):
    # task_profile=True: the gang is submitted with mapInArrow(..., profile=...) (Spark >= 4.0)
    cluster = SparkCluster(spark, n_workers=1, progress=False, task_profile=True)
    try:
        assert cluster.status.name == "running"
        assert cluster.gang_plan.uses_profile
        client = cluster.get_client()
        assert client.submit(lambda x: x * 2, 21).result() == 42
        logs = cluster.get_logs()
        assert {"Cluster", "Scheduler", "Spark tasks"} <= set(logs)
        info = cluster.spark_info()
        assert info["connect session"] == spark.session_id
        assert info["application"].startswith("app-")
        assert info["executors"] == "2 x 1 cores"
        assert cluster.tag in cluster._repr_html_()
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)
    assert "task 0 on executor" in cluster.get_logs()["Spark tasks"]


def test_scheduler_host_option(spark):
    with spark_dask.start(spark, n_workers=1, scheduler_host="127.0.0.1") as client:
        assert client.scheduler.address.startswith("tls://127.0.0.1:")
        assert client.submit(lambda: 7).result() == 7
        cluster = client.cluster
    assert_no_leftovers(spark, cluster)


def test_too_many_workers_fails_fast_without_a_job(spark):
    t0 = time.monotonic()
    with pytest.raises(PlanError, match="n_workers<=2"):
        spark_dask.start(spark, n_workers=3)
    assert time.monotonic() - t0 < 30
    assert not jvm_active_jobs()


def test_scale_up_and_down_through_connect(spark):
    # every gang is a barrier mapInArrow with a session tag of its own
    from distributed import Client

    cluster = SparkCluster(spark, n_workers=1, progress=False)
    try:
        client = Client(cluster)
        cluster.scale(2)
        client.wait_for_workers(2, timeout=60)
        assert client.submit(sum, [1, 2]).result() == 3
        assert sorted(w["name"] for w in client.scheduler_info()["workers"].values()) == ["spark-0", "spark-1"]
        cluster.scale(1)
        assert wait_until(lambda: len(client.scheduler_info()["workers"]) == 1, 30)
        assert wait_until(lambda: sum(not g.done for g in parts_of(cluster).gangs) == 1, 30)
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)
    for tag in cluster.gang_tags:
        assert spark.interruptTag(tag) == []


def test_unreachable_scheduler_is_reported_quickly(spark, monkeypatch):
    # What the tasks see from a laptop behind NAT: an address where nothing listens.
    # A refused port on loopback: no traffic leaves this machine.
    dead = f"tls://127.0.0.1:{open_port('127.0.0.1')}"
    original = GangMaker.task_spec
    tags = []

    def spec_with_dead_address(self):
        tags.append(self.tag)
        return replace(original(self), scheduler_address=dead)

    monkeypatch.setattr(GangMaker, "task_spec", spec_with_dead_address)
    t0 = time.monotonic()
    with pytest.raises(SparkDaskError) as e:
        spark_dask.start(spark, timeout=120)
    elapsed = time.monotonic() - t0
    msg = str(e.value)
    assert f"cannot reach the Dask scheduler at {dead}" in msg, msg
    assert "executor" in msg and "host" in msg and "scheduler_host" in msg, msg
    assert "Connection refused" in msg or "ConnectionRefusedError" in msg, msg
    assert elapsed < 30, elapsed
    assert wait_until(lambda: not jvm_active_jobs())
    assert tags and not dask_processes(tags[0])
    assert "SQLSTATE" not in msg and "Traceback" not in msg  # our message, not Spark's wrapping


def test_a_databricks_notebook_on_a_connect_session_is_refused_at_once(spark, monkeypatch):
    # On a Databricks runtime a Connect session means standard (shared) access mode or
    # serverless, where the tasks cannot start the workers: say so before any job.
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    t0 = time.monotonic()
    with pytest.raises(PlanError, match=r"standard \(shared\) access mode") as e:
        spark_dask.start(spark)
    assert time.monotonic() - t0 < 5
    assert "dedicated (single user) or no-isolation shared" in str(e.value)
    assert not jvm_active_jobs()


def test_the_doctor_through_connect(spark):
    """``spark-dask doctor`` on a Connect session: the same job (``mapInArrow``), the
    address this process's scheduler would listen on; no executor list to compare with."""
    found = spark_dask.doctor(spark)
    assert found.ready, found.render()
    (host,) = found.hosts.values()
    assert len(host["executors"]) == 2 and host["reach"] is None and host["unpickles"] is None
    assert found.render().splitlines()[-1] == "ready: every executor can start Dask workers."


def test_to_dask_and_to_spark_through_connect(spark):
    import warnings

    from pyspark.sql import functions as F

    from spark_dask import HandoffError

    # a gang of two holds both slots of local-cluster[2,1,1024]: refused at once, no job
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client = spark_dask.start(spark, progress=False)
    with client:
        t0 = time.monotonic()
        with pytest.raises(HandoffError, match="hold every slot"):
            spark_dask.to_dask(spark.range(10))
        assert time.monotonic() - t0 < 30
        assert len(jvm_active_jobs()) == 1  # only the gang
    # one worker leaves a slot free
    with spark_dask.start(spark, n_workers=1, progress=False) as client:
        df = spark.range(0, 5000, 1, 3).select(
            "id",
            F.col("id").cast("string").alias("s"),
            F.when(F.col("id") % 3 == 0, None).otherwise(F.col("id") * 0.5).alias("x"),
            F.timestamp_seconds(F.col("id")).alias("ts"),
            F.array(F.col("id"), F.lit(None).cast("long")).alias("a"),
        )
        ddf = spark_dask.to_dask(df)
        assert str(ddf.dtypes["ts"]).startswith("datetime64[us, ")
        pdf = ddf.compute()
        assert sorted(pdf["id"]) == list(range(5000)) and pdf["x"].isna().sum() == 1667
        back = spark_dask.to_spark(ddf)
        assert [f.dataType for f in back.schema] == [f.dataType for f in df.schema]
        assert sorted(map(repr, back.collect())) == sorted(map(repr, df.collect()))
        # fixed-width columns: Spark's per-row batch size estimate is lifted for the job
        # (batches of 7 rows: many batches), and the session's setting is back after it
        key = "spark.sql.execution.arrow.maxBytesPerBatch"
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")
        try:
            fixed = spark.range(0, 5000, 1, 3).selectExpr("id", "id * 0.5 AS x", "id % 2 = 0 AS b")
            got = spark_dask.to_dask(fixed).compute().sort_values("id")
            assert got["id"].tolist() == list(range(5000)) and got["x"].tolist() == [i * 0.5 for i in range(5000)]
            assert got["b"].tolist() == [i % 2 == 0 for i in range(5000)]
            assert spark.conf.get(key, None) is None and not handoff._confs_set
        finally:
            spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
        # the transfer's own batch size: a partition is one Arrow batch, one file loaded
        # without a copy, whatever byte limit the session sets (here 1 MB for partitions of
        # ~2 MB; before, the limit made every file several batches, and Spark estimated the
        # size after every row: 3x slower at 1 GB, docs/benchmarks.md)
        spark.conf.set(key, "1m")
        try:
            roots = {w["root"] for w in client.run(host_info).values()}

            def arrow_files() -> set[str]:
                return {f for r in roots for f in glob.glob(os.path.join(r, f"{DIR_PREFIX}*", "*.arrow"))}

            before = arrow_files()
            big = spark.range(0, 200_000, 1, 2).selectExpr("id", "id * 0.5 AS x")
            ddf = spark_dask.to_dask(big).persist()
            assert ddf["id"].sum().compute() == sum(range(200_000))
            files = arrow_files() - before
            assert len(files) == 2 and [pa.ipc.open_file(f).num_record_batches for f in files] == [1, 1]
            assert spark.conf.get(key) == "1m" and not handoff._confs_set
            del ddf
        finally:
            spark.conf.unset(key)
        cluster = client.cluster
    assert_no_leftovers(spark, cluster)


def test_spark_stop_tears_the_cluster_down(spark):
    """Last in this module: it stops the module's Connect session."""
    client = spark_dask.start(spark, n_workers=2, progress=False)
    cluster = client.cluster
    t0 = time.monotonic()
    spark.stop()
    assert wait_until(lambda: cluster.status.name == "closed", 30)
    assert wait_until(lambda: not dask_processes(cluster.tag), 30)
    assert not port_open(cluster.scheduler_address)
    print(f"connect spark.stop(): cluster closed in {time.monotonic() - t0:.1f}s")
    assert "SparkSession was stopped" in cluster.get_logs()["Cluster"]
    client.close()
