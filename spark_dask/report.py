"""What a cluster says about its Spark side: the facts of ``spark_info()`` (widget, logs,
``spark-dask info``) and each gang's tasks with their placement and status
(``get_logs()["Spark tasks"]``, the widget's rows). The HTML and text are
:mod:`spark_dask.widget`'s part; this module gathers what they show.
"""

from __future__ import annotations

import logging
from contextlib import suppress

from dask.widgets import get_template
from distributed.objects import SchedulerInfo
from distributed.utils import Log, Logs

from spark_dask import widget
from spark_dask.executor.placement import task_number
from spark_dask.gangs import Gang
from spark_dask.options.groups import DEFAULT, group_resource
from spark_dask.spark.session import application_id, is_connect

logger = logging.getLogger("spark_dask")
_port_warned: set = set()  # dashboard ports the warning was given for


def task_request(plan, facts) -> str:
    """What each barrier task asks Spark for, as the widget and logs show it."""
    if plan.uses_profile:
        gpus = f", gpu={plan.task_gpus:g}" if plan.task_gpus else (", no GPU" if plan.gpu_mode else "")
        return f"cpus={plan.task_cpus or facts.task_cpus}{gpus}"
    gpus = f", gpu={facts.task_gpus * plan.workers_per_task:g}" if facts.task_gpus else ""
    return f"cpus={facts.task_cpus}{gpus} (default profile)"


def gang_tasks(gangs: list[Gang], scheduler_info, scheduler) -> list[tuple[Gang, list[dict]]]:
    """Each gang with its tasks' placement and status: from the workers (in
    ``scheduler_info`` and the ``scheduler``; None once the cluster closed) while its job
    runs, from the tasks' status rows after it ended."""
    closed = scheduler is None
    workers = {} if closed else dict((scheduler_info or {}).get("workers", {}))
    status = {}
    for address in workers:
        ws = scheduler.workers.get(address)
        status[address] = ws.status.name if ws is not None else "gone"
    out = []
    for g in gangs:
        if not g.done and not closed:
            tasks = widget.live_tasks(g.plan.n_tasks, workers, status, gang=g.index, base=g.first, group=g.group)
            for t in tasks:
                if not t["workers"] and any(task_number(n) == t["partition"] for n in g.drained):
                    t["status"] = "ended: its Dask workers were retired (Spark decommissioned its executor)"
                elif not t["workers"] and any(task_number(n) == t["partition"] for n in g.retiring):
                    t["status"] = "ended: its Dask workers were retired (scale-down)"
                elif not t["workers"] and g.pending:
                    t["status"] = "waiting for a task slot"
        else:
            tasks = widget.ended_tasks(g.rows)
        for t in tasks:
            t["gang"] = g.tag
        out.append((g, tasks))
    return out


def spark_tasks(sections: list[tuple[Gang, list[dict]]], closed: bool) -> tuple[list[dict], str]:
    """Every gang task of ``sections`` (:func:`gang_tasks`), and whether any gang runs."""
    gangs = [g for g, _ in sections]
    tasks = [t for _, ts in sections for t in ts]
    if any(not g.done for g in gangs) and not closed:
        state = "running"
    elif tasks:
        state = "ended"
    else:
        state = "not running"
    if len(gangs) <= 1:  # one gang: the table has no Gang column
        for t in tasks:
            t.pop("gang", None)
    return tasks, state


def session_info(spark) -> dict:
    """The application (and Spark Connect session) a cluster runs in."""
    info = {}
    with suppress(Exception):
        if is_connect(spark):
            info["connect session"] = spark.session_id
        info["application"] = application_id(spark)
    return info


def plan_info(plan, facts, pools: dict, adaptive) -> dict:
    """The workers, tasks and request of a cluster's gangs: the default group's workers
    (the other groups': :func:`groups_info`) and the Spark tasks of every group
    (``pools``: every worker group's pool, the default group's first; none has a gang
    before the start submits them; ``adaptive``: distributed's ``Adaptive`` or None).

    >>> from types import SimpleNamespace as P
    >>> from spark_dask.capacity import ClusterFacts, GangPlan
    >>> facts = ClusterFacts(executors=5, executor_cores=1, executor_memory=0, slots=5)
    >>> pools = {"default": P(target=2, held=lambda: 2, gangs=[1], live=lambda: [1]),
    ...          "cpu": P(target=3, held=lambda: 3, gangs=[2], live=lambda: [2])}
    >>> info = plan_info(GangPlan("cpu", False, 2, 2), facts, pools, None)
    >>> info["workers"], info["barrier tasks"], info["gangs"]
    ('2 cpu', 5, '2 running, 2 submitted')
    """
    pool = pools.get(DEFAULT)
    started = pool is not None and bool(pool.gangs)
    target = pool.target if started else plan.n_workers
    held = sum(p.held() for p in pools.values()) if started else plan.n_tasks
    info = {
        "workers": f"{target} {plan.kind}" + (" (one per GPU)" if plan.pinned else ""),
        ("barrier tasks" if plan.barrier else "Spark tasks (plain jobs)"): held,
        "task request": task_request(plan, facts),
    }
    gangs = [g for p in pools.values() for g in p.gangs]
    if len(gangs) > 1 or not plan.barrier:
        info["gangs"] = f"{sum(len(p.live()) for p in pools.values())} running, {len(gangs)} submitted"
    if adaptive is not None and getattr(adaptive, "state", "") == "running":
        info["adaptive"] = f"{adaptive.minimum}..{adaptive.maximum} workers"
    if plan.gpu_mode:
        info["GPU mode"] = plan.gpu_mode + (
            " (beside Spark's GPU tasks)" if plan.gpu_mode == "shared" else " (whole GPUs)"
        )
    return info


def groups_info(pools: dict, facts) -> str:
    """The worker groups beside the default one, in words (``""``: none): each one's
    workers, Dask resource and task request."""
    return "; ".join(
        f"{name}: {pool.target} {pool.shape.kind} (resource {group_resource(name)}, {task_request(pool.shape, facts)})"
        for name, pool in pools.items()
        if name != DEFAULT
    )


def placement_info(plan, facts, workers: dict, db, timings: dict) -> dict:
    """Executors, the workers' GPUs, the Databricks cluster and the start-up time."""
    info = {}
    if facts is not None:
        info["executors"] = f"{facts.executors} x {facts.executor_cores} cores" + (
            f", {facts.executor_gpus:g} GPUs" if facts.executor_gpus else ""
        )
    gpus = sorted(
        str(w["spark"]["gpu"])
        for w in workers.values()
        if isinstance(w.get("spark"), dict) and w["spark"].get("gpu") is not None
    )
    if gpus or (plan is not None and plan.pinned):
        info["GPUs"] = f"{len(gpus)} ({', '.join(gpus)})" if gpus else str(plan.n_workers)
    if db is not None:
        name = db.cloud_name
        cloud = db.cloud if name.lower() in (db.cloud, "unknown") else f"{db.cloud} ({name})"
        info["Databricks"] = f"runtime {db.runtime_version}, cluster {db.cluster_id}, {cloud}"
    if "start" in timings:
        info["start-up"] = f"{timings['start']:.1f} s"
    return info


def dashboard_link(settings, scheduler_info, scheduler_address: str) -> str:
    """The dashboard link where a prefix or the Databricks driver proxy serves it
    (``settings``: :class:`~spark_dask.spark.databricks.DashboardSettings`); warns once when
    distributed listens on another port than the one chosen (it was taken meanwhile)."""
    try:
        port = scheduler_info["services"]["dashboard"]
    except (KeyError, TypeError):
        return ""
    if settings.port is not None and port != settings.port and (settings.port, port) not in _port_warned:
        _port_warned.add((settings.port, port))
        logger.warning(
            "spark-dask: the dashboard port %s was taken; the dashboard listens on %s, "
            "which the Databricks driver proxy may not pass",
            settings.port,
            port,
        )
    host = scheduler_address.split("://")[1].split("/")[0].rsplit(":", 1)[0].strip("[]")
    return settings.link(host, port)


def task_log(tag: str, status: str, gangs, scheduler_info, scheduler) -> str:
    """``get_logs()["Spark tasks"]``: a line per Spark task of every gang (``scheduler``:
    the running one, or None once closed), or the gangs' state while there is none."""
    if not gangs:
        return f"Spark barrier stage {tag}: {status}"
    return widget.gangs_log((g.describe(), tasks) for g, tasks in gang_tasks(gangs, scheduler_info, scheduler))


def kept_logs(kept: dict[str, str]) -> Logs:
    """The logs a closed cluster still has (:meth:`spark_dask.logdir.KeptLogs.read`: the
    cluster manager's and the Spark tasks' logs, and with a log directory the scheduler's
    and every worker's), as ``get_logs()`` returns them."""
    return Logs({key: Log(text) for key, text in kept.items()})


def spark_info(cluster, parts, adaptive) -> dict:
    """``cluster.spark_info()``: the session, the plan (``adaptive``: the cluster's
    ``Adaptive``, or None), the placement and the timings, from the cluster's ``parts``
    (:class:`spark_dask.parts.ClusterParts`)."""
    info = {"job tag": cluster.tag, **session_info(cluster.spark)}
    if cluster.gang_plan is not None:
        info.update(plan_info(cluster.gang_plan, parts.facts, parts.pools, adaptive))
    groups = groups_info(parts.pools, parts.facts)
    if groups:
        info["worker groups"] = groups
    workers = (cluster.scheduler_info or {}).get("workers", {})
    settings = parts.dashboard_settings
    db = settings.databricks if settings is not None else None
    info.update(placement_info(cluster.gang_plan, parts.facts, workers, db, parts.timings))
    return info


def cluster_repr(cluster, pools: dict) -> str:
    """``repr(cluster)``: name, scheduler address, tag, live workers, status."""
    closed = cluster.status.name == "closed"
    n = 0 if closed else len((cluster.scheduler_info or {}).get("workers", {}))
    addr = cluster.scheduler.address if cluster.scheduler is not None else None
    groups = [name for name in pools if name != DEFAULT]
    shown = f", groups={['default', *groups]}" if groups else ""
    return f"SparkCluster({cluster.name!r}, {addr!r}, tag={cluster.tag!r}, workers={n}{shown}, status={cluster.status.name})"


def widget_html(cluster, gangs: list[Gang], cluster_status=None) -> str:
    """``cluster._repr_html_()``: :func:`cluster_html` with the Spark facts and a row per
    Spark task of every gang (``gangs``) below (none once the cluster closed)."""
    closed = cluster.status.name == "closed"
    scheduler = None if closed else cluster.scheduler
    tasks, state = spark_tasks(gang_tasks(gangs, cluster.scheduler_info, scheduler), closed)
    plan = cluster.gang_plan
    label = "Spark barrier tasks" if plan is None or plan.barrier else "Spark tasks"
    rows = widget.spark_rows_html(cluster.spark_info(), tasks, state, label)
    workers = {} if closed else dict((cluster.scheduler_info or {}).get("workers", {}))
    return cluster_html(
        type(cluster).__name__,
        cluster.name,
        cluster.scheduler_info,
        workers,
        cluster.dashboard_link,
        (cluster_status or "") + rows,
    )


def cluster_html(
    type_name: str,
    name: str,
    scheduler_info,
    workers: dict,
    dashboard_link: str,
    cluster_status: str,
) -> str:
    """distributed's cluster widget (``cluster.html.j2``) with ``workers`` (the live ones:
    none once closed) and totals fresh from them, and ``cluster_status`` below."""
    if not isinstance(scheduler_info, SchedulerInfo):
        scheduler_info_repr = "Scheduler not started yet."
    else:
        info = SchedulerInfo(scheduler_info)
        info["workers"] = workers
        info.update(widget.scheduler_totals(workers))
        scheduler_info_repr = info._repr_html_()
    return get_template("cluster.html.j2").render(
        type=type_name,
        name=name,
        workers=workers,
        dashboard_link=dashboard_link,
        scheduler_info_repr=scheduler_info_repr,
        cluster_status=cluster_status,
    )
