"""Clusters shared by name (spark_dask/named/): the name rules, the per-user state
directory, stale entries, the handle's protocol with its owner (on a real in-process
scheduler, without Spark), an owner killed with SIGKILL; and one real cluster served by
``spark-dask serve --name`` in a subprocess, joined, used, scaled and closed from here."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import os
import queue
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from types import SimpleNamespace

import dask.config
import psutil
import pytest
from distributed import Scheduler
from distributed.core import Status
from distributed.security import Security

import spark_dask
from spark_dask import connection, named, options, registry
from spark_dask.errors import PlanError, SparkDaskError
from spark_dask.events import Events
from spark_dask.named import store
from spark_dask.named.owner import HandleWatch
from tests.support.paths import ROOT
from tests.support.processes import dask_processes, wait_until


@pytest.fixture
def state(tmp_path):
    """A state directory of this test's own (``spark-dask.state-dir``)."""
    root = str(tmp_path / "state")
    with dask.config.set({"spark-dask.state-dir": root}):
        yield root


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(30)
    return proc.pid


def write_entry(root: str, name: str, **record) -> str:
    directory = os.path.join(root, name)
    os.makedirs(directory, mode=0o700)
    with open(os.path.join(directory, store.RECORD_FILE), "w") as f:
        json.dump({"name": name, "host": socket.gethostname(), "status": "running", "started": time.time(),
                   **record}, f)  # fmt: skip
    return directory


# ---------------------------------------------------------------------- pure decisions


@pytest.mark.parametrize("name", ["etl", "a", "spark-dask-0123456789", "team_a.nightly-2", "x" * 64, "0x"])
def test_valid_names(name):
    assert options.check_name(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "-x", ".hidden", "x" * 65, "a b", "é", None, 3])
def test_invalid_names_are_refused_before_anything_starts(name):
    with pytest.raises(PlanError, match="a cluster name is 1 to 64 letters"):
        options.check_name(name)
    if isinstance(name, str):  # the option itself: SparkCluster(name=...) and --name
        given = {o.name: None for o in options.keyword_options() if o.config}
        with pytest.raises(PlanError, match="a cluster name is"):
            options.resolve(**{**given, "name": name})


def test_state_root_settings(tmp_path):
    tmp = str(tmp_path)
    assert store.state_root("auto", {"XDG_RUNTIME_DIR": "/run/user/7"}, 7, tmp) == "/run/user/7/spark-dask"
    assert store.state_root("auto", {}, 7, tmp) == os.path.join(tmp, "spark-dask-7")
    assert store.state_root(None, {}, 7, tmp) == store.state_root(True, {}, 7, tmp) == os.path.join(tmp, "spark-dask-7")
    for off in (False, "false", "off", "No", ""):
        assert store.state_root(off, {}, 7, tmp) is None
    assert store.state_root("~/clusters", {}, 7, tmp) == os.path.expanduser("~/clusters")
    assert store.state_root("rel/dir", {}, 7, tmp) == os.path.abspath("rel/dir")
    # the package default
    assert dask.config.get("spark-dask.state-dir") == "auto"


def test_entry_state_decides_who_is_alive():
    host = "driver-1"
    alive = {"pid": 10, "host": host, "pid_start": "555"}
    running = {10: "555", 11: ""}.get  # pid -> identity (None: no such process)
    assert store.entry_state(alive, 0, host, running) == "alive"
    assert store.entry_state({**alive, "pid": 12}, 0, host, running) == "stale"  # no such process
    assert store.entry_state({**alive, "pid_start": "444"}, 0, host, running) == "stale"  # pid reused
    assert store.entry_state({**alive, "pid": 11}, 0, host, running) == "alive"  # start time unknown
    assert store.entry_state({**alive, "pid_start": ""}, 0, host, running) == "alive"
    assert store.entry_state({**alive, "host": "driver-2"}, 0, host, running) == "elsewhere"
    # no record: a claim in progress for a while, then stale
    assert store.entry_state(None, 1.0, host, running) == "claiming"
    assert store.entry_state(None, store.CLAIM_GRACE + 1, host, running) == "stale"
    assert store.entry_state({"pid": "10"}, store.CLAIM_GRACE + 1, host, running) == "stale"


def test_process_identity_tells_live_dead_and_zombie_processes_apart():
    me = store.process_identity(os.getpid())
    assert me is not None and me == store.process_identity(os.getpid())
    assert store.process_identity(dead_pid()) is None
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert store.process_identity(proc.pid) is not None
        proc.kill()  # not reaped yet: a zombie is gone as far as an entry is concerned
        assert wait_until(lambda: store.process_identity(proc.pid) is None, timeout=10)
    finally:
        proc.kill()
        proc.wait(30)


def test_list_rows_and_text():
    t = time.time()
    records = [
        {"name": "b", "status": "running", "workers": 2, "address": "tls://h:2", "dashboard": "http://h:3/status",
         "pid": 20, "started": t, "tag": "spark-dask-b", "directory": "/s/b", "groups": ["cpu", "io"]},
        {"name": "a", "status": "starting", "workers": 0, "address": None, "dashboard": None, "pid": 10,
         "started": t - 60, "tag": "spark-dask-a", "directory": "/s/a"},
    ]  # fmt: skip
    rows = store.list_rows(records)
    assert [r["name"] for r in rows] == ["a", "b"]  # oldest first
    assert set(rows[0]) == {"name", "status", "workers", "groups", "scheduler", "dashboard", "pid", "started", "tag",
                            "directory"}  # fmt: skip
    assert rows[1]["scheduler"] == "tls://h:2" and len(rows[1]["started"]) == len("2026-12-01 17:00:00")
    text = named.format_rows(rows, "/s").splitlines()
    assert text[0].split() == ["NAME", "STATUS", "WORKERS", "GROUPS", "PID", "STARTED", "SCHEDULER", "DASHBOARD"]
    assert text[1].split()[:5] == ["a", "starting", "0", "-", "10"] and text[1].rstrip().endswith("-")
    assert text[2].split()[:4] == ["b", "running", "2", "cpu,io"]
    assert "tls://h:2" in text[2] and "http://h:3/status" in text[2]
    assert named.format_rows([], "/s") == "no spark-dask cluster of this user runs on this host (state directory /s)"
    assert "state-dir is false" in named.format_rows([], None)


# ---------------------------------------------------------------------- the state directory


def test_claim_publish_and_remove_an_entry(state):
    entry = named.Entry("etl", "spark-dask-0000000000", named.configured_root())
    with entry:
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(entry.directory).st_mode) == 0o700
        record = store.read_record(entry.directory)
        assert (
            record["status"] == "starting" and record["pid"] == os.getpid() and record["host"] == socket.gethostname()
        )
        assert stat.S_IMODE(os.stat(os.path.join(entry.directory, store.RECORD_FILE)).st_mode) == 0o600
        [row] = spark_dask.list_clusters()
        assert (row["name"], row["status"], row["pid"], row["tag"]) == ("etl", "starting", os.getpid(), entry.tag)
        # the same name again, from this process or another: taken, said at once
        with pytest.raises(
            SparkDaskError, match=r"a cluster named 'etl' already runs for this user \(pid \d+, status starting\)"
        ):
            named.Entry("etl", "spark-dask-1111111111", state).claim()
        with pytest.raises(SparkDaskError, match="the cluster named 'etl' is starting"):
            spark_dask.SparkCluster.from_name("etl")
    assert not os.path.exists(entry.directory)
    assert os.path.isdir(state)  # a state directory the user named stays
    assert spark_dask.list_clusters() == []


def test_the_default_state_directory_goes_with_the_last_entry(tmp_path, monkeypatch):
    """The default (``auto``) directory in the temporary directory: removed with its last
    entry, so a closed cluster leaves nothing in /tmp; kept while another entry is in it."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    root = store.state_root("auto")
    with dask.config.set({"spark-dask.state-dir": "auto"}):
        first = named.Entry("a", "spark-dask-0000000000", named.configured_root())
        second = named.Entry("b", "spark-dask-1111111111", named.configured_root())
        with first:
            with second:
                pass
            assert os.path.isdir(first.directory) and store.read_record(first.directory)["name"] == "a"
        assert not os.path.exists(root)
        with named.Entry("c", "spark-dask-2222222222", named.configured_root()) as again:  # made anew
            assert os.path.isdir(again.directory)
        assert not os.path.exists(root)


def test_stale_entries_are_ignored_and_removed(state):
    os.makedirs(state, mode=0o700)
    write_entry(state, "dead", pid=dead_pid())
    write_entry(state, "reused", pid=os.getpid(), pid_start="not-my-start-time")
    other_host = write_entry(state, "remote", pid=os.getpid(), host="some-other-host")
    old_claim = os.path.join(state, "old-claim")
    os.makedirs(old_claim)
    os.utime(old_claim, (time.time() - 60, time.time() - 60))
    fresh_claim = os.path.join(state, "fresh-claim")
    os.makedirs(fresh_claim)
    assert spark_dask.list_clusters() == []
    assert sorted(os.listdir(state)) == ["fresh-claim", "remote"]  # neither is this host's to judge yet
    assert os.path.isdir(other_host)
    # a stale entry's name is free again; a fresh claim's is not
    with named.Entry("dead", "spark-dask-2222222222", state):
        assert store.read_record(os.path.join(state, "dead"))["pid"] == os.getpid()
    with pytest.raises(SparkDaskError, match="another start is claiming it right now"):
        named.Entry("fresh-claim", "spark-dask-3333333333", state).claim()


def test_two_starts_taking_over_one_stale_entry_leave_one_holder(state, monkeypatch):
    """Both find the name's stale entry; the first takes it over and claims the name while
    the second still holds its verdict. The second must then see the first's entry (the
    name is taken), not remove it: two live clusters of one name otherwise."""
    os.makedirs(state, mode=0o700)
    write_entry(state, "etl", pid=dead_pid())
    judged, first_done = threading.Event(), threading.Event()
    real = store.entry_state

    def entry_state(record, age, host, identity_of):  # the seam: between the read and the removal
        verdict = real(record, age, host, identity_of)
        if threading.current_thread().name == "second" and verdict == "stale" and not judged.is_set():
            judged.set()
            first_done.wait(1.0)  # a check-then-remove lets the first one claim the name here
        return verdict

    monkeypatch.setattr(store, "entry_state", entry_state)
    results = {}

    def start(who):
        entry = named.Entry("etl", f"spark-dask-{who}", state)
        try:
            entry.claim()
            results[who] = entry
        except SparkDaskError as e:
            results[who] = e
        finally:
            if who == "first":
                first_done.set()

    second = threading.Thread(target=start, args=("second",), name="second")
    second.start()
    assert judged.wait(10)
    first = threading.Thread(target=start, args=("first",), name="first")
    first.start()
    first.join(30)
    second.join(30)
    winners = [who for who, r in results.items() if isinstance(r, named.Entry)]
    assert len(winners) == 1, results
    [loser] = {"first", "second"} - set(winners)
    assert "a cluster named 'etl' already runs for this user" in str(results[loser])
    assert store.read_record(os.path.join(state, "etl"))["tag"] == f"spark-dask-{winners[0]}"
    assert os.listdir(state) == ["etl"]  # the stale entry, moved aside, is gone
    results[winners[0]].remove()


def test_a_record_that_cannot_be_rewritten_leaves_no_temporary_file(state, caplog):
    with named.Entry("etl", "spark-dask-6666666666", state) as entry:
        record = os.path.join(entry.directory, store.RECORD_FILE)
        os.unlink(record)
        os.makedirs(os.path.join(record, "in-the-way"))  # os.replace onto a directory fails
        with caplog.at_level("WARNING", logger="spark_dask"):
            entry.update(status="running")
        assert sorted(os.listdir(entry.directory)) == [store.RECORD_FILE]  # no cluster.json.<pid>.<thread>
        [said] = [r.getMessage() for r in caplog.records if "could not be rewritten" in r.getMessage()]
        assert said.startswith(f"spark-dask: the record {record} of cluster 'etl' could not be rewritten (")


def test_an_unknown_name_says_which_clusters_run(state):
    with named.Entry("etl", "spark-dask-4444444444", state) as entry:
        entry.update(status="running")
        t0 = time.monotonic()
        with pytest.raises(SparkDaskError) as e:
            spark_dask.SparkCluster.from_name("nightly")
        assert time.monotonic() - t0 < 5
    assert str(e.value).startswith(
        f"spark-dask: no cluster named 'nightly' runs on this host for this user (running: 'etl'; state directory {state})"
    )
    with pytest.raises(SparkDaskError, match=r"\(none is running;"):
        spark_dask.SparkCluster.from_name("nightly")
    with pytest.raises(PlanError, match="a cluster name is"):
        spark_dask.SparkCluster.from_name("../etc")
    with dask.config.set({"spark-dask.state-dir": False}):
        assert spark_dask.list_clusters() == []
        with pytest.raises(SparkDaskError, match="state-dir is false"):
            spark_dask.SparkCluster.from_name("etl")
        nothing = named.Entry("etl", "spark-dask-5555555555", named.configured_root())
        with nothing:
            assert nothing.directory is None and nothing.record is None


def test_the_state_directory_must_be_the_users_own(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(SparkDaskError, match="is not a directory of this user"):
        store.private_dir(str(link))
    with dask.config.set({"spark-dask.state-dir": str(link)}):
        with pytest.raises(SparkDaskError, match="is not a directory of this user"):
            spark_dask.list_clusters()
    # a cluster starts all the same, unlisted, and says so
    said = []
    entry = named.Entry("etl", "spark-dask-8888888888", str(link), said.append)
    with entry:
        assert entry.record is None and os.listdir(target) == []
    assert said == [f"spark-dask: the cluster 'etl' is not listed (spark-dask: the state directory {link} is not a "
                    "directory of this user (another user's, a link or a file); set spark-dask.state-dir to a "
                    "directory of your own): SparkCluster.from_name() and spark-dask list will not find it"]  # fmt: skip
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    os.chmod(wide, 0o755)
    assert store.private_dir(str(wide))
    assert stat.S_IMODE(os.stat(wide).st_mode) == 0o700
    assert store.private_dir(str(tmp_path / "missing"), create=False) is False


def test_cli_list(state):
    from click.testing import CliRunner

    from spark_dask import cli

    out = CliRunner().invoke(cli.main, ["list"])
    assert out.exit_code == 0 and out.output.startswith("no spark-dask cluster of this user runs on this host"), (
        out.output
    )
    with named.Entry("etl", "spark-dask-6666666666", state) as entry:
        entry.update(status="running", workers=3, address="tls://10.0.0.1:4000")
        text = CliRunner().invoke(cli.main, ["list"]).output.splitlines()
        assert text[1].split()[:5] == ["etl", "running", "3", "-", str(os.getpid())], text  # no worker groups
        rows = json.loads(CliRunner().invoke(cli.main, ["list", "--json"]).output)
        assert [(r["name"], r["workers"], r["scheduler"]) for r in rows] == [("etl", 3, "tls://10.0.0.1:4000")]


def test_cli_serve_refuses_a_bad_name_before_anything_starts():
    from click.testing import CliRunner

    from spark_dask import cli

    out = CliRunner().invoke(cli.main, ["serve", "--name", "my cluster"])
    assert out.exit_code == 2 and "Error: spark-dask: a cluster name is 1 to 64 letters" in out.output, out.output
    assert "--name NAME" in CliRunner().invoke(cli.main, ["serve", "--help"]).output


# ---------------------------------------------------------------------- owner and handle


def test_events_keep_the_python_warnings_a_handle_hears():
    events = Events([], quiet=True)
    with pytest.warns(UserWarning, match="grow to 2"):
        events.warn("spark-dask: grow to 2")
    events.warn("spark-dask: worker lost", python_warning=False)  # a log record while running
    with pytest.warns(UserWarning, match="held"), events.hold():
        events.warn("spark-dask: held")
        assert events.warned == ["spark-dask: grow to 2", "spark-dask: held"]


class FakeOwner:
    """What an entry and the owner's handlers use of a SparkCluster, around a real
    in-process TLS scheduler on a loop of its own (no Spark, no worker)."""

    def __init__(self, name: str, root: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.security = Security.temporary()
        self.status = Status.running
        self.events = Events([], quiet=True)
        self.hooks, self.requests = [], []
        self.dashboard_link = "http://dashboard.example/status"
        self.scheduler = self.run(self._scheduler())
        self.entry = named.Entry(name, "spark-dask-fake000000", root)
        # what publish() reads of a SparkCluster's parts
        self.parts = SimpleNamespace(events=self.events, pools={"default": None})
        self.entry.claim()
        self.run(self._publish())

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    async def _scheduler(self):
        scheduler = Scheduler(host="127.0.0.1", port=0, protocol="tls", security=self.security, dashboard=False,
                              validate=False)  # fmt: skip
        await scheduler
        return scheduler

    def write_connection(self, directory):  # a SparkCluster's, off Databricks
        return connection.write_connection(self, directory)

    async def _publish(self):
        self.entry.publish(self, self.parts)

    def add_close_hook(self, hook):
        self.hooks.append(hook)

    def scale(self, n=0, memory=None, cores=None):
        self.requests.append(("scale", n, memory, cores))
        self.events.warn("spark-dask: only 1 free Spark task slot")

    def adapt(self, **kwargs):
        self.requests.append(("adapt", kwargs))
        return SimpleNamespace(minimum=kwargs.get("minimum", 0), maximum=4)

    def close(self):
        self.status = Status.closing
        for hook in reversed(self.hooks):
            hook()
        self.run(self.scheduler.close())
        self.entry.remove()
        self.status = Status.closed
        self.loop.call_soon_threadsafe(self.loop.stop)


def test_a_handle_joins_and_the_owner_scales_adapts_and_closes(state):
    owner = FakeOwner("shared", state)
    try:
        record = store.read_record(owner.entry.directory)
        assert record["status"] == "running" and record["address"] == owner.scheduler.address and record["tls"]
        assert sorted(os.listdir(owner.entry.directory)) == sorted(
            ["cluster.json", "scheduler.json", "ca.pem", "client-cert.pem", "client-key.pem", "spark-dask-client.yaml"]
        )
        with spark_dask.SparkCluster.from_name("shared") as seen:  # leaving the block lets go only
            assert seen.status == Status.running
        assert seen.status == Status.closed and owner.status == Status.running

        t0 = time.monotonic()
        cluster = spark_dask.SparkCluster.from_name("shared")
        took = time.monotonic() - t0
        assert took < 5, took
        assert isinstance(cluster, spark_dask.NamedCluster)
        assert cluster.scheduler_address == owner.scheduler.address
        assert cluster.dashboard_link == "http://dashboard.example/status"
        assert repr(cluster).startswith(
            f"NamedCluster('shared', '{owner.scheduler.address}', 0 workers, owner pid {os.getpid()}"
        )
        assert "owner" in cluster._repr_html_() and owner.entry.directory in cluster._repr_html_()
        client = cluster.get_client()
        assert client.scheduler_info()["address"] == owner.scheduler.address
        client.close()
        # each subscriber keeps its own worker-status plugin (the stock one has one name
        # for all: a handle's subscription would end the owner's)
        other = spark_dask.SparkCluster.from_name("shared")
        watches = [p for p in owner.scheduler.plugins.values() if isinstance(p, HandleWatch)]
        assert len({p.name for p in watches}) == len(watches) >= 2
        other.disconnect()
        assert other.status == Status.closed and owner.status == Status.running

        def watches_after_one_more_join() -> int:
            """HandleWatch plugins once one more handle joined and left: those of handles
            that left are removed at the next subscription (here: `cluster` and the last)."""
            spark_dask.SparkCluster.from_name("shared").disconnect()
            return sum(isinstance(p, HandleWatch) for p in owner.scheduler.plugins.values())

        assert wait_until(lambda: watches_after_one_more_join() == 2, timeout=10)

        with pytest.warns(UserWarning, match="only 1 free Spark task slot"):
            cluster.scale(3)
        with pytest.warns(UserWarning, match="only 1 free Spark task slot"):
            cluster.scale(cores=8)
        assert cluster.adapt(minimum=1, maximum=6) == {"minimum": 1, "maximum": 4}
        assert owner.requests == [
            ("scale", 3, None, None),
            ("scale", 0, None, 8),
            ("adapt", {"minimum": 1, "maximum": 6}),
        ]
        with pytest.raises(SparkDaskError, match="adapt.Adaptive=.... is not possible"):
            cluster.adapt(object)

        async def asynchronous():
            async with spark_dask.SparkCluster.from_name("shared", asynchronous=True) as handle:
                with pytest.warns(UserWarning, match="only 1 free Spark task slot"):
                    await handle.scale(1)
                return await handle.adapt(maximum=2), handle.status

        assert asyncio.run(asynchronous()) == ({"minimum": 0, "maximum": 4}, Status.running)
        assert owner.requests[-2:] == [("scale", 1, None, None), ("adapt", {"maximum": 2})]

        # a plain Client() elsewhere: the entry's connection files
        env = dict(os.environ, DASK_CONFIG=owner.entry.directory, PYTHONPATH=ROOT)
        code = "from distributed import Client; c = Client(timeout=20); print(c.scheduler.address); c.close()"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert out.stdout.strip() == owner.scheduler.address, out.stderr[-2000:]

        t0 = time.monotonic()
        cluster.close()  # carried out by the owner, in its thread: it may still be closing
        assert cluster.status == Status.closed
        # the owner closes its scheduler, removes the entry, then says closed
        assert wait_until(lambda: owner.status == Status.closed, timeout=10), owner.status
        assert not os.path.exists(owner.entry.directory)
        assert time.monotonic() - t0 < 10
        assert spark_dask.list_clusters() == []
    finally:
        if owner.status == Status.running:  # a close under way (or done) is not repeated
            owner.close()


CLOSE_FROM_ANOTHER_PROCESS = textwrap.dedent(
    """
    import spark_dask
    cluster = spark_dask.SparkCluster.from_name("quiet")
    client = cluster.get_client()
    assert client.scheduler_info()["address"] == cluster.scheduler_address
    cluster.close()
    print(client.status)
    """
)


def test_a_close_from_another_process_leaves_its_stderr_empty(state):
    """Issue 68 point 6: a handle's close() from another process, then its exit, printed a
    35-line ``distributed.client - ERROR`` traceback (ConnectionRefusedError, CancelledError)
    in most runs: the handle's Client (``get_client()``) saw its connection end while the
    handle still said running, so it reconnected to the gone scheduler (``_reconnect``,
    which logs what ends it) until the exit cancelled it. Now the handle says closing
    first and the Client closes with it. Three owners and closes, each bounded."""
    env = dict(os.environ, DASK_SPARK_DASK__STATE_DIR=state, PYTHONPATH=ROOT)
    for _ in range(3):
        owner = FakeOwner("quiet", state)
        try:
            out = subprocess.run([sys.executable, "-c", CLOSE_FROM_ANOTHER_PROCESS], env=env, capture_output=True,
                                 text=True, timeout=60)  # fmt: skip
            assert out.returncode == 0 and out.stdout.split() == ["closed"], (out.stdout, out.stderr[-3000:])
            assert out.stderr == "", out.stderr[-3000:]
            assert wait_until(lambda o=owner: o.status == Status.closed, timeout=10), owner.status
        finally:
            if owner.status == Status.running:
                owner.close()


OWNER = textwrap.dedent(
    """
    import sys, time
    from spark_dask import named
    entry = named.Entry(sys.argv[1], "spark-dask-killed0000", sys.argv[2])
    entry.claim()
    entry.update(status="running", address="tls://127.0.0.1:1", workers=1)
    print("CLAIMED", flush=True)
    time.sleep(120)  # until the test kills it
    """
)


def test_dask_ctl_discovery_finds_the_running_clusters_by_name(state):
    """The ``dask_cluster_discovery`` entry point, held to dask-ctl's documented contract
    (an async generator of ``(name, class)``; dask-ctl then calls
    ``class.from_name(name)``). dask-ctl itself is not run: its newest release
    (2024.1.0) fails on import with today's distributed (``dask_ctl/utils.py`` imports
    ``distributed.cli.utils.install_signal_handlers``, which distributed removed)."""
    (point,) = [e for e in importlib.metadata.entry_points(group="dask_cluster_discovery") if e.name == "spark-dask"]
    discover = point.load()

    async def names():
        return [found async for found in discover()]

    assert asyncio.run(names()) == []
    owner = FakeOwner("ctl", state)
    try:
        ((name, cls),) = asyncio.run(names())
        assert name == "ctl" and cls is spark_dask.NamedCluster
        cluster = cls.from_name(name)
        try:
            assert cluster.scheduler_address == owner.scheduler.address
            with cluster.get_client() as client:
                assert client.scheduler_info()["address"] == owner.scheduler.address
        finally:
            cluster.disconnect()
        assert owner.status == Status.running  # a discovered cluster is only looked at
    finally:
        owner.close()
    assert asyncio.run(names()) == []


def test_an_owner_killed_with_sigkill_leaves_no_live_entry(state):
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-c", OWNER, "killed", state], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "CLAIMED"
        assert [(r["name"], r["pid"]) for r in spark_dask.list_clusters()] == [("killed", proc.pid)]
        proc.send_signal(signal.SIGKILL)  # no teardown; not reaped yet either
        assert wait_until(lambda: spark_dask.list_clusters() == [], timeout=10)
        assert not os.path.exists(os.path.join(state, "killed"))  # removed by the reader
        with pytest.raises(SparkDaskError, match="no cluster named 'killed'"):
            spark_dask.SparkCluster.from_name("killed")
        with named.Entry("killed", "spark-dask-7777777777", state):  # the name is free
            pass
    finally:
        proc.kill()
        proc.wait(30)


class FakeServed:
    """What ``serve_cluster`` uses of the SparkCluster it starts (no Spark)."""

    instances: list = []

    def __init__(self, spark, **kwargs):
        self.kwargs = kwargs
        self.name = kwargs.get("name", "spark-dask-0000000000")
        self.entry = named.Entry(self.name, "spark-dask-0000000000", named.configured_root())
        self.tag = "spark-dask-0000000000"
        registry.add(self, SimpleNamespace(entry=self.entry))  # as a SparkCluster's, while it runs
        self.entry.claim()
        self.scheduler = SimpleNamespace(workers={"w1": None, "w2": None})
        self.scheduler_address, self.dashboard_link = "tls://10.0.0.1:4000", "http://10.0.0.1:8787/status"
        self.status = Status.running
        self.closed = 0
        FakeServed.instances.append(self)

    def close(self):
        self.closed += 1
        self.entry.remove()
        self.status = Status.closed
        registry.discard(self)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "close request", "failed", "closed by itself"])
def test_serve_keeps_the_cluster_until_told(state, monkeypatch, capsys, how):
    """serve_cluster's wait: SIGTERM, SIGINT, a handle's close() or the cluster's own end
    stop it; it closes the cluster and returns 0; its signal handlers are put back."""
    from spark_dask.commands import run, serve

    monkeypatch.setattr(run, "SparkCluster", FakeServed)  # what serve's start_cluster makes
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)

    def ready(cluster):
        if how in ("SIGTERM", "SIGINT"):
            os.kill(os.getpid(), getattr(signal, how))
        elif how == "close request":
            registry.parts_of(cluster).entry.on_close_request()
        elif how == "failed":
            cluster.status = Status.failed
        else:  # idle_timeout: it closed and said so itself
            cluster.status = Status.closed

    t0 = time.monotonic()
    assert serve.serve_cluster(spark=object(), ready=ready, name="served", n_workers=2) == 0
    assert time.monotonic() - t0 < 5
    cluster = FakeServed.instances[-1]
    assert cluster.closed == 1 and cluster.kwargs == {"name": "served", "n_workers": 2}
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "spark-dask: serving cluster 'served': 2 workers at tls://10.0.0.1:4000; dashboard http://10.0.0.1:8787/status",
        "  join from Python (this user, this host): spark_dask.SparkCluster.from_name('served').get_client()",
        f"  connection files: {state}/served (DASK_CONFIG={state}/served makes a plain Client() join)",
        f"  stop: Ctrl-C, kill {os.getpid()} (SIGTERM), or .close() from any process that joined",
    ]
    assert ("spark-dask: cluster 'served' closed in" in out.err) == (how != "closed by itself")
    assert spark_dask.list_clusters() == []


# ---------------------------------------------------------------------- real Spark


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _serve_command() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "spark-dask")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "spark_dask.cli"]


@pytest.mark.spark
@pytest.mark.timeout(240)
def test_a_served_cluster_is_found_used_scaled_and_closed_by_name(state, tmp_path):
    """``spark-dask serve --name`` in a subprocess (one Spark application); from here:
    from_name, a computation, scale(2), list, close(); the server exits 0 and leaves no
    process."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, DASK_SPARK_DASK__STATE_DIR=state,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))  # fmt: skip
    cmd = [*_serve_command(), "serve", "--master", "local-cluster[2,1,1024]", "--conf", "spark.ui.enabled=false",
           "--name", "served", "--n-workers", "1", "--no-progress"]  # fmt: skip
    t_start = time.monotonic()
    with open(tmp_path / "stderr", "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=str(tmp_path))
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    server, descendants = psutil.Process(proc.pid), []
    try:
        first = lines.get(timeout=180)
        while first.startswith("spark-dask: ") and " connected to tls://" in first:  # the cluster's own line
            first = lines.get(timeout=10)
        assert first.startswith("spark-dask: serving cluster 'served': 1 worker at tls://"), first
        said = first + "".join(lines.get(timeout=5) for _ in range(3))
        assert "spark_dask.SparkCluster.from_name('served')" in said and f"connection files: {state}" in said, said
        t_served = time.monotonic() - t_start
        descendants = server.children(recursive=True)  # the Spark JVMs, the Python workers
        assert descendants

        t0 = time.monotonic()
        cluster = spark_dask.SparkCluster.from_name("served")
        t_join = time.monotonic() - t0
        tag = cluster.record["tag"]
        client = cluster.get_client()
        assert client.submit(sum, [1, 2, 3]).result(timeout=60) == 6
        with pytest.warns(UserWarning, match="take every task slot"):  # the owner's warning, said here
            cluster.scale(2)
        client.wait_for_workers(2, timeout=120)
        assert wait_until(lambda: [r["workers"] for r in spark_dask.list_clusters()] == [2], timeout=20)
        assert sorted(client.run(lambda: 1).values()) == [1, 1]
        client.close()
        t0 = time.monotonic()
        cluster.close()
        t_close = time.monotonic() - t0
        assert proc.wait(60) == 0, (tmp_path / "stderr").read_text()[-3000:]
        assert spark_dask.list_clusters() == []
        assert wait_until(lambda: not any(_alive(p) for p in descendants), timeout=30), [
            p for p in descendants if _alive(p)
        ]
        assert wait_until(lambda: not dask_processes(tag), timeout=20)
        print(f"served in {t_served:.1f}s, from_name {t_join * 1000:.0f} ms, close {t_close:.1f}s, "
              f"all {time.monotonic() - t_start:.1f}s")  # fmt: skip
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for p in descendants:
            if _alive(p):
                with contextlib.suppress(psutil.Error):
                    p.kill()


@pytest.mark.spark
@pytest.mark.timeout(180)
def test_serve_says_nothing_of_pandas_and_keeps_its_last_line(state, tmp_path):
    """Issue 42, point 8: ``spark-dask serve`` (its entry point, a subprocess) with an idle
    timeout and kept logs: no pyspark pandas >= 3 FutureWarning (the session is
    spark-dask's), a scheduler.log about the scheduler (not distributed's jupyter-server-proxy
    hint first), and a cluster.log that ends with the line the terminal ended with."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, DASK_SPARK_DASK__STATE_DIR=state,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))  # fmt: skip
    logs = tmp_path / "logs"
    cmd = [*_serve_command(), "serve", "--master", "local-cluster[2,1,1024]", "--conf", "spark.ui.enabled=false",
           "--name", "quiet", "--n-workers", "1", "--no-progress", "--idle-timeout", "2s",
           "--log-directory", str(logs)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=env, cwd=str(tmp_path))
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-3000:]
    assert "closed after being idle" in proc.stdout, said[-3000:]
    assert "does not yet fully support pandas" not in said and "FutureWarning" not in said, said[-3000:]
    [directory] = logs.iterdir()
    scheduler_log = (directory / "scheduler.log").read_text().splitlines()
    assert " - distributed.scheduler - INFO - State start" in scheduler_log[0], scheduler_log[:3]
    assert not [line for line in scheduler_log if "jupyter-server-proxy" in line]
    cluster_log = (directory / "cluster.log").read_text().splitlines()
    last = [line for line in proc.stdout.splitlines() if line.startswith("spark-dask: ")][-1]
    assert "closed after being idle (idle_timeout) in " in last
    assert cluster_log[-1].endswith(last), cluster_log[-3:]


@pytest.mark.spark
@pytest.mark.timeout(240)
def test_closing_one_of_two_clusters_by_name_leaves_the_others_logs_quiet(spark, state, capfd):
    """Issue 68 point 6, the owner's side: of two clusters of this process (each with
    ``silence_logs="warning"``), the one closed through ``from_name()`` put distributed's
    handlers back at their level while the other ran: its close printed distributed's
    INFO lines (``Received 'close-stream'``, ``Closing scheduler``). Now they stay quiet
    until the last cluster closes, then come back as they were."""
    import logging

    handlers = [h for h in logging.getLogger("distributed").handlers if isinstance(h, logging.StreamHandler)]
    before = [h.level for h in handlers]
    first = spark_dask.SparkCluster(spark, name="first", n_workers=1, silence_logs="warning", progress=False)
    try:
        second = spark_dask.SparkCluster(spark, name="second", n_workers=1, silence_logs="warning", progress=False)
        try:
            spark_dask.SparkCluster.from_name("first").close()
            assert wait_until(lambda: first.status == Status.closed, timeout=30), first.status
            assert [h.level for h in handlers] == [logging.WARNING] * len(handlers)
            capfd.readouterr()
            spark_dask.SparkCluster.from_name("second").close()
            assert wait_until(lambda: second.status == Status.closed, timeout=30), second.status
            said = capfd.readouterr().err
            assert " - INFO - " not in said, said[-3000:]
        finally:
            second.close()
    finally:
        first.close()
    assert [h.level for h in handlers] == before
