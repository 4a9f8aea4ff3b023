"""SparkCluster's public surface: distributed's ``Cluster`` and what the docs describe.
The parts (scheduler side, gang pool, maker, state-directory entry, kept logs, events,
facts, options) are the cluster's own ``ClusterParts``, handed by it to the modules that
work for it (or found in :mod:`spark_dask.registry` while it runs), so they do not show in
a user's tab completion. Fast, no Spark."""

from __future__ import annotations

import ast
import inspect
import textwrap

from distributed.deploy import Cluster

from spark_dask import registry
from spark_dask.cluster import SparkCluster
from spark_dask.parts import ClusterParts

# Beyond distributed.deploy.Cluster's: each is in the API page's SparkCluster entry (its
# docstring) or the user guide.
DOCUMENTED = {
    "add_close_hook", "add_worker_group", "close_grace", "from_name", "gang_plan", "gang_status", "gang_tags", "id",
    "scale_down", "scale_up", "scheduler", "security", "spark", "spark_info", "tag", "task_rows",
    "remove_worker_group", "write_connection",
}  # fmt: skip


def _assigned(cls) -> set[str]:
    """The ``self.<name> = ...`` attributes of a class's source."""
    out = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(cls)))):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                out.add(t.attr)
    return out


def test_the_public_surface_is_distributeds_and_the_documented():
    base = set(dir(Cluster)) | _assigned(Cluster)
    public = {n for n in dir(SparkCluster) if not n.startswith("_")} | {
        a for a in _assigned(SparkCluster) if not a.startswith("_")
    }
    assert public - base == DOCUMENTED
    for internal in (
        "driver_scheduler",
        "pools",
        "makers",
        "entry",
        "log_keeper",
        "events",
        "facts",
        "options",
        "gangs",
    ):
        assert internal not in public, internal
        assert internal in ClusterParts.__annotations__ or isinstance(getattr(ClusterParts, internal), property)


def test_the_registry_has_no_parts_for_what_is_not_a_running_cluster_of_this_process():
    assert registry.parts_of(object()) is None and registry.parts_of(3) is None
