"""Another local user gets nothing (issue 54): a second Unix user, made by the test
(:mod:`tests.support.users`), tries each attack on the connection files and the state
directory for real; and a stopped holder of the state directory's lock lets no take-over
go on without it. No Spark (the hand-off's files: tests/spark/test_local_users.py).

The victim is this process's user (root under CI, where nothing stops root from writing
anywhere: the checks, not the permissions, must refuse) and, where it matters, a second
made user (a fork of this process that became it), whom the permissions bind as well."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import warnings
from types import SimpleNamespace

import dask.config
import psutil
import pytest
from distributed.core import Status

import spark_dask
from spark_dask import connection, named
from spark_dask.errors import ClusterError
from spark_dask.named import store
from tests.support import users
from tests.support.processes import wait_until

pytestmark = pytest.mark.timeout(120)

VICTIMS_OWN = b"ssh-ed25519 AAAAC3Nza the victim's own key\n"
ATTACKERS_CONFIG = "scheduler-address: tls://attacker.example:8786\n"
TAG = "spark-dask-0000000000"


@pytest.fixture
def other():
    """The other local user."""
    with users.other_user() as user:
        yield user


@pytest.fixture
def shared():
    """A directory like /tmp (mode 1777) every user reaches."""
    with users.shared_tmp() as path:
        yield path


def running_cluster():
    """What write_connection() reads of a running cluster: the scheduler's identity, the
    status, the client credentials (PEM text) and where close hooks go (the real cluster
    writes the same files: tests/spark/test_connection.py)."""
    scheduler = SimpleNamespace(id="Scheduler-1", address="tls://127.0.0.1:8786", services={}, time_started=0.0)
    security = SimpleNamespace(require_encryption=True, tls_ca_file="CA\n", tls_client_cert="CERT\n",
                               tls_client_key="KEY\n")  # fmt: skip
    return SimpleNamespace(scheduler=scheduler, status=Status.running, security=security, add_close_hook=lambda f: None)


def write_into(directory: str) -> str:
    """``write_connection()`` into ``directory`` by this process's user: the scheduler
    file's path, or ``ERROR <the message>``."""
    try:
        return connection.write_connection(running_cluster(), directory)
    except ClusterError as e:
        return f"ERROR {e}"


def plant(attacker: users.User, directory: str, target: str, mode: str = "0755") -> None:
    """The attacker makes ``directory`` and plants links to ``target`` where the key and
    the scheduler file go, and a Dask config of its own."""
    script = 'mkdir -m "$3" "$1" && ln -s "$2" "$1/client-key.pem" && ln -s "$2" "$1/scheduler.json" && printf "$4" > "$1/spark-dask-client.yaml"'
    done = attacker.run("sh", "-c", script, "sh", directory, target, mode, ATTACKERS_CONFIG)
    assert done.returncode == 0, done.stderr


def victims_file(path: str, owner: users.User | None = None) -> str:
    with open(path, "wb") as f:
        f.write(VICTIMS_OWN)
    if owner is not None:
        os.chown(path, owner.uid, owner.gid)
    return path


def left_alone(directory: str, target: str) -> bool:
    """Nothing of the victim's written through the links; the attacker's files as planted."""
    with open(target, "rb") as f, open(os.path.join(directory, connection.CONFIG_FILE)) as g:
        return (
            f.read() == VICTIMS_OWN
            and g.read() == ATTACKERS_CONFIG
            and sorted(os.listdir(directory))
            == sorted([connection.KEY_FILE, connection.SCHEDULER_FILE, connection.CONFIG_FILE])
        )


def test_write_connection_refuses_a_directory_another_user_made(other, shared):
    for mode in ("0755", "0777"):  # listable, and writable by anyone
        directory = os.path.join(shared, f"my-cluster-{mode}")
        target = victims_file(os.path.join(shared, f"authorized_keys-{mode}"))
        plant(other, directory, target, mode)
        said = write_into(directory)
        assert said.startswith(f"ERROR spark-dask: write_connection() refuses {directory}: it belongs to another user "
                               f"(uid {other.uid}), who could replace the files written there; "), said  # fmt: skip
        assert said.endswith(connection.USE_INSTEAD)
        assert left_alone(directory, target)


def test_a_victim_who_is_not_root_is_refused_the_same(shared):
    """The same attack on a user whom the permissions bind (a made user, not root)."""
    with users.other_user() as attacker, users.other_user() as victim:
        home = os.path.join(shared, "home")
        os.mkdir(home, 0o700)
        os.chown(home, victim.uid, victim.gid)
        target = victims_file(os.path.join(home, "authorized_keys"), victim)
        directory = os.path.join(shared, "my-cluster")
        plant(attacker, directory, target, "0777")
        said = victim.call(write_into, directory, home=home)
        assert said.startswith(f"ERROR spark-dask: write_connection() refuses {directory}: it belongs to another user")
        assert left_alone(directory, target)
        # the victim's own new directory: made private, the files written
        mine = os.path.join(home, "my-cluster")
        assert victim.call(write_into, mine, home=home) == os.path.join(mine, connection.SCHEDULER_FILE)
        assert stat.S_IMODE(os.stat(mine).st_mode) == 0o700 and os.stat(mine).st_uid == victim.uid
        assert {stat.S_IMODE(os.stat(os.path.join(mine, f)).st_mode) for f in os.listdir(mine)} == {0o600}


def test_write_connection_follows_no_link_and_trusts_no_open_directory(tmp_path, other, shared):
    target = victims_file(str(tmp_path / "authorized_keys"))
    # the victim's own directory that others can write to: refused (they could swap a file later)
    open_dir = os.path.join(shared, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    assert write_into(open_dir).startswith(f"ERROR spark-dask: write_connection() refuses {open_dir}: other users "
                                           "can write to it (mode 777)")  # fmt: skip
    assert os.listdir(open_dir) == []
    # a link as the directory: refused, not followed
    link = os.path.join(shared, "link")
    assert other.run("ln", "-s", str(tmp_path), link).returncode == 0
    assert write_into(link).startswith(f"ERROR spark-dask: write_connection() refuses {link}: it is a symbolic link")
    # a directory inside one another user can change (rename it away, put another in its place)
    outer = os.path.join(shared, "outer")
    assert other.run("mkdir", "-m", "0777", outer).returncode == 0
    inner = os.path.join(outer, "inner")
    os.mkdir(inner, 0o700)
    assert write_into(inner).startswith(
        f"ERROR spark-dask: write_connection() refuses {inner}: its parent directory {outer} can be changed by "
        f"another user (owner uid {other.uid}, mode 777)"
    )
    # a link where a file goes, in the user's own directory: refused, the target unchanged
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (mine / connection.KEY_FILE).symlink_to(target)
    said = write_into(str(mine))
    assert said.startswith(f"ERROR spark-dask: write_connection() found a symbolic link where its file "
                           f"{connection.KEY_FILE} goes")  # fmt: skip
    with open(target, "rb") as f:
        assert f.read() == VICTIMS_OWN
    assert sorted(os.listdir(mine)) == [connection.KEY_FILE]  # what it wrote before the link is removed again
    # a file there is replaced (never written through), mode 0600
    os.unlink(mine / connection.KEY_FILE)
    (mine / connection.SCHEDULER_FILE).write_text("old")
    os.chmod(mine / connection.SCHEDULER_FILE, 0o644)
    assert write_into(str(mine)) == str(mine / connection.SCHEDULER_FILE)
    assert json.loads((mine / connection.SCHEDULER_FILE).read_text())["address"] == "tls://127.0.0.1:8786"
    assert {stat.S_IMODE(os.stat(mine / f).st_mode) for f in os.listdir(mine)} == {0o600}
    assert not [f for f in os.listdir(mine) if f.startswith(".")]  # no temporary file left


def use_state_dir(tmp: str, home: str) -> None:
    """The ``auto`` state directory in ``tmp`` (as in /tmp), the fallback under ``home``."""
    os.environ.pop("XDG_RUNTIME_DIR", None)
    os.environ["HOME"] = home
    tempfile.tempdir = tmp


def list_and_find(tmp: str, home: str) -> dict:
    """What this process's user sees of its clusters with the ``auto`` state directory in
    ``tmp``: the rows, the warnings, and from_name()'s answer for an unknown name, with
    one cluster's entry claimed."""
    use_state_dir(tmp, home)
    with dask.config.set({"spark-dask.state-dir": "auto"}), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = spark_dask.list_clusters()
        with named.Entry("etl", TAG, named.configured_root()) as entry:
            entry.update(status="running", address="tls://127.0.0.1:1")
            rows = spark_dask.list_clusters()
            try:
                spark_dask.SparkCluster.from_name("nightly")
            except ClusterError as e:
                unknown = str(e)
        after = os.path.exists(entry.directory)
    return {"before": before, "names": [r["name"] for r in rows], "directory": entry.directory, "after": after,
            "unknown": unknown, "said": sorted({str(w.message) for w in caught})}  # fmt: skip


@pytest.mark.parametrize("victim_is_root", [True, False])
def test_a_state_directory_another_user_made_first(other, shared, monkeypatch, victim_is_root):
    home = os.path.join(shared, "home")
    os.mkdir(home, 0o700)
    victim = None if victim_is_root else other  # None: this process's user
    if victim is None:
        uid = os.getuid()
        monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)  # list_and_find() sets these
        monkeypatch.setenv("HOME", home)
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    else:
        uid = victim.uid
        os.chown(home, uid, victim.gid)
    with users.other_user() as squatter:
        squatted = os.path.join(shared, f"spark-dask-{uid}")
        assert squatter.run("mkdir", "-m", "0700", squatted).returncode == 0
        seen = list_and_find(shared, home) if victim is None else victim.call(list_and_find, shared, home, home=home)
        fallback = store.fallback_root(home)
        assert seen["before"] == [] and seen["names"] == ["etl"]
        assert seen["directory"] == os.path.join(fallback, "etl") and not seen["after"]
        assert seen["unknown"].startswith(f"spark-dask: no cluster named 'nightly' runs on this host for this user "
                                          f"(running: 'etl'; state directory {fallback})")  # fmt: skip
        assert seen["said"] == [store.taken_root_message(squatted, squatter.uid, fallback)]
        assert os.listdir(squatted) == [] and os.stat(squatted).st_uid == squatter.uid  # nothing put there
        assert not os.path.exists(fallback)  # gone with its last entry


HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(30)
    return proc.pid


def test_a_stopped_lock_holder_lets_no_take_over_go_on_without_the_lock(tmp_path):
    """A process stopped (SIGSTOP) while it holds the state directory's lock: listing
    leaves the stale entry alone, and two starts taking over the name each fail, saying
    so, instead of going on without the lock and removing each other's fresh claim.
    Once the holder is gone, one of them gets the name."""
    root = str(tmp_path / "state")
    os.makedirs(os.path.join(root, "etl"), mode=0o700)
    with open(os.path.join(root, "etl", store.RECORD_FILE), "w") as f:
        json.dump({"name": "etl", "host": socket.gethostname(), "pid": dead_pid(), "status": "running"}, f)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, root], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"locked\n"
        holder.send_signal(signal.SIGSTOP)
        assert wait_until(lambda: psutil.Process(holder.pid).status() == psutil.STATUS_STOPPED, 10)
        with dask.config.set({"spark-dask.state-dir": root}):
            assert spark_dask.list_clusters() == []
        assert os.listdir(root) == ["etl"]  # stale, but not removed without the lock
        results: dict = {}

        def start(who):
            try:
                results[who] = named.Entry("etl", f"spark-dask-{who}", root, lock_wait=1.0).claim()
            except ClusterError as e:
                results[who] = str(e)

        threads = [threading.Thread(target=start, args=(who,)) for who in ("1111111111", "2222222222")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert list(results.values()) == [store.locked_message(root, 1.0)] * 2
        assert store.read_record(os.path.join(root, "etl"))["status"] == "running"  # the stale record, untouched
    finally:
        holder.kill()
        holder.wait(30)
    first, second = named.Entry("etl", TAG, root, lock_wait=1.0), named.Entry("etl", "spark-dask-3333333333", root)
    first.claim()
    with pytest.raises(ClusterError, match="a cluster named 'etl' already runs for this user"):
        second.claim()
    assert store.read_record(first.directory)["tag"] == TAG
    first.remove()
