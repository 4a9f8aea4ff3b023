"""``spark-dask run``: start a cluster, run a script (or ``-m`` module) in this process
against it, tear everything down (:func:`run_script`); the script's client
configuration (:func:`client_config`) and its child processes' environment.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import time
import traceback
from contextlib import contextmanager, suppress

import dask.config
from distributed import Client

from spark_dask import registry
from spark_dask.cluster import SparkCluster
from spark_dask.connection import ENV_SCHEDULER_FILE, proxied_dashboard_link
from spark_dask.connection import client_config as connection_config
from spark_dask.sizes import plural
from spark_dask.spark.builder import command_session, quiet_task_failures


def client_config(cluster, parts) -> dict:
    """``dask.config`` values that make a plain ``Client()`` connect to ``cluster``.

    The scheduler address, and with TLS the cluster's client credentials (in-memory
    PEM text, which :class:`distributed.security.Security` accepts in these keys: no
    key material is written to disk). On Databricks the dashboard link is the proxy URL.
    The keys are :func:`spark_dask.connection.client_config`'s, flat. ``parts``: the
    cluster's (:mod:`spark_dask.registry`).
    """
    sec = cluster.security
    tls = None
    if sec is not None and sec.require_encryption:
        tls = {"ca": sec.tls_ca_file, "cert": sec.tls_client_cert, "key": sec.tls_client_key}
    return connection_config(
        cluster.scheduler_address,
        tls,
        proxied_dashboard_link(parts.dashboard_settings, cluster.dashboard_link),
        dotted=True,
    )


@contextmanager
def environment(**values: str):
    """``values`` in this process's environment for the block, each back as it was
    after (unset where it was unset)."""
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
    with environment(DASK_CONFIG=os.path.dirname(scheduler_file), **{ENV_SCHEDULER_FILE: scheduler_file}):
        yield


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
        For a new SparkSession (see :func:`~spark_dask.spark.builder.get_or_create_session`).
    **start_kwargs
        :class:`spark_dask.SparkCluster` keyword arguments.
    """
    spark, stop_session = command_session(spark, master, conf, app_name)
    cluster = client = parts = None
    code = 1
    with _sigterm_as_exit():
        try:
            cluster = start_cluster(spark, start_kwargs)
            if cluster is None:
                return 1
            parts = registry.parts_of(cluster)  # kept for the teardown's line, after the close
            print(
                f"spark-dask: {plural(len(cluster.scheduler.workers), 'worker')} at "
                f"{cluster.scheduler_address}; dashboard {cluster.dashboard_link or '(off)'}",
                file=sys.stderr,
                flush=True,
            )
            with dask.config.set(client_config(cluster, parts)), _child_environment(cluster):
                client = Client(cluster, set_as_default=True)
                code = exec_target(target, args, module)
        finally:
            _close(cluster, parts, client, code)
            if stop_session:
                with suppress(Exception):
                    spark.stop()
    return code


def start_cluster(spark, start_kwargs: dict) -> SparkCluster | None:
    """A command's cluster (Spark's task failures kept out of the terminal while it starts),
    or None once why it did not start is said on stderr."""
    try:
        with quiet_task_failures(spark):
            return SparkCluster(spark, **start_kwargs)
    except Exception as e:  # noqa: BLE001 - reported, the command exits with 1
        print(f"spark-dask: the Dask cluster did not start: {e}", file=sys.stderr)
        return None


def _close(cluster, parts, client, code: int) -> None:
    """:func:`run_script`'s teardown: the script's clients, ours, the cluster (said on stderr)."""
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
        ended = all(g.done for g in parts.gangs)
        print(
            f"spark-dask: cluster {cluster.tag} closed in {time.monotonic() - t0:.1f}s "
            f"(Spark barrier job ended: {'yes' if ended else 'NO'}); exit status {code}",
            file=sys.stderr,
            flush=True,
        )
