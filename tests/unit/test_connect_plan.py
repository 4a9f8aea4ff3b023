"""Spark Connect without a server: facts read from confs, scheduler address parsing,
the task's reachability check and its error text."""

from __future__ import annotations

import socket

import pytest

from spark_dask.executor.command import scheduler_endpoint, unreachable_message
from spark_dask.executor.task_context import reach_error
from spark_dask.plan import PlanError, plan_gang
from spark_dask.spark import session

pytest.importorskip("grpc", reason="needs the connect extra (pyspark[connect])")
from pyspark.sql.connect.session import SparkSession as ConnectSession


class _Conf:
    def __init__(self, values):
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)


class FakeConnect(ConnectSession):
    """A Connect session object that only answers conf reads (no server)."""

    conf = None
    version = None
    session_id = None
    is_stopped = False

    def __init__(self, values, version="4.3.0", session_id="s-1"):
        self.conf = _Conf(values)
        self.version = version
        self.session_id = session_id


def test_scheduler_endpoint():
    assert scheduler_endpoint("tls://10.0.0.5:8786") == ("10.0.0.5", 8786)
    assert scheduler_endpoint("tcp://host.example:1") == ("host.example", 1)
    assert scheduler_endpoint("tcp://[::1]:40001") == ("::1", 40001)
    assert scheduler_endpoint("10.1.2.3:99") == ("10.1.2.3", 99)
    for bad in ("inproc://10.0.0.1/123/1", "tls://nohost", "tcp://:80", "tcp://h:port"):
        with pytest.raises(ValueError):
            scheduler_endpoint(bad)


def test_unreachable_message_names_address_executor_and_fix():
    msg = unreachable_message("executor 3 (host w1, partition 2)", "tls://10.0.0.5:8786", "timed out")
    assert msg.startswith("spark-dask: executor 3 (host w1, partition 2) cannot reach the Dask scheduler")
    assert "tls://10.0.0.5:8786: timed out" in msg
    assert "scheduler_host=" in msg and "where the Python client runs" in msg


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_reach_error_refused_and_open_and_not_tcp():
    err = reach_error(f"tls://127.0.0.1:{_refused_port()}", 2)
    assert err is not None and "ConnectionRefusedError" in err
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert reach_error(f"tcp://127.0.0.1:{server.getsockname()[1]}", 2) is None
    assert reach_error("inproc://192.0.2.1/1/2", 2) is None


def test_connect_facts_from_local_cluster_master():
    spark = FakeConnect({"spark.master": "local-cluster[3,2,1024]"}, session_id="probed")
    session._probed_sessions.add("probed")  # the probe job needs a server
    f = session.cluster_facts(spark)
    assert (f.executors, f.executor_cores, f.slots, f.task_cpus) == (3, 2, 6, 1)
    assert f.executor_memory == 2**30 and f.task_profiles and not f.dynamic_allocation
    plan = plan_gang(f)
    assert plan.n_workers == 3 and plan.task_cpus == 2  # one task per executor, cores // 2 + 1
    with pytest.raises(PlanError, match="n_workers<=6"):
        plan_gang(f, n_workers=7)


def test_connect_facts_without_profiles_before_spark_4():
    spark = FakeConnect({"spark.master": "local-cluster[2,4,1024]"}, version="3.5.3", session_id="probed")
    session._probed_sessions.add("probed")
    f = session.cluster_facts(spark)
    assert not f.task_profiles
    assert not plan_gang(f).uses_profile


def test_connect_facts_from_executor_instances():
    spark = FakeConnect(
        {"spark.master": "k8s://https://api:6443", "spark.executor.instances": "4", "spark.executor.cores": "8",
         "spark.executor.memory": "4g", "spark.task.cpus": "2"},
        session_id="probed-k8s",
    )  # fmt: skip
    session._probed_sessions.add("probed-k8s")
    f = session.cluster_facts(spark)
    assert (f.executors, f.executor_cores, f.task_cpus, f.slots) == (4, 8, 2, 16)
    assert f.executor_memory == 4 * 2**30 + int(4 * 2**30 * 0.1)  # heap + default k8s overhead


def test_connect_facts_local_master():
    f = session.cluster_facts(FakeConnect({"spark.master": "local[4]"}))
    assert (f.executors, f.executor_cores, f.slots, f.task_profiles) == (1, 4, 4, False)


def test_connect_facts_unknown_executors_need_n_workers():
    spark = FakeConnect({})  # e.g. serverless: spark.master not readable
    with pytest.raises(PlanError, match="pass n_workers="):
        session.cluster_facts(spark)
    f = session.cluster_facts(spark, n_workers=3)
    assert f.executors == 3 and f.slots is None and not f.task_profiles
    plan = plan_gang(f, n_workers=3)
    assert (plan.n_workers, plan.n_tasks, plan.uses_profile) == (3, 3, False)


def test_connect_facts_under_dynamic_allocation_plan_one_plain_job_per_worker():
    # Spark runs no barrier stages under dynamic allocation: each worker is a plain
    # one-task job there, over Spark Connect too (no task profiles)
    spark = FakeConnect({"spark.dynamicAllocation.enabled": "true"})
    facts = session.cluster_facts(spark)
    assert facts.dynamic_allocation
    plan = plan_gang(facts)
    assert (plan.barrier, plan.n_workers, plan.n_tasks, plan.uses_profile) == (False, 1, 1, False)


def test_driver_host_override_and_route():
    assert session.driver_host(FakeConnect({}), "10.9.8.7") == ("10.9.8.7", "10.9.8.7")
    assert session.route_ip("127.0.0.1") == "127.0.0.1"


def test_reach_error_does_the_tls_handshake(caplog):
    import asyncio

    from distributed import Scheduler
    from distributed.security import Security

    async def main():
        sec = Security.temporary()
        tls = {"ca": sec.tls_ca_file, "cert": sec.tls_worker_cert, "key": sec.tls_worker_key}
        other = Security.temporary()
        wrong = {"ca": other.tls_ca_file, "cert": other.tls_worker_cert, "key": other.tls_worker_key}
        async with Scheduler(host="127.0.0.1", port=0, protocol="tls", security=sec, dashboard=False) as s:
            ok = await asyncio.to_thread(reach_error, s.address, 5, tls)
            bad = await asyncio.to_thread(reach_error, s.address, 5, wrong)
        return ok, bad

    with caplog.at_level("WARNING", logger="distributed.comm.tcp"):
        ok, bad = asyncio.run(main())
    assert ok is None
    assert bad is not None and "SSL" in bad
    # the good check leaves no "TLS handshake failed" warning behind (the bad one does)
    assert sum("TLS handshake failed" in r.getMessage() for r in caplog.records) <= 1
