"""Every option of spark-dask, described once, and one cluster's options resolved from it.

- :mod:`~spark_dask.options.table`: the table of every option (``OPTIONS``), the one
  source of ``SparkCluster``'s parameters, the CLI's options, ``spark_dask.yaml`` and the
  configuration page (``tools/generate.py``);
- :mod:`~spark_dask.options.config`: the defaults through :mod:`dask.config`;
- :mod:`~spark_dask.options.resolving`: a cluster's :class:`ClusterOptions`, checked;
- :mod:`~spark_dask.options.groups`: worker groups, their options over the cluster's.
"""

from spark_dask.options import resolving, table
from spark_dask.options.resolving import *  # noqa: F403 - the face: each module's __all__
from spark_dask.options.table import *  # noqa: F403

__all__ = [*resolving.__all__, *table.__all__]
