"""A second Unix user for the tests of what another local user can reach (issue 54).

:func:`other_user` makes one (``useradd``, a unique name, no home directory) and removes it
afterwards (``userdel``), also when the test fails. Its commands run through ``setpriv``
with its uid and gid and no supplementary groups (:meth:`User.run`); Python code runs as it
in a forked process of this one (:meth:`User.call`: the package is imported already, so the
made user needs no read access to the checkout or the virtual environment).

Making a user needs root: elsewhere the tests skip, saying so, except under CI
(``CI=true``), which runs as root: there they fail rather than pass unseen.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass

import pytest

# Seconds a useradd, userdel or a command of the made user may take.
COMMAND_TIMEOUT = 60
# Run by the made user (User.reaches): a line for each directory it can list and each file
# it can read, then one saying that it ran, as whom.
TRY_TO_READ = """
for p; do
  if [ -d "$p" ]; then ls "$p" > /dev/null 2>&1 && echo "listed $p"
  else cat "$p" > /dev/null 2>&1 && echo "read $p"; fi
done
echo "tried as $(id -u)"
"""


@dataclass(frozen=True)
class User:
    """A Unix user the test made: its name, uid and gid."""

    name: str
    uid: int
    gid: int

    def run(self, *cmd: str, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess:
        """Run ``cmd`` as this user (text output captured; cwd ``/``)."""
        drop = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--"]
        return subprocess.run([*drop, *cmd], capture_output=True, text=True, timeout=timeout, cwd="/")

    def reaches(self, paths) -> list[str]:
        """Which of ``paths`` this user can list (a directory) or read (a file): ``listed
        <path>`` and ``read <path>`` lines."""
        done = self.run("sh", "-c", TRY_TO_READ, "sh", *paths)
        lines = done.stdout.splitlines()
        assert lines[-1:] == [f"tried as {self.uid}"], done.stdout + done.stderr
        return lines[:-1]

    def call(self, fn, *args, home: str, timeout: float = COMMAND_TIMEOUT):
        """``fn(*args)`` in a forked process running as this user (``HOME=home``): its
        result, or its exception raised here."""
        ctx = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(1, ctx, initializer=_become, initargs=(self, home)) as pool:
            return pool.submit(fn, *args).result(timeout)


def _become(user: User, home: str) -> None:
    """The forked process's start: this user for good, with its own home."""
    os.setgroups([])
    os.setresgid(user.gid, user.gid, user.gid)
    os.setresuid(user.uid, user.uid, user.uid)
    os.environ["HOME"] = home


def unavailable() -> str | None:
    """Why no user can be made here; None where one can."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "making a second Unix user needs root"
    missing = [c for c in ("useradd", "userdel", "setpriv") if shutil.which(c) is None]
    return f"{', '.join(missing)} not found" if missing else None


@contextlib.contextmanager
def other_user():
    """A new Unix user for the test (:class:`User`), removed afterwards."""
    reason = unavailable()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}: CI runs as root and must run the tests of another local user")
        pytest.skip(reason)
    name = f"sdtest{uuid.uuid4().hex[:10]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True, capture_output=True,
                   timeout=COMMAND_TIMEOUT)  # fmt: skip
    try:
        info = pwd.getpwnam(name)
        yield User(name, info.pw_uid, info.pw_gid)
    finally:
        subprocess.run(["userdel", "--force", name], check=True, capture_output=True, timeout=COMMAND_TIMEOUT)


@contextlib.contextmanager
def shared_tmp():
    """A directory like ``/tmp`` (mode 1777: everyone may make entries, and remove only
    their own), made in the temporary directory so that every user can reach it; removed
    afterwards with everything in it."""
    path = tempfile.mkdtemp(prefix="spark-dask-shared-", dir="/tmp")
    os.chmod(path, 0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
