"""Each GPU worker's host-wide claim on its GPU (an abstract Unix socket held while the
task runs), so that gangs started later never put a second worker of the cluster on it;
and the GPUs of an executor a gang shares with Spark (:func:`executor_gpus`).

Shipped by value with the task code (:mod:`spark_dask.executor`): the standard library
only at module level.
"""

from __future__ import annotations

import os
import socket
import sys
import time

from spark_dask.errors import WorkerStartError
from spark_dask.executor.placement import executor_gpu_list, physical_gpu, shared_addresses
from spark_dask.executor.task_spec import TaskSpec


def executor_gpus(
    spec: TaskSpec, executor: str, own: list[str] | None = None, executor_id: str | None = None
) -> list[str]:
    """The physical GPUs of an executor (``host:port``, its id where known), for a gang
    sharing them with Spark.

    See :func:`spark_dask.executor.placement.executor_gpu_list`; addresses are mapped through this
    task's ``CUDA_VISIBLE_DEVICES``.
    """
    host = executor.rsplit(":", 1)[0]
    candidates = spec.executor_gpus.get(host) or []
    registered = spec.gpus_by_executor.get(str(executor_id)) if executor_id is not None else None
    addresses = executor_gpu_list(candidates, own or [], spec.gpus_per_executor, registered)
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    return [physical_gpu(a, cvd) for a in addresses]


def host_shared_gpus(spec: TaskSpec, host: str) -> list[str]:
    """The physical GPUs that several executors of ``host`` registered with
    (:func:`spark_dask.executor.placement.shared_addresses`)."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    return [physical_gpu(a, cvd) for a in shared_addresses(spec.executor_gpus.get(host) or [])]


class _NoClaim:
    """Where abstract sockets do not exist (not Linux): claims always succeed."""

    def close(self) -> None:
        pass


def _claim(cluster_id: str, gpu: str):
    """A host-wide claim on ``gpu`` for the cluster ``cluster_id``, or None if taken.

    An abstract Unix socket (Linux): its name is unique per network namespace, i.e. per
    host or container, the kernel frees it when the process holding it dies, and it
    leaves no file behind. The task holds it while its worker runs.
    """
    if not sys.platform.startswith("linux"):
        return _NoClaim()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("\0" + f"spark-dask/{cluster_id}/gpu/{gpu}"[:100])
    except OSError:
        sock.close()
        return None
    return sock


def claim_gpus(
    cluster_id: str,
    mine: list[dict],
    spare: list[str],
    wait: float,
    name,
    where: str,
    shared: list[str] | tuple[str, ...] = (),
):
    """Claim the GPU of each of this task's workers; a worker whose GPU another worker of
    the cluster holds takes a free one of ``spare`` (the executor's GPUs, when the gang
    shares them with Spark) and is renamed (``name(gpu)``).

    Retries for ``wait`` seconds (a retired worker's task may still be ending), then
    raises :class:`WorkerStartError`, which names the GPUs of ``shared`` (those that
    several executors of this host registered with, :func:`host_shared_gpus`) as the
    cause where the missing ones are among them. Returns (workers, claims to close at
    the end).
    """
    deadline = time.monotonic() + wait
    while True:
        claims, out, missing = [], [], []
        for w in mine:
            options = [w["gpu"]] + [g for g in spare if g != w["gpu"]]
            for gpu in options:
                if any(o["gpu"] == gpu for o in out):
                    continue
                claim = _claim(cluster_id, gpu)
                if claim is not None:
                    claims.append(claim)
                    out.append(w if gpu == w["gpu"] else {**w, "gpu": gpu, "name": name(gpu)})
                    break
            else:
                missing.append(w["gpu"])
        if not missing:
            return out, claims
        for claim in claims:
            claim.close()
        if time.monotonic() >= deadline:
            overlap = list(shared) if set(shared) & set(missing) else []
            raise WorkerStartError(no_free_gpu_message(where, sorted(set(spare) | {w["gpu"] for w in mine}), overlap))
        time.sleep(0.2)


def no_free_gpu_message(where: str, held: list[str], shared: list[str]) -> str:
    """Why no GPU was free: executors of this host registered the same GPUs (``shared``),
    or the executor's GPUs all run a worker of the cluster already."""
    if shared:
        return (
            f"spark-dask: no free GPU for a Dask worker on {where}: several executors of this "
            f"host registered the same GPUs {shared} (each one's discovery script reports the "
            f"host's GPUs), and another executor's Dask worker holds them. Give each executor "
            f"GPUs of its own (one standalone Worker per host: spark.worker.resource.gpu.* "
            f"splits the host's GPUs among its executors; or a discovery script that reports "
            f"only the executor's), or start fewer workers."
        )
    return (
        f"spark-dask: no free GPU for a Dask worker on {where}: GPUs {held} of this host "
        f"are all used by other workers of this Dask cluster (another gang's). Scale to "
        f"fewer workers, or add executors with GPUs."
    )
