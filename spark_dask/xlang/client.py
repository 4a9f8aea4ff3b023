"""Cross-language tasks from a Python client: :func:`submit` one task, or
:func:`submit_graph` a whole msgpack-shaped graph (:mod:`spark_dask.xlang.graph`), as
ordinary Dask tasks that the scheduler (:mod:`spark_dask.xlang.scheduler`) places on
the workers of each task's language.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import dask
from distributed import Future

from spark_dask import errors
from spark_dask.spark.shipping import by_value, ship_by_value
from spark_dask.xlang import graph
from spark_dask.xlang.graph import (
    ANNOTATION,
    PYTHON,
    XLangError,
    call_python,
    references,
    resolve,
    resource,
    run_elsewhere,
    task_order,
)

# What a Python task of a graph runs on its worker, pickled by value (the workers need
# not have spark_dask): the graph rules and the exceptions they raise.
SHIPPED = (errors, graph)
_CALL_PYTHON = by_value(call_python)


def submit_task(client, key: str, language: str, function: str, args: list, futures: Mapping) -> Future:
    """One task of a graph, through ``client``; ``futures`` maps each referenced key to
    its Future (on the same client)."""
    deps = [futures[k] for k in dict.fromkeys(references(args))]
    if language == PYTHON:
        ship_by_value(*SHIPPED)
        return client.submit(_CALL_PYTHON, function, key, *resolve(args, futures), key=key, pure=False)
    with dask.annotate(**{ANNOTATION: {"language": language, "function": function, "args": args}}):
        return client.submit(
            run_elsewhere, language, function, *deps, key=key, resources={resource(language): 1}, pure=False
        )


def submit(client, language: str, function: str, *args, key: str | None = None) -> Future:
    """Run ``function`` of ``language`` on the cluster's workers of that language.

    Parameters
    ----------
    client : distributed.Client
        A client of a spark-dask cluster (or of any scheduler with
        :func:`spark_dask.xlang.scheduler.install`).
    language : str
        ``"python"`` (a dotted, importable function such as ``"math.factorial"``, run on
        the Python workers) or the language of other workers (``"node"``).
    function : str
        The function's name in that language's worker.
    *args
        Values msgpack carries, or Futures (of tasks of any language), passed as their
        results.
    key : str, optional
        The task's key; default ``<language>-<function>-<random hex>``.

    Returns
    -------
    distributed.Future
        Its result, ``.result()`` like any other; a failure in another language raises
        :class:`XLangTaskError` with that language's message.
    """
    key = key or f"{language}-{function}-{uuid.uuid4().hex}"
    futures: dict[str, Future] = {}
    spec = [language, function, *(_reference(a, futures) for a in args)]
    task_order({key: spec})  # checks the spec (a refused value raises here)
    return submit_task(client, key, language, function, spec[2:], futures)


def submit_graph(client, graph: Mapping, futures: Mapping | None = None) -> dict[str, Future]:
    """Submit a whole cross-language graph through ``client``.

    Parameters
    ----------
    client : distributed.Client
        A client of a spark-dask cluster.
    graph : dict
        ``{key: [language, function, arg, ...]}``, ``"@other"`` for the result of task
        ``other`` (the module's docstring and docs/other-languages.md).
    futures : dict, optional
        Futures for keys the graph refers to that are not in it; default: Futures for
        those keys on the scheduler.

    Returns
    -------
    dict
        A :class:`distributed.Future` per key of the graph.
    """
    return submit_ordered(client, task_order(graph), dict(futures or {}), lambda key: Future(key, client))


def submit_ordered(client, order, known: dict, want) -> dict[str, Future]:
    """Submit the tasks of ``order`` (:func:`task_order`) through ``client``: ``known``
    maps keys to their Futures (filled as tasks are submitted); ``want(key)`` makes the
    Future of an existing task the graph refers to. Returns a Future per task."""
    out: dict[str, Future] = {}
    for key, language, function, args in order:
        for dep in references(args):
            if dep not in known:
                known[dep] = want(dep)
        out[key] = known[key] = submit_task(client, key, language, function, args, known)
    return out


def _reference(value, futures: dict):
    """An argument of :func:`submit` in graph form: a Future becomes ``"@key"``, a string
    starting with ``@`` is escaped (``"@@..."``)."""
    if isinstance(value, Future):
        if not isinstance(value.key, str):
            raise XLangError(
                f"spark-dask: a cross-language task refers to results by string keys; this Future's key is {value.key!r}"
            )
        futures[value.key] = value
        return "@" + value.key
    if isinstance(value, str) and value.startswith("@"):
        return "@" + value
    if isinstance(value, (list, tuple)):
        return [_reference(v, futures) for v in value]
    if isinstance(value, dict):
        return {k: _reference(v, futures) for k, v in value.items()}
    return value
