"""``spark-dask info``: the cluster a start would make on this Spark application
(:func:`describe`: the application's facts, the planned gang and worker groups, each
worker's threads, memory and command line), without starting anything.
"""

from __future__ import annotations

import shlex

from dask.utils import format_bytes, parse_timedelta

from spark_dask import options, rapids
from spark_dask.capacity import hog_warning, spare_slots, task_cpus, workers_per_executor
from spark_dask.errors import PlanError
from spark_dask.executor.command import worker_command
from spark_dask.executor.gang_task import PRELOAD_MODULE, host_memory
from spark_dask.executor.sizing import worker_memory
from spark_dask.options import config
from spark_dask.options.groups import group_holds, plan_groups
from spark_dask.plan import gang_threads, plan_gang
from spark_dask.report import task_request
from spark_dask.sizes import plural
from spark_dask.spark import databricks
from spark_dask.spark.session import cluster_facts
from spark_dask.spark.session import conf as spark_conf


def describe(
    spark,
    n_workers=None,
    worker=None,
    task_profile=None,
    threads_per_worker=None,
    memory_limit=None,
    gpu_mode=None,
    barrier=None,
    worker_groups=None,
) -> dict:
    """What a cluster would look like on this Spark application; starts nothing.

    Reads the session (executors, slots, GPUs), resolves the options
    (:func:`spark_dask.options.resolve`) and plans the gang exactly as
    :class:`~spark_dask.SparkCluster` does, without submitting a Spark job; and shows
    the command line each Dask worker would run (``"worker command"``).
    """
    facts = cluster_facts(spark, parse_timedelta(config.get("executor-wait")))
    out = _facts_rows(facts)
    given = {
        "n_workers": n_workers,
        "worker": worker,
        "task_profile": task_profile,
        "gpu_mode": gpu_mode,
        "threads_per_worker": threads_per_worker,
        "memory_limit": memory_limit,
        "barrier": barrier,
        "worker_groups": worker_groups or None,
    }
    try:
        opts = options.resolve(**{**{o.name: None for o in options.keyword_options() if o.config}, **given})
        plan = plan_gang(facts, opts.n_workers, opts.worker, opts.task_profile, opts.gpu_mode, opts.barrier)
        group_plans = plan_groups(facts, opts.worker_groups, opts, ((plan.n_tasks, task_cpus(plan, facts)),))
    except PlanError as e:
        out["error"] = str(e)
        return out
    out.update(_plan_rows(facts, plan, group_holds(group_plans, facts)))
    if group_plans:
        out["worker groups"] = {name: _group_row(facts, p) for name, p in group_plans.items()}
    fewest, most = gang_threads(facts, plan, opts.threads_per_worker)
    threads = fewest if fewest == most else "<nthreads>"
    out["threads per worker"] = (
        fewest if fewest == most else f"{fewest}-{most} (depends on how Spark places the tasks on the executors)"
    )
    memory, out["memory per worker"] = _worker_memory(facts, plan, opts.memory_limit)
    out["worker command"] = _shell_line(info_worker_command(plan, opts, threads, memory))
    db = databricks.detect(spark)
    if db is not None:
        out["databricks"] = {
            "runtime": db.runtime_version,
            "workspace": db.workspace,
            "cloud": db.cloud,
            "cluster": db.cluster_id,
            "dashboard": (databricks.proxy_url(db, 0).replace("/0/", "/<port>/") if db.has_proxy else None),
        }
    if plan.kind == "cuda":
        warnings_ = rapids.check_rapids(lambda key: spark_conf(spark, key), float(config.get("rapids.dask-fraction")))
        out["rapids"] = warnings_ or "ok"
    return out


def _facts_rows(facts) -> dict:
    """``info``'s rows about the Spark application."""
    return {
        "master": facts.master,
        "executors": facts.executors,
        "executor cores": facts.executor_cores,
        "executor memory": format_bytes(facts.executor_memory),
        "executor GPUs": facts.executor_gpus,
        "task cpus": facts.task_cpus,
        "task GPUs": facts.task_gpus,
        "task slots": facts.slots,
    }


def _plan_rows(facts, plan, groups: tuple = ()) -> dict:
    """``info``'s rows about the planned gang (workers, tasks, warnings); ``groups``:
    the ``(name, tasks, CPUs per task)`` of the worker groups beside it."""
    out = {
        "workers": plan.n_workers,
        "worker kind": plan.kind,
        "one worker per GPU": plan.pinned,
        "barrier tasks" if plan.barrier else "Spark jobs (one task each)": plan.n_tasks,
        "task request": (
            {"cpus": plan.task_cpus or facts.task_cpus, "gpus": plan.task_gpus}
            if plan.uses_profile
            else "default resource profile"
        ),
        "free slots while running": spare_slots(facts, plan, tuple((n, c) for _, n, c in groups)),
    }
    if plan.gpu_mode:
        out["GPU mode"] = plan.gpu_mode
    notes = [n for n in plan.notes + (hog_warning(facts, plan, (), groups),) if n]
    if notes:
        out["warnings"] = notes
    return out


def _group_row(facts, plan) -> str:
    """A worker group's row of ``info``: its workers, kind and Spark task request."""
    workers = plural(plan.n_workers, plan.kind + " worker")
    return f"{workers}, {plural(plan.n_tasks, 'task')} ({task_request(plan, facts)})"


def _worker_memory(facts, plan, limit) -> tuple[int | None, str]:
    """(bytes, as shown) of each worker's memory limit; bytes None where each host
    decides (``auto`` off local mode)."""
    if limit != "auto":
        return int(limit), format_bytes(int(limit))
    if facts.container_room is not None:
        # YARN, Kubernetes: the room in each executor's container, over its workers
        size = worker_memory("auto", 0, 0, 0, 0, facts.container_room, workers_per_executor(facts, plan))
        return size, format_bytes(size) + " (auto: the room in each executor's container)"
    if facts.master.startswith("local"):
        # Every executor runs on this host.
        size = worker_memory("auto", host_memory(), facts.executor_memory, facts.executors, plan.n_workers)
        return size, format_bytes(size) + " (auto)"
    return None, (
        "auto: each host's memory less its executors' "
        f"({format_bytes(facts.executor_memory)} each), split over its workers"
    )


def _shell_line(cmd: list[str]) -> str:
    """``cmd`` as a shell line; the ``<...>`` placeholders unquoted."""
    return " ".join(p if p.startswith("<") and p.endswith(">") else shlex.quote(p) for p in cmd)


def info_worker_command(plan, opts: dict, threads: int | str, memory: int | None) -> list[str]:
    """The command line of one Dask worker of ``plan`` (:func:`spark_dask.executor.command.worker_command`,
    what each Spark task runs), with ``<...>`` where only the task knows the value
    (its interpreter, the scheduler's address, the worker's name and directory, the
    credentials' files). A dask-cuda worker's RMM pool flags, which its task derives
    from its GPU's memory, are not shown."""
    fields = {
        "python": "<python>",
        "scheduler_address": "<scheduler-address>",
        "name": "<name>",
        "nthreads": threads,
        "memory_limit": memory if memory is not None else "<auto>",
        "local_directory": "<local-directory>",
        "death_timeout": opts.death_timeout,
        "preload": "<preload-file>",
        "preload_module": PRELOAD_MODULE,
        "tls_ca_file": "<ca.pem>" if opts.tls else "",
        "tls_cert": "<cert.pem>" if opts.tls else "",
        "tls_key": "<key.pem>" if opts.tls else "",
    }
    return worker_command(fields, plan.kind, opts.worker_command, opts.worker_options)
