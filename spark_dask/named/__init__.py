"""Clusters other processes join by name: ``SparkCluster.from_name(name)``,
:func:`list_clusters`, ``spark-dask list`` and ``spark-dask serve``.

- :mod:`~spark_dask.named.store`: every running cluster's **entry** in the per-user state
  directory of the driver host (``spark-dask.state-dir``), ``<state-dir>/<name>/`` of mode
  0700 holding ``cluster.json`` (name, Spark job tag, scheduler address, dashboard link,
  workers, owner pid and host, start time, status) and the connection files of
  :mod:`spark_dask.connection`; which entries are alive (an entry whose owner process is
  gone is stale: ignored and removed); what ``list`` shows; the messages. Plain
  functions, tested without Spark.
- :mod:`~spark_dask.named.owner`: the owner claims the name when its start begins
  (``os.mkdir``: one winner), publishes the record once the workers run, keeps the worker
  count current and removes the entry when the cluster closes; it carries out ``scale``,
  ``adapt`` and ``close`` for handles through handlers on its scheduler, which only
  holders of the cluster's credentials reach (TLS with client certificates).
- :mod:`~spark_dask.named.handle`: another process's :class:`NamedCluster`, a
  ``distributed.deploy.Cluster`` for it (:func:`from_name`), and dask-ctl's :func:`discover`.
"""

from spark_dask.named.handle import NamedCluster, discover, from_name
from spark_dask.named.owner import Entry
from spark_dask.named.store import configured_root, extra_groups, format_rows, list_clusters

__all__ = [
    "Entry",
    "NamedCluster",
    "configured_root",
    "discover",
    "extra_groups",
    "format_rows",
    "from_name",
    "list_clusters",
]
