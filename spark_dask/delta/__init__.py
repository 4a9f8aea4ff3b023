"""Delta Lake tables read into Dask right, and written through Spark.

:func:`read_delta` reads a table's files on the Dask workers, deletion vectors and
column mapping included (or through Spark where the file reader refuses a feature);
:func:`write_delta` writes a Dask DataFrame with Spark's own Delta writer. See
``docs/delta.md``.
"""

from spark_dask.delta.read import read_delta
from spark_dask.delta.write import write_delta

__all__ = ["read_delta", "write_delta"]
