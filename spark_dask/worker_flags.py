"""The worker programs' command lines, checked on the driver before anything starts,
and the warnings the Spark tasks send back through their workers.

``worker_options`` become command-line flags of ``python -m distributed.cli.dask_worker``
(CPU workers) or ``python -m dask cuda worker`` (GPU workers). Both programs accept
unknown options silently at parse time (``ignore_unknown_options``) and then fail
inside the worker with a misleading click error about ``--preload`` arguments, so
:func:`check_worker_options` checks every option against the program that will run it,
on the driver, and says what is wrong before a Spark job is submitted.

The options of ``dask worker`` are read from its click command (distributed is
installed on the driver). Those of ``dask cuda worker`` are read from dask-cuda's
click command when dask-cuda can be imported here, else from :data:`DASK_CUDA_OPTIONS`,
recorded from dask-cuda's source.

Driver side only: this module is not shipped to the executors.
"""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

from distributed.diagnostics.plugin import SchedulerPlugin

from spark_dask.errors import PlanError


@dataclass(frozen=True)
class WorkerFlag:
    """One option (command-line flag) of a worker program.

    ``name`` is the flag without dashes, ``_`` for ``-`` (``rmm_pool_size``). A
    ``switch`` takes no value; ``off`` is the name of its off-switch (``no_dashboard``,
    ``disable_cudf_spill``) or None. ``multiple`` options may repeat. ``kind`` is
    ``"str"`` or ``"int"``; ``choices`` the allowed values, if any. ``since`` /
    ``until``: the first / last dask-cuda release that has it (None: all of 24.08-26.10).
    """

    name: str
    switch: bool = False
    off: str | None = None
    multiple: bool = False
    kind: str = "str"
    choices: tuple = ()
    since: str | None = None
    until: str | None = None


def _o(name, **kw) -> WorkerFlag:
    return WorkerFlag(name, **kw)


def _switch(name, off=None, **kw) -> WorkerFlag:
    return WorkerFlag(name, switch=True, off=off, **kw)


# `dask cuda worker`, from dask_cuda/cli.py of rapidsai/dask-cuda, tag v26.08.00
# (commit 2339d7d84a0e7cac57555b6d225027392191aaae), with the differences of the
# releases 24.08.02 ... 26.08.00 and main (26.10a, 63a1ea9) recorded in since/until.
DASK_CUDA_VERSION = "26.08.00"
DASK_CUDA_OPTIONS: dict[str, WorkerFlag] = {
    o.name: o
    for o in [
        _o("host"),
        _o("worker_port", since="26.06"),
        _o("listen_address", since="26.04"),
        _o("contact_address", since="26.04"),
        _o("nthreads", kind="int"),
        _o("name"),
        _o("memory_limit"),
        _o("device_memory_limit"),
        _switch("enable_cudf_spill", "disable_cudf_spill"),
        _o("cudf_spill_stats", kind="int"),
        _o("rmm_pool_size"),
        _o("rmm_maximum_pool_size"),
        _switch("rmm_managed_memory", "no_rmm_managed_memory"),
        _switch("rmm_async", "no_rmm_async"),
        _o("set_rmm_allocator_for_libs", since="24.12"),  # comma-separated: cupy, torch
        _o("rmm_release_threshold"),
        _o("rmm_log_directory"),
        _switch("rmm_track_allocations", "no_rmm_track_allocations"),
        _o("pid_file"),
        _o("resources"),
        _switch("dashboard", "no_dashboard"),
        _o("dashboard_address"),
        _o("local_directory"),
        _o("scheduler_file"),
        _o("protocol"),
        _o("interface"),
        _o("preload", multiple=True),
        _o("death_timeout"),
        _o("dashboard_prefix"),
        _o("tls_ca_file"),
        _o("tls_cert"),
        _o("tls_key"),
        _switch("enable_tcp_over_ucx", "disable_tcp_over_ucx"),
        _switch("enable_infiniband", "disable_infiniband"),
        _switch("enable_nvlink", "disable_nvlink"),
        _switch("enable_rdmacm", "disable_rdmacm"),
        _o("worker_class"),
        _o("pre_import"),
        _o("multiprocessing_method", choices=("spawn", "fork", "forkserver")),
        # removed in 26.06
        _switch("enable_jit_unspill", "disable_jit_unspill", until="26.04"),
        _switch("shared_filesystem", "no_shared_filesystem", until="26.04"),
    ]
}

# What the launcher itself passes (or decides); a user value would break it or has a
# keyword of its own. Refused with the reason and the way to get the same effect.
LAUNCHER_OPTIONS = {
    "name": "spark-dask names each worker spark-<task>[-gpu<id>], which is how it maps workers to their Spark tasks",
    "nthreads": "use threads_per_worker (spark-dask.threads-per-worker)",
    "memory_limit": "use memory_limit (spark-dask.memory-limit)",
    "local_directory": "each worker gets a private directory under the executor's "
    "SPARK_LOCAL_DIRS that is removed with the task (it holds the cluster's TLS key)",
    "death_timeout": "set spark-dask.death-timeout in dask.config",
    "tls_ca_file": "spark-dask makes per-cluster TLS credentials (tls=False for plain TCP)",
    "tls_cert": "spark-dask makes per-cluster TLS credentials (tls=False for plain TCP)",
    "tls_key": "spark-dask makes per-cluster TLS credentials (tls=False for plain TCP)",
    "scheduler_file": "the workers are given the scheduler's address",
    "protocol": "the scheduler's address sets it (tls, or tcp with tls=False); another "
    "protocol such as ucx would carry worker-to-worker traffic outside the cluster's TLS",
    "version": "it prints the version and exits, so no worker would start",
}
CPU_LAUNCHER_OPTIONS = {
    "nworkers": "spark-dask starts one worker per Spark task (or per GPU); use n_workers",
}


def _version(dist: str) -> str | None:
    try:
        import importlib.metadata

        return importlib.metadata.version(dist)
    except Exception:  # noqa: BLE001
        return None


def _from_click(command) -> dict[str, WorkerFlag]:
    """The options of a click command, by name (``--rmm-pool-size`` -> ``rmm_pool_size``)."""
    import click

    out: dict[str, WorkerFlag] = {}
    for p in command.params:
        if not isinstance(p, click.Option) or not p.opts[0].startswith("--"):
            continue
        name = p.opts[0][2:].replace("-", "_")
        off = p.secondary_opts[0][2:].replace("-", "_") if p.secondary_opts else None
        choices = tuple(p.type.choices) if isinstance(p.type, click.Choice) else ()
        kind = "int" if isinstance(p.type, click.types.IntParamType) else "str"
        out[name] = WorkerFlag(
            name, switch=bool(p.is_flag), off=off, multiple=bool(p.multiple), kind=kind, choices=choices
        )
    return out


def program_options(kind: str) -> tuple[dict[str, WorkerFlag], str]:
    """The options of the worker program for ``kind`` ("cpu" or "cuda"), and its name
    for messages (with the version the options were read from)."""
    if kind == "cuda":
        if importlib.util.find_spec("dask_cuda") is not None:
            try:
                from dask_cuda.cli import worker

                return _from_click(worker), f"`dask cuda worker` (dask-cuda {_version('dask-cuda')})"
            except Exception:  # dask-cuda that cannot load here (no CUDA libraries): the table  # noqa: BLE001
                pass
        return (
            dict(DASK_CUDA_OPTIONS),
            f"`dask cuda worker` (options of dask-cuda {DASK_CUDA_VERSION}; dask-cuda is not importable here)",
        )
    from distributed.cli.dask_worker import main

    return _from_click(main), f"`python -m distributed.cli.dask_worker` (distributed {_version('distributed')})"


def _lookup(table: dict[str, WorkerFlag], key: str) -> tuple[WorkerFlag, bool] | None:
    """(option, polarity) for a key that names an option or its off-switch."""
    if key in table:
        return table[key], True
    for o in table.values():
        if o.off == key:
            return o, False
    return None


def _all_names(table: dict[str, WorkerFlag]) -> list[str]:
    return sorted(set(table) | {o.off for o in table.values() if o.off})


def _unknown(key: str, kind: str, table: dict[str, WorkerFlag], program: str) -> PlanError:
    hint = ""
    other = "cpu" if kind == "cuda" else "cuda"
    other_names = set(DASK_CUDA_OPTIONS) | {o.off for o in DASK_CUDA_OPTIONS.values() if o.off}
    if other == "cpu":
        try:
            other_names = set(_all_names(program_options("cpu")[0]))
        except Exception:  # pragma: no cover - distributed's CLI always imports here  # noqa: BLE001
            other_names = set()
    if key in other_names:
        hint += (
            " It is an option of distributed's `dask worker`, which `dask cuda worker` does not have."
            if kind == "cuda"
            else " It is an option of `dask cuda worker`; this cluster starts plain Dask workers "
            "(worker='cpu', or the Spark tasks get no GPUs)."
        )
    close = difflib.get_close_matches(key, _all_names(table), n=1, cutoff=0.6)
    if close:
        hint += f" Did you mean {close[0]!r}?"
    return PlanError(f"spark-dask: worker_options[{key!r}]: {program} has no option --{key.replace('_', '-')}.{hint}")


def _check_value(key: str, option: WorkerFlag, value, program: str) -> None:
    flag = "--" + key.replace("_", "-")

    def bad(what: str) -> PlanError:
        return PlanError(f"spark-dask: worker_options[{key!r}]={value!r}: {flag} of {program} {what}")

    if option.switch:
        if not isinstance(value, bool):
            raise bad("is a switch: give True or False")
        return
    if isinstance(value, bool):
        raise bad("takes a value, not True/False")
    if isinstance(value, dict):
        if key != "resources":
            raise bad("takes one value, not a dict (only resources takes a dict: {'GPU': 1})")
        return
    values = value if isinstance(value, (list, tuple)) else [value]
    if isinstance(value, (list, tuple)) and not option.multiple:
        raise bad("takes one value, not a list")
    for v in values:
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise bad(f"takes text or numbers, not {type(v).__name__}")
        if option.kind == "int":
            try:
                int(str(v))
            except ValueError:
                raise bad("takes an integer") from None
        if option.choices and str(v) not in option.choices:
            raise bad(f"takes one of {', '.join(option.choices)}")


def check_worker_options(options: dict | None, kind: str, template=None) -> dict:
    """Check ``worker_options`` against the worker program; the options to ship.

    Parameters
    ----------
    options : dict or None
        The user's options, keys with ``_`` or ``-`` (``rmm_pool_size``, ``rmm-pool-size``).
    kind : {"cpu", "cuda"}
        Which program runs them (the plan's worker kind).
    template : str or list, optional
        A custom ``worker_command``: its program is unknown, nothing is checked.

    Returns
    -------
    dict
        Keys spelled with ``_``; ``None`` values dropped; a switch given ``False``
        becomes its program's off-switch (``{"enable_cudf_spill": False}`` ->
        ``{"disable_cudf_spill": True}``), so :func:`spark_dask.executor.command.option_flags`
        writes a flag the program has.

    Raises
    ------
    PlanError
        An option the program does not have (with a close match when there is one),
        one the launcher sets itself, or a value of the wrong shape. It names the
        option and the program.
    """
    if template:
        return dict(options or {})
    table, program = program_options(kind)
    launcher = dict(LAUNCHER_OPTIONS, **(CPU_LAUNCHER_OPTIONS if kind == "cpu" else {}))
    out: dict = {}
    for raw, value in (options or {}).items():
        key = str(raw).strip().lstrip("-").replace("-", "_")
        found = _lookup(table, key)
        if found is None:
            raise _unknown(key, kind, table, program)
        option, polarity = found
        if option.name in launcher:
            raise PlanError(
                f"spark-dask: worker_options[{raw!r}]: spark-dask sets --{option.name.replace('_', '-')} "
                f"of {program} itself: {launcher[option.name].rstrip('.')}."
            )
        if value is None:
            continue
        _check_value(key, option, value, program)
        if option.switch:
            if value == polarity:
                out[option.name] = True
            elif option.off:
                out[option.off] = True
            # else: a switch without an off form is off when it is absent
            continue
        out[option.name] = list(value) if isinstance(value, tuple) else value
    if kind == "cpu" and out.get("nanny") is True:
        del out["nanny"]  # the launcher's own default
    return out


class TaskWarnings(SchedulerPlugin):
    """Hands the warnings a Spark task attached to its workers to ``report``, once each.

    A barrier task cannot talk to the driver while it runs; the warnings travel in the
    worker's Spark facts (``SPARK_DASK_FACTS``, published by the spark-dask preload as
    ``scheduler_info()["workers"][...]["spark"]``), and this plugin of the in-process
    scheduler sees them when the worker registers, before ``start()`` returns.
    """

    name = "spark-dask-task-warnings"

    def __init__(self, report: Callable[[str], None]):
        self.report = report
        self.seen: set[str] = set()

    def add_worker(self, scheduler, worker):
        ws = scheduler.workers.get(worker)
        facts = ws.extra.get("spark") if ws is not None else None
        for msg in (facts or {}).get("warnings") or []:
            if msg not in self.seen:
                self.seen.add(msg)
                self.report(msg)


__all__ = ["DASK_CUDA_OPTIONS", "TaskWarnings", "WorkerFlag", "check_worker_options", "program_options"]
