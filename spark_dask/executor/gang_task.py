"""What runs inside each Spark barrier task: meet the gang, place, size and start this
task's Dask workers, keep them alive while the cluster runs, and make sure they cannot
outlive the task; and the partition functions Spark runs (the gang's, classic and Spark
Connect, and the Spark Connect executor probe's).

The driver ships this module to the executors by value together with what it uses of
the package (:data:`spark_dask.executor.SHIPPED`: the task's context and facts,
:mod:`~spark_dask.executor.task_context`; the workers' processes,
:mod:`~spark_dask.executor.processes`; the line to the scheduler,
:mod:`~spark_dask.executor.task_line`; the GPU claims,
:mod:`~spark_dask.executor.gpu_claims`; and the task specification,
:class:`spark_dask.executor.task_spec.TaskSpec`, which carries the workers' preload,
:mod:`spark_dask.executor.preload`, as text), so the executors need ``distributed`` (and
``dask-cuda`` for GPU workers) but not ``spark_dask`` itself, and driver and executors
never disagree on its version.

The same :func:`run_task` serves classic sessions (``rdd.barrier().mapPartitions``)
and Spark Connect sessions (``mapInArrow(..., barrier=True)``).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from spark_dask.errors import WorkerStartError
from spark_dask.executor.command import (
    REGISTERED_MARKER,
    forks_nanny,
    tail,
    unreachable_message,
    version_problem,
    worker_command,
)
from spark_dask.executor.gpu_claims import claim_gpus, executor_gpus, host_shared_gpus
from spark_dask.executor.logs import save_worker_logs
from spark_dask.executor.placement import (
    assign_shared,
    assign_workers,
    gang_shortfall,
    gpu_env,
    worker_name,
)
from spark_dask.executor.processes import (
    KILL_WAIT,
    ForkedNanny,
    can_fork,
    freeze_heap,
    make_death_signal,
    read_text,
    stop_workers,
    write_private,
)
from spark_dask.executor.rmm import rmm_installed, rmm_option, rmm_problem
from spark_dask.executor.sizing import (
    memory_problem,
    thread_cores,
    worker_memory,
    worker_threads,
)
from spark_dask.executor.task_context import (
    barrier_context,
    executor_id,
    gang_from_task_infos,
    reach_error,
    task_facts,
)
from spark_dask.executor.task_line import TaskLine, line_cut
from spark_dask.executor.task_spec import TaskSpec

# The module name under which each task writes the workers' preload (the text of
# spark_dask.executor.preload, carried in TaskSpec.preload) into its workers' directory.
PRELOAD_MODULE = "spark_dask_preload"


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


def _where(t: dict) -> str:
    return f"executor {t['executor_id'] or t['executor']} (host {t['host']}, partition {t['partition']})"


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
    ctx = barrier_context(spec.barrier)
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
        line = TaskLine(spec, [w["name"] for w in mine], lambda: line_cut(spec, procs, row))
        freeze_heap()  # distributed is imported now: spares the gc.collect() after the task
        _supervise(spec, procs, logs, mine, where)
        row["t"]["exited"] = time.time()
    finally:
        if line is not None:
            line.hang_up(float(spec.kill_grace) + KILL_WAIT)
            if line.error:
                row.setdefault("notes", []).append(f"spark-dask: no line to the driver ({line.error})")
        _finish(spec, procs, claims, mine, logs, row, workdir)
    return row


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
        gang = gang_from_task_infos(ctx, me)
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
        # what tells this task's executor apart from the others on its host: its GPU share
        # (fractional amounts), its id (the others' are unknown without allGather)
        own = {me["executor"]: me["spark_gpus"]}
        ids = {me["executor"]: me["executor_id"]}
        lists = {e: executor_gpus(spec, e, own.get(e), ids.get(e)) for e in {t["executor"] for t in gang}}
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
    # every executor JVM of the host takes its memory, a task of the gang on it or not
    # (spark-dask info counts them alike); the gang's own where the driver could not tell
    executors_on_host = max(len({t["executor"] for t in on_host}), spec.executors_by_host.get(me["host"], 0))
    workers_on_host = sum(len(assignment[t["partition"]]) for t in on_host)
    in_executor = sum(len(assignment[t["partition"]]) for t in gang if t["executor"] == me["executor"])
    if not spec.barrier:
        # A plain job's task does not know which other workers share its executor:
        # count the executor's task slots as workers on the host (one executor per host).
        executors_on_host = 1
        workers_on_host = max(int(spec.executor_cores) // max(int(me["cpus"]), 1), 1) * len(mine)
        in_executor = workers_on_host
    # the same rule as spark-dask info's (plan.gang_threads)
    cores = thread_cores(spec.executor_cores, spec.gpu_mode, spec.barrier, spec.own_executor)
    nthreads = worker_threads(spec.threads_per_worker, me["cpus"], cores, same_executor, len(mine), spec.kind)
    memory = worker_memory(
        spec.memory_limit,
        host_memory(),
        spec.executor_memory,
        executors_on_host,
        workers_on_host,
        spec.container_room,
        in_executor,
    )
    problem = memory_problem(memory, host_memory())
    if problem:
        raise WorkerStartError(f"spark-dask: on {where}: {problem}")
    return nthreads, memory


def _claim_workers(spec: TaskSpec, me: dict, mine: list[dict], spare: list[str], where: str):
    """:func:`claim_gpus` for this task's workers (renamed after the GPU they get)."""
    base = spec.name_base
    return claim_gpus(
        spec.cluster_id,
        mine,
        spare,
        float(spec.claim_wait),
        lambda gpu: worker_name(base + me["partition"], gpu, me["attempt"]),
        where,
        host_shared_gpus(spec, me["host"]),
    )


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
    cmd = worker_command(
        {**fields, "name": w["name"], "local_directory": local}, spec.kind, spec.worker_command, options
    )
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
                    preexec_fn=make_death_signal(os.getpid()),
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
    fork = forks_nanny(spec.kind, spec.worker_command, cmd, env, spec.fork_nanny) and can_fork()
    if fork:
        try:  # in the task's process: a Python worker Spark reuses has it already
            import distributed.cli.dask_worker  # noqa: F401
        except Exception:  # noqa: BLE001  (the command below fails with its log)
            fork = False
        fork = fork and can_fork()  # the import started no Python thread
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
        text = read_text(logs[i])
        if procs[i].returncode != 0 and REGISTERED_MARKER not in text:
            raise WorkerStartError(
                f"spark-dask: Dask worker {mine[i]['name']} on {where} exited with "
                f"code {procs[i].returncode} before it connected to "
                f"{spec.scheduler_address}.\ncommand: {' '.join(procs[i].args)}\n"
                f"--- worker log (last lines) ---\n{tail(text)}"
            )


def _finish(
    spec: TaskSpec, procs: list, claims: list, mine: list[dict], logs: list[str], row: dict, workdir: str
) -> None:
    """Stop what is left of the workers, free their GPU claims, put their exit codes and
    log tails in ``row``, keep their whole logs in the cluster's log directory (if it
    has one; why not, in ``row["log_error"]``) and remove the task's directory (key
    material, spill files)."""
    for p in stop_workers(procs, float(spec.kill_grace)):
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
                "log_tail": tail(read_text(log), spec.log_lines),
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
