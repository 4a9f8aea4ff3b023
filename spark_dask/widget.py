"""What the cluster widget and ``get_logs()["Spark tasks"]`` show (pure functions).

Facts in, text or HTML out; no Spark, no Dask objects. Used by
``SparkCluster._repr_html_``, ``__repr__`` and ``get_logs`` in :mod:`spark_dask.cluster`.

Placement of the barrier tasks while the cluster runs comes from the Dask workers: a
preload puts the Spark facts of each worker (``executor_id``, ``executor``, ``host``,
``partition``, ``gang``, ``task``, ``gpu``) in its entry of
``scheduler_info["workers"][address]["spark"]``. After a gang's Spark job ended, each
task's status row (exit codes, log tails) says it. A cluster has one section (and
widget rows) per gang; tasks are numbered over the whole cluster, as the workers'
names are (``spark-<task>``).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping

_CELL = "style='text-align: left;'"


def scheduler_totals(workers: Mapping[str, Mapping]) -> dict:
    """``n_workers``, ``total_threads`` and ``total_memory`` of a ``workers`` mapping.

    The cluster's ``scheduler_info`` takes these three from the scheduler once, when
    the cluster subscribes (before any worker exists); only its ``workers`` entry is
    kept up to date afterwards.

    >>> scheduler_totals({"a": {"nthreads": 2, "memory_limit": 10}, "b": {"nthreads": 1, "memory_limit": 5}})
    {'n_workers': 2, 'total_threads': 3, 'total_memory': 15}
    """
    values = list(workers.values())
    return {
        "n_workers": len(values),
        "total_threads": sum(int(w.get("nthreads") or 0) for w in values),
        "total_memory": sum(int(w.get("memory_limit") or 0) for w in values),
    }


def live_tasks(
    n_tasks: int,
    workers: Mapping[str, Mapping],
    status: Mapping[str, str],
    gang: int | None = None,
    base: int = 0,
    group: str = "default",
) -> list[dict]:
    """One entry per barrier task (partition) while the stage runs.

    Parameters
    ----------
    n_tasks : int
        Barrier tasks in the stage.
    workers : mapping
        ``scheduler_info["workers"]``: address -> worker info with a ``"spark"`` entry.
    status : mapping
        address -> the worker's current status name on the scheduler (``"running"``, ...).
    gang : int, optional
        Only the workers of this gang (their ``"gang"`` fact; 0 when they have none);
        the entries then carry ``"gang"``.
    base : int
        The cluster-wide number of the gang's first task: ``partition`` of the entries
        is ``base`` + the task's partition in its stage.
    group : str
        With ``gang``: the worker group it belongs to (gangs are numbered per group).

    Returns
    -------
    list of dict
        ``partition``, ``executor_id``, ``host``, ``gpu`` (``"0,1"`` or None),
        ``workers`` (``"spark-0 (tls://...) running"`` each) and ``status``.
    """
    by_partition: dict[int, list[tuple[str, Mapping]]] = {}
    for address, info in workers.items():
        facts = info.get("spark")
        if isinstance(facts, Mapping) and isinstance(facts.get("partition"), int):
            if gang is not None and (facts.get("gang", 0), facts.get("group", "default")) != (gang, group):
                continue
            by_partition.setdefault(facts["partition"], []).append((address, info))
    out = []
    for p in range(max([n_tasks, *(k + 1 for k in by_partition)])):
        mine = sorted(by_partition.get(p, []), key=lambda x: str(x[1].get("name")))
        facts = [info["spark"] for _, info in mine]
        states = [status.get(a) or info.get("status") or "unknown" for a, info in mine]
        gpus = [str(f["gpu"]) for f in facts if f.get("gpu") is not None]
        if not mine:
            state = "no Dask worker connected"
        elif all(s == "running" for s in states):
            state = "running"
        else:
            state = ", ".join(f"{info.get('name')}: {s}" for (_, info), s in zip(mine, states) if s != "running")
        entry = {
            "partition": base + p,
            "executor_id": facts[0].get("executor_id") if facts else None,
            "host": facts[0].get("host") if facts else None,
            "gpu": ",".join(gpus) or None,
            "workers": [f"{info.get('name')} ({a}) {s}" for (a, info), s in zip(mine, states)],
            "status": state,
        }
        if gang is not None:
            entry["gang"] = gang
        out.append(entry)
    return out


def ended_tasks(rows: Iterable[Mapping]) -> list[dict]:
    """One entry per barrier task from the status rows of an ended stage."""
    out = []
    for row in sorted(rows, key=lambda r: r.get("task", r.get("partition", 0))):
        workers = row.get("workers") or []
        gpus = [str(w["gpu"]) for w in workers if w.get("gpu") is not None]
        out.append(
            {
                "partition": row.get("task", row.get("partition")),
                "executor_id": row.get("executor_id"),
                "host": row.get("host"),
                "gpu": ",".join(gpus) or None,
                "workers": [f"{w.get('name')} exit={w.get('exit_code')}" for w in workers],
                "status": row.get("status", "unknown"),
                "log_tails": {w.get("name"): w.get("log_tail") or "" for w in workers},
            }
        )
    return out


def task_line(task: Mapping) -> str:
    """``task 0 on executor 1 (10.0.0.5), gpu 0: running``; without a known executor
    (it has no worker, or waits for a slot) ``task 0: waiting for a task slot``."""
    where = f" on executor {task.get('executor_id')} ({task.get('host')})" if task.get("host") else ""
    gpu = f", gpu {task['gpu']}" if task.get("gpu") else ""
    return f"task {task.get('partition')}{where}{gpu}: {task.get('status')}"


def task_log(header: str, tasks: Iterable[Mapping]) -> str:
    """The ``"Spark tasks"`` log: a header line, then a line per task and its workers."""
    out = [header]
    for task in tasks:
        out.append(task_line(task))
        tails = task.get("log_tails") or {}
        for w in task.get("workers", []):
            out.append(f"  worker {w}")
            name = w.split(" ", 1)[0]
            out += ["    " + ln for ln in (tails.get(name) or "").splitlines()]
    return "\n".join(out)


def gangs_log(sections: Iterable[tuple[str, Iterable[Mapping]]]) -> str:
    """The ``"Spark tasks"`` log of a cluster: a :func:`task_log` per gang."""
    return "\n".join(task_log(header, tasks) for header, tasks in sections)


def _cell(label: str, value) -> str:
    return f"<td {_CELL}><strong>{html.escape(label)}:</strong> {html.escape(str(value))}</td>"


def spark_rows_html(
    info: Mapping[str, object], tasks: list[Mapping], tasks_state: str, label: str = "Spark barrier tasks"
) -> str:
    """Table rows (``<tr>``) for the widget's top table: the Spark facts two per row,
    then one row holding a collapsible table of the barrier tasks (with a "Gang" column,
    the Spark job group of each task's gang, when the tasks say it).

    Rows, not a table: distributed puts this text inside its own ``<table>``, and a
    ``<table>`` directly inside a ``<table>`` is invalid HTML (browsers move it out).
    """
    items = [(f"Spark {k}", v) for k, v in info.items()]
    rows = []
    for i in range(0, len(items), 2):
        cells = [_cell(k, v) for k, v in items[i : i + 2]]
        if len(cells) == 1:
            cells.append(f"<td {_CELL}></td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    gangs = any("gang" in t for t in tasks)
    columns = ("Task", "Executor", "Host", "GPU", "Dask workers") + (("Gang",) if gangs else ()) + ("Status",)
    head = "".join(f"<th {_CELL}>{h}</th>" for h in columns)

    def cells(t: Mapping) -> tuple:
        values = (
            t.get("partition"),
            t.get("executor_id") if t.get("executor_id") is not None else "",
            t.get("host") or "",
            t.get("gpu") or "",
            "; ".join(t.get("workers") or []) or "none",
        )
        return values + ((t.get("gang", ""),) if gangs else ()) + (t.get("status"),)

    body = "".join(
        "<tr>" + "".join(f"<td {_CELL}>{html.escape(str(v))}</td>" for v in cells(t)) + "</tr>" for t in tasks
    )
    summary = html.escape(f"{label}: {len(tasks)} ({tasks_state})")
    rows.append(
        f"<tr><td colspan='2' {_CELL}><details><summary><strong>{summary}</strong></summary>"
        f"<table style='width: 100%;'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        "</details></td></tr>"
    )
    return "".join(rows)
