"""What runs inside each Spark barrier task: start this task's Dask workers, keep them
alive while the cluster runs, and make sure they cannot outlive the task.

The driver ships this module to the executors by value together with what it uses of
the package (:mod:`spark_dask.errors`, :mod:`spark_dask.plan`, :mod:`spark_dask.rapids`,
:mod:`spark_dask.logdir`, and the task specification, :class:`spark_dask.executor.task_spec.TaskSpec`, which carries the
workers' preload, :mod:`spark_dask.executor.preload`, as text), so the executors need
``distributed`` (and ``dask-cuda`` for GPU workers) but not ``spark_dask`` itself, and
driver and executors never disagree on its version.

The same :func:`run_task` serves classic sessions (``rdd.barrier().mapPartitions``)
and Spark Connect sessions (``mapInArrow(..., barrier=True)``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import json
import os
import queue
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from spark_dask.errors import WorkerStartError
from spark_dask.executor.command import (
    REGISTERED_MARKER,
    forks_nanny,
    scheduler_endpoint,
    tail,
    unreachable_message,
    version_problem,
    worker_command,
)
from spark_dask.executor.logs import save_worker_logs
from spark_dask.executor.placement import (
    assign_shared,
    assign_workers,
    executor_gpu_list,
    gang_shortfall,
    gpu_env,
    physical_gpu,
    worker_name,
)
from spark_dask.executor.rmm import rmm_installed, rmm_option, rmm_problem
from spark_dask.executor.sizing import (
    memory_problem,
    thread_cores,
    worker_memory,
    worker_threads,
)
from spark_dask.executor.task_spec import TaskSpec

PR_SET_PDEATHSIG = 1
# Seconds the task waits for a worker to end after its SIGKILL: one in uninterruptible
# sleep (D state, e.g. a hung NFS or GPU driver call) may never end; the task ends anyway.
KILL_WAIT = 5.0
# The scheduler handler each task opens its line with (TaskLine; the driver's side:
# spark_dask.scheduler.DriverScheduler.cut_line).
TASK_LINE = "spark_dask_task_line"
# The module name under which each task writes the workers' preload (the text of
# spark_dask.executor.preload, carried in TaskSpec.preload) into its workers' directory.
PRELOAD_MODULE = "spark_dask_preload"


def executor_id() -> str | None:
    """The executor id, from what the cluster manager puts in the executor's env."""
    if os.environ.get("SPARK_EXECUTOR_ID"):  # Kubernetes
        return os.environ["SPARK_EXECUTOR_ID"]
    for key in ("SPARK_LOG_URL_STDERR", "SPARK_LOG_URL_STDOUT"):  # standalone
        url = os.environ.get(key, "")
        if "executorId=" in url:
            return url.split("executorId=", 1)[1].split("&", 1)[0]
    return os.environ.get("CONTAINER_ID")  # YARN


def host_memory() -> int:
    """Physical memory of the host, capped by a cgroup (container) limit (bytes)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                raw = f.read().strip()
        except OSError:
            continue
        if raw.isdigit():
            total = min(total, int(raw))
    return total


def _prctl():
    """libc's ``prctl``, looked up in this (the parent) process; None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


def _make_death_signal(parent_pid: int):
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
    keys = ("logging", "logging-file-config", "distributed.logging", "distributed.logging-file-config",
            "distributed.admin.log-format")  # fmt: skip
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
    ``death_signal``: :func:`_make_death_signal`'s function, made before the fork."""
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
        # what a new interpreter would put first on sys.path from PYTHONPATH (the preload's directory)
        sys.path[:0] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)[:1] if p and p not in sys.path]
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
    Python workers). Offers what :func:`run_task` uses of a ``Popen``."""

    def __init__(self, cmd: list[str], env: dict, cwd: str, log_fd: int):
        self.args = cmd
        self.returncode: int | None = None
        self._done = threading.Event()
        self._reaper: threading.Thread | None = None
        self._lock = threading.Lock()
        sys.stdout.flush()
        sys.stderr.flush()
        death_signal = _make_death_signal(os.getpid())
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


def _can_fork() -> bool:
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


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _stop(procs, grace: float) -> list:
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


def reach_error(address: str, timeout: float, tls: dict | None = None) -> str | None:
    """Open (and close) a connection to the scheduler; the error text, or None.

    Run by every task before it starts a worker, so that a scheduler the executors
    cannot reach (a client outside the cluster's network, a firewall) is reported
    within seconds instead of as a worker that never connects. With ``tls`` (PEM
    texts ``ca``, ``cert``, ``key``) the TLS handshake is done too, so the scheduler
    sees a well-formed connection and logs no handshake warning.
    """
    try:
        host, port = scheduler_endpoint(address)
    except ValueError:  # inproc:// or a custom comm: nothing to check
        return None
    tmp = tempfile.mkdtemp(prefix="spark-dask-reach-") if tls else None
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            if tls:
                import ssl

                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname = False  # Dask's TLS authenticates by certificate, not name
                ctx.load_verify_locations(cadata=tls["ca"])
                ctx.load_cert_chain(
                    write_private(os.path.join(tmp, "cert.pem"), tls["cert"]),
                    write_private(os.path.join(tmp, "key.pem"), tls["key"]),
                )
                with ctx.wrap_socket(sock):
                    pass
        return None
    except TimeoutError:
        return f"no answer within {timeout:g}s (timed out)"
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def executor_gpus(spec: TaskSpec, executor: str, own: list[str] | None = None) -> list[str]:
    """The physical GPUs of an executor (``host:port``), for a gang sharing them with Spark.

    See :func:`spark_dask.executor.placement.executor_gpu_list`; addresses are mapped through this
    task's ``CUDA_VISIBLE_DEVICES``.
    """
    host = executor.rsplit(":", 1)[0]
    candidates = spec.executor_gpus.get(host) or []
    addresses = executor_gpu_list(candidates, own or [], spec.gpus_per_executor)
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    return [physical_gpu(a, cvd) for a in addresses]


def _where(t: dict) -> str:
    return f"executor {t['executor_id'] or t['executor']} (host {t['host']}, partition {t['partition']})"


class _PlainContext:
    """Stands in for the ``BarrierTaskContext`` of a barrier task whose Python worker was
    handed a plain ``TaskContext``.

    Seen on Databricks Runtime 14.3 in a barrier ``mapInArrow``/``mapInPandas``:
    ``TaskContext.get()`` is not a ``BarrierTaskContext`` there (NVIDIA spark-rapids
    PR 12456, issue 12477), so ``BarrierTaskContext.get()`` raises. What a plain context
    has still works (partition id, resources, CPUs); where every task's executor is
    unknown (no ``getTaskInfos()``), ``_gang_from_task_infos`` leaves it unknown, and the
    one call that cannot be replaced, ``allGather``, raises a clear error.
    """

    def __init__(self, ctx, reason: str):
        self._ctx = ctx
        self.reason = reason
        self.n_tasks: int | None = None  # set by task_facts from the spec

    def partitionId(self) -> int:
        return self._ctx.partitionId()

    def resources(self) -> dict:
        return self._ctx.resources()

    def cpus(self) -> int:
        return self._ctx.cpus()

    def attemptNumber(self) -> int:
        return self._ctx.attemptNumber()

    def getTaskInfos(self):
        raise RuntimeError(f"no BarrierTaskContext: {self.reason}")

    def allGather(self, message: str = ""):
        raise WorkerStartError(
            "spark-dask: the Spark tasks share GPUs (fractional spark.task.resource.gpu.amount) "
            "and must agree which task starts which worker (BarrierTaskContext.allGather), but "
            "this Spark runtime gave the barrier task no BarrierTaskContext "
            f"({self.reason}). Give each task whole GPUs (spark.task.resource.gpu.amount=1)."
        )


PLAIN_JOB = "a plain Spark job (dynamic allocation: no barrier stage)"


def _context(barrier: bool = True):
    """This barrier task's context: the ``BarrierTaskContext``, or a :class:`_PlainContext`
    around the plain ``TaskContext`` where the runtime hands the Python worker no barrier
    context (Databricks Runtime 14.3, barrier ``mapInArrow``), or where the task is a
    plain Spark job (``barrier=False``: a gang of one task under dynamic allocation)."""
    from pyspark import BarrierTaskContext, TaskContext

    if not barrier:
        plain = TaskContext.get()
        if plain is None:
            raise WorkerStartError("spark-dask: no Spark task context in this Python worker")
        return _PlainContext(plain, PLAIN_JOB)
    try:
        ctx = BarrierTaskContext.get()
    except Exception as e:  # NOT_IN_BARRIER_STAGE (PySparkRuntimeError) or older texts  # noqa: BLE001
        reason = f"{type(e).__name__}: {e}".splitlines()[0]
    else:
        if hasattr(ctx, "allGather") and hasattr(ctx, "getTaskInfos"):
            return ctx
        reason = f"BarrierTaskContext.get() returned {type(ctx).__name__}"
    plain = TaskContext.get()
    if plain is None:
        raise WorkerStartError(f"spark-dask: no Spark task context in this Python worker ({reason})")
    return _PlainContext(plain, reason)


def _fallback_host() -> str:
    """This executor's host when no task infos say it: Spark's own setting, else the
    address the host name resolves to, else the host name."""
    if os.environ.get("SPARK_LOCAL_IP"):
        return os.environ["SPARK_LOCAL_IP"]
    name = socket.gethostname()
    try:
        return socket.gethostbyname(name)
    except OSError:
        return name


def task_facts(ctx, spec: TaskSpec) -> dict:
    """What this task tells the rest of the gang (through ``allGather``)."""
    partition = ctx.partitionId()
    context_note = None
    try:
        address = ctx.getTaskInfos()[partition].address
    except Exception as e:  # no BarrierTaskContext (see _PlainContext)  # noqa: BLE001
        # "host:executor": unique per executor like the host:port of getTaskInfos; the
        # parent of a PySpark worker is its executor's daemon.
        address = f"{_fallback_host()}:{executor_id() or os.getppid()}"
        if spec.barrier:
            context_note = f"no barrier task infos ({e}); executor address from this host"
        try:  # how many tasks the gang has, for _gang_from_task_infos
            ctx.n_tasks = int(spec.n_workers) // max(int(spec.workers_per_task), 1)
        except (AttributeError, TypeError, ValueError):
            pass
    resources = ctx.resources()
    gpus = list(resources["gpu"].addresses) if "gpu" in resources else []
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    missing = [m for m in spec.requires if importlib.util.find_spec(m) is None]
    try:
        dist_version = importlib.metadata.version("distributed")
    except importlib.metadata.PackageNotFoundError:
        dist_version = None
    try:
        attempt = int(ctx.attemptNumber())
    except Exception:  # a stand-in context without attempts  # noqa: BLE001
        attempt = 0
    facts = {
        "partition": partition,
        "gang": int(spec.gang),
        "group": spec.group,
        "task": int(spec.name_base) + partition,  # the task's number in the cluster
        "attempt": attempt,
        "executor": address,
        "host": address.rsplit(":", 1)[0],
        "executor_id": executor_id(),
        "gpus": [physical_gpu(a, cvd) for a in gpus],
        "spark_gpus": gpus,  # as Spark named them (before CUDA_VISIBLE_DEVICES)
        "cpus": ctx.cpus(),
        "python": sys.executable,
        "missing": missing,
        "distributed": dist_version,
    }
    if context_note:
        facts["context"] = context_note
    return facts


def _gang_from_task_infos(ctx, me: dict) -> list[dict]:
    """Where every task of the stage runs, without a barrier round.

    ``getTaskInfos()`` knows every task's executor address when the stage starts;
    ``allGather`` costs about a second (Spark polls it once a second), which is only
    worth paying when tasks may share GPUs and must agree who uses which.

    Without a ``BarrierTaskContext`` (:class:`_PlainContext`) the other tasks' executors
    are unknown (``None``): each task then sizes its workers as if no other gang task
    shared its executor or host.
    """
    try:
        addresses = [info.address for info in ctx.getTaskInfos()]
    except Exception:  # noqa: BLE001
        n = getattr(ctx, "n_tasks", None) or me["partition"] + 1
        addresses = [None] * max(n, me["partition"] + 1)
    gang = []
    for partition, address in enumerate(addresses):
        if partition == me["partition"]:
            gang.append(me)
        else:
            host = address.rsplit(":", 1)[0] if address else None
            gang.append({"partition": partition, "executor": address, "host": host,
                         "gpus": [], "missing": [], "unreachable": None})  # fmt: skip
    return gang


class _NoClaim:
    """Where abstract sockets do not exist (not Linux): claims always succeed."""

    def close(self) -> None:
        pass


def _claim(cluster_id: str, gpu: str):
    """A host-wide claim on ``gpu`` for the cluster ``cluster_id``, or None if taken.

    An abstract Unix socket (Linux): its name is unique per network namespace, i.e. per
    host or container, the kernel frees it when the process holding it dies, and it
    leaves no file behind. The task holds it while its worker runs.
    """
    if not sys.platform.startswith("linux"):
        return _NoClaim()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("\0" + f"spark-dask/{cluster_id}/gpu/{gpu}"[:100])
    except OSError:
        sock.close()
        return None
    return sock


def claim_gpus(cluster_id: str, mine: list[dict], spare: list[str], wait: float, name, where: str):
    """Claim the GPU of each of this task's workers; a worker whose GPU another worker of
    the cluster holds takes a free one of ``spare`` (the executor's GPUs, when the gang
    shares them with Spark) and is renamed (``name(gpu)``).

    Retries for ``wait`` seconds (a retired worker's task may still be ending), then
    raises :class:`WorkerStartError`. Returns (workers, claims to close at the end).
    """
    deadline = time.monotonic() + wait
    while True:
        claims, out, missing = [], [], []
        for w in mine:
            options = [w["gpu"]] + [g for g in spare if g != w["gpu"]]
            for gpu in options:
                if any(o["gpu"] == gpu for o in out):
                    continue
                claim = _claim(cluster_id, gpu)
                if claim is not None:
                    claims.append(claim)
                    out.append(w if gpu == w["gpu"] else {**w, "gpu": gpu, "name": name(gpu)})
                    break
            else:
                missing.append(w["gpu"])
        if not missing:
            return out, claims
        for claim in claims:
            claim.close()
        if time.monotonic() >= deadline:
            held = sorted(set(spare) | {w["gpu"] for w in mine})
            raise WorkerStartError(
                f"spark-dask: no free GPU for a Dask worker on {where}: GPUs {held} of this host "
                f"are all used by other workers of this Dask cluster (another gang's). Scale to "
                f"fewer workers, or add executors with GPUs."
            )
        time.sleep(0.2)


def run_task(spec: TaskSpec) -> dict:
    """Body of one barrier task. Returns a status row; raises only when the gang must stop.

    A failed task aborts a barrier result stage for good, so the task raises only for
    errors the driver must report at once (a worker that could not start, an executor
    without ``distributed``). When the cluster closes normally it returns a row with
    the exit codes and log tails of its workers.

    The phases: meet the gang (:func:`_meet`), check this executor's Python
    (:func:`_check_python`) and the other tasks (:func:`_peers_skip`), place the
    workers (:func:`_place`, :func:`_placement_skip`, :func:`_my_workers`), size them
    (:func:`_size`), claim their GPUs (:func:`_claim_workers`), start them
    (:func:`_spawn`) and wait for them (:func:`_supervise`); :func:`_finish` stops what
    is left and fills the row. A task that starts no worker returns its row with a
    ``skipped: ...`` status.
    """
    started = time.time()
    ctx = _context(spec.barrier)
    me, gang, row = _meet(ctx, spec, started)
    where = _where(me)
    task_warnings, has_rmm = _check_python(spec, me, where, row)
    skipped = _peers_skip(spec, me, gang)
    if skipped is None:
        assignment, spare = _place(ctx, spec, me, gang)
        skipped = _placement_skip(spec, me, gang, assignment)
    if skipped:
        row["status"] = skipped
        return row
    mine = _my_workers(spec, me, assignment)
    nthreads, memory = _size(spec, me, gang, assignment, mine, where)
    claims: list = []
    # Each GPU worker holds a host-wide claim on its GPU while the task runs, so that
    # gangs started later (scale-ups, relaunches, plain jobs) never put a second worker
    # of this cluster on it.
    if spec.pinned:
        mine, claims = _claim_workers(spec, me, mine, spare, where)
    local_dirs = (os.environ.get("SPARK_LOCAL_DIRS") or "").split(",")[0]
    # mode 0700; named after the cluster: a forked nanny's cwd says whose it is
    workdir = tempfile.mkdtemp(prefix=f"{spec.cluster_id}-", dir=local_dirs or None)
    procs: list[subprocess.Popen] = []
    logs: list[str] = []
    line = None
    try:
        fields = _worker_fields(spec, workdir, nthreads, memory)
        for w in mine:
            _spawn(spec, me, w, fields, workdir, where, row, task_warnings, has_rmm, procs, logs)
        row["t"]["spawned"] = time.time()
        row["forked"] = [isinstance(p, ForkedNanny) for p in procs]
        # opened after the nannies are forked: a thread of this process makes a fork unsafe
        line = TaskLine(spec, [w["name"] for w in mine], lambda: _line_cut(spec, procs, row))
        _supervise(spec, procs, logs, mine, where)
        row["t"]["exited"] = time.time()
    finally:
        if line is not None:
            line.hang_up(float(spec.kill_grace) + KILL_WAIT)
            if line.error:
                row.setdefault("notes", []).append(f"spark-dask: no line to the driver ({line.error})")
        _finish(spec, procs, claims, mine, logs, row, workdir)
    return row


def _line_cut(spec: TaskSpec, procs: list, row: dict) -> None:
    """The driver cut this task's line (a worker's nanny did not answer), or the
    scheduler closed: the workers get kill-grace to exit by themselves (at a close their
    nannies are ending them), then what is left of their process groups is killed,
    frozen processes too."""
    deadline = time.monotonic() + float(spec.kill_grace)
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    if any(p.poll() is None for p in procs):
        row.setdefault("notes", []).append("spark-dask: the driver cut this task's line: its Dask workers were ended")
        _stop(procs, 0.0)


def _meet(ctx, spec: TaskSpec, started: float) -> tuple[dict, list[dict], dict]:
    """This task's facts (:func:`task_facts`, with its test connection to the scheduler)
    and the gang's (``allGather``, or ``getTaskInfos()`` where no GPU is to be agreed).

    Returns
    -------
    tuple
        (this task's facts, every task's facts by partition, the task's status row with
        the wall-clock marks, epoch seconds, of its start-up, for diagnosing slow starts).
    """
    me = task_facts(ctx, spec)
    me["unreachable"] = reach_error(spec.scheduler_address, float(spec.connect_timeout), spec.tls)
    checked = time.time()
    if spec.gather:
        gang = [json.loads(m) for m in ctx.allGather(json.dumps(me))]
    else:
        gang = _gang_from_task_infos(ctx, me)
    row = {**me, "workers": [], "status": "ok", "t": {"start": started, "checked": checked, "gathered": time.time()}}
    return me, gang, row


def _check_python(spec: TaskSpec, me: dict, where: str, row: dict) -> tuple[list[str], bool]:
    """Checks of this executor's Python, before any worker starts: missing packages, a
    distributed release other than the driver's, RMM options without rmm.

    Environment problems are raised by the task that has them (its executor is named in
    the message); one failed task ends the barrier stage at once. Warnings reach the
    driver through each worker's Spark facts (``SPARK_DASK_FACTS``, published by the
    preload); they are noted in ``row`` too.

    Returns
    -------
    tuple
        (the warnings for every worker of the task, whether ``rmm`` is installed: only
        looked up for dask-cuda's default command).
    """
    if me["missing"]:
        raise WorkerStartError(
            f"spark-dask: the Python on {where} ({me['python']}) cannot import "
            f"{', '.join(me['missing'])}. Install them on every executor, or point PYSPARK_PYTHON "
            f"(spark.pyspark.python) at a Python that has them (Databricks: %pip install in the "
            f"notebook, or a cluster library)."
        )
    task_warnings: list[str] = []
    if spec.requires and spec.distributed_version:
        version = version_problem(spec.distributed_version, me["distributed"], where)
        if version and version[0] == "error":
            raise WorkerStartError(f"spark-dask: {version[1]}")
        if version:
            task_warnings.append(f"spark-dask: {version[1]}")
            row.setdefault("notes", []).append(version[1])
    has_rmm = rmm_installed() if _cuda_default(spec) else False
    if _cuda_default(spec):
        problem = rmm_problem(spec.worker_options, has_rmm, me["python"])
        if problem:
            raise WorkerStartError(f"spark-dask: on {where}: {problem}")
    return task_warnings, has_rmm


def _cuda_default(spec: TaskSpec) -> bool:
    """dask-cuda workers started by the default command (RMM options are ours to set)."""
    return spec.kind == "cuda" and not spec.worker_command


def _peers_skip(spec: TaskSpec, me: dict, gang: list[dict]) -> str | None:
    """The other tasks' problems: a task that lacks packages raised already (this one
    skips); a task that cannot reach the scheduler raises it, every other task skips.

    Returns
    -------
    str or None
        This task's ``skipped: ...`` status, or None.
    """
    if any(t["missing"] for t in gang):
        return "skipped: another task lacks packages"
    cut_off = [t for t in gang if t.get("unreachable")]
    if cut_off:
        t = cut_off[0]
        if t["partition"] == me["partition"]:
            raise WorkerStartError(unreachable_message(_where(t), spec.scheduler_address, t["unreachable"]))
        return "skipped: another task cannot reach the scheduler"
    return None


def _place(ctx, spec: TaskSpec, me: dict, gang: list[dict]) -> tuple[dict, list[str]]:
    """Which workers (names, GPUs) each task of the gang starts.

    Returns
    -------
    tuple
        (every task's workers by partition, the other GPUs of this task's executor a
        worker may take if its own is in use).
    """
    base = spec.name_base
    spare: list[str] = []
    if spec.gpu_mode == "shared":
        if any(t["executor"] is None for t in gang):  # _PlainContext: peers unknown
            ctx.allGather()  # raises: the tasks cannot agree which task takes which GPU
        own = {me["executor"]: me["spark_gpus"]}
        lists = {t["executor"]: executor_gpus(spec, t["executor"], own.get(t["executor"])) for t in gang}
        assignment = assign_shared(gang, lists, base)
        spare = lists[me["executor"]]
    elif spec.gather:
        assignment = assign_workers(gang, spec.pinned, base)
    else:  # every task owns its GPUs: only this task's assignment needs working out
        assignment = {t["partition"]: [None] * spec.workers_per_task for t in gang}
        assignment.update(assign_workers([me], spec.pinned, base))
    return assignment, spare


def _placement_skip(spec: TaskSpec, me: dict, gang: list[dict], assignment: dict) -> str | None:
    """Too few workers placed: the gang's first task raises, the others skip; a task
    left without a worker skips.

    Returns
    -------
    str or None
        This task's ``skipped: ...`` status, or None.
    """
    problem = gang_shortfall(assignment, spec.n_workers, spec.pinned, spec.gpu_mode == "shared")
    if problem:
        if me["partition"] == min(t["partition"] for t in gang):
            raise WorkerStartError("spark-dask: " + problem)
        return "skipped: gang cannot start"
    if not assignment[me["partition"]]:
        return "skipped: no worker for this task"
    return None


def _my_workers(spec: TaskSpec, me: dict, assignment: dict) -> list[dict]:
    """This task's workers (``name``, ``gpu``); renamed when Spark runs the task again
    (an attempt > 0: the earlier attempt's worker may still be known to the scheduler)."""
    mine = assignment[me["partition"]]
    if me["attempt"]:
        mine = [{**w, "name": worker_name(spec.name_base + me["partition"], w["gpu"], me["attempt"])} for w in mine]
    return mine


def _size(spec: TaskSpec, me: dict, gang: list[dict], assignment: dict, mine: list[dict], where: str):
    """Threads and memory limit of each of this task's workers; raises where the limit
    exceeds the host's memory.

    Returns
    -------
    tuple
        (threads per worker, memory limit per worker in bytes).
    """
    same_executor = sum(t["executor"] == me["executor"] for t in gang)
    on_host = [t for t in gang if t["host"] == me["host"]]
    executors_on_host = len({t["executor"] for t in on_host})
    workers_on_host = sum(len(assignment[t["partition"]]) for t in on_host)
    if not spec.barrier:
        # A plain job's task does not know which other workers share its executor:
        # count the executor's task slots as workers on the host (one executor per host).
        executors_on_host = 1
        workers_on_host = max(int(spec.executor_cores) // max(int(me["cpus"]), 1), 1) * len(mine)
    # the same rule as spark-dask info's (plan.gang_threads)
    cores = thread_cores(spec.executor_cores, spec.gpu_mode, spec.barrier, spec.own_executor)
    nthreads = worker_threads(spec.threads_per_worker, me["cpus"], cores, same_executor, len(mine), spec.kind)
    memory = worker_memory(spec.memory_limit, host_memory(), spec.executor_memory, executors_on_host, workers_on_host)
    problem = memory_problem(memory, host_memory())
    if problem:
        raise WorkerStartError(f"spark-dask: on {where}: {problem}")
    return nthreads, memory


def _claim_workers(spec: TaskSpec, me: dict, mine: list[dict], spare: list[str], where: str):
    """:func:`claim_gpus` for this task's workers (renamed after the GPU they get)."""
    base = spec.name_base
    return claim_gpus(
        spec.cluster_id, mine, spare, float(spec.claim_wait),
        lambda gpu: worker_name(base + me["partition"], gpu, me["attempt"]), where,
    )  # fmt: skip


def _worker_fields(spec: TaskSpec, workdir: str, nthreads, memory) -> dict:
    """The fields of the worker command common to this task's workers; writes the
    preload and the TLS credentials into ``workdir``."""
    fields = {
        "python": sys.executable,
        "scheduler_address": spec.scheduler_address,
        "nthreads": nthreads,
        "memory_limit": memory,
        "death_timeout": spec.death_timeout,
        "preload": write_private(os.path.join(workdir, PRELOAD_MODULE + ".py"), spec.preload),
        "preload_module": PRELOAD_MODULE,  # importable: workdir is on the worker's PYTHONPATH
        "tls_ca_file": "",
        "tls_cert": "",
        "tls_key": "",
    }
    if spec.tls:
        fields["tls_ca_file"] = write_private(os.path.join(workdir, "ca.pem"), spec.tls["ca"])
        fields["tls_cert"] = write_private(os.path.join(workdir, "cert.pem"), spec.tls["cert"])
        fields["tls_key"] = write_private(os.path.join(workdir, "key.pem"), spec.tls["key"])
    return fields


def _spawn(spec: TaskSpec, me, w, fields, workdir, where, row, task_warnings, has_rmm, procs, logs) -> None:
    """Start worker ``w`` (a forked nanny or a new process); appends it to ``procs`` and
    its log file to ``logs``."""
    local = os.path.join(workdir, w["name"])
    os.mkdir(local)
    options = spec.worker_options
    worker_warnings = list(task_warnings)
    if _cuda_default(spec):
        options, note, warning = rmm_option(spec.rmm, w["gpu"], options, has_rmm)
        row.setdefault("notes", []).append(f"{w['name']}: {note}")
        if warning:
            worker_warnings.append(f"spark-dask: on {where}, worker {w['name']}: {warning}")
    cmd = worker_command({**fields, "name": w["name"], "local_directory": local}, spec.kind, spec.worker_command,
                         options)  # fmt: skip
    env = _worker_env(spec, me, w, workdir, cmd, worker_warnings)
    log = os.path.join(workdir, w["name"] + ".log")
    fork = _forks(spec, cmd, env)
    with open(log, "wb") as out:
        if fork:
            procs.append(ForkedNanny(cmd, env, local, out.fileno()))
        else:
            procs.append(
                subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=local,
                    start_new_session=True,  # its own process group, killed in finally
                    preexec_fn=_make_death_signal(os.getpid()),
                )
            )
    logs.append(log)


def _worker_env(spec: TaskSpec, me: dict, w: dict, workdir: str, cmd: list[str], warnings: list[str]) -> dict:
    """The environment of worker ``w``: the task's, the Databricks credentials, the
    cluster's ``env``, the preload's inputs (task pid, kill grace, Spark facts) and the
    worker's GPU."""
    env = {**os.environ, **spec.credentials, **spec.env}
    if not spec.worker_command:  # the default command loads PRELOAD_MODULE
        env["PYTHONPATH"] = os.pathsep.join(p for p in (workdir, env.get("PYTHONPATH")) if p)
    if spec.multiprocessing_method and spec.kind == "cpu":
        # how the nanny starts its worker process: "fork" saves a Python start-up
        # and an import of distributed (about 1.5 s per start and per restart)
        env.setdefault("DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD", spec.multiprocessing_method)
    env["SPARK_DASK_TASK_PID"] = str(os.getpid())
    env["SPARK_DASK_KILL_GRACE"] = str(spec.kill_grace)
    env["SPARK_DASK_FACTS"] = json.dumps(
        {
            "executor_id": me["executor_id"],
            "executor": me["executor"],
            "host": me["host"],
            "partition": me["partition"],
            "gang": me["gang"],
            "group": spec.group,
            "task": me["task"],
            "gpu": w["gpu"],
            "cluster": spec.cluster_id,
            "warnings": warnings,
            # the nanny runs the preload: the driver may close it with spark_dask_close
            "fast_close": "--preload-nanny" in cmd,
        }
    )
    env.update(gpu_env(w["gpu"], spec.env))  # the GPU, numbered in PCI order
    return env


def _forks(spec: TaskSpec, cmd: list[str], env: dict) -> bool:
    """Whether this worker's nanny is forked from the task's process (:class:`ForkedNanny`)."""
    fork = forks_nanny(spec.kind, spec.worker_command, cmd, env, spec.fork_nanny) and _can_fork()
    if fork:
        try:  # in the task's process: a Python worker Spark reuses has it already
            import distributed.cli.dask_worker  # noqa: F401
        except Exception:  # noqa: BLE001  (the command below fails with its log)
            fork = False
        fork = fork and _can_fork()  # the import started no Python thread
    return fork


def _supervise(spec: TaskSpec, procs: list, logs: list[str], mine: list[dict], where: str) -> None:
    """Stay alive while the workers run; raise for one that exited before it connected.

    They exit when the scheduler closes them; a thread per worker waits for its exit, so
    the task returns (and the Spark job ends) the moment the last one is gone, not at
    the next poll.
    """
    exits: queue.Queue = queue.Queue()
    for i, p in enumerate(procs):
        threading.Thread(target=lambda i=i, p=p: (p.wait(), exits.put(i)), daemon=True).start()
    pending = len(procs)
    while pending:
        try:
            i = exits.get(timeout=1.0)
        except queue.Empty:
            continue
        pending -= 1
        text = _read(logs[i])
        if procs[i].returncode != 0 and REGISTERED_MARKER not in text:
            raise WorkerStartError(
                f"spark-dask: Dask worker {mine[i]['name']} on {where} exited with "
                f"code {procs[i].returncode} before it connected to "
                f"{spec.scheduler_address}.\ncommand: {' '.join(procs[i].args)}\n"
                f"--- worker log (last lines) ---\n{tail(text)}"
            )


def _error_text(e: BaseException) -> str:
    """``Type: message`` of ``e``, with the errors it was raised from: distributed's
    ``connect`` reports every failure (TLS, refused, resolver) as a timeout, its cause
    says which."""
    parts, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        if not parts or text not in parts[-1]:  # distributed's CommClosedError repeats its cause
            parts.append(text)
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return "; from ".join(parts)


class TaskLine:
    """This task's line to the scheduler (the :data:`TASK_LINE` handler): one connection
    held open while the task's workers run.

    The driver cuts it when a worker's nanny does not answer (frozen: SIGSTOP, a hang
    holding the GIL; it keeps its own connections open), and it closes with the
    scheduler: the task then ends its workers' process groups (``on_cut``), what a frozen
    process cannot do itself (a signal other than SIGKILL waits until it runs again).
    Where no line opens (no ``distributed`` in a custom ``worker_command``'s Python, a
    refused connection) the task goes on without; ``error`` says why.

    Parameters
    ----------
    spec : TaskSpec
        The scheduler's address and TLS credentials, the connect timeout.
    workers : list of str
        The names of this task's workers (what the driver cuts the line for).
    on_cut : callable
        Called from the line's thread once the scheduler side closed the line.
    """

    def __init__(self, spec: TaskSpec, workers: list[str], on_cut):
        self.error: str | None = None
        self._loop = asyncio.new_event_loop()
        self._hung_up = asyncio.Event()  # bound to the line's loop when first awaited there
        self._thread = threading.Thread(target=self._run, args=(spec, workers, on_cut), name="spark-dask-line",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _run(self, spec: TaskSpec, workers: list[str], on_cut) -> None:
        try:
            cut = self._loop.run_until_complete(self._hold(spec, workers))
        except Exception as e:  # noqa: BLE001 - no line: the task runs on without one
            self.error, cut = _error_text(e), False
        finally:  # the resolver's threads too: a Python worker Spark reuses forks nannies only without threads
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()
        if cut:
            on_cut()

    async def _hold(self, spec: TaskSpec, workers: list[str]) -> bool:
        """Open the line and hold it; True when the scheduler side closed it."""
        from distributed.comm import connect
        from distributed.security import Security

        tls = spec.tls
        security = (
            Security(tls_ca_file=tls["ca"], tls_worker_cert=tls["cert"], tls_worker_key=tls["key"],
                     require_encryption=True) if tls else Security()
        )  # fmt: skip
        # distributed's import takes seconds in a Python worker that never had it (dask-cuda's
        # workers are new processes): the task may end, and its cluster close, before the
        # line opens. Hung up before it opened is no failure: the task no longer needs a line.
        if self._hung_up.is_set():
            return False
        opening = asyncio.ensure_future(connect(spec.scheduler_address, timeout=float(spec.connect_timeout),
                                                **security.get_connection_args("worker")))  # fmt: skip
        hung_up = asyncio.ensure_future(self._hung_up.wait())
        await asyncio.wait({opening, hung_up}, return_when=asyncio.FIRST_COMPLETED)
        hung_up.cancel()
        if not opening.done():
            opening.cancel()
            await asyncio.gather(opening, hung_up, return_exceptions=True)
            return False
        await asyncio.gather(hung_up, return_exceptions=True)
        comm = opening.result()  # raises where the line could not open
        try:
            await comm.write({"op": TASK_LINE, "workers": workers, "reply": False})
            read = asyncio.ensure_future(comm.read())
            hung_up = asyncio.ensure_future(self._hung_up.wait())
            await asyncio.wait({read, hung_up}, return_when=asyncio.FIRST_COMPLETED)
            for waiting in (read, hung_up):
                waiting.cancel()
            await asyncio.gather(read, hung_up, return_exceptions=True)  # the closed comm's error retrieved
            return not self._hung_up.is_set()
        finally:
            comm.abort()

    def hang_up(self, wait: float) -> bool:
        """The task ends: close the line without ``on_cut`` and wait at most ``wait``
        seconds for its thread (a Python worker Spark reuses keeps no thread of it);
        True once the thread has ended."""
        try:
            self._loop.call_soon_threadsafe(self._hung_up.set)
        except RuntimeError:  # its loop ended already (the line was cut, or never opened)
            pass
        self._thread.join(wait)
        return not self._thread.is_alive()


def _finish(spec: TaskSpec, procs: list, claims: list, mine: list[dict], logs: list[str], row: dict,
            workdir: str) -> None:  # fmt: skip
    """Stop what is left of the workers, free their GPU claims, put their exit codes and
    log tails in ``row``, keep their whole logs in the cluster's log directory (if it
    has one; why not, in ``row["log_error"]``) and remove the task's directory (key
    material, spill files)."""
    for p in _stop(procs, float(spec.kill_grace)):
        name = next((w["name"] for w, q in zip(mine, procs) if q is p), "?")
        note = (
            f"spark-dask: the process {p.pid} of Dask worker {name} did not end within {KILL_WAIT:g}s "
            "of its SIGKILL (uninterruptible sleep?): the Spark task ends without waiting for it"
        )
        print(note, file=sys.stderr, flush=True)  # the executor's log
        row.setdefault("notes", []).append(note)
    for claim in claims:
        claim.close()
    for w, p, log in zip(mine, procs, logs):
        row["workers"].append(
            {
                "name": w["name"],
                "gpu": w["gpu"],
                "exit_code": p.returncode,
                "log_tail": tail(_read(log), spec.log_lines),
            }
        )
    if spec.log_directory:
        row["log_error"] = save_worker_logs(spec.log_directory, [(w["name"], log) for w, log in zip(mine, logs)])
    shutil.rmtree(workdir, ignore_errors=True)  # key material and spill files
    row["t"]["done"] = time.time()


def _run_or_row(spec: TaskSpec) -> dict:
    """:func:`run_task`; in a plain Spark job a start failure becomes a ``failed`` row.

    A failed task of a plain job is retried by Spark (``spark.task.maxFailures``, 4):
    for a worker that cannot start that only delays the error. A barrier task raises:
    the stage fails at once and is never retried task by task.
    """
    if spec.barrier:
        return run_task(spec)
    try:
        return run_task(spec)
    except WorkerStartError as e:
        return {"partition": 0, "status": "failed", "error": f"WorkerStartError: {e}", "workers": []}


def classic_partition(spec: TaskSpec):
    """``mapPartitions`` function for classic sessions: one JSON row per task."""

    def fn(rows):
        for _ in rows:  # read to the end: Spark reuses a Python worker only then
            pass
        yield json.dumps(_run_or_row(spec))

    return fn


def probe_partition(pause: float):
    """``mapInArrow`` function of the Spark Connect executor probe: where did this task run.

    Spark Connect cannot list executors; a short non-barrier job whose tasks overlap
    in time (each sleeps ``pause`` seconds) lands on every executor with a free slot.
    """

    def fn(batches):
        import pyarrow as pa

        for _ in batches:
            pass
        time.sleep(pause)
        ident = executor_id() or f"{socket.gethostname()}:{os.getppid()}"
        row = json.dumps({"executor_id": ident, "host": socket.gethostname()})
        yield pa.RecordBatch.from_pydict({"info": [row]}, schema=pa.schema([("info", pa.string())]))

    return fn


def arrow_partition(spec: TaskSpec):
    """``mapInArrow`` function for Spark Connect sessions: one JSON row per task."""

    def fn(batches):
        import pyarrow as pa

        for _ in batches:  # read to the end: Spark reuses a Python worker only then
            pass
        row = json.dumps(_run_or_row(spec))
        yield pa.RecordBatch.from_pydict({"status": [row]}, schema=pa.schema([("status", pa.string())]))

    return fn
