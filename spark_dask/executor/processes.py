"""The processes of a task's Dask workers: each started as a forked nanny
(:class:`ForkedNanny`) or a new process, tied to the Spark task so that it dies with it
(``PR_SET_PDEATHSIG``), and stopped with its whole process group (:func:`stop_workers`);
the private files the task writes for them (:func:`write_private`).

Shipped by value with the task code (:mod:`spark_dask.executor`): the standard library
only at module level.
"""

from __future__ import annotations

import gc
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import traceback

PR_SET_PDEATHSIG = 1
# Seconds the task waits for a worker to end after its SIGKILL: one in uninterruptible
# sleep (D state, e.g. a hung NFS or GPU driver call) may never end; the task ends anyway.
KILL_WAIT = 5.0


def _prctl():
    """libc's ``prctl``, looked up in this (the parent) process; None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


def make_death_signal(parent_pid: int):
    """preexec_fn: die with the Spark task (Linux ``PR_SET_PDEATHSIG``).

    libc is loaded and ``prctl`` looked up here, before the fork: the child only makes
    the call (an import or a ``dlopen`` there could block on a lock another thread of
    the task held at the fork)."""
    prctl, sigterm, sigkill = _prctl(), int(signal.SIGTERM), int(signal.SIGKILL)

    def preexec():
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, sigterm)
        if os.getppid() != parent_pid:  # the task died before prctl took effect
            os.kill(os.getpid(), sigkill)

    return preexec


def _inherited_channels() -> list[int]:
    """This process's sockets and pipes beyond stdin/out/err (the Python worker's
    connection to its executor): a forked nanny must not hold them."""
    found = []
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for name in names:
        fd = int(name)
        if fd < 3:
            continue
        try:
            mode = os.fstat(fd).st_mode
        except OSError:  # the directory listing's own descriptor, already closed
            continue
        if stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode):
            found.append(fd)
    return found


def _logging_config(dask_config) -> list:
    """The dask.config settings that distributed's logging set-up reads."""
    keys = (
        "logging",
        "logging-file-config",
        "distributed.logging",
        "distributed.logging-file-config",
        "distributed.admin.log-format",
    )
    return [dask_config.get(k, None) for k in keys]


def _drop_stderr_handlers() -> None:
    """Remove the handlers that write to ``sys.stderr`` (distributed's, from its import)."""
    import logging

    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in list(getattr(logger, "handlers", ())):
            if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
                logger.removeHandler(handler)


def _nanny_child(cmd: list[str], env: dict, cwd: str, log_fd: int, death_signal) -> None:
    """The forked child of :class:`ForkedNanny`: becomes ``dask worker``; never returns.
    ``death_signal``: :func:`make_death_signal`'s function, made before the fork."""
    code = 1
    try:
        os.setsid()  # its own process group, as start_new_session
        death_signal()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in _inherited_channels():
            os.dup2(null, fd)  # the numbers stay taken: no later file is closed by mistake
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        # what a new interpreter would put first on sys.path from PYTHONPATH: the preload's
        # directory and the directories of the cluster's env={"PYTHONPATH": ...}
        sys.path[:0] = list(
            dict.fromkeys(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path)
        )
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import dask.config
        from distributed.cli.dask_worker import main
        from distributed.config import initialize_logging

        logging_before = _logging_config(dask.config)
        dask.config.refresh()  # this worker's environment (DASK_* of `env`), as a new process reads it
        if _logging_config(dask.config) != logging_before:  # e.g. DASK_LOGGING__DISTRIBUTED in `env`
            _drop_stderr_handlers()  # what distributed's import set up; it adds, never replaces
            initialize_logging(dask.config.config)
        sys.argv = ["dask worker", *cmd[3:]]
        main.main(args=cmd[3:], prog_name="dask worker")
        code = 0
    except SystemExit as e:
        if isinstance(e.code, int) or e.code is None:
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001  (the child never returns to the task: report, exit 1)
        traceback.print_exc()
    finally:
        try:
            import logging

            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class ForkedNanny:
    """A CPU worker's nanny forked from this task's Python process instead of a new
    ``python -m distributed.cli.dask_worker``: no interpreter start, and no import of
    distributed where the Python worker has it from an earlier gang (Spark reuses
    Python workers). Offers what :func:`spark_dask.executor.gang_task.run_task` uses of a ``Popen``."""

    def __init__(self, cmd: list[str], env: dict, cwd: str, log_fd: int):
        self.args = cmd
        self.returncode: int | None = None
        self._done = threading.Event()
        self._reaper: threading.Thread | None = None
        self._lock = threading.Lock()
        sys.stdout.flush()
        sys.stderr.flush()
        death_signal = make_death_signal(os.getpid())
        freeze_heap()  # the child's collections then leave the pages it shares with the task alone
        pid = os.fork()
        if pid == 0:
            _nanny_child(cmd, env, cwd, log_fd, death_signal)
        self.pid = pid

    def _reap(self) -> None:
        _, status = os.waitpid(self.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        self._done.set()

    def _watch(self) -> None:
        # started at the first wait/poll, after every nanny of the task is forked: a
        # thread of this process would make the next fork unsafe
        with self._lock:
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap, name="spark-dask-reaper", daemon=True)
                self._reaper.start()

    def poll(self) -> int | None:
        self._watch()
        return self.returncode if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        self._watch()
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode


def freeze_heap() -> None:
    """Take what this process holds now out of the garbage collector's full collections.

    Young garbage is collected first (generations 0 and 1: milliseconds); then
    ``gc.freeze()`` moves every tracked object to the permanent generation. Two costs go:
    PySpark's daemon runs ``gc.collect()`` after every task of a reused Python worker
    (``pyspark/daemon.py``), which with distributed imported traverses all its modules'
    objects at each task's end, and none of them after a freeze; and a forked nanny's
    own collections would write to the header of every object it shares with the task,
    copying those pages (Python's ``gc.freeze`` documentation recommends a freeze right
    before a fork).
    What is frozen and later becomes cyclic garbage stays until the Python worker exits:
    modules, classes and functions, which live that long anyway, and the task's state,
    freed by reference counting.
    """
    gc.collect(1)
    gc.freeze()


def can_fork() -> bool:
    """Whether this process may fork a nanny: a POSIX system, and no other Python thread
    (one could hold a lock the child inherits locked, or be in the middle of a write).

    Native threads of libraries are theirs to handle, as for distributed's own
    ``multiprocessing-method: fork``: OpenBLAS (NumPy's, started by ``import numpy``
    where ``OMP_NUM_THREADS`` > 1) stops its pool before a fork (OpenBLAS PR 343) and
    Arrow C++ (pyarrow, imported by every ``mapInArrow`` task) rebuilds its thread
    pools in the child (apache/arrow PRs 2363, 14594).
    """
    return hasattr(os, "fork") and threading.active_count() == 1


def write_private(path: str, text: str) -> str:
    """Write ``text`` (UTF-8) to a new file only its owner can read; its path.

    Parameters
    ----------
    path : str
        The file: it must not exist yet (``O_CREAT | O_EXCL | O_NOFOLLOW``: nothing
        planted in the directory beforehand, a link least of all, is followed or
        reused), and is made with mode 0600 whatever the umask.
    text : str
        Its content.

    Returns
    -------
    str
        ``path``.

    Used on executors (this module is shipped by value), in the task's own new
    directory (``tempfile.mkdtemp``: mode 0700). The driver's connection files are
    :func:`spark_dask.connection.write_file`'s.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(fd, 0o600)
        f.write(text.encode())
    return path


def read_text(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def stop_workers(procs, grace: float) -> list:
    """SIGTERM every worker's process group, then SIGKILL what is left after ``grace``;
    the processes still there :data:`KILL_WAIT` seconds after the SIGKILL."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        try:  # also reaps grandchildren left in the group
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + KILL_WAIT
    stuck = []
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            stuck.append(p)
    return stuck
