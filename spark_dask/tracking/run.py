"""Which MLflow run a cluster writes into (:func:`wanted`), what it writes there at the
start (:func:`cluster_params`, :func:`versions`), and :class:`Link`, the one line
through which every call of a cluster to MLflow goes, each bounded.

MLflow's own HTTP client retries a failed request 7 times with a backoff factor of 2
(``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR``, about four
minutes) and waits up to 120 s for an answer (``MLFLOW_HTTP_REQUEST_TIMEOUT``:
``mlflow/environment_variables.py``), read from the environment at each request
(``mlflow/utils/rest_utils.py``, ``http_request``). Those are the user's, process-wide,
and left alone: the calls run in a thread of the cluster's own, and the cluster waits
for them only where it must (the run opened, the artifacts at close), each time for a
named, bounded time.

MLflow is imported here only, and only where a cluster is to be tracked
(``import mlflow`` takes seconds; a process that never imported it has no active run).
"""

from __future__ import annotations

import importlib.metadata
import queue
import socket
import sys
import threading
from urllib.parse import urlsplit

import dask
import distributed

from spark_dask.tracking.redact import Redactor, public_uri

FIRST_CALL_WAIT = 5.0  # seconds the start of tracking waits for the run to answer (in the background)
PROBE_WAIT = 2.0  # seconds to connect to an http(s) tracking server before the first call
CLOSE_WAIT = 5.0  # seconds close() waits for the last sample and the artifacts to reach MLflow
QUEUED = 8  # calls waiting for the thread; a sample beyond that is dropped (a slow server grows nothing)

# distributions whose versions a run records, by param name: the first one installed
PACKAGES = {
    "spark_dask.version": ("spark-dask",),
    "dask.version": ("dask",),
    "distributed.version": ("distributed",),
    "pyspark.version": ("pyspark", "pyspark-client", "pyspark-connect"),
    "rapids.version": ("cudf-cu12", "cudf-cu13", "cudf"),
    "dask_cuda.version": ("dask-cuda",),
}


def active_run_id() -> str | None:
    """The MLflow run active in the calling thread (MLflow keeps one per thread), or None.
    None without a look where MLflow was never imported: no run can be active then."""
    mlflow = sys.modules.get("mlflow")
    run = mlflow.active_run() if mlflow is not None else None
    return run.info.run_id if run is not None else None


def wanted(mode: str | bool) -> tuple[bool, str | None]:
    """Whether a cluster started with ``mlflow=mode`` in this thread is tracked, and the
    run it writes into (None: a run of its own, made at the start).

    >>> wanted(False), wanted("auto") if "mlflow" not in sys.modules else (False, None)
    ((False, None), (False, None))
    """
    if mode is False:
        return False, None
    run = active_run_id()
    return (True, run) if mode is True else (run is not None, run)


def versions() -> dict[str, str]:
    """The version of each package of :data:`PACKAGES` that is installed (the driver's);
    pyspark's from the module where the runtime has no distribution of it (Databricks)."""
    out = {}
    for param, names in PACKAGES.items():
        for name in names:
            try:
                out[param] = importlib.metadata.version(name)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    out.setdefault("dask.version", dask.__version__)
    out.setdefault("distributed.version", distributed.__version__)
    pyspark = sys.modules.get("pyspark")
    if "pyspark.version" not in out and getattr(pyspark, "__version__", None):
        out["pyspark.version"] = pyspark.__version__
    return out


def cluster_params(facts, shapes: dict, workers: dict, start_seconds: float | None) -> dict[str, str]:
    """The params a cluster writes at its start: a fixed list, nothing from the options,
    the workers' environment or Spark's confs (which may hold secrets).

    Parameters
    ----------
    facts : spark_dask.capacity.ClusterFacts
    shapes : dict
        Each worker group's :class:`~spark_dask.capacity.GangPlan` by its name.
    workers : dict
        Each group's connected workers, ``(threads, memory limit)`` each
        (:func:`spark_dask.tracking.sampler.workers_by_group`).
    start_seconds : float or None
        How long the start took.
    """
    master = Redactor().line(public_uri(facts.master))
    params = {
        "spark.master": master,
        "spark.executors": str(facts.executors),
        "spark_dask.workers": str(sum(len(w) for w in workers.values())),
    }
    if start_seconds is not None:
        params["spark_dask.startup_seconds"] = f"{start_seconds:.2f}"
    for name, shape in shapes.items():
        mine = workers.get(name, [])
        threads = sorted({t for t, _ in mine})
        limits = sorted({m for _, m in mine})
        params.update(
            {
                f"spark_dask.group.{name}.workers": str(len(mine)),
                f"spark_dask.group.{name}.kind": shape.kind,
                f"spark_dask.group.{name}.threads": ",".join(map(str, threads)),
                f"spark_dask.group.{name}.memory_limit_bytes": ",".join(map(str, limits)),
                f"spark_dask.group.{name}.gpus_per_worker": "1" if shape.pinned else "0",
            }
        )
    return params


def unreachable(uri: str) -> str | None:
    """Why an http(s) tracking server cannot be reached (a TCP connect, at most
    :data:`PROBE_WAIT` seconds), or None (reached, or not an http(s) URI)."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=PROBE_WAIT).close()
    except OSError as e:
        return f"cannot reach the tracking server {public_uri(uri)} ({e.strerror or type(e).__name__})"
    return None


def off_message(name: str, problem: str) -> str:
    """The one line a cluster says when it stops writing into its MLflow run.

    >>> off_message("etl", "cannot reach the tracking server http://h:5000 (Connection refused)")
    "spark-dask: cluster 'etl' stopped writing into its MLflow run: cannot reach the tracking server http://h:5000 (Connection refused); the cluster runs on"
    """
    return f"spark-dask: cluster {name!r} stopped writing into its MLflow run: {problem}; the cluster runs on"


class Link:
    """Every call of one cluster to MLflow, in order, in a daemon thread of its own.

    The caller never waits on the tracking server but in :meth:`wait`, a named,
    bounded wait. The first call that fails, or a wait whose bound passes, stops the
    link with one line (``say(off_message(...))``); nothing is sent after that.

    Parameters
    ----------
    name : str
        The cluster's name (the line, the thread's name).
    say : callable
        ``say(line)``: the cluster's event, a WARNING record.
    """

    def __init__(self, name: str, say):
        self.name = name
        self.say = say
        self.off = False
        self._lock = threading.Lock()
        self._calls: queue.Queue = queue.Queue()  # send() keeps it to QUEUED; a wait and the end always go in
        self._thread = threading.Thread(target=self._run, name=f"spark-dask-mlflow-{name}", daemon=True)
        self._thread.start()

    def send(self, fn, *args) -> bool:
        """Queue ``fn(*args)``; False where the link is off or the queue full (dropped)."""
        if self.off or self._calls.qsize() >= QUEUED:
            return False
        self._calls.put((fn, args, None))
        return True

    def wait(self, what: str, timeout: float, fn, *args) -> bool:
        """Queue ``fn(*args)`` and wait until it ran, at most ``timeout`` seconds (it is
        ``what`` in the line said when the bound passes); whether it ran without failing."""
        if self.off:
            return False
        done = threading.Event()
        self._calls.put((fn, args, done))
        if not done.wait(timeout):
            self.stop(f"{what} took more than {timeout:g}s")
        return not self.off

    def stop(self, problem: str) -> None:
        """Stop sending, and say why (once)."""
        with self._lock:
            if self.off:
                return
            self.off = True
        self.say(off_message(self.name, Redactor().line(problem)))

    def close(self) -> None:
        """End the thread once what is queued was sent (it does not wait)."""
        self._calls.put(None)

    def _run(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            fn, args, done = item
            try:
                if not self.off:
                    fn(*args)
            except Exception as e:  # noqa: BLE001 - any failure of MLflow stops the link, never the cluster
                text = str(e).strip().splitlines()
                self.stop(f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": "))
            finally:
                if done is not None:
                    done.set()


__all__ = ["Link", "active_run_id", "cluster_params", "off_message", "unreachable", "versions", "wanted"]
