"""One exception base (issue 37): every exception class of the package is a
``SparkDaskError`` and the builtin that fits, survives pickling (Dask workers send them
back), is exported, and the package raises no bare builtin where a user would see it.
Fast, no Spark."""

from __future__ import annotations

import ast
import glob
import importlib
import os
import pickle
import pkgutil

import pytest

import spark_dask
from spark_dask import (
    ClusterError,
    ClusterTimeoutError,
    DeltaError,
    DoctorError,
    HandoffError,
    HandoffTypeError,
    PlanError,
    SparkDaskError,
    TaskFailed,
    UnknownKeywordError,
    WorkerStartError,
    XLangError,
    XLangTaskError,
)
from tests.support.paths import ROOT

pytestmark = pytest.mark.core

GENERIC = (BaseException, Exception, object)

# The builtin each class was before issue 37 (or, for the new ones, is): callers that
# catch it keep catching it.
BUILTIN = {
    PlanError: ValueError,
    ClusterError: RuntimeError,
    ClusterTimeoutError: (TimeoutError, RuntimeError),
    UnknownKeywordError: TypeError,
    WorkerStartError: RuntimeError,
    TaskFailed: RuntimeError,
    HandoffError: RuntimeError,
    HandoffTypeError: TypeError,
    DeltaError: RuntimeError,
    DoctorError: RuntimeError,
    XLangError: ValueError,
    XLangTaskError: RuntimeError,
}

# Bare builtins the package raises, each where no user sees it: (module, exception).
BARE_OK = {
    ("spark_dask/sizes.py", "ValueError"),  # parse_size: a leaf; its callers make it a PlanError or a default
    (
        "spark_dask/executor/command.py",
        "ValueError",
    ),  # scheduler_endpoint: gang_task.py catches it (inproc:// or custom comms)
    ("spark_dask/handoff/files.py", "ValueError"),  # push_target: unreachable, to_dask/to_spark need a worker first
    ("spark_dask/handoff/transfer.py", "ValueError"),  # the file handlers' guard against paths outside transfer dirs
    ("spark_dask/executor/task_context.py", "RuntimeError"),  # _PlainContext.getTaskInfos: its callers catch it
    (
        "spark_dask/spark/databricks.py",
        "ValueError",
    ),  # proxy_prefix / plan_dashboard: callers check has_proxy, pick the port
    ("tools/gpu_check.py", "ValueError"),  # python -m tools.gpu_check: caught and printed
    ("tools/gpu_check.py", "RuntimeError"),  # the same
    ("spark_dask/named/store.py", "OSError"),  # root_lock: caught on the next lines, logged at DEBUG
}
BARE = {"Exception", "ValueError", "RuntimeError", "TypeError", "TimeoutError", "KeyError", "OSError", "IOError"}


def package_exceptions() -> set[type]:
    """Every exception class defined in spark_dask, found by importing each module."""
    found = set()
    for info in pkgutil.walk_packages(spark_dask.__path__, "spark_dask."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__.startswith("spark_dask")
            ):
                found.add(value)
    return found


def test_the_walk_finds_every_class():
    assert package_exceptions() == {SparkDaskError, *BUILTIN}


def test_every_exception_is_a_spark_dask_error_and_a_builtin():
    for cls in package_exceptions() - {SparkDaskError}:
        assert issubclass(cls, SparkDaskError), cls
        builtins = [b for b in cls.__mro__ if b.__module__ == "builtins" and b not in GENERIC]
        assert builtins, f"{cls.__name__} derives from no builtin but Exception"
    assert SparkDaskError.__bases__ == (Exception,)


def test_every_exception_is_exported():
    for cls in package_exceptions():
        assert cls.__name__ in spark_dask.__all__, cls
        assert getattr(spark_dask, cls.__name__) is cls


@pytest.mark.parametrize("cls", sorted(BUILTIN, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_the_builtin_contracts_hold(cls):
    for builtin in BUILTIN[cls] if isinstance(BUILTIN[cls], tuple) else (BUILTIN[cls],):
        with pytest.raises(builtin, match="^spark-dask: no luck$"):
            raise cls("spark-dask: no luck")
    with pytest.raises(SparkDaskError):
        raise cls("spark-dask: no luck")


@pytest.mark.parametrize("cls", sorted(BUILTIN, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_pickle_round_trip(cls):
    error = cls("spark-dask: the message")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls and str(back) == "spark-dask: the message" and back.args == error.args


def test_a_task_error_keeps_its_traceback_through_pickle():
    error = XLangTaskError("node task 'k' (f) failed on worker node-1: Error: no luck", "at f (worker.mjs:3)")
    back = pickle.loads(pickle.dumps(error))
    assert str(back) == str(error) and back.remote_traceback == "at f (worker.mjs:3)"


def raises(path: str):
    """(exception name, line) of each ``raise Name(...)`` / ``Name(...)`` call of a module."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name):
                yield exc.id, node.lineno
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "SparkDaskError":
            yield "SparkDaskError", node.lineno


def test_no_bare_builtin_or_base_is_raised_to_users():
    """A user's ``except spark_dask.SparkDaskError`` misses a bare builtin; the base is
    never raised itself (a subclass says which builtin it also is)."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "spark_dask", "**", "*.py"), recursive=True)):
        module = os.path.relpath(path, ROOT)
        for name, line in raises(path):
            if name == "SparkDaskError" or (name in BARE and (module, name) not in BARE_OK):
                found.append(f"{module}:{line} {name}")
    assert not found, "raise the package's class (errors.py), which is also the builtin:\n" + "\n".join(found)
