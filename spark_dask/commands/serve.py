"""``spark-dask serve``: start a cluster that other processes join by name and keep it
until a signal, a ``close()`` from a process that joined, or its own end
(:func:`serve_cluster`); what it prints once the cluster runs (:func:`join_text`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager, suppress

from spark_dask import registry
from spark_dask.commands.run import start_cluster
from spark_dask.sizes import plural
from spark_dask.spark.builder import command_session


def join_text(cluster) -> str:
    """What ``spark-dask serve`` prints once the cluster runs: how other processes join."""
    entry = registry.parts_of(cluster).entry
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
        For a new SparkSession (see :func:`~spark_dask.spark.builder.get_or_create_session`).
    ready : callable, optional
        ``ready(cluster)`` once it runs (tests); the join text is printed either way.
    **start_kwargs
        :class:`spark_dask.SparkCluster` keyword arguments (``name=`` above all).
    """
    spark, stop_session = command_session(spark, master, conf, app_name)
    stop = threading.Event()
    cluster = None
    try:
        cluster = start_cluster(spark, start_kwargs)
        if cluster is None:
            return 1
        registry.parts_of(cluster).entry.on_close_request = stop.set  # a handle's close(): this thread closes it
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
