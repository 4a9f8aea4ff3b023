"""The py4j gateway of a classic session, where the package handles its connections
itself: :mod:`spark_dask.signals` retires the main thread's interrupted connection on
Ctrl-C (why: that module's text).
"""

from __future__ import annotations

__all__ = ["retire_main_connection"]


def retire_main_connection() -> None:
    """Close (this side of) the py4j connection the interrupted main thread is using.

    The JVM finishes the interrupted call and its answer goes nowhere; the next call
    of this thread opens a new connection. Thread-local Spark properties of the main
    thread (a job group, a scheduler pool) are not carried over to it.
    """
    from pyspark import SparkContext

    client = getattr(SparkContext._gateway, "_gateway_client", None)
    get = getattr(client, "get_thread_connection", None)
    if get is None:
        return
    connection = get()
    if connection is not None and connection not in getattr(client, "deque", ()):  # in use
        connection.close(True)
