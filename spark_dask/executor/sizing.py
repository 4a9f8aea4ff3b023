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

    ``auto``: what the host has left after the executor JVMs placed on it, split over
    the Dask workers on that host, and never below 256 MiB. A number of bytes wins.
    """
    if override not in (None, "auto"):
        return int(override)
    left = host_memory - executors_on_host * executor_memory
    return max(MIN_MEMORY, left // max(workers_on_host, 1))
