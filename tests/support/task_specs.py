"""A :class:`~spark_dask.executor.task_spec.TaskSpec` for tests that run task code without a cluster,
stand-ins for what that code talks to (a plain TaskContext, a gang's launcher), and the Spark
facts the pure rules are tested on."""

from __future__ import annotations

import dataclasses
import threading

import distributed

from spark_dask import options
from spark_dask.capacity import ClusterFacts
from spark_dask.executor.task_spec import TaskSpec
from spark_dask.gangs.maker import preload_source


def small_facts(**kw) -> ClusterFacts:
    """The facts of ``local-cluster[2,1,1024]`` (2 executors of 1 core and 1 GiB), with ``kw``."""
    base = dict(executors=2, executor_cores=1, executor_memory=2**30, slots=2, master="local-cluster[2,1,1024]")
    base.update(kw)
    return ClusterFacts(**base)


def cluster_options(**changes) -> options.ClusterOptions:
    """The options a cluster started with no argument gets (this process's dask config),
    with ``changes``."""
    resolved = options.resolve(**{o.name: None for o in options.keyword_options() if o.config})
    return dataclasses.replace(resolved, **changes)


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


class FakeLauncher:
    """What Gang uses of GangLauncher: a job that ends when told to."""

    def __init__(self, spark, plan, spec, tag, description, on_done=None):
        self.plan, self.spec, self.tag, self.description, self.on_done = plan, spec, tag, description, on_done
        self.done = threading.Event()
        self.error = None
        self.rows = []
        self.cancelled = 0

    def start(self):
        pass

    def wait_job_listed_ended(self, timeout):
        return True

    def join(self, timeout=None):
        return self.done.wait(timeout or 0)

    def cancel(self):
        self.cancelled += 1
        self.finish()

    def finish(self, error=None, rows=()):
        self.error = error
        self.rows = list(rows)
        self.done.set()
        if self.on_done is not None:
            self.on_done(self)
