"""The command line of each Dask worker and what the task checks around it: the program
and flags (:func:`worker_command`), whether the nanny may be forked, the worker's GPU
environment, the scheduler's endpoint and the messages when it cannot be reached, the
distributed release compared with the driver's. Pure functions, run on the executors.
"""

from __future__ import annotations

import json
import re
import shlex

REGISTERED_MARKER = "Registered to:"  # what distributed's worker logs once it joined


def _release(version: str) -> tuple[int, int] | None:
    """(year, month) of a calendar version such as ``2026.8.0`` or ``2026.8.1rc1``."""
    parts = version.split(".")
    if len(parts) < 2 or not parts[0].isdigit():
        return None
    month = ""
    for ch in parts[1]:
        if not ch.isdigit():
            break
        month += ch
    return (int(parts[0]), int(month)) if month else None


def version_problem(driver: str, executor: str | None, where: str = "the executor") -> tuple[str, str] | None:
    """A ``distributed`` version on an executor that differs from the driver's.

    Returns None when they are equal (or the executor has none: reported as a missing
    package elsewhere), else ``(level, message)``:

    * ``"error"`` when the release differs (year or month of the calendar version,
      ``2026.7.x`` vs ``2026.8.x``): the scheduler runs on the driver and the workers
      on the executors, and distributed's scheduler-worker protocol changes between
      releases without any compatibility promise (Dask itself only warns, after the
      workers joined);
    * ``"warning"`` when only the patch level differs (``2026.8.0`` vs ``2026.8.1``):
      bug-fix releases of one month keep the protocol, so the workers start, but the
      user is told which executor differs and how to align it.

    >>> version_problem("2026.8.0", "2026.8.0") is None
    True
    >>> version_problem("2026.8.0", "2026.7.1")[0]
    'error'
    >>> version_problem("2026.8.0", "2026.8.1")[0]
    'warning'
    """
    if executor is None or driver == executor:
        return None
    fix = (
        f"Install the driver's version on every executor (Databricks: %pip install "
        f"distributed=={driver} in the notebook, which installs it on the executors too; "
        f"elsewhere: the Python environment the executors run), or the executors' version "
        f"on the driver."
    )
    d, e = _release(driver), _release(executor)
    if d is not None and d == e:
        return (
            "warning",
            f"{where} has distributed {executor}, the driver (Dask scheduler) has {driver}: "
            f"only the patch level differs, so the workers start. {fix}",
        )
    return (
        "error",
        f"{where} has distributed {executor}, but the driver, where the Dask scheduler runs, "
        f"has {driver}: the scheduler and its workers must run the same release of "
        f"distributed (its protocol changes between releases). {fix}",
    )


def option_flags(options: dict | None) -> list[str]:
    """Turn ``worker_options`` into command-line flags.

    ``{"rmm_pool_size": "10GB", "no_nanny": True, "resources": {"GPU": 1}}`` becomes
    ``--rmm-pool-size 10GB --no-nanny --resources GPU=1``; a list repeats the flag.
    ``False`` gives ``--no-<flag>``; on the driver,
    :func:`spark_dask.worker_flags.check_worker_options` has already turned ``False``
    into the program's own off-switch (``{"enable_cudf_spill": False}`` →
    ``{"disable_cudf_spill": True}``).
    """
    out: list[str] = []
    for key, value in (options or {}).items():
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False:
            out.append("--no-" + flag[2:])
        elif value is None:
            continue
        elif isinstance(value, (list, tuple)):
            for v in value:
                out += [flag, str(v)]
        elif isinstance(value, dict):
            out += [flag, " ".join(f"{k}={v}" for k, v in value.items())]
        else:
            out += [flag, str(value)]
    return out


def worker_command(fields: dict, kind: str, template=None, options: dict | None = None) -> list[str]:
    """The command line that starts one Dask worker.

    ``fields`` fills the placeholders (``python``, ``scheduler_address``, ``name``,
    ``nthreads``, ``memory_limit``, ``local_directory``, ``death_timeout``, ``preload``,
    ``tls_ca_file``, ``tls_cert``, ``tls_key``). A ``template`` (string or list)
    replaces the default command; ``options`` are appended as flags in both cases.
    The interpreter is always the Spark task's own (``sys.executable``), so
    notebook-scoped packages are the ones the worker imports.

    The default command loads the preload by module name (``preload_module``, its
    directory on the worker's ``PYTHONPATH``) where the field is given: a preload *file*
    makes distributed call ``importlib.invalidate_caches()``, which on Python 3.11 reads
    again the directory of every zip on ``sys.path``; a Spark executor's Python has
    PySpark's zips and ``spark-core``'s jar (6,000 entries) there, and the nanny and the
    worker load the preload three times (what it cost each worker's start:
    docs/benchmarks.md, "What the figures mean"). A template's
    ``{preload}`` is the file.

    A CPU worker runs under a nanny unless ``options`` says ``no_nanny: True`` (then
    neither ``--nanny`` nor ``--preload-nanny`` is given, never both switches).

    The worker's own dashboard is off (``--no-dashboard``) unless ``options`` mention
    it (``dashboard``, ``no_dashboard``, ``dashboard_address``): it costs each worker an
    import of bokeh at start, on the critical path of start-up (docs/benchmarks.md, "What
    the figures mean"), and Databricks' driver proxy reaches only the driver,
    never an executor's port. The scheduler's dashboard shows every worker.
    """
    if template:
        parts = shlex.split(template) if isinstance(template, str) else list(template)
        cmd = [str(p).format(**fields) for p in parts]
        return cmd + option_flags(options)
    options = dict(options or {})
    preload = fields.get("preload_module") or fields["preload"]
    if kind == "cuda":
        cmd = [fields["python"], "-m", "dask", "cuda", "worker"]
    else:
        cmd = [fields["python"], "-m", "distributed.cli.dask_worker"]
    cmd += [
        fields["scheduler_address"],
        "--name",
        fields["name"],
        "--nthreads",
        str(fields["nthreads"]),
        "--memory-limit",
        str(fields["memory_limit"]),
        "--local-directory",
        fields["local_directory"],
        "--death-timeout",
        str(fields["death_timeout"]),
        "--preload",
        preload,
    ]
    if kind == "cpu":
        no_nanny = options.pop("no_nanny", None) is True
        no_nanny = options.pop("nanny", None) is False or no_nanny
        if no_nanny:
            cmd += ["--nworkers", "1", "--no-nanny"]
        else:
            cmd += ["--nworkers", "1", "--nanny", "--preload-nanny", preload]
    if not {"dashboard", "no_dashboard", "dashboard_address"} & set(options):
        cmd.append("--no-dashboard")
    if fields.get("tls_ca_file"):
        cmd += [
            "--tls-ca-file",
            fields["tls_ca_file"],
            "--tls-cert",
            fields["tls_cert"],
            "--tls-key",
            fields["tls_key"],
        ]
    return cmd + option_flags(options)


def forks_nanny(kind: str, template, cmd: list[str], env: dict, enabled: bool = True) -> bool:
    """Whether the Spark task forks this worker's nanny from its own Python process
    rather than starting ``python -m distributed.cli.dask_worker``.

    Only for what a fork reproduces exactly: a CPU worker with the default command and a
    nanny, whose worker process is itself forked (``multiprocessing-method`` ``fork``,
    as the worker's environment says). A ``spawn``/``forkserver`` worker process would
    re-import the parent's ``__main__`` (PySpark's daemon); dask-cuda workers and
    command templates run their own programs.

    >>> cmd = ["python", "-m", "distributed.cli.dask_worker", "tls://h:1", "--nanny"]
    >>> fork = {"DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD": "fork"}
    >>> forks_nanny("cpu", None, cmd, fork)
    True
    >>> forks_nanny("cpu", None, cmd, {"DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD": "spawn"})
    False
    >>> forks_nanny("cpu", None, cmd[:-1] + ["--no-nanny"], fork), forks_nanny("cuda", None, cmd, fork)
    (False, False)
    >>> forks_nanny("cpu", "{python} -m mypkg.worker", cmd, fork), forks_nanny("cpu", None, cmd, fork, False)
    (False, False)
    """
    return bool(
        enabled
        and kind == "cpu"
        and not template
        and cmd[1:3] == ["-m", "distributed.cli.dask_worker"]
        and "--nanny" in cmd
        and env.get("DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD") == "fork"
    )


def process_cluster(environ: dict, cwd: str | None) -> str | None:
    """The spark-dask cluster (its tag) a local process belongs to, from what ``ps``
    and ``/proc`` show of it: ``SPARK_DASK_FACTS`` in the environment a started worker
    process got; for a nanny forked from the Spark task (and the worker it forked),
    whose ``/proc/<pid>/environ`` is still the task's, its working directory, inside
    the task's ``<tag>-*`` work directory. For tests, benchmarks and admins' scripts.

    >>> process_cluster({"SPARK_DASK_FACTS": '{"cluster": "spark-dask-0a1b2c3d4e"}'}, "/")
    'spark-dask-0a1b2c3d4e'
    >>> process_cluster({}, "/local/spark-dask-0a1b2c3d4e-k2j4h1/spark-1")
    'spark-dask-0a1b2c3d4e'
    >>> process_cluster({}, "/home/me"), process_cluster({}, None)
    (None, None)
    """
    facts = environ.get("SPARK_DASK_FACTS")
    if facts:
        try:
            return json.loads(facts).get("cluster")
        except ValueError:
            return None
    match = re.search(r"/(spark-dask-[0-9a-f]{10})-[^/]+/[^/]+/?$", cwd or "")
    return match.group(1) if match else None


def scheduler_endpoint(address: str) -> tuple[str, int]:
    """(host, port) of a Dask address such as ``tls://10.0.0.5:8786`` or ``tcp://[::1]:8786``.

    What a Spark task connects to when it checks that the scheduler is reachable
    before it starts any worker.

    >>> scheduler_endpoint("tls://10.0.0.5:8786")
    ('10.0.0.5', 8786)
    >>> scheduler_endpoint("tcp://[::1]:40001")
    ('::1', 40001)
    """
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"not a host:port Dask address: {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def unreachable_message(where: str, address: str, error: str) -> str:
    """The error a Spark task raises when it cannot open a TCP connection to the scheduler."""
    return (
        f"spark-dask: {where} cannot reach the Dask scheduler at {address}: {error}. "
        "The scheduler runs where the Python client runs (the Spark driver for classic "
        "sessions, this Python process for Spark Connect sessions), and every executor must "
        "be able to open TCP connections to it. Set scheduler_host=... to an address of "
        "this machine that the executors can route to, allow the port through the "
        "firewall, or run the client on the cluster (e.g. a notebook attached to it)."
    )


def tail(text: str, lines: int = 30) -> str:
    """The last ``lines`` lines of a log."""
    return "\n".join(text.rstrip().splitlines()[-lines:])
