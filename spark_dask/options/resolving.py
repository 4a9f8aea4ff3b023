"""One cluster's options from the table (:mod:`spark_dask.options.table`): each keyword
argument or its ``spark-dask.*`` config value, checked (:func:`resolve` makes a
:class:`ClusterOptions`); the checks of a name and of unknown keywords and config keys."""

from __future__ import annotations

import difflib
import functools
import importlib.util
import inspect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from dask.utils import parse_timedelta

from spark_dask.errors import PlanError, UnknownKeywordError
from spark_dask.options import config
from spark_dask.options.groups import check_groups
from spark_dask.options.table import config_options, keyword_options
from spark_dask.plan import check_barrier, check_gpu_mode, check_memory_limit


@dataclass(frozen=True)
class ClusterOptions:
    """One cluster's options as :func:`resolve` makes them: each keyword argument, or its
    ``spark-dask.*`` config value, checked; durations in seconds, ``memory_limit`` in
    bytes (or ``"auto"``). One field per config option of :data:`OPTIONS`, in the
    table's order, named as the keyword (``.`` and ``-`` as ``_``):
    ``tests/test_options.py`` holds the class and the table together. Frozen: a changed
    value is a new object (:func:`dataclasses.replace`)."""

    n_workers: int | None
    worker: str
    threads_per_worker: int | None
    memory_limit: int | str
    worker_options: dict | None
    worker_command: str | list[str] | None
    worker_groups: dict
    multiprocessing_method: str | None
    fork_nanny: bool
    task_profile: str | bool
    barrier: str | bool
    timeout: float
    name: str | None
    idle_timeout: float | None
    executor_wait: float
    slot_wait: float
    close_timeout: float
    death_timeout: float
    kill_grace: float
    relaunch_attempts: int
    lost_worker_grace: float
    no_workers_timeout: float
    drain_timeout: float
    close_on_sigterm: str | bool
    tls: bool
    require_encryption: bool
    scheduler_host: str | None
    state_dir: str | bool | None
    databricks_credentials: bool
    connect_timeout: float
    dashboard: bool
    log_directory: str | os.PathLike | None
    dashboard_prefix: str | bool | None
    progress: bool
    silence_logs: str | bool
    mlflow: str | bool
    mlflow_interval: float
    gpu_mode: str
    rapids_rmm_pool_size: str | int | bool | None
    rapids_rmm_reserve: str | int
    rapids_rmm_fraction: float
    rapids_spill_fraction: float | bool | None
    rapids_dask_fraction: float


# --------------------------------------------------------------------------------------
# one cluster's options: resolved and checked
# --------------------------------------------------------------------------------------


def resolve(**given) -> ClusterOptions:
    """The options of one cluster: each keyword argument (None: not given) or its
    ``spark-dask.*`` config value, durations in seconds, sizes in bytes, every value
    checked (:class:`~spark_dask.errors.PlanError` says what is wrong). The one place an
    option is resolved: ``SparkCluster`` and ``spark-dask info`` both call it.

    A ``spark-dask.*`` config key that is no option (a misspelling) is warned about
    once per process, with the closest option's key (:func:`unknown_keys`)."""
    warn_unknown_keys()
    opts = {k: config.get(k.replace("_", "-"), v) for k, v in given.items()}
    for o in config_options():  # the keys without a keyword argument; durations in seconds
        if not o.keyword:
            value = config.get(o.key)
            opts[o.name.replace(".", "_")] = parse_timedelta(value) if o.time else value
    try:
        opts["timeout"] = parse_timedelta(opts["timeout"])
    except (ValueError, KeyError, TypeError) as e:
        raise PlanError(
            f"spark-dask: timeout must be seconds or a time string like '3m', got {given['timeout']!r}"
        ) from e
    tpw = opts["threads_per_worker"]
    if tpw is not None and (isinstance(tpw, bool) or not isinstance(tpw, int) or tpw < 1):
        raise PlanError(f"spark-dask: threads_per_worker must be a positive integer, got {tpw!r}")
    opts["memory_limit"] = check_memory_limit(opts["memory_limit"])
    opts["worker_groups"] = check_groups(opts["worker_groups"])
    if opts["worker_options"] is not None and not isinstance(opts["worker_options"], dict):
        raise PlanError(f"spark-dask: worker_options must be a dict, got {type(opts['worker_options']).__name__}")
    ra = opts["relaunch_attempts"]
    if isinstance(ra, bool) or not isinstance(ra, int) or ra < 0:
        raise PlanError(f"spark-dask: relaunch_attempts must be an integer >= 0, got {ra!r}")
    if opts["task_profile"] not in ("auto", True, False):
        raise PlanError(f"spark-dask: task_profile must be 'auto', True or False, got {opts['task_profile']!r}")
    if opts["name"] is not None:
        check_name(opts["name"])
    opts["idle_timeout"] = check_idle_timeout(opts["idle_timeout"])
    if opts["log_directory"] is not None and not isinstance(opts["log_directory"], (str, os.PathLike)):
        raise PlanError(f"spark-dask: log_directory must be a path, got {type(opts['log_directory']).__name__}")
    if not isinstance(opts["databricks_credentials"], bool):
        raise PlanError(
            f"spark-dask: databricks_credentials must be True or False, got {opts['databricks_credentials']!r}"
        )
    check_gpu_mode(opts["gpu_mode"])
    check_barrier(opts["barrier"], False)
    check_mlflow(opts["mlflow"], opts["mlflow_interval"])
    return ClusterOptions(**opts)


def check_mlflow(mlflow, interval) -> None:
    """Refuse an ``mlflow`` value that is none of ``auto``, True, False, ``True`` where
    MLflow is not installed (looked up, not imported: an import takes seconds), and an
    ``mlflow-interval`` that is not a positive duration.

    >>> check_mlflow("yes", 5)
    Traceback (most recent call last):
    ...
    spark_dask.errors.PlanError: spark-dask: mlflow must be 'auto', True or False, got 'yes'
    """
    if mlflow not in ("auto", True, False):
        raise PlanError(f"spark-dask: mlflow must be 'auto', True or False, got {mlflow!r}")
    if mlflow is True and importlib.util.find_spec("mlflow") is None:
        raise PlanError(
            "spark-dask: mlflow=True, but MLflow is not installed in this Python: "
            "pip install 'spark-dask[mlflow]' (or mlflow=False)"
        )
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
        raise PlanError(f"spark-dask: mlflow-interval must be a positive duration such as '5s', got {interval!r}")


def check_idle_timeout(value) -> float | None:
    """``idle_timeout`` in seconds (None: off), or a :class:`~spark_dask.errors.PlanError`.

    >>> check_idle_timeout("30m"), check_idle_timeout(None), check_idle_timeout(90)
    (1800, None, 90)
    """
    if value is None or value is False:
        return None
    try:
        seconds = parse_timedelta(value)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise PlanError(f"spark-dask: idle_timeout must be seconds or a time string like '30m', got {value!r}") from e
    if isinstance(value, bool) or seconds is None or seconds <= 0:
        raise PlanError(
            f"spark-dask: idle_timeout must be a positive duration such as '30m' (or None: off), got {value!r}"
        )
    return seconds


def given(arguments: dict) -> dict:
    """The option keyword arguments among a call's ``arguments`` (``SparkCluster``'s
    ``locals()``), for :func:`resolve`."""
    return {o.name: arguments[o.name] for o in keyword_options() if o.config}


NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_name(name) -> str:
    """``name`` if it can name a cluster: 1 to 64 letters, digits, ``.``, ``_`` or ``-``,
    starting with a letter or digit (it names a directory of the state directory, so no
    path separators, no ``..``); else a :class:`~spark_dask.errors.PlanError`."""
    if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
        raise PlanError(
            "spark-dask: a cluster name is 1 to 64 letters, digits, '.', '_' or '-', starting "
            f"with a letter or digit; got {name!r}"
        )
    return name


_WARNED: set[str] = set()


def unknown_keys(node: dict | None = None, prefix: str = "") -> list[str]:
    """The ``spark-dask.*`` keys set in ``dask.config`` (or in ``node``, the
    ``spark-dask`` section) that are no option, spelled with ``-`` as the table does;
    nested sections such as ``rapids.*`` included."""
    import dask.config

    known = {o.key for o in config_options()}
    if node is None:
        node = dask.config.get("spark-dask", {}) or {}
    out = []
    for raw, value in node.items():
        key = prefix + str(raw).replace("_", "-")
        if key in known:
            continue
        if isinstance(value, dict) and any(k.startswith(key + ".") for k in known):
            out += unknown_keys(value, key + ".")
        else:
            out.append(key)
    return out


def unknown_key_message(key: str) -> str:
    """The warning for a config key that is no option, with the closest option's key."""
    close = difflib.get_close_matches(key, [o.key for o in config_options()], n=1)
    hint = f" (did you mean spark-dask.{close[0]}?)" if close else ""
    return f"spark-dask: unknown config key spark-dask.{key}{hint}; it is ignored"


def unknown_keyword_message(function: str, key: str, names) -> str:
    """The error for a keyword argument that is none of ``names``, with the closest one.

    >>> unknown_keyword_message("start()", "n_worker", ["n_workers", "worker"])
    "spark-dask: start() got an unexpected keyword argument 'n_worker'. Did you mean 'n_workers'? help(start) lists every option."
    """
    close = difflib.get_close_matches(key, list(names), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return (
        f"spark-dask: {function} got an unexpected keyword argument {key!r}.{hint} "
        f"help({function.rstrip('()')}) lists every option."
    )


P = ParamSpec("P")
R = TypeVar("R")


def keywords_checked(function: str):
    """Decorator: a keyword argument the function does not take is refused with the
    closest one (:class:`~spark_dask.errors.UnknownKeywordError`, a ``TypeError``), naming
    ``function`` as the user called it (``"start()"``, ``"SparkCluster()"``)."""

    def decorate(f: Callable[P, R]) -> Callable[P, R]:
        sig = inspect.signature(f)
        names = [
            p.name
            for p in sig.parameters.values()
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
        ]

        @functools.wraps(f)
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            for key in kwargs:
                if key not in names:
                    raise UnknownKeywordError(unknown_keyword_message(function, key, names))
            return f(*args, **kwargs)

        return checked

    return decorate


def warn_unknown_keys() -> None:
    """Warn (``UserWarning``) about each :func:`unknown_keys` key, once per process."""
    import warnings

    for key in unknown_keys():
        if key not in _WARNED:
            _WARNED.add(key)
            warnings.warn(unknown_key_message(key), UserWarning, stacklevel=3)


__all__ = [
    "ClusterOptions",
    "check_idle_timeout",
    "check_mlflow",
    "check_name",
    "given",
    "keywords_checked",
    "resolve",
    "unknown_key_message",
    "unknown_keys",
    "unknown_keyword_message",
    "warn_unknown_keys",
]
