"""Worker groups on real Spark with fake GPUs: dask-cuda workers (the stand-in of
tests/support/gpus.py) on the GPUs and a CPU group on the same executors' other cores.

One Spark application and one cluster for the whole module (CI time):
local-cluster[1,6,1024], one executor of six cores and two fake GPUs, whole-GPU Spark
tasks. One executor: the fake GPUs of two executors on one host have the same
addresses, which the workers' host-wide GPU claims tell apart as one GPU. The default
group is two stand-in dask-cuda workers (a core and a GPU each); the ``cpu`` group two
CPU workers of two threads whose Spark tasks hold two cores and no GPU (a task profile
of their own). A lost executor relaunching only its own group's gangs is covered
without Spark (tests/unit/test_worker_groups.py): one pool per group makes it so.
"""

from __future__ import annotations

import os
import time
import warnings

import pytest
from distributed import get_worker, wait

import spark_dask
from spark_dask import PlanError
from tests.support.gpus import FAKE_CUDA_ENV, fake_dask_cuda, gpu_conf
from tests.support.parts import parts_of
from tests.support.processes import wait_until
from tests.support.spark import assert_no_leftovers, make_spark, stop_spark

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    return fake_dask_cuda(tmp_path_factory.mktemp("fake-dask-cuda"))


@pytest.fixture(scope="module")
def spark(fake):
    s = make_spark("local-cluster[1,6,1024]", **gpu_conf(2, "1", **{"spark.executorEnv.PYTHONPATH": fake["path"]}))
    yield s
    stop_spark(s)


@pytest.fixture(scope="module")
def cluster(spark):
    groups = {"cpu": {"worker": "cpu", "n_workers": 2, "threads_per_worker": 2}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = spark_dask.SparkCluster(spark, worker="cuda", n_workers=2, worker_groups=groups, env=FAKE_CUDA_ENV,
                                    progress=False)  # fmt: skip
    # the executor's six cores and two GPUs are all the groups' together: said, naming the group
    said = [str(w.message) for w in caught if "spark-dask" in str(w.message)]
    assert any("with its worker groups cpu (2 tasks of 2 CPUs) take every task slot" in m for m in said), said
    yield c
    c.close()


@pytest.fixture(scope="module")
def client(cluster):
    with cluster.get_client() as c:
        yield c


def by_group(client) -> dict[str, set[str]]:
    """The workers' addresses by worker group (their Spark facts)."""
    out: dict[str, set[str]] = {}
    for address, w in client.scheduler_info(n_workers=-1)["workers"].items():
        out.setdefault(w["spark"].get("group", "default"), set()).add(address)
    return out


@pytest.mark.timeout(30)
def test_bad_groups_are_refused_before_anything_starts(spark):
    with pytest.raises(PlanError, match="'default' is the cluster's own worker group"):
        spark_dask.SparkCluster(spark, worker_groups={"default": {"worker": "cpu"}})
    with pytest.raises(PlanError, match="worker must be 'cpu' or 'cuda'"):
        spark_dask.SparkCluster(spark, worker_groups={"cpu": {"worker": "gpu"}})


@pytest.mark.timeout(120)
def test_a_cuda_group_and_a_cpu_group_start_together_on_the_same_executors(cluster, client):
    groups = by_group(client)
    assert {k: len(v) for k, v in groups.items()} == {"default": 2, "cpu": 2}
    info = client.scheduler_info(n_workers=-1)["workers"]
    gpus = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
    for address in groups["cpu"]:
        w = info[address]
        assert w["nthreads"] == 2 and w["resources"] == {"group-cpu": 1}
        assert w["spark"]["gpu"] is None and gpus[address] is None  # the CPU group holds no GPU
    for address in groups["default"]:
        assert info[address]["spark"]["gpu"] is not None and "group-cpu" not in info[address]["resources"]
    assert {info[a]["spark"]["executor_id"] for a in info} == {"0"}  # the same executor
    assert len({w["name"] for w in info.values()}) == 4  # one task count over the groups
    pools = parts_of(cluster).pools
    assert list(pools) == ["default", "cpu"] and pools["cpu"].shape.task_cpus == 2
    assert pools["cpu"].shape.task_gpus is None and pools["cpu"].gangs[0].tag == f"{cluster.tag}-cpu-g0"
    assert "(worker group cpu)" in cluster.get_logs()["Spark tasks"]
    assert "group-cpu" in cluster.spark_info()["worker groups"] and "groups=['default', 'cpu']" in repr(cluster)


@pytest.mark.timeout(60)
def test_work_with_a_groups_resource_runs_on_that_group_only(client):
    groups = by_group(client)
    on_cpu = client.gather(client.map(lambda _: get_worker().address, range(8), resources={"group-cpu": 1}, pure=False))
    assert set(on_cpu) <= groups["cpu"]


@pytest.mark.timeout(60)
def test_bad_group_arguments_are_refused_at_once(cluster):
    with pytest.raises(PlanError, match="no worker group 'nope'"):
        cluster.scale(1, group="nope")
    with pytest.raises(PlanError, match="has a worker group 'cpu' already"):
        cluster.add_worker_group("cpu")
    with pytest.raises(PlanError, match="worker must be 'cpu' or 'cuda'"):
        cluster.add_worker_group("other", worker="tpu")
    with pytest.raises(PlanError, match="no worker group 'nope'"):
        cluster.adapt(maximum=4, group="nope")
    with pytest.raises(PlanError, match="no worker group 'nope'"):
        cluster.scale(1, worker_group="nope")  # dask-kubernetes's name for it
    with pytest.raises(PlanError, match="name two groups; give one"):
        cluster.scale(1, group="cpu", worker_group="default")
    with pytest.raises(PlanError, match="cannot be removed"):
        cluster.remove_worker_group("default")
    with pytest.raises(PlanError, match="no worker group 'nope'"):
        cluster.remove_worker_group("nope")


@pytest.mark.timeout(90)
def test_scaling_a_group_leaves_the_other_alone(cluster, client):
    before = by_group(client)
    cluster.scale(1, group="cpu")
    assert wait_until(lambda: len(by_group(client).get("cpu", ())) == 1, 30)
    after = by_group(client)
    assert after["default"] == before["default"] and after["cpu"] < before["cpu"]
    assert parts_of(cluster).pools["cpu"].target == 1 and parts_of(cluster).pools["default"].target == 2
    cluster.scale(2, worker_group="cpu")  # a gang of the group's own shape (dask-kubernetes's keyword)
    assert wait_until(lambda: len(by_group(client).get("cpu", ())) == 2, 60)
    info = client.scheduler_info(n_workers=-1)["workers"]
    assert all(info[a]["resources"] == {"group-cpu": 1} and info[a]["nthreads"] == 2 for a in by_group(client)["cpu"])
    assert by_group(client)["default"] == before["default"]
    assert parts_of(cluster).pools["cpu"].gangs[-1].tag == f"{cluster.tag}-cpu-g1"
    cluster.scale(1, group="cpu")  # room for the next test's group
    assert wait_until(lambda: len(by_group(client).get("cpu", ())) == 1, 30)


@pytest.mark.timeout(90)
def test_a_group_adapts_on_its_own(cluster, client):
    """adapt(group="cpu"): idle, the cpu group comes down to its minimum, the default
    group untouched; work restricted to group-cpu brings it back up to its maximum."""
    cluster.scale(2, group="cpu")  # the scaling test left it at 1
    assert wait_until(lambda: len(by_group(client).get("cpu", ())) == 2, 60)
    before = by_group(client)
    adaptive = cluster.adapt(minimum=1, maximum=2, group="cpu", interval="100ms", wait_count=2)
    try:
        assert wait_until(lambda: len(by_group(client).get("cpu", ())) == 1, 30), by_group(client)
        assert by_group(client)["default"] == before["default"]
        # 8 one-second tasks for the cpu group's 2 threads: more than the 5 s target for one worker
        slow = client.map(lambda i: time.sleep(1) or i, range(12), resources={"group-cpu": 1}, pure=False)
        assert wait_until(lambda: len(by_group(client).get("cpu", ())) == 2, 40), by_group(client)
        assert sum(client.gather(slow)) == sum(range(12))
        assert by_group(client)["default"] == before["default"]
    finally:
        adaptive.stop()
    cluster.scale(1, group="cpu")  # room for the next test's group
    assert wait_until(lambda: len(by_group(client).get("cpu", ())) == 1, 30)


@pytest.mark.timeout(120)
def test_a_group_added_and_removed_moves_its_data_first(cluster, client):
    cluster.add_worker_group("io", n_workers=1, threads_per_worker=1, resources={"io": 1})
    io = by_group(client)["io"]
    (address,) = io
    assert client.scheduler_info(n_workers=-1)["workers"][address]["resources"] == {"io": 1, "group-io": 1}
    data = client.submit(lambda: b"x" * 1000, resources={"io": 1}, pure=False)
    wait(data, timeout=30)
    assert client.who_has(data)[data.key] == (address,)
    assert _listed_groups(cluster) == "cpu,io"  # spark-dask list
    gangs = list(parts_of(cluster).pools["io"].gangs)
    cluster.remove_worker_group("io")
    assert "io" not in parts_of(cluster).pools and "io" not in by_group(client)
    assert data.result(timeout=30) == b"x" * 1000  # moved to another worker before the io worker left
    assert address not in client.who_has(data)[data.key]
    assert wait_until(lambda: all(g.done for g in gangs), 30)
    assert set(by_group(client)) == {"default", "cpu"}
    assert _listed_groups(cluster) == "cpu"


def _listed_groups(cluster) -> str | None:
    (row,) = [r for r in spark_dask.list_clusters() if r["tag"] == cluster.tag]
    return row["groups"]


@pytest.mark.timeout(90)
def test_close_ends_every_groups_gangs(spark, cluster):
    gangs = list(parts_of(cluster).gangs)
    assert {g.group for g in gangs} == {"default", "cpu"}
    cluster.close()
    assert all(g.done for g in gangs)
    assert_no_leftovers(spark, cluster)
