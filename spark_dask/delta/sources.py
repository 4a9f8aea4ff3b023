"""What a ``read_delta`` or ``write_delta`` source names: a table in the catalog or a
path, and where each reader finds a path. The file reader opens it with fsspec
(``dbfs:/x`` through Databricks' FUSE mount ``/dbfs/x``: fsspec has no ``dbfs:``);
Spark gets ``/dbfs/x`` as ``dbfs:/x``: a path without a scheme is resolved against
Spark's default filesystem, which on Databricks is DBFS itself, so ``/dbfs/x`` would be
``dbfs:/dbfs/x``, another place (Databricks, "What is DBFS?": ``/dbfs/`` is the FUSE
mount of ``dbfs:/``).
"""

from __future__ import annotations

import os
import re

# catalog.schema.table, schema.table or table (back-quoted parts allowed): not a path
TABLE_NAME = re.compile(r"^(`[^`]+`|[A-Za-z_][\w$]*)(\.(`[^`]+`|[A-Za-z_][\w$]*)){0,2}$")
FUSE = "/dbfs"  # where Databricks mounts dbfs:/ on every node


def is_table_name(source: str) -> bool:
    """Whether ``source`` names a table (``catalog.schema.table``) rather than a path: a
    name has no ``/`` and is not a directory here (``events`` beside the notebook is a
    path).

    >>> [is_table_name(s) for s in ("main.sales.orders", "orders", "/tmp/t", "s3://b/t", "dbfs:/t", "./t")]
    [True, True, False, False, False, False]
    """
    return bool(TABLE_NAME.match(source)) and "/" not in source and not os.path.isdir(source)


def file_source(source: str) -> str:
    """Where the file reader opens ``source``: ``dbfs:/x`` through the FUSE mount
    ``/dbfs/x``; anything else as it is.

    >>> file_source("dbfs:/user/t"), file_source("s3://b/t")
    ('/dbfs/user/t', 's3://b/t')
    """
    if source.startswith("dbfs:/"):
        return FUSE + "/" + source[len("dbfs:/") :].lstrip("/")
    return source


def spark_source(source: str) -> str:
    """Where Spark finds the path ``source``: ``/dbfs/x`` (the FUSE mount) as
    ``dbfs:/x``; anything else as it is.

    >>> spark_source("/dbfs/mnt/t"), spark_source("/dbfs"), spark_source("/dbfsx/t"), spark_source("dbfs:/t")
    ('dbfs:/mnt/t', 'dbfs:/', '/dbfsx/t', 'dbfs:/t')
    """
    if source == FUSE or source.startswith(FUSE + "/"):
        return "dbfs:/" + source[len(FUSE) :].lstrip("/")
    return source


__all__ = ["FUSE", "TABLE_NAME", "file_source", "is_table_name", "spark_source"]
