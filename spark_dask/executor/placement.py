"""Where each Dask worker of a gang goes, decided inside the Spark task: its name, its
GPU (the physical one behind Spark's address and ``CUDA_VISIBLE_DEVICES``), which
task starts which workers, and what a short gang lacks. Pure functions, run on the
executors (:mod:`spark_dask.executor.gang_task`) and doctested here.
"""

from __future__ import annotations


def physical_gpu(address: str, cuda_visible_devices: str | None) -> str:
    """Map a Spark GPU address (an index) through an existing ``CUDA_VISIBLE_DEVICES``.

    >>> physical_gpu("1", "4,5,6")
    '5'
    >>> physical_gpu("GPU-abc", None)
    'GPU-abc'
    """
    if not cuda_visible_devices:
        return address
    visible = [d.strip() for d in cuda_visible_devices.split(",") if d.strip()]
    if address.isdigit() and int(address) < len(visible):
        return visible[int(address)]
    return address


def worker_name(index: int, gpu: str | None = None, attempt: int = 0) -> str:
    """Dask worker name: ``spark-<n>`` or ``spark-<n>-gpu<id>``.

    ``n`` numbers the cluster's Spark tasks over every gang it ever submitted (the
    first gang's tasks are 0, 1, ...; each scale-up and relaunch continues the count),
    so names stay unique: the scheduler refuses a worker whose name another worker still
    holds. A task that Spark itself runs again (attempt > 0, plain jobs under dynamic
    allocation) adds ``-a<attempt>``.

    >>> worker_name(3), worker_name(3, "1"), worker_name(3, None, 1)
    ('spark-3', 'spark-3-gpu1', 'spark-3-a1')
    """
    name = f"spark-{index}" if gpu is None else f"spark-{index}-gpu{gpu}"
    return f"{name}-a{attempt}" if attempt else name


def task_number(name: str) -> int | None:
    """The task number in a worker name of :func:`worker_name`; None for other names.

    >>> task_number("spark-3-gpu1"), task_number("spark-12"), task_number("other")
    (3, 12, None)
    """
    parts = str(name).split("-")
    return int(parts[1]) if len(parts) > 1 and parts[0] == "spark" and parts[1].isdigit() else None


def assign_workers(gathered: list[dict], pinned: bool, base: int = 0) -> dict[int, list[dict]]:
    """Which task starts which workers, from every task's facts (``allGather``).

    Each entry of ``gathered`` has ``partition``, ``host`` and ``gpus`` (physical ids).
    With ``pinned``, every physical GPU of a host gets exactly one worker, started by
    the lowest partition that owns it; tasks that share a GPU (fractional
    ``spark.task.resource.gpu.amount``) agree on this without talking to each other.
    Without ``pinned``, each task starts one unpinned worker. Worker names count from
    ``base`` (the gang's first task number in the cluster).
    """
    out: dict[int, list[dict]] = {}
    claimed: set[tuple[str, str]] = set()
    for t in sorted(gathered, key=lambda t: t["partition"]):
        p = t["partition"]
        mine = []
        if not pinned:
            mine.append({"name": worker_name(base + p, None), "gpu": None})
        else:
            for gpu in t.get("gpus") or []:
                key = (t["host"], gpu)
                if key in claimed:
                    continue
                claimed.add(key)
                mine.append({"name": worker_name(base + p, gpu), "gpu": gpu})
        out[p] = mine
    return out


def executor_gpu_list(
    candidates: list[list[str]], own: list[str], count: int, registered: list[str] | None = None
) -> list[str]:
    """The GPU addresses of an executor, from what the driver knows of it and its host.

    ``registered`` are the addresses the executor registered with, found by its id
    (:func:`spark_dask.executor.task_context.executor_id`): the answer wherever the
    driver knows them, however many executors share the host. Otherwise, by host:
    ``candidates`` are the address lists of the executors on the executor's host;
    ``own`` the addresses Spark gave the asking task (a share of one of them), which
    tells executors on one host apart. Without a single answer, the executor's
    ``count`` GPUs are taken to be ``0..count-1``, what discovery scripts based on
    ``nvidia-smi`` report (Databricks, the Spark RAPIDS examples).

    >>> executor_gpu_list([["0", "1"], ["2", "3"]], [], 2, ["2", "3"])
    ['2', '3']
    >>> executor_gpu_list([["0", "1"], ["2", "3"]], ["2"], 2)
    ['2', '3']
    >>> executor_gpu_list([], [], 2)
    ['0', '1']
    """
    if registered:
        return list(registered)
    matches = [list(c) for c in candidates if set(own) <= set(c)] if own else [list(c) for c in candidates]
    distinct = {tuple(m) for m in matches}
    if len(distinct) == 1:
        return list(next(iter(distinct)))
    return [str(i) for i in range(int(count))]


def shared_addresses(candidates: list[list[str]]) -> list[str]:
    """The GPU addresses that more than one executor of a host registered with.

    On one host an address names one device, and Spark hands each executor its own
    (a standalone Worker or a NodeManager splits the host's GPUs): an address in two
    executors' lists means each one's discovery script reports the whole host's GPUs,
    so their Dask workers would meet on the same GPU.

    >>> shared_addresses([["0", "1"], ["0", "1"], ["2"]])
    ['0', '1']
    >>> shared_addresses([["0", "1"], ["2", "3"]])
    []
    """
    seen: dict[str, int] = {}
    for addresses in candidates:
        for a in set(addresses):
            seen[a] = seen.get(a, 0) + 1
    return sorted(a for a, n in seen.items() if n > 1)


def assign_shared(gang: list[dict], executor_gpus: dict[str, list[str]], base: int = 0) -> dict[int, list[dict]]:
    """Which task starts which worker when the gang shares the executors' GPUs.

    Spark gives the gang's tasks GPU *shares* (or none), so the addresses it assigns do
    not tell the tasks apart. Instead the tasks on one executor (``executor`` of each
    entry of ``gang``) take its GPUs (``executor_gpus[executor]``, physical ids) in the
    order of their partitions: the k-th task on an executor runs the worker of its k-th
    GPU. Every task computes the same answer from the gang's placement alone. Worker
    names count from ``base``. Other gangs of the cluster may already use some of these
    GPUs: each task then takes another free one (``run_task``'s GPU claims).
    """
    out: dict[int, list[dict]] = {}
    rank: dict[str, int] = {}
    for t in sorted(gang, key=lambda t: t["partition"]):
        i = rank.get(t["executor"], 0)
        rank[t["executor"]] = i + 1
        gpus = executor_gpus.get(t["executor"]) or []
        p = t["partition"]
        out[p] = [{"name": worker_name(base + p, gpus[i]), "gpu": gpus[i]}] if i < len(gpus) else []
    return out


def gang_shortfall(assignment: dict[int, list[dict]], expected: int, pinned: bool, shared: bool = False) -> str | None:
    """Explain why the gang would start fewer workers than ``expected``, else None."""
    total = sum(len(v) for v in assignment.values())
    if total == expected:
        return None
    empty = sorted(p for p, ws in assignment.items() if not ws)
    if shared:
        return (
            f"the Spark tasks can start {total} Dask worker{'' if total == 1 else 's'}, not the {expected} requested: Spark "
            "placed more of the gang's tasks on some executors than they have GPUs, and fewer "
            "on others (their task slots were busy with Spark jobs)"
            + (f"; tasks without a GPU: {empty}" if empty else "")
            + f". Start the cluster again once those jobs are done, or pass n_workers={total}."
        )
    why = (
        "several tasks were given the same GPU (fractional spark.task.resource.gpu.amount "
        "without stage-level scheduling) or tasks got no GPU"
        if pinned
        else "tasks were placed unexpectedly"
    )
    return (
        f"the Spark tasks can start {total} Dask worker{'' if total == 1 else 's'}, not the {expected} requested: {why}"
        + (f" (tasks without a GPU of their own: {empty})" if empty else "")
        + ". Set spark.task.resource.gpu.amount=1, or pass n_workers="
        + f"{total}."
    )


def gpu_env(gpu: str | None, user_env: dict | None = None) -> dict:
    """Environment variables that pin a worker to its GPU.

    ``CUDA_VISIBLE_DEVICES`` is the physical GPU (an index as Spark's discovery
    script and NVML count, or a UUID). ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes CUDA
    number devices the same way: its default, ``FASTEST_FIRST``, can put another GPU
    at index 3 than the one ``nvidia-smi`` calls 3 on hosts with mixed GPUs. A
    ``CUDA_DEVICE_ORDER`` in the user's ``env`` wins. No GPU: nothing.

    >>> gpu_env("3")
    {'CUDA_VISIBLE_DEVICES': '3', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'}
    >>> gpu_env(None)
    {}
    """
    if gpu is None:
        return {}
    env = {"CUDA_VISIBLE_DEVICES": str(gpu)}
    if "CUDA_DEVICE_ORDER" not in (user_env or {}):
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env
