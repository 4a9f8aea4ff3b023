"""Tasks in other languages on a spark-dask cluster, without pickle.

A cross-language graph is plain msgpack: ``{key: [language, function, arg, ...]}``. An
argument ``"@other"`` is the result of the task ``other`` (in the graph or already on the
scheduler); ``"@@text"`` is the literal string ``"@text"``; references may sit inside
lists and maps. ``language="python"`` names an importable function (``"math.factorial"``)
run on the Python workers; any other language runs on the workers that declare it, as
the Dask resource ``xlang-<language>`` (``examples/workers/node/worker.mjs`` declares
``xlang-node``).

The graph becomes ordinary Dask tasks: a Python task calls :func:`call_python`; a task of
another language is a task restricted to that resource whose ``xlang`` annotation
(``{"language", "function", "args"}``, references left as ``"@key"``) tells that
language's worker what to run, and whose Python callable (:func:`run_elsewhere`) is never
run. Their dependencies are Dask dependencies, so the dashboard shows them and a lost
worker's tasks run again elsewhere.

Python clients call :func:`~spark_dask.xlang.client.submit` (or
:func:`~spark_dask.xlang.client.submit_graph`); clients in other languages send the
graph to the scheduler's ``xlang_submit`` operation
(:mod:`spark_dask.xlang.scheduler`, which also keeps ordinary tasks off the workers of
other languages). Values that cross languages are what msgpack carries: numbers,
strings, bytes, lists, maps, None (:func:`carry_problem` says what is not). Lists that
come back from another language arrive in Python as tuples (distributed reads msgpack
with ``use_list=False``); :func:`call_python` hands them to the function as lists.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from spark_dask.errors import SparkDaskError

PYTHON = "python"
RESOURCE_PREFIX = "xlang-"
ANNOTATION = "xlang"


class XLangError(SparkDaskError, ValueError):
    """A cross-language graph or value that cannot work; the message says which and why."""


class XLangTaskError(SparkDaskError, RuntimeError):
    """A task of another language failed on its worker: the message is that language's
    error text; ``remote_traceback`` its stack, as the worker sent it."""

    def __init__(self, message: str, remote_traceback: str = ""):
        super().__init__(message, remote_traceback)
        self.remote_traceback = remote_traceback

    def __str__(self) -> str:
        return self.args[0]


def resource(language: str) -> str:
    """The Dask resource that workers of ``language`` declare (``xlang-node``)."""
    return RESOURCE_PREFIX + language


def language_of(resources: Mapping | None) -> str | None:
    """The language of a task or worker from its resources (``{"xlang-node": 1}`` →
    ``"node"``); None for Python (no ``xlang-`` resource, or ``xlang-python``)."""
    for name in resources or ():
        if isinstance(name, str) and name.startswith(RESOURCE_PREFIX):
            language = name[len(RESOURCE_PREFIX) :]
            if language != PYTHON:
                return language
    return None


def carry_problem(value, where: str) -> str | None:
    """Why ``value`` cannot cross languages (None if it can): msgpack carries None,
    bool, int (64-bit), float, str, bytes, lists/tuples and maps with str/int keys."""
    if value is None or isinstance(value, (bool, float, str, bytes, bytearray)):
        return None
    if isinstance(value, int):
        if -(2**63) <= value < 2**64:
            return None
        digits = len(str(abs(value)))
        return f"{where} is an int too large for msgpack (64 bits): {digits} digits"
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            problem = carry_problem(item, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                return f"{where} has a key of type {type(k).__name__} ({k!r}); msgpack maps here take str or int keys"
            problem = carry_problem(item, f"{where}[{k!r}]")
            if problem:
                return problem
        return None
    kind = type(value)
    return f"{where} is a {kind.__module__}.{kind.__qualname__}, which msgpack cannot carry (numbers, str, bytes, lists, maps, None)"


def references(value) -> list[str]:
    """The keys that ``value`` refers to (``"@key"`` strings, nested in lists and maps)."""
    if isinstance(value, str):
        return [value[1:]] if value.startswith("@") and not value.startswith("@@") else []
    if isinstance(value, (list, tuple)):
        return [k for item in value for k in references(item)]
    if isinstance(value, dict):
        return [k for item in value.values() for k in references(item)]
    return []


def resolve(value, results: Mapping):
    """``value`` with each ``"@key"`` replaced by ``results[key]`` (as it is: a Future,
    when :func:`submit_task` builds a task) and ``"@@x"`` by ``"@x"``."""
    if isinstance(value, str):
        if value.startswith("@@"):
            return value[1:]
        return results[value[1:]] if value.startswith("@") else value
    if isinstance(value, (list, tuple)):
        return [resolve(item, results) for item in value]
    if isinstance(value, dict):
        return {k: resolve(item, results) for k, item in value.items()}
    return value


def as_lists(value):
    """``value`` with every tuple (a msgpack array as distributed reads it) a list."""
    if isinstance(value, (list, tuple)):
        return [as_lists(item) for item in value]
    if isinstance(value, dict):
        return {k: as_lists(item) for k, item in value.items()}
    return value


def task_order(graph) -> list[tuple[str, str, str, list]]:
    """The graph's tasks as ``(key, language, function, args)``, each after the tasks of
    the graph it refers to; :class:`XLangError` for a malformed graph or a cycle. Keys
    referred to but not in the graph are left for the caller to find on the scheduler."""
    if not isinstance(graph, Mapping) or not graph:
        raise XLangError(
            f"spark-dask: a cross-language graph is a non-empty map {{key: [language, function, arg, ...]}}, not {type(graph).__name__}"
        )
    tasks = {}
    for key, spec in graph.items():
        if not isinstance(key, str) or not key:
            raise XLangError(f"spark-dask: task keys are non-empty strings here; got {key!r}")
        if not isinstance(spec, (list, tuple)) or len(spec) < 2 or not all(isinstance(s, str) and s for s in spec[:2]):
            raise XLangError(
                f"spark-dask: task {key!r}: expected [language, function, arg, ...] with language and function strings, got {spec!r}"
            )
        language, function, *args = spec
        problem = carry_problem(args, f"task {key!r}: its arguments")
        if problem:
            raise XLangError(problem)
        if language == PYTHON and "." not in function:
            raise XLangError(
                f"spark-dask: task {key!r}: a python function is named by its dotted path (e.g. 'math.factorial'), not {function!r}"
            )
        tasks[key] = (language, function, list(args))
    order: list = []
    state: dict[str, str] = {}

    def visit(key, path):
        if state.get(key) == "done":
            return
        if state.get(key) == "visiting":
            raise XLangError("spark-dask: the graph has a cycle: " + " -> ".join([*path, key]))
        state[key] = "visiting"
        for dep in references(tasks[key][2]):
            if dep in tasks:
                visit(dep, [*path, key])
        state[key] = "done"
        order.append((key, *tasks[key]))

    for key in tasks:
        visit(key, [])
    return order


def call_python(function: str, key: str, *args):
    """Run a cross-language graph's Python task on a Python worker: import ``function``
    (a dotted path), call it with ``args`` (msgpack arrays as lists), and check that its
    result can cross languages."""
    result = import_function(function)(*as_lists(list(args)))
    problem = carry_problem(result, f"the result of task {key!r} ({function})")
    if problem:
        raise XLangError(problem)
    return result


def import_function(path: str):
    """The object at dotted ``path``: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            break
        return obj
    raise XLangError(f"spark-dask: cannot import the python function {path!r} on this worker")


def run_elsewhere(language: str, function: str, *args):
    """The Python callable of a task of another language: only that language's workers
    receive such a task (it is restricted to their resource), and they read the task's
    annotation instead; a Python worker never runs it."""
    raise XLangError(
        f"spark-dask: a {language} task ({function}) was sent to a Python worker; only workers declaring the resource {resource(language)!r} may run it"
    )
