"""The idle driver (issue 70, point 6) on a real Spark application: while a cluster runs
and nothing happens, its watches read Spark in one thread over one kept py4j connection
(a thread per read opened a connection, and a JVM thread, every time), and the slot
watch's rounds read Spark's active stage ids only (two py4j calls) while Spark runs no
stage but the cluster's own. Counted (py4j commands by thread and by spark-dask
function), not timed; the unit tests are in tests/unit/test_idle_watches.py."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass

import pytest
from py4j.clientserver import ClientServerConnection

import spark_dask
from spark_dask.gangs import drain
from tests.support.processes import wait_until
from tests.support.spark import assert_no_leftovers

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


@dataclass(frozen=True)
class Command:
    thread: str
    kind: str  # py4j's command name: "c" a call, "m" a release, "A" a new connection's auth
    functions: tuple[str, ...]  # the spark-dask functions on the stack, innermost first


class Commands:
    """The py4j commands this process sends from :meth:`install` on."""

    def __init__(self):
        self.sent: list[Command] = []

    def install(self, monkeypatch) -> None:
        original = ClientServerConnection.send_command

        def counted(connection, command, *args, **kwargs):
            self.sent.append(Command(threading.current_thread().name, command[:1], spark_dask_functions()))
            return original(connection, command, *args, **kwargs)

        monkeypatch.setattr(ClientServerConnection, "send_command", counted)

    def by(self, function: str) -> int:
        return sum(function in c.functions for c in list(self.sent))


def spark_dask_functions() -> tuple[str, ...]:
    names, f = [], sys._getframe(2)
    while f is not None:
        if "/spark_dask/" in f.f_code.co_filename:
            names.append(f.f_code.co_name)
        f = f.f_back
    return tuple(names)


def test_an_idle_cluster_reads_spark_in_one_thread_and_its_slot_watch_two_calls_a_round(spark, monkeypatch):
    """Two workers on local-cluster[2,1,1024]; the decommission watch runs as where Spark
    decommissions (its window given: the session's spark.decommission.enabled is off),
    reading each executor's state for real. Once the watches made their first rounds,
    every py4j command of spark-dask comes from the cluster's reads thread, no
    connection is opened, and no round reads the whole stage snapshot (only the
    gang's stage is active)."""
    monkeypatch.setattr(drain, "spark_window", lambda spark, drain_timeout: 30.0)
    commands = Commands()
    commands.install(monkeypatch)
    with pytest.warns(UserWarning, match="every task slot Spark jobs can use"):
        client = spark_dask.start(spark, n_workers=2, progress=False)
    with client:
        cluster = client.cluster
        reads = f"{cluster.tag}-reads"
        assert wait_until(lambda: commands.by("active_stage_ids") and commands.by("decommissioning"), 60)
        commands.sent.clear()  # from here on: rounds of the watches, the first (full) ones done
        assert wait_until(lambda: commands.by("active_stage_ids") >= 4 and commands.by("decommissioning") >= 8, 60)
        sent = list(commands.sent)
        assert [t for t in threading.enumerate() if t.name == reads]
    assert_no_leftovers(spark, cluster)
    assert wait_until(lambda: not [t for t in threading.enumerate() if t.name == reads], 15)
    ours = [c for c in sent if c.functions]
    assert {c.thread for c in ours} == {reads}, {c.thread for c in ours}
    assert {c.functions[-1] for c in ours} <= {"serve"}  # SparkReads.serve: the reads thread's own
    assert not [c for c in sent if c.kind == "A"], [c for c in sent if c.kind == "A"]
    assert not [c for c in ours if "stage_snapshot" in c.functions]
    # the slot watch: the active stage ids (the array, its text); the decommission
    # watch: two reads of each executor (its state, whether it is defined)
    assert {c.functions[0] for c in ours} <= {"java_ints", "active_stage_ids", "decommissioning"}
