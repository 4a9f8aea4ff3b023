"""``start()``: a :class:`~spark_dask.cluster.SparkCluster` as a connected Client, which
owns its cluster (closing the Client closes the cluster).

Its parameters and their docs are ``SparkCluster``'s, written out here by
``tools/generate.py`` (but ``asynchronous`` and ``loop``).
"""

from __future__ import annotations

from distributed import Client

from spark_dask import options
from spark_dask.cluster import SparkCluster


class _ClusterClient(Client):
    """A Client that owns its SparkCluster: closing it closes the cluster."""

    _collected = False

    def close(self, timeout=None):
        try:
            if timeout is None:
                return super().close()
            return super().close(timeout=timeout)
        finally:
            cluster = self.cluster
            # Not from the garbage collector: it may run inside another cluster's
            # loop start-up, which holds the lock that stopping a loop needs.
            if cluster is not None and not self._collected:
                cluster.close()

    def __del__(self):
        self._collected = True
        super().__del__()


@options.keywords_checked("start()")
def start(
    spark=None,
    *,
    n_workers: int | None = None,
    worker: str | None = None,
    threads_per_worker: int | None = None,
    memory_limit: int | str | None = None,
    worker_options: dict | None = None,
    worker_command: str | list | None = None,
    worker_groups: dict | None = None,
    timeout: str | float | None = None,
    tls: bool | None = None,
    dashboard: bool | None = None,
    progress: bool | None = None,
    task_profile: bool | str | None = None,
    gpu_mode: str | None = None,
    scheduler_host: str | None = None,
    env: dict | None = None,
    silence_logs: str | int | bool | None = None,
    require_encryption: bool | None = None,
    relaunch_attempts: int | None = None,
    barrier: bool | str | None = None,
    name: str | None = None,
    idle_timeout: str | float | None = None,
    log_directory: str | None = None,
    databricks_credentials: bool | None = None,
    mlflow: bool | str | None = None,
    quiet: bool = False,
) -> Client:
    """Start a Dask cluster in the Spark application and return a connected Client.

    Returns once every worker is connected. Leaving the ``with`` block (or
    ``client.close()``) closes the workers, the Spark barrier job and the scheduler.
    Keyword arguments are those of ``SparkCluster`` (but ``asynchronous`` and ``loop``:
    use ``await SparkCluster(..., asynchronous=True)`` in an event loop).

    Parameters
    ----------
    spark : SparkSession, optional
        Classic or Spark Connect session; defaults to the active session (looked up
        now). With Spark Connect the scheduler runs in this Python process, not on the
        Spark driver.
    n_workers : int, optional
        Number of Dask workers at start; ``cluster.scale(n)`` / ``cluster.adapt(...)``
        change it later. Default: one per executor GPU, else one per executor.
        (``spark-dask.n-workers``; CLI ``--n-workers``)
    worker : {'auto', 'cuda', 'cpu'}, optional
        Worker program: ``cuda`` (dask-cuda), ``cpu`` (nanny + worker); ``auto``:
        ``cuda`` when the Spark tasks own GPUs. Default: ``'auto'``.
        (``spark-dask.worker``; CLI ``--worker``)
    threads_per_worker : int, optional
        Threads per worker. Default: dask-cuda: 1; CPU: the task's CPUs (executor cores
        with one gang task per executor). (``spark-dask.threads-per-worker``; CLI
        ``--threads-per-worker``)
    memory_limit : int or str, optional
        Memory per worker: bytes, a size such as ``8GiB``, or ``auto``. Default:
        ``'auto'``. (``spark-dask.memory-limit``; CLI ``--memory-limit``)
    worker_options : dict, optional
        Extra worker command-line options, e.g. ``{"rmm_pool_size": "10GB"}`` →
        ``--rmm-pool-size 10GB``. Default: ``{}``. (``spark-dask.worker-options``; CLI
        ``--worker-option``)
    worker_command : str or list, optional
        A command template (string or list) that replaces the default worker command.
        Default: ``None``. (``spark-dask.worker-command``; CLI ``--worker-command``)
    env : dict, optional
        Environment variables for the worker processes. Default: none. (CLI ``--env``)
    worker_groups : dict, optional
        More kinds of worker beside the default ones: ``{name: {worker, n_workers,
        ...}}``. Default: none. (``spark-dask.worker-groups``; CLI ``--worker-group``)
    task_profile : {'auto', True, False}, optional
        Ask Spark for a stage-level task resource profile for the gang. Default:
        ``'auto'``. (``spark-dask.task-profile``; CLI ``--task-profile``)
    barrier : {'auto', True, False}, optional
        Run the workers as one Spark barrier stage (``true``) or each as a Spark job of
        its own (``false``). Default: ``'auto'``. (``spark-dask.barrier``; CLI
        ``--barrier``)
    timeout : str or float, optional
        How long ``start()`` waits for every worker before it fails. Default:
        ``'180s'``. (``spark-dask.timeout``; CLI ``--timeout``)
    name : str, optional
        The cluster's name: other Python processes of this user on this host join it
        with ``SparkCluster.from_name(name)``; ``spark-dask list`` shows it. Default:
        the Spark job tag, ``spark-dask-<id>``. (``spark-dask.name``; CLI ``--name``)
    idle_timeout : str or float, optional
        Close the cluster after this long without Dask tasks or work from its clients;
        its Spark task slots return to Spark. Default: ``None``.
        (``spark-dask.idle-timeout``; CLI ``--idle-timeout``)
    relaunch_attempts : int, optional
        How often failed gangs (a lost executor) are relaunched while the cluster runs;
        each relaunch replaces only the failed gang's workers. Default: ``3``.
        (``spark-dask.relaunch-attempts``; CLI ``--relaunch-attempts``)
    tls : bool, optional
        TLS with fresh per-cluster credentials between scheduler, workers and clients.
        Default: ``True``. (``spark-dask.tls``; CLI ``--tls / --no-tls``)
    require_encryption : bool, optional
        Refuse to start unless Spark encrypts its own RPC. Default: ``False``.
        (``spark-dask.require-encryption``; CLI ``--require-encryption /
        --no-require-encryption``)
    scheduler_host : str, optional
        Address of this machine that the executors use to reach the scheduler (it
        listens there). Default: the driver's address; Connect: this machine's address
        towards the server. (``spark-dask.scheduler-host``; CLI ``--scheduler-host``)
    databricks_credentials : bool, optional
        Give the workers the notebook's Databricks workspace host and token
        (``DATABRICKS_HOST``, ``DATABRICKS_TOKEN``), for MLflow and the Databricks SDK
        in Dask tasks. Default: ``False``. (``spark-dask.databricks-credentials``; CLI
        ``--databricks-credentials / --no-databricks-credentials``)
    dashboard : bool, optional
        Serve the scheduler's dashboard. Default: ``True``. (``spark-dask.dashboard``;
        CLI ``--dashboard / --no-dashboard``)
    log_directory : str, optional
        A directory where the scheduler's, the workers' and the Spark tasks' logs are
        kept, also after the cluster closed or a worker crashed. Default: ``None``.
        (``spark-dask.log-directory``; CLI ``--log-directory``)
    progress : bool, optional
        Show "2/4 Dask workers connected" while starting (terminal and notebook).
        Default: ``True``. (``spark-dask.progress``; CLI ``--progress / --no-progress``)
    silence_logs : str or False, optional
        Level below which the scheduler's log lines are not printed; ``false`` prints
        them all. Default: ``'warning'``. (``spark-dask.silence-logs``; CLI
        ``--silence-logs``)
    mlflow : {'auto', True, False}, optional
        Keep what the cluster did in the MLflow run: its workers and versions (params),
        its workers, memory, tasks and GPUs over time (metrics), its performance report
        and logs (artifacts at close). Default: ``'auto'``. (``spark-dask.mlflow``; CLI
        ``--mlflow``)
    gpu_mode : {'auto', 'shared', 'exclusive'}, optional
        GPU executors: run the workers beside Spark's own GPU tasks (``shared``) or hold
        their GPUs whole (``exclusive``). Default: ``'auto'``. (``spark-dask.gpu-mode``;
        CLI ``--gpu-mode``)
    quiet : bool
        No progress line and no slot warning.

    Notes
    -----
    Every keyword defaults to its ``dask.config`` key ``spark-dask.<name>`` (``_`` as
    ``-``), set in ``spark_dask/spark_dask.yaml``, by ``dask.config.set`` or by an
    environment variable such as ``DASK_SPARK_DASK__TIMEOUT=5m``; an explicit argument
    wins. Keys without a keyword argument: ``multiprocessing-method``, ``fork-nanny``,
    ``executor-wait``, ``slot-wait``, ``close-timeout``, ``death-timeout``,
    ``kill-grace``, ``lost-worker-grace``, ``no-workers-timeout``, ``drain-timeout``,
    ``close-on-sigterm``, ``state-dir``, ``connect-timeout``, ``dashboard-prefix``,
    ``mlflow-interval``, ``rapids.rmm-pool-size``, ``rapids.rmm-reserve``,
    ``rapids.rmm-fraction``, ``rapids.spill-fraction``, ``rapids.dask-fraction``. The
    configuration page of the docs describes each one (generated, like this section,
    from ``spark_dask/options.py``).

    Examples
    --------
    >>> with spark_dask.start(spark) as client:          # doctest: +SKIP
    ...     ddf.groupby("k").x.mean().compute()
    """
    cluster = SparkCluster(spark, **{k: v for k, v in locals().items() if k != "spark"})
    try:
        return _ClusterClient(cluster)
    except BaseException:
        cluster.close()
        raise


__all__ = ["start"]
