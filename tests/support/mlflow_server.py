"""A real MLflow tracking server for the tests and the benchmarks: ``mlflow server`` in a
process group of its own, a sqlite backend store and a local artifact store under one
directory, on a port the operating system picks.

The server runs from an environment of its own (:data:`REQUIREMENT`, the full ``mlflow``
package: its UI's JavaScript, SQLAlchemy, alembic), not from the tests' ``.venv``: the full
package caps ``pyarrow<26`` and ``cryptography<51`` (mlflow 3.17.2's metadata), and
installing it there would take the newest pyarrow away from the hand-off's tests. The
tests' own process talks to it with ``mlflow-skinny`` (the ``mlflow`` extra), as a user's
does. ``tests/run-all.sh`` installs it once, beside the jars, into a cache outside the
repository; a test that needs it asks :func:`server_or_skip` (a skip locally when it is
absent, a failure under CI)::

    python -m tests.support.mlflow_server install   # once (about 650 MB, 35 s)
    python -m tests.support.mlflow_server path      # the server environment's Python

The cache is ``$SPARK_DASK_MLFLOW_SERVER``, by default
``~/.cache/spark-dask/mlflow-server-<version>``. A Python whose own environment has the
full ``mlflow`` package serves too (:func:`server_python`).

    with MLflowServer(server_or_skip(), directory) as server:
        mlflow.set_tracking_uri(server.uri)
        with server.down():       # stopped; started again on the same port after
            ...

The port: ``mlflow server --port 0`` hands 0 to uvicorn, which binds a port the OS picks
(no window between choosing a port and binding it, where another process could take it);
:func:`listening_port` reads which from the process group's listening socket. The start
is ~20 s of CPU (``mlflow.cli`` and then the app, 8-10 s of imports each, measured on this
project's machine), so :data:`START_TIMEOUT` allows for a loaded 2-core machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

VERSION = "3.17.2"
REQUIREMENT = f"mlflow=={VERSION}"
# seconds: the wait for /health after the start (measured 42-56 s at a load of 12-15 on 2
# cores, 2 imports of ~9 s of CPU each); the wait for the process group to end after SIGTERM
START_TIMEOUT = 150.0
STOP_TIMEOUT = 10.0
INSTALL_TIMEOUT = 900.0
# what the server's environment must not take from ours: MLFLOW_PORT, MLFLOW_WORKERS,
# MLFLOW_BACKEND_STORE_URI... are defaults of `mlflow server`'s options
SERVER_ENV = {
    "MLFLOW_DISABLE_TELEMETRY": "true",  # no usage events (the machine has no internet anyway)
    "DO_NOT_TRACK": "true",
    # no huey job runner (evaluation jobs): one process less to start and to end
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
}


def environment_dir() -> str:
    """Where :func:`install` puts the server's environment."""
    return os.environ.get("SPARK_DASK_MLFLOW_SERVER") or os.path.join(
        os.path.expanduser("~"), ".cache", "spark-dask", f"mlflow-server-{VERSION}"
    )


def has_server(python: str, timeout: float = 60) -> bool:
    """Whether ``python`` can run ``mlflow server`` with its UI: the full ``mlflow``
    package (``mlflow-skinny`` has the server's Python but neither the UI's build nor
    SQLAlchemy)."""
    probe = (
        "import importlib.util as u, os, sys; s = u.find_spec('mlflow');"
        "ok = s is not None and u.find_spec('sqlalchemy') is not None and os.path.isdir("
        "os.path.join(os.path.dirname(s.origin), 'server', 'js', 'build'));"
        "sys.exit(0 if ok else 1)"
    )
    try:
        return subprocess.run([python, "-c", probe], timeout=timeout, capture_output=True).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def server_python() -> str | None:
    """The Python that runs the server: the installed environment's, else this one's when it
    has the full package, else None."""
    cached = os.path.join(environment_dir(), "bin", "python")
    if os.path.exists(os.path.join(environment_dir(), "installed")) and os.access(cached, os.X_OK):
        return cached
    return sys.executable if has_server(sys.executable) else None


def server_or_skip() -> str:
    """The server's Python. Missing: skip with the reason locally, FAIL under ``CI``."""
    import pytest  # the benchmarks import this module without pytest

    python = server_python()
    if python is None:
        reason = (
            f"no MLflow tracking server ({REQUIREMENT}) is installed: "
            "run python -m tests.support.mlflow_server install (tests/run-all.sh does)"
        )
        if os.environ.get("CI"):
            pytest.fail("CI is set but " + reason, pytrace=False)
        pytest.skip(reason)
    return python


def install(timeout: float = INSTALL_TIMEOUT) -> str:
    """Make the server's environment (a venv with :data:`REQUIREMENT`) once; its Python.
    A venv cannot be moved (its scripts name its interpreter by path), so it is made in its
    place, and a marker written last says it is complete: one without it is made again."""
    target = environment_dir()
    python = os.path.join(target, "bin", "python")
    marker = os.path.join(target, "installed")
    if os.path.exists(marker):
        return python
    shutil.rmtree(target, ignore_errors=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", target], check=True, timeout=timeout)
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-compile", REQUIREMENT], check=True, timeout=timeout)
    open(marker, "w").close()
    return python


def server_command(python: str, directory: str, port: int = 0) -> list[str]:
    """``mlflow server``'s command line: sqlite store and artifacts under ``directory``
    (artifacts served through the server, as a remote server does), 127.0.0.1, one uvicorn
    worker (the default is 4 processes), ``port`` (0: the OS picks).

    >>> server_command("/env/bin/python", "/tmp/m", 0)[:3]
    ['/env/bin/python', '-m', 'mlflow']
    >>> " ".join(server_command("/env/bin/python", "/tmp/m", 0)[3:])
    'server --backend-store-uri sqlite:////tmp/m/mlflow.db --artifacts-destination /tmp/m/artifacts --host 127.0.0.1 --port 0 --workers 1'
    """
    return [
        python, "-m", "mlflow", "server",
        "--backend-store-uri", f"sqlite:///{os.path.join(directory, 'mlflow.db')}",
        "--artifacts-destination", os.path.join(directory, "artifacts"),
        "--host", "127.0.0.1", "--port", str(int(port)), "--workers", "1",
    ]  # fmt: skip


def server_environment(ours: dict) -> dict:
    """The server's environment: ours without MLflow's variables (``MLFLOW_PORT``,
    ``MLFLOW_TRACKING_URI``, ... are not the server's business), with :data:`SERVER_ENV`.

    >>> env = server_environment({"PATH": "/bin", "MLFLOW_PORT": "5000", "MLFLOW_TRACKING_URI": "x"})
    >>> sorted(env)
    ['DO_NOT_TRACK', 'MLFLOW_DISABLE_TELEMETRY', 'MLFLOW_SERVER_ENABLE_JOB_EXECUTION', 'PATH']
    """
    return {**{k: v for k, v in ours.items() if not k.startswith("MLFLOW_")}, **SERVER_ENV}


def group_processes(pgid: int) -> list:
    """The live processes of process group ``pgid`` (``psutil.Process``; psutil, a test
    dependency, is imported here so that ``install`` runs on a bare Python: tests/run-all.sh
    runs it beside the venvs' installs)."""
    import psutil

    found = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def listening_port(pgid: int) -> int | None:
    """The TCP port a process of group ``pgid`` listens on (uvicorn's, once it bound), or
    None."""
    import psutil

    for p in group_processes(pgid):
        try:
            for c in p.net_connections(kind="tcp"):
                if c.status == psutil.CONN_LISTEN:
                    return c.laddr.port
        except psutil.Error:
            continue
    return None


def answers(uri: str, timeout: float = 2.0) -> bool:
    """Whether the server at ``uri`` answers its health check (``GET /health``: 200)."""
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=timeout) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


class MLflowServer:
    """``mlflow server`` under ``directory`` (``mlflow.db``, ``artifacts/``, ``server.log``):
    started by :meth:`start` (or ``with``), ended with its process group by :meth:`stop`.

    Parameters
    ----------
    python : str
        The Python whose environment has the full ``mlflow`` (:func:`server_or_skip`).
    directory : str
        Where the store, the artifacts and the server's log go (kept after the stop).
    """

    def __init__(self, python: str, directory: str):
        self.python, self.directory = python, directory
        self.log = os.path.join(directory, "server.log")
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.start_seconds: float | None = None

    @property
    def uri(self) -> str:
        """The tracking URI (``http://127.0.0.1:<port>``)."""
        if self.port is None:
            raise RuntimeError("the MLflow server has not started")
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = START_TIMEOUT) -> MLflowServer:
        """Start it (on its former port, when it ran before) and wait until ``/health``
        answers: at most ``timeout`` seconds, failing at once when it exits."""
        os.makedirs(self.directory, exist_ok=True)
        t0 = time.monotonic()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                server_command(self.python, self.directory, self.port or 0),
                env=server_environment(dict(os.environ)),
                cwd=self.directory,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,  # uvicorn's process goes with the group
            )  # fmt: skip
        try:
            self._wait_ready(t0 + timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def _wait_ready(self, deadline: float) -> None:
        """The wait "MLflow server answers /health": bounded by ``deadline``."""
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited ({self.proc.returncode}):\n{self.log_tail()}")
            port = self.port or listening_port(self.proc.pid)
            if port is not None and answers(f"http://127.0.0.1:{port}"):
                self.port = port
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not answer /health in time:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """End its process group: SIGTERM, then SIGKILL to what is left after ``timeout``."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the group's id is the leader's pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while group_processes(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        proc.wait(timeout)

    @contextlib.contextmanager
    def down(self):
        """Within: the server is stopped (its port refuses connections); started again on
        the same port after."""
        self.stop()
        try:
            yield self
        finally:
            self.start()

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log."""
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as e:
            return f"(no log: {e})"

    def __enter__(self) -> MLflowServer:
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        state = "running" if self.proc is not None else "stopped"
        return f"MLflowServer({self.uri if self.port else '?'}, {state}, log {self.log})"


def main(argv: list[str]) -> int:
    if argv not in (["install"], ["path"]):
        print("usage: python -m tests.support.mlflow_server install|path", file=sys.stderr)
        return 2
    python = install() if argv[0] == "install" else server_python()
    if python is None:
        print(f"no MLflow server installed ({environment_dir()})", file=sys.stderr)
        return 1
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
