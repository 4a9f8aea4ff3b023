"""How big each Dask worker is, decided inside the Spark task from what Spark gave it:
threads from the task's CPUs (:func:`worker_threads`), memory from the executor's
(:func:`worker_memory`), and the check that a memory limit fits the host. Pure
functions, run on the executors and by the driver's planning (:mod:`spark_dask.plan`).
"""

from __future__ import annotations

from spark_dask.sizes import human_bytes

MIN_MEMORY = 256 * 2**20  # below this a Dask worker is not useful


def memory_problem(limit: int, host_memory: int) -> str | None:
    """A memory limit larger than the host has."""
    if limit > host_memory:
        return (
            f"memory_limit={human_bytes(limit)} per worker exceeds the {human_bytes(host_memory)} of "
            "memory of the host; use memory_limit='auto' (the host's memory left after the Spark "
            "executors, split over its Dask workers) or a smaller size"
        )
    return None


def small_memory_problem(given, limit: int) -> str | None:
    """A memory limit below what a Dask worker needs (:data:`MIN_MEMORY`), read as
    ``limit`` bytes from the ``given`` value; a bare number is bytes in Dask but MiB in
    Spark's memory settings, so the likely intent is named.

    >>> "Did you mean memory_limit='512MiB'?" in small_memory_problem("512", 512)
    True
    >>> small_memory_problem(4 * 2**30, 4 * 2**30) is None
    True
    """
    if limit >= MIN_MEMORY:
        return None
    text = str(given).strip()
    bare = isinstance(given, (int, float)) or text.replace(".", "", 1).isdigit()
    if not bare:
        return (
            f"memory_limit={given!r} is {human_bytes(limit)} per Dask worker, below the "
            f"{human_bytes(MIN_MEMORY)} a Dask worker needs. Give at least '{MIN_MEMORY // 2**20}MiB', "
            "or use memory_limit='auto'."
        )
    number = f"{float(text):g}"
    meant = f"{number}MiB" if float(text) * 2**20 >= MIN_MEMORY else f"{number}GiB"
    return (
        f"memory_limit={given!r} was read as {human_bytes(limit)} per Dask worker: a bare number is bytes "
        f"in Dask (Spark's memory settings read it as MiB), and a Dask worker needs at least "
        f"{human_bytes(MIN_MEMORY)}. Did you mean memory_limit='{meant}'? Or use memory_limit='auto'."
    )


def worker_threads(
    override: int | None,
    task_cpus: int,
    executor_cores: int,
    tasks_on_executor: int,
    workers_in_task: int,
    kind: str = "cpu",
) -> int:
    """Threads per Dask worker.

    ``override`` (``threads_per_worker``) wins. A dask-cuda worker (``kind="cuda"``)
    gets one thread, dask-cuda's own default: a GPU runs one task's kernels at a time,
    and more threads mostly add host-memory pressure and contention for the device.
    A CPU worker gets the task's CPUs, or the executor's cores when the gang has a
    single task on this executor, split over the workers the task starts.
    """
    if override is not None:
        return int(override)
    if kind == "cuda":
        return 1
    cpus = executor_cores if tasks_on_executor == 1 and executor_cores else task_cpus
    return max(1, int(cpus) // max(workers_in_task, 1))


def thread_cores(executor_cores: int, gpu_mode: str | None, barrier: bool, own_executor: bool) -> int:
    """The executor cores a task that is alone on its executor gives its workers
    (:func:`worker_threads`' ``executor_cores``); 0: only the task's own CPUs.

    Sharing GPUs with Spark's tasks, the worker gets its task's CPUs, never the
    executor's other cores (Spark's tasks use them). A plain job's task likewise (other
    workers' tasks may run on the same executor), unless its CPUs keep it alone there.
    """
    shares = gpu_mode == "shared" or not (barrier or own_executor)
    return 0 if shares else int(executor_cores)


def worker_memory(
    override: int | str | None,
    host_memory: int,
    executor_memory: int,
    executors_on_host: int,
    workers_on_host: int,
) -> int:
    """Memory limit (bytes) of each Dask worker on a host.

    ``auto``: what the host has left after the executor JVMs placed on it (all of them,
    ``executors_on_host``, whether they run a task of the cluster or not: the start and
    ``spark-dask info`` count them alike), split over the Dask workers on that host, and
    never below 256 MiB. A number of bytes wins.

    >>> GiB = 2**30
    >>> worker_memory("auto", 32 * GiB, GiB + 384 * 2**20, 2, 1) / GiB  # local-cluster[2,1,1024], one worker
    29.25
    """
    if override not in (None, "auto"):
        return int(override)
    left = host_memory - executors_on_host * executor_memory
    return max(MIN_MEMORY, left // max(workers_on_host, 1))
