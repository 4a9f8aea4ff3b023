"""spark-dask on YARN: a ResourceManager and two NodeManagers on this machine
(:class:`tests.support.yarn.YarnBed`, the ``yarn-3.3`` jars group), a client-mode
application with two executors in YARN containers, and what a user does with it."""

from __future__ import annotations

import glob
import os
import warnings

import dask
import distributed
import pytest

import spark_dask
from tests.support.processes import wait_until
from tests.support.spark import assert_no_leftovers
from tests.support.yarn_fixtures import session_on, yarn_bed

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

MIB = 2**20
# An executor's container: 512 MiB of heap + 1536 MiB of memory overhead. Each NM holds
# one executor (3.5 GiB: the AM's 640 MiB and one executor's 2 GiB fit, two executors do
# not), so that each executor is on an NM of its own. The NMs check the containers'
# physical memory each second (every 3 s by default), by polling: Hadoop 3.3's
# ContainersMonitorImpl.checkLimit returns at once while
# yarn.nodemanager.resource.memory.enforced is true (its default; then only cgroups
# enforce memory, as on clusters that configure them). The RM gives up on a silent NM
# after 10 s (600 s by default), so that a lost NM is one within the test.
OVERHEAD_MIB = 1536
SETTINGS = {
    "yarn.nodemanager.resource.memory-mb": "3584",
    "yarn.scheduler.maximum-allocation-mb": "3584",
    "yarn.nodemanager.pmem-check-enabled": "true",
    "yarn.nodemanager.resource.memory.enforced": "false",
    "yarn.nodemanager.resource-monitor.interval-ms": "1000",
    "yarn.nodemanager.container-monitor.interval-ms": "1000",
    "yarn.nm.liveness-monitor.expiry-interval-ms": "10000",
}


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """The RM and 2 NMs, for the module."""
    with yarn_bed(str(tmp_path_factory.mktemp("yarn")), settings=SETTINGS) as b:
        yield b


@pytest.fixture(scope="module")
def spark(bed):
    """A client-mode application on the bed: 2 executors of 2 cores."""
    with session_on(bed, **{"spark.executor.memoryOverhead": f"{OVERHEAD_MIB}m"}) as s:
        yield s


def _total(client) -> int:
    import dask.array as da

    return int(client.compute(da.arange(100_000, chunks=10_000).sum()).result())


def _make_container_id():
    # a closure: Dask pickles it by value (the tests package is not on the workers)
    def container_id():
        import os

        return os.environ.get("CONTAINER_ID")

    return container_id


_container_id = _make_container_id()


def test_start_compute_scale_close_on_yarn(spark, bed):
    assert spark.sparkContext.master == "yarn"
    client = spark_dask.start(spark, n_workers=2)
    cluster = client.cluster
    try:
        containers = set(client.run(_container_id).values())
        assert len(containers) == 2 and all(c and c.startswith("container_") for c in containers), containers
        # memory_limit="auto": the room in each executor's container (its overhead less
        # Spark's default 384 MiB), not the host's memory
        limits = {w["memory_limit"] for w in client.scheduler_info()["workers"].values()}
        assert limits == {(OVERHEAD_MIB - 384) * MIB}, limits
        assert _total(client) == 4_999_950_000

        cluster.scale(1)
        assert wait_until(lambda: len(client.scheduler_info()["workers"]) == 1, timeout=60)
        cluster.scale(2)
        client.wait_for_workers(2, timeout=90)
        assert _total(client) == 4_999_950_000
        assert all(c and c.startswith("container_") for c in client.run(_container_id).values())
    finally:
        client.close()
    assert_no_leftovers(spark, cluster)
    assert bed.metrics()["appsRunning"] == 1  # the application itself, still up


def test_the_doctor_checks_the_yarn_executors(spark):
    found = spark_dask.doctor(spark)
    assert found.ready, found.render()
    assert not [f for f in found.findings if f.problem], found.render()
    answered = sorted(e for host in found.hosts.values() for e in host["executors"])
    assert len(answered) == 2, found.render()  # each executor, in its container, answered
    assert all(h["versions"]["distributed"] == distributed.__version__ for h in found.hosts.values())
    # the containers leave the workers 1.12 GiB: nothing to say of their memory
    assert not [f for f in found.findings if "memoryOverhead" in f.fix], found.render()


def test_hand_off_both_ways_on_yarn(spark):
    from pyspark.sql import functions as F

    df = spark.range(0, 3000, 1, 3).select("id", (F.col("id") * 0.5).alias("x"), F.col("id").cast("string").alias("s"))
    with spark_dask.start(spark, n_workers=1, progress=False) as client:  # the other executor's slots for Spark
        ddf = spark_dask.to_dask(df)
        pdf = ddf.compute().sort_values("id")
        assert pdf["id"].tolist() == list(range(3000)) and pdf["x"].tolist() == [i * 0.5 for i in range(3000)]
        back = spark_dask.to_spark(ddf.assign(y=ddf.x * 2))
        rows = sorted((r.id, r.x, r.s, r.y) for r in back.collect())
        assert rows == [(i, i * 0.5, str(i), float(i)) for i in range(3000)]
        cluster = client.cluster
    assert_no_leftovers(spark, cluster)


def _make_address():
    def address(_):
        import distributed

        return distributed.get_worker().address

    return address


_address = _make_address()


def test_a_worker_group_and_adapt_on_yarn(spark):
    """A second group of one worker beside the default group's one (each task 2 cores:
    one per executor), work for the group on it only; adapt() takes the idle default
    group down to none, and work brings a worker back in a YARN container."""
    groups = {"io": {"worker": "cpu", "n_workers": 1}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the slot warning: the groups take both executors
        cluster = spark_dask.SparkCluster(spark, n_workers=1, worker_groups=groups, progress=False)
    try:
        client = cluster.get_client()
        info = client.scheduler_info(n_workers=-1)["workers"]
        io = {a for a, w in info.items() if w["spark"].get("group") == "io"}
        assert len(info) == 2 and len(io) == 1, info
        assert set(client.gather(client.map(_address, range(6), resources={"group-io": 1}, pure=False))) == io

        def default_group() -> int:
            workers = client.scheduler_info(n_workers=-1)["workers"].values()
            return sum(w["spark"].get("group", "default") == "default" for w in workers)

        adaptive = cluster.adapt(minimum=0, maximum=1, interval="100ms", wait_count=2)
        try:
            assert wait_until(lambda: default_group() == 0, 60)  # idle: down to its minimum
            slow = client.map(lambda i: __import__("time").sleep(1) or i, range(16), pure=False)
            assert wait_until(lambda: default_group() == 1, 60)  # work: back up
            assert sum(client.gather(slow)) == sum(range(16))
            assert all(c and c.startswith("container_") for c in client.run(_container_id).values())
        finally:
            adaptive.stop()
        client.close()
    finally:
        cluster.close()
    assert_no_leftovers(spark, cluster)


def _make_where_read():
    def where_read(frame):
        import os

        return frame.assign(container=os.environ.get("CONTAINER_ID"))

    return where_read


_where_read = _make_where_read()


def test_read_delta_on_the_yarn_workers(spark, tmp_path):
    """A Delta table by path, read by the Dask workers in their YARN containers: every
    version gives what the table's own reader (delta-rs) gives."""
    deltalake = pytest.importorskip("deltalake")
    pd = pytest.importorskip("pandas")
    root = str(tmp_path / "t")
    first = pd.DataFrame({"x": range(100), "k": [i % 3 for i in range(100)]})
    deltalake.write_deltalake(root, first, partition_by=["k"])
    deltalake.write_deltalake(root, first.assign(x=first.x + 100), partition_by=["k"], mode="append")
    deltalake.DeltaTable(root).delete("x % 7 = 0")  # version 2: files rewritten
    with spark_dask.start(spark, n_workers=2, progress=False) as client:
        for version in (0, 1, 2):
            ddf = spark_dask.read_delta(root, version=version, via="files", client=client)
            got = ddf.map_partitions(_where_read).compute()
            want = deltalake.DeltaTable(root, version=version).to_pandas()
            assert sorted(got["x"]) == sorted(want["x"]), version
            assert sorted(zip(got["x"], got["k"].astype(int))) == sorted(zip(want["x"], want["k"].astype(int)))
            assert all(str(c).startswith("container_") for c in got["container"].unique())
        cluster = client.cluster
    assert_no_leftovers(spark, cluster)


def _make_hog():
    def hog(nbytes):
        import time

        import numpy as np

        block = np.ones(nbytes // 8)  # written: resident, as YARN's check counts it
        time.sleep(60)  # held until YARN kills the container
        return float(block[0])

    return hog


_hog = _make_hog()


def _loss_lines(cluster) -> list[str]:
    return [line for line in cluster.get_logs()["Cluster"].splitlines() if "failed (executor" in line]


def test_a_container_killed_for_memory_is_named_and_its_workers_come_back(spark, bed):
    # a task that kills its worker fails at once (not retried on 3 more workers, each
    # costing an executor)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with pytest.warns(UserWarning, match="per Dask worker is more than the 1.12 GiB the executors' containers"):
            client = spark_dask.start(spark, n_workers=2, memory_limit="3GiB")
    cluster = client.cluster
    try:
        # 2.5 GiB in a 2 GiB container: Dask's nanny would act only at 95 % of 3 GiB
        hogging = client.submit(_hog, 5 * 2**29, pure=False)
        assert wait_until(lambda: _loss_lines(cluster), timeout=90), cluster.get_logs()["Cluster"][-3000:]
        line = _loss_lines(cluster)[0]
        assert "lost: YARN killed its container for exceeding its physical memory limit (" in line, line
        assert "give it more (spark.executor.memoryOverhead) or the Dask workers less (memory_limit)" in line, line
        with pytest.raises(distributed.KilledWorker):
            hogging.result(timeout=60)
        client.wait_for_workers(2, timeout=120)  # relaunched, in containers YARN gave Spark again
        assert _total(client) == 4_999_950_000
    finally:
        client.close()
    assert_no_leftovers(spark, cluster)


def _nodemanagers(bed) -> tuple[list[int], list[int]]:
    """The running NMs (their index) with the AM's container, and those with an
    executor's container only."""
    am, executors = [], []
    for i, nm in enumerate(bed.nms):
        if nm.process.poll() is not None:
            continue
        names = [
            os.path.basename(c) for c in glob.glob(f"{bed.directory}/nm{i}/local/usercache/*/appcache/*/container_*")
        ]
        if any(n.endswith("_000001") for n in names):  # each attempt's first container is its AM's
            am.append(i)
        elif names:
            executors.append(i)
    return am, executors


def test_a_lost_nodemanager_costs_its_executor_and_the_workers_return_with_it(spark, bed):
    client = spark_dask.start(spark, n_workers=2)
    cluster = client.cluster
    try:
        _, victims = _nodemanagers(bed)
        assert len(victims) == 1, victims  # one executor per NM, the AM beside the other
        before = set(client.run(_container_id).values())
        assert bed.lose_nodemanager(victims[0])  # the NM and its containers' processes
        assert wait_until(lambda: _loss_lines(cluster), timeout=60), cluster.get_logs()["Cluster"][-3000:]
        line = _loss_lines(cluster)[0]
        # the whole stage failed; the executor left takes 1 worker (its 2 cores), the
        # other waits for Spark's new executor, which needs a NodeManager with room
        assert "2 Dask workers lost" in line and "starting 1 now" in line and "1 more once Spark" in line, line
        client.wait_for_workers(1, timeout=60)
        assert _total(client) == 4_999_950_000
        bed.restart_nodemanager(victims[0])  # the host is back
        client.wait_for_workers(2, timeout=120)
        after = set(client.run(_container_id).values())
        assert len(after) == 2 and len(after & before) == 1, (before, after)
        assert _total(client) == 4_999_950_000
    finally:
        client.close()
    assert_no_leftovers(spark, cluster)


def test_losing_the_application_masters_nodemanager_relaunches_every_worker(spark, bed):
    """Client mode: the driver is not in YARN; YARN starts a new AM attempt, which ends
    every executor of the last one."""
    client = spark_dask.start(spark, n_workers=2)
    cluster = client.cluster
    try:
        am, _ = _nodemanagers(bed)
        assert len(am) == 1, am
        before = set(client.run(_container_id).values())
        bed.lose_nodemanager(am[0])
        # the lost NM's executor at once, the other when the RM gives up on the NM
        # (10 s here) and the new AM attempt's start ends the old attempt's containers
        assert wait_until(lambda: len(_loss_lines(cluster)) >= 2, timeout=90), cluster.get_logs()["Cluster"][-3000:]
        # the NM left holds the new AM and one executor: one worker (its 2 cores) ...
        client.wait_for_workers(1, timeout=120)
        assert _total(client) == 4_999_950_000
        bed.restart_nodemanager(am[0])  # ... and both once the host is back
        client.wait_for_workers(2, timeout=120)
        after = set(client.run(_container_id).values())
        assert not after & before and all("_02_" in c for c in after), (before, after)  # the second attempt's
        assert _total(client) == 4_999_950_000
    finally:
        client.close()
    assert_no_leftovers(spark, cluster)
    assert bed.metrics()["appsRunning"] == 1
