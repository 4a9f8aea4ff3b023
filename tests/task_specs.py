"""A :class:`~spark_dask.spec.TaskSpec` for tests that run task code without a cluster."""

from __future__ import annotations

import distributed

from spark_dask.spec import TaskSpec, preload_source


def make_spec(**changes) -> TaskSpec:
    """A CPU cluster's task specification (2 workers, one per task, plain TCP, the
    default command) with ``changes`` applied."""
    values = {
        "cluster_id": "spark-dask-test",
        "scheduler_address": "tcp://127.0.0.1:1",
        "tls": None,
        "kind": "cpu",
        "pinned": False,
        "gather": False,
        "gpu_mode": None,
        "executor_gpus": {},
        "gpus_per_executor": 0,
        "workers_per_task": 1,
        "n_workers": 2,
        "multiprocessing_method": None,
        "fork_nanny": True,
        "requires": [],
        "distributed_version": distributed.__version__,
        "threads_per_worker": None,
        "memory_limit": "auto",
        "executor_cores": 2,
        "own_executor": False,
        "executor_memory": 2**28,
        "worker_options": {},
        "worker_command": None,
        "death_timeout": 5,
        "kill_grace": 1,
        "connect_timeout": 2,
        "env": {},
        "rmm": None,
        "preload": preload_source(),
    }
    values.update(changes)
    return TaskSpec(**values)


class _Resource:
    def __init__(self, addresses):
        self.addresses = addresses


class FakePlainContext:
    """What a plain TaskContext answers: no allGather, no getTaskInfos."""

    def __init__(self, partition, gpus=(), cpus=1):
        self._partition = partition
        self._gpus = list(gpus)
        self._cpus = cpus

    def partitionId(self):
        return self._partition

    def resources(self):
        return {"gpu": _Resource(self._gpus)} if self._gpus else {}

    def cpus(self):
        return self._cpus
