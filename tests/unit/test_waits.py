"""Bounded waits and process identity (issue 37): a worker that outlives its SIGKILL, a
nanny that does not close, an RPC or a Spark job that never answers, a reused pid, the
parent-death signal, the status tracker's polling. Fast, no Spark."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import types

import psutil
import pytest

from spark_dask.errors import HandoffError
from spark_dask.executor import gang_task as task
from spark_dask.executor import preload, processes
from spark_dask.handoff import transfer as handoff_task
from spark_dask.spark import launcher, session
from tests.support.task_specs import make_spec

pytestmark = pytest.mark.core
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: prctl, /proc")


class _Unkillable:
    """A worker process as run_task sees it whose wait never returns (D state): a real
    process group for the signals, a wait that only ever times out."""

    def __init__(self, pid: int):
        self.pid = pid
        self.args = ["python", "-m", "distributed.cli.dask_worker"]
        self.returncode = None

    def poll(self):
        return None

    def wait(self, timeout=None):
        if timeout is None:
            threading.Event().wait()  # for good
        raise subprocess.TimeoutExpired(self.args, timeout)


@pytest.mark.timeout(60)
def test_a_worker_that_outlives_sigkill_does_not_pin_the_task(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(processes, "KILL_WAIT", 0.05)  # the wait (stop_workers)
    monkeypatch.setattr(task, "KILL_WAIT", 0.05)  # the note (_finish)
    real = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        workdir = tmp_path / "work"
        workdir.mkdir()
        log = workdir / "spark-0.log"
        log.write_text("")
        row = {"workers": [], "t": {}}
        proc = _Unkillable(real.pid)
        task._finish(make_spec(kill_grace=0), [proc], [], [{"name": "spark-0", "gpu": None}], [str(log)], row,
                     str(workdir))  # fmt: skip
    finally:
        real.kill()
        real.wait(30)
    (note,) = row["notes"]
    assert note.startswith(f"spark-dask: the process {real.pid} of Dask worker spark-0 did not end within 0.05s")
    assert note in capsys.readouterr().err
    assert row["workers"][0]["exit_code"] is None and "done" in row["t"] and not workdir.exists()


PRINT_DEATH_SIGNAL = (
    "import ctypes; c = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(c)); print(c.value)"  # PR_GET_PDEATHSIG
)


@linux
@pytest.mark.timeout(60)
def test_the_death_signal_child_only_makes_the_call(monkeypatch):
    preexec = processes.make_death_signal(os.getpid())  # libc looked up here, in the parent
    monkeypatch.setitem(sys.modules, "ctypes", None)  # an import in the forked child fails
    child = subprocess.Popen([sys.executable, "-c", PRINT_DEATH_SIGNAL], stdout=subprocess.PIPE, text=True,
                             preexec_fn=preexec, start_new_session=True)  # fmt: skip
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 0 and int(out) == signal.SIGTERM


ORPHAN_PARENT = """
import os, subprocess, sys, time
from spark_dask.executor import processes
child = subprocess.Popen(["sleep", "60"], preexec_fn=processes.make_death_signal(os.getpid()), start_new_session=True)
print(child.pid, flush=True)
time.sleep(60)
"""


@linux
@pytest.mark.timeout(60)
def test_a_worker_dies_with_its_task():
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN_PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        parent.kill()
        parent.wait(30)
        gone, _ = psutil.wait_procs([child], timeout=30)
        assert gone or child.status() == psutil.STATUS_ZOMBIE  # a container's init may not reap
    finally:
        parent.kill()
        parent.wait(30)


def test_process_start_reads_field_22(tmp_path):
    (tmp_path / "7").mkdir()
    fields = ["S", *map(str, range(4, 22)), "123456", "0"]  # fields 3..23: field 22 is 123456
    (tmp_path / "7" / "stat").write_text("7 (a) b (c) " + " ".join(fields) + "\n")
    assert preload.process_start(7, str(tmp_path)) == "123456"
    assert preload.process_start(8, str(tmp_path)) is None


@linux
def test_alive_is_not_fooled_by_a_reused_pid(monkeypatch):
    me = os.getpid()
    start = preload.process_start(me)
    assert start and preload.alive(me, start) and preload.alive(me)
    monkeypatch.setattr(preload, "process_start", lambda pid, proc="/proc": str(int(start) + 1))
    assert not preload.alive(me, start)  # the pid exists, but another process has it
    monkeypatch.setattr(preload, "process_start", lambda pid, proc="/proc": None)
    assert preload.alive(me, start)  # unreadable: the old answer (the pid exists)


class _Exited(BaseException):
    pass


@pytest.mark.timeout(30)
def test_the_watchdog_ends_the_group_when_the_task_pid_is_reused(monkeypatch):
    starts = iter(["100", "100", "200"])  # read at the start, a look while it runs, then another process
    monkeypatch.setattr(preload, "process_start", lambda pid, proc="/proc": next(starts))
    monkeypatch.setattr(preload.time, "sleep", lambda s: None)
    killed = []

    def _exit(code):
        raise _Exited(code)

    fake_os = types.SimpleNamespace(kill=os.kill, getpgid=lambda pid: 4242, killpg=lambda g, s: killed.append((g, s)),
                                    _exit=_exit)  # fmt: skip
    monkeypatch.setattr(preload, "os", fake_os)
    with pytest.raises(_Exited):
        preload.watchdog(os.getpid(), 0)  # this process exists: only its start time tells it changed
    assert killed == [(4242, signal.SIGTERM), (4242, signal.SIGKILL)]


@pytest.mark.timeout(30)
def test_the_fast_close_leaves_when_the_nanny_does_not_close(monkeypatch, caplog):
    class StuckNanny:
        async def close(self, reason=""):
            await asyncio.Event().wait()

    exits = []
    monkeypatch.setattr(preload, "NANNY_CLOSE_WAIT", 0.05)
    monkeypatch.setattr(preload, "os", types.SimpleNamespace(_exit=exits.append))
    monkeypatch.setattr(logging, "shutdown", lambda: None)
    with caplog.at_level(logging.WARNING, logger="distributed.nanny"):
        asyncio.run(preload.close_and_exit(StuckNanny())())
    assert exits == [0]
    assert "spark-dask: the nanny did not close within 0.05s" in caplog.text


class _FakeRpc:
    """distributed.core.rpc to a scheduler that knows one worker on 10.0.0.9, and to
    workers that never answer."""

    def __init__(self, address, connection_args=None, **kwargs):
        self.address = address

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    async def identity(self):
        return {"workers": {"tcp://10.0.0.9:1": {"host": "10.0.0.9"}}}

    async def spark_dask_handoff_get(self, **kwargs):
        await asyncio.Event().wait()

    spark_dask_handoff_put = spark_dask_handoff_get


@pytest.mark.timeout(30)
def test_a_worker_rpc_of_a_transfer_is_bounded(monkeypatch):
    import distributed.core

    monkeypatch.setattr(distributed.core, "rpc", _FakeRpc)
    monkeypatch.setattr(handoff_task, "RPC_TIMEOUT", 0.05)
    # a Spark task's stream of a file from a worker that accepts the connection and says
    # nothing: bounded, then the scheduler's workers of that machine (silent too): bounded
    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        part = {"ip": "127.0.0.1", "path": "/x/part-0.arrow", "hostname": "h9"}
        links = handoff_task.Links({"scheduler": address, "workers": {"h9": [address]}})
        t0 = time.monotonic()
        try:
            with pytest.raises(HandoffError, match="the Dask scheduler did not answer (the request identity )?within"):
                list(handoff_task.pulled_batches(links, part))
        finally:
            links.close()
        assert time.monotonic() - t0 < 10
    with pytest.raises(HandoffError, match="spark-dask: Dask worker tcp://10.0.0.9:1 did not answer the request "
                                           "spark_dask_handoff_put within 0.05s"):  # fmt: skip
        asyncio.run(handoff_task._push({"dir": "d"}, "tcp://10.0.0.9:1", "part-0.arrow", b"x"))


@pytest.mark.timeout(30)
def test_the_scheduler_rpc_of_a_transfer_is_bounded(monkeypatch):
    class Silent:
        async def identity(self):
            await asyncio.Event().wait()

    monkeypatch.setattr(handoff_task, "RPC_TIMEOUT", 0.05)
    with pytest.raises(HandoffError, match="spark-dask: the Dask scheduler did not answer the request identity"):
        asyncio.run(handoff_task._find_workers(Silent(), "10.0.0.9", 0))


def _connect_session(collect):
    """A Spark Connect session object (no server) whose jobs' ``collect`` is ``collect(session)``."""
    pytest.importorskip("grpc", reason="needs the connect extra (pyspark[connect])")
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    class Fake(ConnectSession):
        def __init__(self):
            self.tags, self.interrupted, self.released = [], [], threading.Event()

        def addTag(self, tag):
            self.tags.append(tag)

        def removeTag(self, tag):
            pass

        def interruptTag(self, tag):
            self.interrupted.append(tag)
            self.released.set()

        def range(self, *args):
            return self

        def mapInArrow(self, fn, schema):
            return self

        def collect(self):
            return collect(self)

    return Fake()


@pytest.mark.timeout(30)
def test_the_executor_probe_job_is_bounded(monkeypatch, caplog):
    def stuck(spark):  # tasks that get no slot: the job waits until cancelled
        spark.released.wait(20)
        raise RuntimeError("OPERATION_CANCELED")

    spark = _connect_session(stuck)
    monkeypatch.setattr(session, "PROBE_JOB_WAIT", 0.05)
    with caplog.at_level(logging.WARNING, logger="spark_dask"):
        assert session._probe_executors(spark, 2, 2, 0) == 0
    assert spark.interrupted == spark.tags and len(spark.tags) == 1  # its own tag, cancelled
    assert "spark-dask: the executor probe job (Spark Connect) did not end within 0.05s" in caplog.text


@pytest.mark.timeout(30)
def test_the_executor_probe_counts_executors_and_raises_spark_errors():
    rows = [{"info": json.dumps({"executor_id": e})} for e in ("1", "2")]
    assert session._probe_executors(_connect_session(lambda spark: rows), 2, 2, 10) == 2

    def failing(spark):
        raise RuntimeError("SESSION_CLOSED")

    with pytest.raises(RuntimeError, match="SESSION_CLOSED"):
        session._probe_executors(_connect_session(failing), 2, 2, 10)


class _Tracker:
    """Spark's status tracker where the gang's job (7) stays active for ``looks`` looks."""

    def __init__(self, looks: int):
        self.looks, self.calls = looks, []

    def getJobIdsForGroup(self, tag):
        self.calls.append("getJobIdsForGroup")
        return [7]

    def getActiveJobsIds(self):
        self.calls.append("getActiveJobsIds")
        self.looks -= 1
        return [7, 8] if self.looks >= 0 else [8]


def _gang_launcher(tracker) -> launcher.GangLauncher:
    g = launcher.GangLauncher.__new__(launcher.GangLauncher)
    g.connect, g.tag = False, "spark-dask-gang"
    g.spark = types.SimpleNamespace(sparkContext=types.SimpleNamespace(statusTracker=lambda: tracker))
    return g


def test_the_ended_job_poll_makes_one_gateway_call_a_look(monkeypatch):
    pauses = []
    monkeypatch.setattr(launcher.time, "sleep", pauses.append)
    tracker = _Tracker(looks=8)
    assert _gang_launcher(tracker).wait_job_listed_ended(60)
    assert tracker.calls == ["getJobIdsForGroup"] + ["getActiveJobsIds"] * 9
    assert pauses[0] == launcher.LISTED_POLL_FIRST and max(pauses) == launcher.LISTED_POLL_MAX
    assert pauses == sorted(pauses)  # backing off
    assert not _gang_launcher(_Tracker(looks=10**6)).wait_job_listed_ended(0)  # never listed ended: False


@pytest.mark.timeout(30)
def test_a_blocking_call_that_outlives_its_event_loop_raises_nothing_in_its_thread(monkeypatch):
    """A blocking call still running when its event loop closed (a cluster whose start
    failed) ends quietly: it used to raise 'Event loop is closed' in its thread."""
    from spark_dask import aio

    errors = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    release = threading.Event()

    async def main():
        task = asyncio.ensure_future(aio.blocking(release.wait, 10))
        await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(main())  # closes the loop; the call's thread still waits
    threads = [t for t in threading.enumerate() if t.name == "spark-dask-blocking"]
    release.set()
    for t in threads:
        t.join(10)
    assert threads and errors == []
