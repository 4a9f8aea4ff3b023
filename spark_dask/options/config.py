"""Package defaults, read through :mod:`dask.config` (``spark-dask.*`` keys).

Override with ``dask.config.set({"spark-dask.timeout": "5m"})``, a YAML file in
``~/.config/dask/``, or environment variables such as ``DASK_SPARK_DASK__TIMEOUT=5m``.
"""

from __future__ import annotations

import os

import dask.config
import yaml

# the YAML stays at the package root, where pyproject.toml ships it
_fn = os.path.join(os.path.dirname(os.path.dirname(__file__)), "spark_dask.yaml")
with open(_fn) as f:
    _defaults = yaml.safe_load(f)

dask.config.update_defaults(_defaults)


def get(key: str, value=None):
    """``value`` when given (not None), else the ``spark-dask.<key>`` config value."""
    return dask.config.get(f"spark-dask.{key}", override_with=value)
