"""``start()``: a :class:`~spark_dask.cluster.SparkCluster` as a connected Client, which
owns its cluster (closing the Client closes the cluster).

``start()`` takes ``SparkCluster``'s arguments but :data:`START_LEAVES_OUT`, and they are
written once, in ``SparkCluster.__init__`` and its docstring (:mod:`spark_dask.cluster`).
:func:`client_of` hands them on: at import it gives ``start()`` ``SparkCluster``'s
signature (``inspect.signature``: ``help()``, IPython, Jupyter and Databricks completion)
and composes its docstring's ``Parameters`` and ``Notes`` from ``SparkCluster``'s; its
``typing.ParamSpec`` gives static checkers and editors the same keywords.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import ParamSpec

from distributed import Client

from spark_dask import options
from spark_dask.cluster import SparkCluster

P = ParamSpec("P")

# SparkCluster's keywords that start() does not take: an asynchronous cluster is awaited
# in an event loop (``await SparkCluster(..., asynchronous=True)``), not made a Client.
START_LEAVES_OUT = ("asynchronous", "loop")

_SECTION = re.compile(r"^(\w+)\n-+\n", re.MULTILINE)  # a numpydoc section heading


class _ClusterClient(Client):
    """A Client that owns its SparkCluster: closing it closes the cluster."""

    _collected = False

    def close(self, timeout=None):
        try:
            if timeout is None:
                return super().close()
            return super().close(timeout=timeout)
        finally:
            cluster = self.cluster
            # Not from the garbage collector: it may run inside another cluster's
            # loop start-up, which holds the lock that stopping a loop needs.
            if cluster is not None and not self._collected:
                cluster.close()

    def __del__(self):
        self._collected = True
        super().__del__()


def _sections(doc: str) -> dict[str, tuple[int, int]]:
    """``{heading: (start, end)}`` of the numpydoc sections of a cleaned docstring."""
    heads = list(_SECTION.finditer(doc))
    ends = [h.start() for h in heads[1:]] + [len(doc)]
    return {h.group(1): (h.start(), end) for h, end in zip(heads, ends)}


def _without(section: str, names: tuple[str, ...]) -> str:
    """A cleaned ``Parameters`` section less the entries of ``names``."""
    kept, dropping = [], False
    for line in section.splitlines(keepends=True):
        if line.strip() and not line[0].isspace():  # an entry's (or the heading's) first line
            dropping = re.split(r"[\s:]", line.lstrip("*"), maxsplit=1)[0] in names
        elif not line.strip():
            dropping = False
        if not dropping:
            kept.append(line)
    return "".join(kept)


def composed_docstring(
    own: str | None, cluster: str | None, leave_out: tuple[str, ...] = START_LEAVES_OUT
) -> str | None:
    """``own`` (a docstring, cleaned) with its ``Parameters`` section replaced by the
    ``Parameters`` (less ``leave_out``) and ``Notes`` sections of ``cluster`` (those of
    ``SparkCluster``); ``own`` as it is when either has none (``python -OO``)."""
    if own is None or cluster is None:
        return own
    own, cluster = inspect.cleandoc(own), inspect.cleandoc(cluster)
    mine, theirs = _sections(own), _sections(cluster)
    if "Parameters" not in mine or "Parameters" not in theirs:
        return own
    begin, end = mine["Parameters"]
    taken = _without(cluster[slice(*theirs["Parameters"])], leave_out)
    if "Notes" in theirs and "Notes" not in mine:
        taken = taken.rstrip("\n") + "\n\n" + cluster[slice(*theirs["Notes"])]
    return own[:begin] + taken.rstrip("\n") + "\n\n" + own[end:].lstrip("\n")


def client_of(cls: Callable[P, SparkCluster]) -> Callable[[Callable[..., Client]], Callable[P, Client]]:
    """Decorator: the function (``start(spark=None, **keywords)``) shown with the
    parameters of ``cls`` (``SparkCluster``) but :data:`START_LEAVES_OUT`.

    At run time it sets the function's ``__signature__`` (and ``__annotations__``) from
    ``inspect.signature(cls)``, return annotation its own, and its ``__doc__`` by
    :func:`composed_docstring`; for static checkers its type is ``Callable[P, Client]``
    with ``cls``'s parameters ``P`` (which do include ``asynchronous`` and ``loop``: a
    ``ParamSpec`` cannot drop keywords; ``start()`` refuses them when called).
    """

    def decorate(f: Callable[..., Client]) -> Callable[P, Client]:
        own = inspect.signature(f)
        params = [p for p in inspect.signature(cls).parameters.values() if p.name not in START_LEAVES_OUT]
        f.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        f.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not p.empty}
        if own.return_annotation is not own.empty:
            f.__annotations__["return"] = own.return_annotation
        f.__doc__ = composed_docstring(f.__doc__, cls.__doc__)
        return f  # type: ignore[return-value]

    return decorate


@options.keywords_checked("start()")
@client_of(SparkCluster)
def start(spark=None, **keywords) -> Client:
    """Start a Dask cluster in the Spark application and return a connected Client.

    Returns once every worker is connected. Leaving the ``with`` block (or
    ``client.close()``) closes the workers, the Spark barrier job and the scheduler.
    Keyword arguments are those of ``SparkCluster`` (but ``asynchronous`` and ``loop``:
    use ``await SparkCluster(..., asynchronous=True)`` in an event loop).

    Parameters
    ----------
    spark : SparkSession, optional
        Classic or Spark Connect session; defaults to the active session.
    **keywords
        Every keyword argument of ``SparkCluster`` but ``asynchronous`` and ``loop``,
        with the same defaults, documented there (on the API page: right below). At
        import ``start()`` takes ``SparkCluster``'s signature and these docs:
        ``help(start)`` and ``inspect.signature(start)`` list each keyword.

    Examples
    --------
    >>> with spark_dask.start(spark) as client:          # doctest: +SKIP
    ...     ddf.groupby("k").x.mean().compute()
    """
    cluster = SparkCluster(spark, **keywords)
    try:
        return _ClusterClient(cluster)
    except BaseException:
        cluster.close()
        raise


__all__ = ["START_LEAVES_OUT", "client_of", "composed_docstring", "start"]
