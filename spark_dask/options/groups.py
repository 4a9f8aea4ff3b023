"""Worker groups: several kinds of Dask worker in one cluster (dask-cuda workers on the
GPUs, CPU workers on the executors' other cores). A group is a name and what its workers
are (:class:`WorkerGroup`); this module checks what a user gives
(:func:`check_groups`), names the Dask resource every worker of a group carries
(:func:`group_resource`) and overlays a group on the cluster's options
(:func:`group_options`). The cluster (:mod:`spark_dask.cluster`) keeps one
:class:`~spark_dask.gangs.pool.GangPool` per group; the plan of a group's gangs is
:func:`spark_dask.plan.plan_group`.

The group the cluster starts as it always did is :data:`DEFAULT`; its workers carry no
group resource.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import yaml

from spark_dask.capacity import ClusterFacts, GangPlan, task_cpus
from spark_dask.errors import PlanError
from spark_dask.plan import check_memory_limit, plan_group

DEFAULT = "default"
KINDS = ("cpu", "cuda")
KEYS = ("n_workers", "worker", "threads_per_worker", "memory_limit", "resources", "worker_options", "env")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]{0,31}")


@dataclass(frozen=True)
class WorkerGroup:
    """One group of a cluster's workers, checked (:func:`check_group`).

    Attributes
    ----------
    name : str
        Letters, digits and ``_`` (it names the group's gangs and its Dask resource).
    worker : str
        ``"cpu"`` or ``"cuda"``: the worker program.
    n_workers : int or None
        Workers at start (None: one per executor; ``cuda``: one per executor GPU).
    threads_per_worker : int or None
        Threads per worker; for ``cpu`` also the CPUs each of its Spark tasks asks for.
    memory_limit : int or str
        Bytes per worker, or ``"auto"``.
    resources : dict
        Dask resources of each worker beside the group's own (:func:`group_resource`).
    worker_options : dict
        Extra worker command-line options, over the cluster's.
    env : dict
        Environment variables of the workers, over the cluster's.
    """

    name: str
    worker: str
    n_workers: int | None = None
    threads_per_worker: int | None = None
    memory_limit: int | str = "auto"
    resources: dict = field(default_factory=dict)
    worker_options: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)


def group_resource(name: str) -> str:
    """The Dask resource every worker of group ``name`` carries (one unit):
    ``client.submit(f, resources={group_resource("cpu"): 1})`` runs ``f`` on that group.

    >>> group_resource("cpu")
    'group-cpu'
    """
    return f"group-{name}"


def check_name(name, taken=()) -> str:
    """``name`` if it can name a new group: 1 to 32 letters, digits or ``_``, not
    ``default`` and not one of ``taken``; else a :class:`~spark_dask.errors.PlanError`.

    >>> check_name("cpu")
    'cpu'
    >>> check_name("default")
    Traceback (most recent call last):
    ...
    spark_dask.errors.PlanError: spark-dask: 'default' is the cluster's own worker group (the workers it starts with); give the new group another name
    """
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        raise PlanError(
            f"spark-dask: a worker group's name is 1 to 32 letters, digits or '_', starting with a "
            f"letter or digit; got {name!r}"
        )
    if name == DEFAULT:
        raise PlanError(
            "spark-dask: 'default' is the cluster's own worker group (the workers it starts with); "
            "give the new group another name"
        )
    if name in taken:
        raise PlanError(f"spark-dask: the cluster has a worker group {name!r} already")
    return name


def _positive(name: str, key: str, value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanError(f"spark-dask: worker group {name!r}: {key} must be a positive integer, got {value!r}")
    return value


def _mapping(name: str, key: str, value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PlanError(f"spark-dask: worker group {name!r}: {key} must be a dict, got {type(value).__name__}")
    return dict(value)


def check_group(name, spec, taken=()) -> WorkerGroup:
    """The group ``name`` as ``spec`` (a dict of :data:`KEYS`) describes it, checked.

    >>> check_group("cpu", {"worker": "cpu", "threads_per_worker": 4}).threads_per_worker
    4
    >>> check_group("cpu", {"worker": "gpu"})
    Traceback (most recent call last):
    ...
    spark_dask.errors.PlanError: spark-dask: worker group 'cpu': worker must be 'cpu' or 'cuda', got 'gpu'
    """
    check_name(name, taken)
    if not isinstance(spec, dict):
        raise PlanError(f"spark-dask: worker group {name!r} must be a dict of {', '.join(KEYS)}; got {spec!r}")
    unknown = sorted(set(spec) - set(KEYS))
    if unknown:
        raise PlanError(
            f"spark-dask: worker group {name!r}: unknown key {unknown[0]!r}; a group takes {', '.join(KEYS)}"
        )
    worker = spec.get("worker", "cpu")
    if worker not in KINDS:
        raise PlanError(f"spark-dask: worker group {name!r}: worker must be 'cpu' or 'cuda', got {worker!r}")
    resources = _mapping(name, "resources", spec.get("resources"))
    for key, amount in resources.items():
        if (
            not isinstance(key, str)
            or " " in key
            or "=" in key
            or isinstance(amount, bool)
            or not isinstance(amount, (int, float))
        ):
            raise PlanError(
                f"spark-dask: worker group {name!r}: resources maps names (no spaces or '=') to numbers, "
                f"got {key!r}: {amount!r}"
            )
    return WorkerGroup(
        name,
        worker,
        _positive(name, "n_workers", spec.get("n_workers")),
        _positive(name, "threads_per_worker", spec.get("threads_per_worker")),
        check_memory_limit(spec.get("memory_limit"), name),
        resources,
        _mapping(name, "worker_options", spec.get("worker_options")),
        {str(k): str(v) for k, v in _mapping(name, "env", spec.get("env")).items()},
    )


def check_groups(groups) -> dict[str, WorkerGroup]:
    """``worker_groups`` (``{name: {key: value}}``, the keyword or the
    ``spark-dask.worker-groups`` config key) checked, in their order.

    >>> list(check_groups({"cpu": {"worker": "cpu"}, "gpu": {"worker": "cuda"}}))
    ['cpu', 'gpu']
    """
    if groups is None:
        return {}
    if not isinstance(groups, dict):
        raise PlanError(f"spark-dask: worker_groups must be a dict of group name -> dict, got {type(groups).__name__}")
    out: dict[str, WorkerGroup] = {}
    for name, spec in groups.items():
        out[name] = check_group(name, spec, out)
    return out


def group_options(opts, group: WorkerGroup, task_cpus: int | None = None):
    """The cluster's options (:class:`spark_dask.options.ClusterOptions`) as the
    group's workers get them: its kind, size and count, its worker options over the
    cluster's, and its resources (with the group's own) as ``--resources``: the
    cluster's ``resources`` worker option describes the default group's workers (a
    ``GPU`` resource of the dask-cuda workers must not follow onto a CPU group), so a
    group has only its own. A ``cpu`` group's threads default to its Spark tasks' CPUs
    (``task_cpus``, from the group's plan), never the whole executor's cores: other
    groups run there too."""
    options = {**(opts.worker_options or {}), **group.worker_options}
    resources = {**(group.worker_options.get("resources") or {}), **group.resources, group_resource(group.name): 1}
    return replace(
        opts,
        n_workers=group.n_workers,
        worker=group.worker,
        threads_per_worker=group.threads_per_worker or (task_cpus if group.worker == "cpu" else None),
        memory_limit=group.memory_limit,
        worker_options={**options, "resources": resources},
        worker_groups={},
    )


def group_env(env: dict, group: WorkerGroup) -> dict:
    """The workers' environment variables: the cluster's, then the group's.

    >>> group_env({"A": "1"}, WorkerGroup("cpu", "cpu", env={"B": "2"}))
    {'A': '1', 'B': '2'}
    """
    return {**env, **group.env}


def parse_flag(text: str) -> tuple[str, dict]:
    """``spark-dask run --worker-group NAME:KEY=VALUE,...`` as ``(name, spec)``; values
    are read as YAML (a comma inside ``{...}`` or ``[...]`` does not split).

    >>> parse_flag("cpu:worker=cpu,n_workers=2,resources={io: 1, net: 2}")
    ('cpu', {'worker': 'cpu', 'n_workers': 2, 'resources': {'io': 1, 'net': 2}})
    """
    name, sep, rest = str(text).partition(":")
    if not sep or not name:
        raise PlanError(f"spark-dask: --worker-group takes NAME:KEY=VALUE,KEY=VALUE...; got {text!r}")
    items, depth, start = [], 0, 0
    for i, ch in enumerate(rest + ","):
        depth += (ch in "{[") - (ch in "}]")
        if ch == "," and depth == 0:
            items.append(rest[start:i])
            start = i + 1
    spec = {}
    for item in (x.strip() for x in items if x.strip()):
        key, eq, value = item.partition("=")
        if not eq:
            raise PlanError(f"spark-dask: --worker-group {name}: expected KEY=VALUE, got {item!r}")
        spec[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    return name, spec


def group_holds(plans: dict[str, GangPlan], facts: ClusterFacts) -> tuple[tuple[str, int, int], ...]:
    """``(group, tasks, CPUs per task)`` of the groups' ``plans``, as the slot warning
    (:func:`spark_dask.capacity.hog_warning`) counts them.

    >>> group_holds({"cpu": GangPlan("cpu", False, 2, 2, 1, task_cpus=4)}, ClusterFacts(1, 8, 0))
    (('cpu', 2, 4),)
    """
    return tuple((name, plan.n_tasks, task_cpus(plan, facts)) for name, plan in plans.items())


def plan_groups(facts: ClusterFacts, groups: dict[str, WorkerGroup], opts, held: tuple = ()) -> dict[str, GangPlan]:
    """The plan of every group of ``groups`` (:func:`spark_dask.plan.plan_group`), each
    beside ``held`` (the ``(tasks, CPUs per task)`` of the default group's gangs) and
    the groups before it; ``opts``: the cluster's options (task profile, GPU mode,
    barrier)."""
    beside, out = list(held), {}
    for name, g in groups.items():
        try:
            plan = plan_group(
                facts,
                g.worker,
                g.n_workers,
                g.threads_per_worker,
                opts.task_profile,
                opts.gpu_mode,
                opts.barrier,
                tuple(beside),
            )
        except PlanError as e:
            raise PlanError(f"spark-dask: worker group {name!r}: {str(e).removeprefix('spark-dask: ')}") from e
        beside.append((plan.n_tasks, task_cpus(plan, facts)))
        out[name] = plan
    return out


def chosen_group(group: str | None, worker_group: str | None) -> str | None:
    """The worker group a call names: ``group``, or ``worker_group`` as dask-kubernetes
    names it (``KubeCluster.scale(n, worker_group=...)``); two different names are refused.

    >>> chosen_group(None, "io"), chosen_group("io", None), chosen_group(None, None)
    ('io', 'io', None)
    """
    if group is not None and worker_group is not None and group != worker_group:
        raise PlanError(f"spark-dask: group={group!r} and worker_group={worker_group!r} name two groups; give one")
    return group if group is not None else worker_group


__all__ = [
    "DEFAULT",
    "chosen_group",
    "WorkerGroup",
    "check_group",
    "check_groups",
    "check_name",
    "group_env",
    "group_holds",
    "group_options",
    "group_resource",
    "parse_flag",
    "plan_groups",
    "task_cpus",
]
