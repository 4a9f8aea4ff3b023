"""How big each Dask worker is, decided inside the Spark task from what Spark gave it:
threads from the task's CPUs (:func:`worker_threads`), memory from the executor's
(:func:`worker_memory`), and the check that a memory limit fits the host. Pure
functions, run on the executors and by the driver's planning (:mod:`spark_dask.plan`).
"""

from __future__ import annotations

from spark_dask.sizes import human_bytes

MIN_MEMORY = 256 * 2**20  # below this a Dask worker is not useful
# below this per Dask worker, the room an executor's container leaves them is warned of
MIN_CONTAINER_ROOM = 2**30


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
    container_room: int | None = None,
    workers_in_executor: int = 1,
) -> int:
    """Memory limit (bytes) of each Dask worker on a host.

    ``auto``: what the host has left after the executor JVMs placed on it (all of them,
    ``executors_on_host``, whether they run a task of the cluster or not: the start and
    ``spark-dask info`` count them alike), split over the Dask workers on that host, and
    never below 256 MiB. Where the executors run in containers with a memory limit
    (YARN, Kubernetes: ``container_room`` not None), the host's memory belongs to other
    containers too: the room in the executor's own container, split over the
    ``workers_in_executor``. A number of bytes wins.

    >>> GiB = 2**30
    >>> worker_memory("auto", 32 * GiB, GiB + 384 * 2**20, 2, 1) / GiB  # local-cluster[2,1,1024], one worker
    29.25
    >>> worker_memory("auto", 32 * GiB, 5 * GiB, 2, 2, container_room=4 * GiB, workers_in_executor=2) / GiB
    2.0
    """
    if override not in (None, "auto"):
        return int(override)
    if container_room is not None:
        return max(MIN_MEMORY, container_room // max(workers_in_executor, 1))
    left = host_memory - executors_on_host * executor_memory
    return max(MIN_MEMORY, left // max(workers_on_host, 1))


def _container_name(master: str) -> str:
    return "Kubernetes" if master.startswith("k8s") else "YARN"


def warning(advice: tuple[str, str] | None) -> str | None:
    """The start-up warning of an ``(what, fix)`` pair (:func:`container_advice`,
    :func:`pyspark_memory_advice`); None for None.

    >>> warning(("x is small", "Raise it")), warning(None)
    ('spark-dask: x is small. Raise it.', None)
    """
    return None if advice is None else f"spark-dask: {advice[0]}. {advice[1]}."


def container_advice(limit: int | str, room: int | None, workers: int, master: str) -> tuple[str, str] | None:
    """What is wrong and what to do, where the Dask workers' memory does not fit their
    executor's container (``room``: :attr:`spark_dask.capacity.ClusterFacts.container_room`;
    None: no container) for ``workers`` Dask workers per executor; None where it fits.
    The start warns of it (:func:`warning`), the doctor reports it.

    >>> print(warning(container_advice("auto", 0, 1, "yarn")))  # doctest: +ELLIPSIS
    spark-dask: on YARN the Dask workers run inside the executors' containers, which leave them nothing beyond what the executor's JVM and PySpark need (...): each of the 1 Dask worker per executor gets memory_limit=256 MiB, and YARN kills a container that uses more than its size. Raise spark.executor.memoryOverhead ...
    >>> container_advice("auto", 8 * 2**30, 2, "yarn") is None, container_advice(2**30, None, 4, "spark://h:7077")
    (True, None)
    >>> print(warning(container_advice(8 * 2**30, 2**30, 1, "k8s://https://k:443")))  # doctest: +ELLIPSIS
    spark-dask: memory_limit=8 GiB per Dask worker is more than the 1 GiB the executors' containers leave to their 1 Dask worker on Kubernetes: ...
    """
    if room is None:
        return None
    where = _container_name(master)
    per_worker = room // max(workers, 1)
    grow = (
        "spark.executor.memoryOverhead when the application starts, by about 2 GiB per Dask worker "
        f"({human_bytes(2 * 2**30 * max(workers, 1))} for {workers} per executor; Spark adds it to every "
        "executor's container)"
    )
    if limit == "auto":
        if per_worker >= MIN_CONTAINER_ROOM:
            return None
        return (
            f"on {where} the Dask workers run inside the executors' containers, which leave them "
            f"{human_bytes(room) if room else 'nothing'} beyond what the executor's JVM and PySpark need "
            "(spark.executor.memoryOverhead less Spark's default overhead, 10 % of the heap and at least "
            f"384 MiB): each of the {workers} Dask worker{'s' if workers != 1 else ''} per executor gets "
            f"memory_limit={human_bytes(max(MIN_MEMORY, per_worker))}, and {where} kills a container that "
            "uses more than its size",
            f"Raise {grow}",
        )
    if int(limit) <= per_worker:
        return None
    return (
        f"memory_limit={human_bytes(int(limit))} per Dask worker is more than the {human_bytes(room)} the "
        f"executors' containers leave to their {workers} Dask worker{'s' if workers != 1 else ''} on "
        f"{where}: {where} kills the container before Dask spills or pauses the worker",
        f"Lower memory_limit (or use memory_limit='auto'), or raise {grow}",
    )


def pyspark_memory_advice(pyspark_memory: int, executor_cores: int) -> tuple[str, str] | None:
    """What is wrong and what to do where ``spark.executor.pyspark.memory`` is set
    (``pyspark_memory`` bytes; 0: unset): PySpark limits each Python worker's address
    space to its share, and the Dask workers a Spark task starts inherit that limit.

    >>> print(warning(pyspark_memory_advice(4 * 2**30, 4)))  # doctest: +ELLIPSIS
    spark-dask: spark.executor.pyspark.memory (4 GiB) limits the address space of each of PySpark's Python workers to 1 GiB ...
    >>> pyspark_memory_advice(0, 4) is None
    True
    """
    if not pyspark_memory:
        return None
    share = pyspark_memory // max(int(executor_cores), 1)
    return (
        f"spark.executor.pyspark.memory ({human_bytes(pyspark_memory)}) limits the address space of each of "
        f"PySpark's Python workers to {human_bytes(share)} (its share of the executor's cores, as an RLIMIT_AS "
        "that only root can raise), and the Dask workers a Spark task starts inherit that limit: allocations "
        "beyond it fail with MemoryError whatever memory_limit says, and a worker that maps more address "
        "space than that (threads, libraries) fails to start",
        "For Dask workers leave spark.executor.pyspark.memory unset and give their room as "
        "spark.executor.memoryOverhead instead",
    )
