"""Tasks in other languages on a spark-dask cluster, without pickle
(``docs/other-languages.md``).

=============  ==========================================================================
``graph``      the msgpack graph format's rules and the Python side of its tasks
``client``     :func:`submit` / :func:`submit_graph` for Python clients
``scheduler``  the scheduler's plugins: placement by language, errors, the gateway for
               clients that do not speak pickle (``--preload spark_dask.xlang.scheduler``)
=============  ==========================================================================
"""

from spark_dask.xlang.client import submit, submit_graph
from spark_dask.xlang.graph import XLangError, XLangTaskError

__all__ = ["XLangError", "XLangTaskError", "submit", "submit_graph"]
