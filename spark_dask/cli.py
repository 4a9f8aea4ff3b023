"""``spark-dask`` command line (also ``dask spark ...``): run a script on a Dask cluster
inside the Spark application, or show what that cluster would look like.

::

    spark-dask run [OPTIONS] SCRIPT [ARGS]...     # or: spark-dask run -m MODULE [ARGS]...
    spark-dask serve [OPTIONS]                    # a cluster other processes join by name
    spark-dask list [--json]                      # the clusters running on this host
    spark-dask info [OPTIONS]

Under ``spark-submit`` (which needs a ``.py`` file) submit this module's file::

    spark-submit --master ... "$(python -c 'import spark_dask.cli as m; print(m.__file__)')" run job.py
"""

from __future__ import annotations

import json
import os
import runpy
import shlex
import signal
import sys
import threading
import time
import traceback
from contextlib import contextmanager, suppress

import click
from dask.utils import format_bytes, parse_timedelta

from spark_dask import __version__, config, named, options, rapids
from spark_dask.cluster import SparkCluster
from spark_dask.connection import ENV_SCHEDULER_FILE, proxied_dashboard_link
from spark_dask.connection import client_config as connection_config
from spark_dask.diagnosis import doctor as run_doctor
from spark_dask.errors import SparkDaskError
from spark_dask.executor.command import worker_command
from spark_dask.executor.gang_task import PRELOAD_MODULE, host_memory
from spark_dask.executor.sizing import worker_memory
from spark_dask.groups.spec import group_holds, plan_groups, task_cpus
from spark_dask.parts import parts_of
from spark_dask.plan import PlanError, gang_threads, hog_warning, plan_gang, spare_slots
from spark_dask.report import task_request
from spark_dask.sizes import plural
from spark_dask.spark import databricks
from spark_dask.spark.pyspark_warnings import pandas3_warning_off
from spark_dask.spark.session import cluster_facts, require_pyspark
from spark_dask.spark.session import conf as spark_conf

# --------------------------------------------------------------------------------------
# Options. Those of spark_dask.start() come from the option table (spark_dask/options.py),
# which also writes their docs; --master/--conf/--app-name are the CLI's own.
# --------------------------------------------------------------------------------------

_key_values = options.key_values
_typed_key_values = options.typed_key_values


def session_options(f):
    """--master, --conf, --app-name: how to get or create the SparkSession."""
    f = click.option("--app-name", default=None, help="Application name when a new SparkSession is created.")(f)
    f = click.option(
        "--conf",
        "spark_conf",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_key_values,
        help="Spark conf for a new SparkSession (repeatable). Ignored by an existing one for static confs.",
    )(f)
    f = click.option(
        "--master",
        default=None,
        help="Spark master for a new SparkSession, e.g. 'local-cluster[2,1,1024]'. Default: "
        "the active session, or what spark-submit / the Databricks cluster provides.",
    )(f)
    return f


plan_options = options.click_options("info")  # the size and shape of the cluster (run and info)
run_options = options.click_options("run")  # every start() option
doctor_options = options.click_options("doctor")  # where the scheduler would listen


def _start_kwargs(options: dict) -> dict:
    """start() keyword arguments from the parsed options (None: the configured default)."""
    kwargs = {k: v for k, v in options.items() if v is not None and v != {}}
    silence = kwargs.get("silence_logs")
    if isinstance(silence, str) and silence.lower() in ("false", "no", "off"):
        kwargs["silence_logs"] = False
    return kwargs


# --------------------------------------------------------------------------------------
# Session, client configuration, script execution.
# --------------------------------------------------------------------------------------


def _conf_given(key: str) -> bool:
    """Whether ``spark-submit --conf`` / ``spark-defaults.conf`` set ``key``."""
    from pyspark import SparkConf

    try:
        return bool(SparkConf().contains(key))
    except Exception:  # noqa: BLE001
        return False


def _executors_python_unset(master: str | None, conf: dict | None) -> bool:
    """Whether a new session would be local (``local``, ``local-cluster`` masters) and
    the user named no Python for its executors (``PYSPARK_PYTHON``,
    ``spark.pyspark.python``)."""
    from pyspark import SparkConf

    conf = conf or {}
    if os.environ.get("PYSPARK_PYTHON") or "spark.pyspark.python" in conf or _conf_given("spark.pyspark.python"):
        return False
    if not master:
        try:
            master = SparkConf().get("spark.master", None)
        except Exception:  # noqa: BLE001 - no readable defaults: leave the executors' Python alone
            return False
    return (master or "local[*]").startswith("local")


def get_or_create_session(master: str | None = None, conf: dict | None = None, app_name: str | None = None):
    """(session, created): the active SparkSession, or a new one from the options.

    ``created`` is True when this call started the SparkContext (so the caller may stop it).
    Without pyspark: an ImportError that says what to install.
    """
    require_pyspark()
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    if existing is not None and not master and not conf:
        return existing, False
    had_context = SparkContext._active_spark_context is not None
    builder = SparkSession.builder
    if master:
        builder = builder.master(master)
    if app_name:
        builder = builder.appName(app_name)
    if (
        not had_context
        and "spark.ui.showConsoleProgress" not in (conf or {})
        and not _conf_given("spark.ui.showConsoleProgress")
    ):
        # The barrier stage runs as long as the cluster: Spark's console progress bar
        # would redraw "[Stage 0:> (0 + 2) / 2]" over the script's output all the while.
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if not had_context and _executors_python_unset(master, conf):
        # A local master's executors run on this machine: give them this interpreter
        # (a venv's spark-dask run without the venv activated would give them the
        # system python3 from PATH, which lacks distributed). PySpark reads the
        # variable (not the conf) when the SparkContext starts.
        os.environ["PYSPARK_PYTHON"] = sys.executable
    with pandas3_warning_off():  # the session is spark-dask's here, and it uses no pandas through Spark
        spark = builder.getOrCreate()
    return spark, not had_context and existing is None


def client_config(cluster) -> dict:
    """``dask.config`` values that make a plain ``Client()`` connect to ``cluster``.

    The scheduler address, and with TLS the cluster's client credentials (in-memory
    PEM text, which :class:`distributed.security.Security` accepts in these keys: no
    key material is written to disk). On Databricks the dashboard link is the proxy URL.
    The keys are :func:`spark_dask.connection.client_config`'s, flat.
    """
    sec = cluster.security
    tls = None
    if sec is not None and sec.require_encryption:
        tls = {"ca": sec.tls_ca_file, "cert": sec.tls_client_cert, "key": sec.tls_client_key}
    return connection_config(cluster.scheduler_address, tls, proxied_dashboard_link(cluster), dotted=True)


@contextmanager
def _child_environment(cluster):
    """``DASK_CONFIG`` (and ``SPARK_DASK_SCHEDULER_FILE``) for the script's child processes.

    The script itself is configured in memory (:func:`client_config`); a process it
    starts (``subprocess``, ``multiprocessing`` with spawn, a program in another
    language) reads the connection files of :meth:`SparkCluster.write_connection`
    instead: ``DASK_CONFIG`` names their directory, so a plain ``Client()`` there joins
    the cluster. The previous values come back afterwards; the files go with the cluster.
    """
    scheduler_file = cluster.write_connection()
    values = {"DASK_CONFIG": os.path.dirname(scheduler_file), ENV_SCHEDULER_FILE: scheduler_file}
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def exit_code(code) -> int:
    """The process exit status for ``SystemExit(code)``, as Python itself maps it."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code % 256
    print(code, file=sys.stderr)
    return 1


def exec_target(target: str, args, module: bool = False) -> int:
    """Run a script (or ``-m`` module) as ``__main__`` in this process; its exit status.

    ``sys.argv`` is ``[target, *args]`` while it runs, and a script's directory comes
    first on ``sys.path``, as with ``python SCRIPT``. An exception is printed and gives 1.
    """
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    try:
        if module:
            sys.argv = [target, *args]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            path = os.path.abspath(target)
            if not os.path.exists(path):
                print(f"spark-dask: no such script: {target}", file=sys.stderr)
                return 2
            sys.argv = [target, *args]
            sys.path.insert(0, os.path.dirname(path))
            runpy.run_path(path, run_name="__main__")
        return 0
    except SystemExit as e:
        return exit_code(e.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        return 130
    except BaseException:  # noqa: BLE001 - the script's error, reported like python does
        traceback.print_exc()
        return 1
    finally:
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path


@contextmanager
def _sigterm_as_exit():
    """SIGTERM (a cancelled job run, spark-submit killed) raises SystemExit(143) in the
    main thread, so the cluster is torn down in ``finally`` instead of left behind."""

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# The loggers of a failed task's Java stack trace on the driver: TaskSetManager's "Lost
# task", and with local[N] masters the executor's (the same JVM).
TASK_FAILURE_LOGGERS = ("org.apache.spark.scheduler.TaskSetManager", "org.apache.spark.executor.Executor")


@contextmanager
def _quiet_task_failures(spark):
    """No Spark log of the gang's failed tasks (a Java stack trace around the task's
    Python traceback) while the cluster starts: a task's error reaches the user as
    spark-dask's one message. Classic sessions with log4j 2 only; afterwards each
    logger is as before (the script's own jobs log as usual)."""
    try:
        log4j = spark.sparkContext._jvm.org.apache.logging.log4j
        context = log4j.LogManager.getContext(False)
        loggers = context.getConfiguration().getLoggers()
        before = {n: (loggers.containsKey(n), log4j.LogManager.getLogger(n).getLevel()) for n in TASK_FAILURE_LOGGERS}
        for n in TASK_FAILURE_LOGGERS:
            log4j.core.config.Configurator.setLevel(n, log4j.Level.OFF)
    except Exception:  # noqa: BLE001 - Spark Connect, another logging backend: leave it
        before = {}
    try:
        yield
    finally:
        with suppress(Exception):
            for n, (had, level) in before.items():
                if had:
                    log4j.core.config.Configurator.setLevel(n, level)
                else:  # no logger config of its own, as before (Spark's shell filter applies)
                    context.getConfiguration().removeLogger(n)
            if before:
                context.updateLoggers()


def run_script(
    target: str,
    args=(),
    *,
    module: bool = False,
    spark=None,
    master: str | None = None,
    conf: dict | None = None,
    app_name: str | None = None,
    **start_kwargs,
) -> int:
    """Start a cluster, run ``target`` against it, tear everything down; the exit status.

    Inside the script a plain ``distributed.Client()`` and
    ``dask.distributed.get_client()`` connect to the cluster (``dask.config`` holds
    its address and credentials, and a default client exists); so does a plain
    ``Client()`` in the script's child processes (``DASK_CONFIG`` names the directory
    of the cluster's connection files, ``SPARK_DASK_SCHEDULER_FILE`` its
    ``scheduler.json``); and
    ``SparkSession.builder.getOrCreate()`` returns the same SparkSession. A
    SparkSession this call created is stopped at the end, except on Databricks, where
    the session belongs to the cluster.

    Parameters
    ----------
    target : str
        Path of a Python script, or a module name with ``module=True``.
    args : sequence of str
        The script's arguments (``sys.argv[1:]``).
    spark : SparkSession, optional
        Use this session instead of getting or creating one.
    master, conf, app_name
        For a new SparkSession (see :func:`get_or_create_session`).
    **start_kwargs
        :class:`spark_dask.SparkCluster` keyword arguments.
    """
    import dask.config
    from distributed import Client

    created = False
    if spark is None:
        spark, created = get_or_create_session(master, conf, app_name)
    stop_session = created and databricks.detect(spark) is None
    cluster = client = None
    code = 1
    with _sigterm_as_exit():
        try:
            try:
                with _quiet_task_failures(spark):
                    cluster = SparkCluster(spark, **start_kwargs)
            except Exception as e:  # noqa: BLE001 - reported, exit status 1
                print(f"spark-dask: the Dask cluster did not start: {e}", file=sys.stderr)
                return 1
            print(
                f"spark-dask: {plural(len(cluster.scheduler.workers), 'worker')} at "
                f"{cluster.scheduler_address}; dashboard {cluster.dashboard_link or '(off)'}",
                file=sys.stderr,
                flush=True,
            )
            with dask.config.set(client_config(cluster)), _child_environment(cluster):
                client = Client(cluster, set_as_default=True)
                code = exec_target(target, args, module)
        finally:
            _close(cluster, client, code)
            if stop_session:
                with suppress(Exception):
                    spark.stop()
    return code


def _close(cluster, client, code: int) -> None:
    """:func:`run_script`'s teardown: the script's clients, ours, the cluster (said on stderr)."""
    from distributed import Client

    t0 = time.monotonic()
    # The script's own clients first (a plain Client() that it did not close):
    # closed after the scheduler they would print reconnect tracebacks.
    for other in list(Client._instances):
        if other is not client and other.status not in ("closed", "closing"):
            with suppress(Exception):
                other.close()
    if client is not None:
        with suppress(Exception):
            client.close()
    if cluster is not None:
        cluster.close()
        ended = all(g.done for g in parts_of(cluster).gangs)
        print(
            f"spark-dask: cluster {cluster.tag} closed in {time.monotonic() - t0:.1f}s "
            f"(Spark barrier job ended: {'yes' if ended else 'NO'}); exit status {code}",
            file=sys.stderr,
            flush=True,
        )


# --------------------------------------------------------------------------------------
# serve, list
# --------------------------------------------------------------------------------------


def join_text(cluster) -> str:
    """What ``spark-dask serve`` prints once the cluster runs: how other processes join."""
    entry = parts_of(cluster).entry
    lines = [
        f"spark-dask: serving cluster {cluster.name!r}: {plural(len(cluster.scheduler.workers), 'worker')} at "
        f"{cluster.scheduler_address}; dashboard {cluster.dashboard_link or '(off)'}",
        f"  join from Python (this user, this host): spark_dask.SparkCluster.from_name({cluster.name!r}).get_client()",
    ]
    if entry.directory is not None:
        lines.append(
            f"  connection files: {entry.directory} (DASK_CONFIG={entry.directory} makes a plain Client() join)"
        )
    else:
        lines.append("  not listed (spark-dask.state-dir is false): from_name() cannot find it")
    lines.append(f"  stop: Ctrl-C, kill {os.getpid()} (SIGTERM), or .close() from any process that joined")
    return "\n".join(lines)


@contextmanager
def _stop_on_signals(stop: threading.Event):
    """SIGTERM and SIGINT set ``stop`` (main thread only); the handlers before come back."""
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        with suppress(ValueError):  # not the main thread
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def serve_cluster(*, spark=None, master=None, conf=None, app_name=None, ready=None, **start_kwargs) -> int:
    """Start a cluster and keep it until SIGTERM, SIGINT, a ``close()`` from any process
    that joined it (:meth:`spark_dask.SparkCluster.from_name`), or its own end (a failure,
    the Spark application stopped); then tear it down. The exit status: 0, or 1 when the
    cluster did not start.

    Parameters
    ----------
    spark : SparkSession, optional
        Use this session instead of getting or creating one.
    master, conf, app_name
        For a new SparkSession (see :func:`get_or_create_session`).
    ready : callable, optional
        ``ready(cluster)`` once it runs (tests); the join text is printed either way.
    **start_kwargs
        :class:`spark_dask.SparkCluster` keyword arguments (``name=`` above all).
    """
    created = False
    if spark is None:
        spark, created = get_or_create_session(master, conf, app_name)
    stop_session = created and databricks.detect(spark) is None
    stop = threading.Event()
    cluster = None
    try:
        try:
            with _quiet_task_failures(spark):
                cluster = SparkCluster(spark, **start_kwargs)
        except Exception as e:  # noqa: BLE001 - reported, exit status 1
            print(f"spark-dask: the Dask cluster did not start: {e}", file=sys.stderr)
            return 1
        parts_of(cluster).entry.on_close_request = stop.set  # a handle's close(): this thread closes it
        with _stop_on_signals(stop):
            print(join_text(cluster), flush=True)
            if ready is not None:
                ready(cluster)
            # in slices: signal handlers run between them, and a cluster that ended by
            # itself (failed, Spark stopped: its own teardown done) ends the wait too
            while not stop.wait(1.0) and cluster.status.name not in ("closed", "failed"):
                pass
        return 0
    except KeyboardInterrupt:  # during the start, before the handlers above
        return 130
    finally:
        if cluster is not None:
            t0, ended = time.monotonic(), cluster.status.name == "closed"  # by itself (idle_timeout): said so
            cluster.close()
            if not ended:
                print(
                    f"spark-dask: cluster {cluster.name!r} closed in {time.monotonic() - t0:.1f}s",
                    file=sys.stderr,
                    flush=True,
                )
        if stop_session:
            with suppress(Exception):
                spark.stop()


# --------------------------------------------------------------------------------------
# info
# --------------------------------------------------------------------------------------


def describe(
    spark,
    n_workers=None,
    worker=None,
    task_profile=None,
    threads_per_worker=None,
    memory_limit=None,
    gpu_mode=None,
    barrier=None,
    worker_groups=None,
) -> dict:
    """What a cluster would look like on this Spark application; starts nothing.

    Reads the session (executors, slots, GPUs), resolves the options
    (:func:`spark_dask.options.resolve`) and plans the gang exactly as
    :class:`~spark_dask.SparkCluster` does, without submitting a Spark job; and shows
    the command line each Dask worker would run (``"worker command"``).
    """
    facts = cluster_facts(spark, parse_timedelta(config.get("executor-wait")))
    out = _facts_rows(facts)
    given = {"n_workers": n_workers, "worker": worker, "task_profile": task_profile, "gpu_mode": gpu_mode,
             "threads_per_worker": threads_per_worker, "memory_limit": memory_limit, "barrier": barrier,
             "worker_groups": worker_groups or None}  # fmt: skip
    try:
        opts = options.resolve(**{**{o.name: None for o in options.keyword_options() if o.config}, **given})
        plan = plan_gang(facts, opts.n_workers, opts.worker, opts.task_profile, opts.gpu_mode, opts.barrier)
        group_plans = plan_groups(facts, opts.worker_groups, opts, ((plan.n_tasks, task_cpus(plan, facts)),))
    except PlanError as e:
        out["error"] = str(e)
        return out
    out.update(_plan_rows(facts, plan, group_holds(group_plans, facts)))
    if group_plans:
        out["worker groups"] = {name: _group_row(facts, p) for name, p in group_plans.items()}
    fewest, most = gang_threads(facts, plan, opts.threads_per_worker)
    threads = fewest if fewest == most else "<nthreads>"
    out["threads per worker"] = (
        fewest if fewest == most else f"{fewest}-{most} (depends on how Spark places the tasks on the executors)"
    )
    memory, out["memory per worker"] = _worker_memory(facts, plan, opts.memory_limit)
    out["worker command"] = _shell_line(info_worker_command(plan, opts, threads, memory))
    db = databricks.detect(spark)
    if db is not None:
        out["databricks"] = {
            "runtime": db.runtime_version,
            "workspace": db.workspace,
            "cloud": db.cloud,
            "cluster": db.cluster_id,
            "dashboard": (databricks.proxy_url(db, 0).replace("/0/", "/<port>/") if db.has_proxy else None),
        }
    if plan.kind == "cuda":
        warnings_ = rapids.check_rapids(lambda key: spark_conf(spark, key), float(config.get("rapids.dask-fraction")))
        out["rapids"] = warnings_ or "ok"
    return out


def _facts_rows(facts) -> dict:
    """``info``'s rows about the Spark application."""
    return {
        "master": facts.master,
        "executors": facts.executors,
        "executor cores": facts.executor_cores,
        "executor memory": format_bytes(facts.executor_memory),
        "executor GPUs": facts.executor_gpus,
        "task cpus": facts.task_cpus,
        "task GPUs": facts.task_gpus,
        "task slots": facts.slots,
    }


def _plan_rows(facts, plan, groups: tuple = ()) -> dict:
    """``info``'s rows about the planned gang (workers, tasks, warnings); ``groups``:
    the ``(name, tasks, CPUs per task)`` of the worker groups beside it."""
    out = {
        "workers": plan.n_workers,
        "worker kind": plan.kind,
        "one worker per GPU": plan.pinned,
        "barrier tasks" if plan.barrier else "Spark jobs (one task each)": plan.n_tasks,
        "task request": (
            {"cpus": plan.task_cpus or facts.task_cpus, "gpus": plan.task_gpus}
            if plan.uses_profile
            else "default resource profile"
        ),
        "free slots while running": spare_slots(facts, plan, tuple((n, c) for _, n, c in groups)),
    }
    if plan.gpu_mode:
        out["GPU mode"] = plan.gpu_mode
    notes = [n for n in plan.notes + (hog_warning(facts, plan, (), groups),) if n]
    if notes:
        out["warnings"] = notes
    return out


def _group_row(facts, plan) -> str:
    """A worker group's row of ``info``: its workers, kind and Spark task request."""
    workers = plural(plan.n_workers, plan.kind + " worker")
    return f"{workers}, {plural(plan.n_tasks, 'task')} ({task_request(plan, facts)})"


def _worker_memory(facts, plan, limit) -> tuple[int | None, str]:
    """(bytes, as shown) of each worker's memory limit; bytes None where each host
    decides (``auto`` off local mode)."""
    if limit != "auto":
        return int(limit), format_bytes(int(limit))
    if facts.master.startswith("local"):
        # Every executor runs on this host.
        size = worker_memory("auto", host_memory(), facts.executor_memory, facts.executors, plan.n_workers)
        return size, format_bytes(size) + " (auto)"
    return None, (
        "auto: each host's memory less its executors' "
        f"({format_bytes(facts.executor_memory)} each), split over its workers"
    )


def _shell_line(cmd: list[str]) -> str:
    """``cmd`` as a shell line; the ``<...>`` placeholders unquoted."""
    return " ".join(p if p.startswith("<") and p.endswith(">") else shlex.quote(p) for p in cmd)


def info_worker_command(plan, opts: dict, threads: int | str, memory: int | None) -> list[str]:
    """The command line of one Dask worker of ``plan`` (:func:`spark_dask.executor.command.worker_command`,
    what each Spark task runs), with ``<...>`` where only the task knows the value
    (its interpreter, the scheduler's address, the worker's name and directory, the
    credentials' files). A dask-cuda worker's RMM pool flags, which its task derives
    from its GPU's memory, are not shown."""
    fields = {
        "python": "<python>",
        "scheduler_address": "<scheduler-address>",
        "name": "<name>",
        "nthreads": threads,
        "memory_limit": memory if memory is not None else "<auto>",
        "local_directory": "<local-directory>",
        "death_timeout": opts.death_timeout,
        "preload": "<preload-file>",
        "preload_module": PRELOAD_MODULE,
        "tls_ca_file": "<ca.pem>" if opts.tls else "",
        "tls_cert": "<cert.pem>" if opts.tls else "",
        "tls_key": "<key.pem>" if opts.tls else "",
    }
    return worker_command(fields, plan.kind, opts.worker_command, opts.worker_options)


def _require_pyspark_or_exit() -> None:
    """Without pyspark: one line that says what to install, exit status 1 (no traceback)."""
    try:
        require_pyspark()
    except ImportError as e:
        raise click.ClickException(str(e)) from None


def check_options(given: dict) -> dict:
    """The options resolved (:func:`spark_dask.options.resolve`) before anything starts:
    a bad value (``--memory-limit lots``, ``DASK_SPARK_DASK__MEMORY_LIMIT=lots``) is a
    usage error now, not after a SparkSession was made; a misspelled ``spark-dask.*``
    config key is said on stderr, one line each."""
    import warnings

    names = {o.name for o in options.keyword_options() if o.config}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return options.resolve(**{**dict.fromkeys(names), **{k: v for k, v in given.items() if k in names}})
        except PlanError as e:
            raise click.UsageError(str(e)) from None
        finally:
            for w in caught:
                click.echo(str(w.message), err=True)


def _check_target(target: str, module: bool) -> None:
    """A missing script (or module) is a usage error before anything starts."""
    import importlib.util

    if not module:
        if not os.path.isfile(target):
            raise click.UsageError(f"no such script: {target}")
        return
    try:
        found = importlib.util.find_spec(target) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise click.UsageError(f"no such module: {target}")


@click.group(name="spark", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="spark-dask", message="%(prog)s %(version)s")
def main():
    """Dask clusters inside a Spark application: the scheduler on the Spark driver, the
    workers in Spark tasks on the executors (a barrier stage, or under dynamic allocation
    one plain one-task Spark job per worker). Also available as 'dask spark'."""


@main.command(context_settings={"allow_interspersed_args": False})
@session_options
@run_options
@click.option(
    "-m",
    "--module",
    "as_module",
    is_flag=True,
    help="Run TARGET as a module, like 'python -m TARGET'.",
)
@click.argument("target")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(target, args, as_module, master, spark_conf, app_name, **options):
    """Run a Python script (or -m module) with a Dask cluster in this Spark application.

    Gets or creates the SparkSession, starts the cluster, runs TARGET in this process
    with ARGS as its arguments, then tears the cluster down and exits with the
    script's exit status. Inside the script a plain distributed.Client() or
    dask.distributed.get_client() connects to the cluster, and
    SparkSession.builder.getOrCreate() returns the same session. The script's child
    processes get DASK_CONFIG (the directory of the cluster's connection files:
    scheduler.json, TLS credentials, a Dask config file) and SPARK_DASK_SCHEDULER_FILE,
    so a plain Client() there, or a client in another language, joins too. Options
    after TARGET belong to the script.

    Exit status: the script's; 1 when the cluster cannot start or the script raises;
    143 on SIGTERM (after teardown); 2 for a usage error (an unknown option, a bad
    value, a missing script), said before anything starts.
    """
    _require_pyspark_or_exit()
    _check_target(target, as_module)
    check_options(options)
    code = run_script(
        target,
        args,
        module=as_module,
        master=master,
        conf=spark_conf,
        app_name=app_name,
        **_start_kwargs(options),
    )
    sys.exit(code)


@main.command()
@session_options
@run_options
def serve(master, spark_conf, app_name, **options):
    """Start a Dask cluster that other processes join by name, and keep it running.

    Gets or creates the SparkSession, starts the cluster (--name NAME, default its Spark
    job tag) and prints how to join it: SparkCluster.from_name(NAME) in any Python
    process of this user on this host (scale, adapt and close carried out here), the
    dashboard link and the directory of its connection files (DASK_CONFIG). Runs until
    SIGTERM, Ctrl-C or a close() from a process that joined; then tears the cluster down
    and exits 0.

    Exit status: 0 after the teardown; 1 when the cluster cannot start (a name already
    taken, no slots, ...); 2 for a usage error (said before anything starts).
    """
    _require_pyspark_or_exit()
    check_options(options)
    sys.exit(serve_cluster(master=master, conf=spark_conf, app_name=app_name, **_start_kwargs(options)))


@main.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def list_command(as_json):
    """List the spark-dask clusters of this user running on this host.

    Name, status, workers, owner pid, start time, scheduler address and dashboard link of
    every cluster any process started here (spark-dask serve, run, a notebook), as found
    in the state directory (spark-dask.state-dir); entries whose owner process is gone
    are removed. Needs no Spark, starts nothing.
    """
    try:
        rows = named.list_clusters()
    except SparkDaskError as e:  # a state directory that is not the user's
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo(named.format_rows(rows, named.configured_root()))


@main.command()
@session_options
@doctor_options
@click.option(
    "--timeout",
    default=None,
    type=float,
    metavar="SECONDS",
    help="How long the check's Spark job may wait for task slots (default: executor-wait, at least 30).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def doctor(master, spark_conf, app_name, scheduler_host, timeout, as_json):
    """Check every executor before a Dask cluster starts there.

    Runs one short Spark job (no Dask process) and reports per executor host: Python
    and the versions of dask, distributed, cloudpickle, msgpack, pandas and pyarrow
    against the driver's, whether spark-dask's task code unpickles there, whether a
    process started there reaches the driver's scheduler address, the free space
    under Spark's local directories; on GPU executors the GPUs NVML sees, the CUDA
    driver, dask-cuda, cudf, rmm, CuPy and nvJitLink (and their import errors), the
    RAPIDS Accelerator's jar against this Spark and the gpu_mode 'auto' picks. The last
    line says ready, or how many problems to fix (each with its fix above it).

    Exit status: 0 ready; 1 a problem found, or the check could not run; 2 a usage error.
    """
    _require_pyspark_or_exit()
    spark, created = get_or_create_session(master, spark_conf, app_name)
    try:
        result = run_doctor(spark, timeout=timeout, scheduler_host=scheduler_host)
    except SparkDaskError as e:
        raise click.ClickException(str(e)) from None
    finally:
        if created and databricks.detect(spark) is None:
            spark.stop()
    click.echo(json.dumps(result.to_dict(), indent=2, default=str) if as_json else result.render())
    sys.exit(0 if result.ready else 1)


@main.command()
@session_options
@plan_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info(master, spark_conf, app_name, as_json, **options):
    """Show the cluster that 'run' (or spark_dask.start()) would start here.

    Executors, task slots, GPUs, planned workers, threads and memory per worker, the
    command line each worker would run, and on Databricks the dashboard URL pattern.
    Starts no Spark job and no Dask process. Exit status 1 when no cluster could start
    with these options; 2 for a usage error (said before anything starts).
    """
    _require_pyspark_or_exit()
    check_options(options)
    spark, created = get_or_create_session(master, spark_conf, app_name)
    try:
        out = describe(spark, **options)
    finally:
        if created and databricks.detect(spark) is None:
            spark.stop()
    if as_json:
        click.echo(json.dumps(out, indent=2, default=str))
    else:
        width = max(len(k) for k in out)
        for key, value in out.items():
            if isinstance(value, list):
                value = "\n".join(value)
            click.echo(f"{key:<{width}}  {value}")
    sys.exit(1 if "error" in out else 0)


if __name__ == "__main__":
    main()
