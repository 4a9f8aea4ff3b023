"""Shared fixtures and pytest hooks: real Spark applications on ``local-cluster``, the
multi-host cluster, and the folders' markers. The helpers behind them (and the ones the
test modules import) are in ``tests/support``.

The tests' folders, each a marker that :func:`pytest_collection_modifyitems` gives its
tests (``pytest -m unit`` is ``pytest tests/unit``):

- ``tests/unit``: no Spark and no cluster processes; the fast loop
  (``python -m pytest tests/unit``, seconds);
- ``tests/spark``: a real local-cluster Spark (classic and Spark Connect), or real
  cluster processes (a module with any such test is here whole);
- ``tests/multihost``: the multi-host cluster of Linux network namespaces (root).
"""

from __future__ import annotations

import glob
import os
import socket

import pytest

from tests.support import cds
from tests.support import hosts as hostlib
from tests.support.delta_tables import DELTA_SPARK, delta_jars_group
from tests.support.extras import needs
from tests.support.jars import require
from tests.support.mlflow_server import MLflowServer, server_or_skip
from tests.support.multihost import MULTIHOST_GPUS, multihost_or_skip
from tests.support.spark import DEFAULT_SPARK, submit_args

HERE = os.path.dirname(os.path.abspath(__file__))

# Each folder of test modules and its marker (registered in pyproject.toml).
FOLDERS = ("unit", "spark", "multihost")
# What a test under tests/unit must not request: Spark and the multi-host cluster.
NOT_IN_UNIT = ("spark", "default_spark_pool", "delta_spark", "multihost", "multihost_driver")


def _folder(item) -> str | None:
    """The folder of ``item``'s module under tests/ (``unit``, ``spark``, ...; ``""``
    for tests/ itself), or None for a module outside tests/."""
    parts = os.path.relpath(str(item.path), HERE).split(os.sep)
    if parts[0] == os.pardir:
        return None
    return parts[0] if len(parts) > 1 else ""


def _mark_folders(items) -> None:
    """Give each test its folder's marker (the package's doctests: ``unit``); fail the collection (naming the tests) on a
    test module outside the folders, a test marked for another folder, or a test under
    tests/unit that requests Spark or the multi-host cluster."""
    problems = [
        f"{os.path.relpath(path, os.path.dirname(HERE))}: a test module outside {', '.join(f'tests/{f}' for f in FOLDERS)}"
        for path in sorted(glob.glob(os.path.join(HERE, "test_*.py")))
    ]
    package = os.path.join(os.path.dirname(HERE), "spark_dask") + os.sep
    for item in items:
        folder = _folder(item)
        if folder is None:
            if str(item.path).startswith(package):  # the package's doctests: pure, in seconds
                item.add_marker(pytest.mark.unit)
            continue
        if folder not in FOLDERS:
            problems.append(f"{item.nodeid}: a test outside {', '.join(f'tests/{f}' for f in FOLDERS)}")
            continue
        other = sorted({m.name for m in item.iter_markers() if m.name in FOLDERS and m.name != folder})
        if other:
            problems.append(f"{item.nodeid}: marked {', '.join(other)} but in tests/{folder}")
        if folder == "unit":
            wanted = [f for f in NOT_IN_UNIT if f in item.fixturenames]
            if wanted:
                problems.append(
                    f"{item.nodeid}: requests the fixture(s) {', '.join(wanted)}: a test that starts Spark or "
                    "the multi-host cluster goes in tests/spark or tests/multihost, not tests/unit"
                )
        item.add_marker(getattr(pytest.mark, folder))
    if problems:
        raise pytest.UsageError("the tests' folders (tests/conftest.py):\n  " + "\n  ".join(problems))


def _shares(module, its, fixture: str) -> bool:
    """Whether ``module`` (its tests ``its``) uses the shared session of ``fixture``: the
    default ``spark`` unless it defines a ``spark`` fixture of its own; ``delta_spark``."""
    if isinstance(module, str) or not any(fixture in i.fixturenames for i in its):
        return False
    return fixture != "spark" or not hasattr(module, "spark")


def _group_shared_spark(items) -> None:
    """The modules that share a session (the default ``spark``; the Delta ``delta_spark``)
    run one after the other, from the first one's place, so they share its application."""
    modules: dict = {}
    for item in items:  # a doctest has no module object: its file is the key
        modules.setdefault(getattr(item, "module", None) or str(item.path), []).append(item)
    order = list(modules)
    for fixture in ("spark", "delta_spark"):
        shared = [m for m in order if _shares(m, modules[m], fixture)]
        if len(shared) < 2:
            continue
        first = order.index(shared[0])
        rest = [m for m in order if m not in shared]
        order = rest[:first] + shared + rest[first:]
    items[:] = [item for m in order for item in modules[m]]


SUBMIT_ARGS = pytest.StashKey[bool]()
JVMS_READY = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before the first test that starts Spark (the unit tests need none, and run first):
    the class-data archives of this JDK and pyspark (:func:`tests.support.cds.build`,
    once, ~35 s, or waiting for the build tests/run-all.sh started beside the unit tests),
    and every JVM the tests start gets the quick JVM options and those archives: their
    own sessions through :func:`tests.support.spark.test_jvm_conf`, the pyspark of every
    subprocess through ``PYSPARK_SUBMIT_ARGS`` (:func:`tests.support.spark.submit_args`),
    unless the environment sets its own."""
    config = item.config
    if config.stash.get(JVMS_READY, False) or not any(m in item.keywords for m in ("spark", "multihost")):
        return
    config.stash[JVMS_READY] = True
    cds.build()
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args()
        config.stash[SUBMIT_ARGS] = True


def pytest_unconfigure(config):
    if config.stash.get(SUBMIT_ARGS, False):
        os.environ.pop("PYSPARK_SUBMIT_ARGS", None)


def pytest_collection_modifyitems(session, config, items):
    """Each test gets its folder's marker (:func:`_mark_folders`), and the modules that
    share a session run one after the other (:func:`_group_shared_spark`)."""
    _mark_folders(items)
    _group_shared_spark(items)


@pytest.fixture(scope="session")
def default_spark_pool():
    yield DEFAULT_SPARK
    DEFAULT_SPARK.release()


@pytest.fixture(scope="module")
def spark(default_spark_pool):
    """local-cluster[2,1,1024]: two executors with one core each (shared by the modules
    that leave it as they found it: :class:`tests.support.spark.SharedSpark`)."""
    yield default_spark_pool.take()
    default_spark_pool.give_back()


@pytest.fixture(scope="session")
def delta_spark_pool():
    yield DELTA_SPARK
    DELTA_SPARK.release()


@pytest.fixture(scope="module")
def delta_spark(delta_spark_pool):
    """local-cluster[2,1,1024] with Delta Lake's Spark connector
    (:data:`tests.support.delta_tables.DELTA_SPARK`), shared by the modules that leave it
    as they found it: the Delta jars of the running pyspark's line (3.5 or 4.0,
    :func:`tests.support.delta_tables.delta_jars_group`); skips on another line (no
    pinned Delta release: the newest pyspark) and without the delta extra."""
    group = delta_jars_group()
    needs("pyroaring", "delta")
    require(group)
    yield delta_spark_pool.take()
    delta_spark_pool.give_back()


@pytest.fixture(scope="session")
def mlflow_server(request, tmp_path_factory):
    """A real ``mlflow server`` for the session (sqlite store, artifacts served through it,
    a port the OS picks: :class:`tests.support.mlflow_server.MLflowServer`): its ``uri``,
    ``down()`` for a block while it is stopped. Its log stays under pytest's temporary
    directory; its tail is printed at the end of a session with a failed test."""
    server = MLflowServer(server_or_skip(), str(tmp_path_factory.mktemp("mlflow-server")))
    with server:
        yield server
    if request.session.testsfailed:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"\nmlflow server's log ({server.log}), the end:\n{server.log_tail()}")


@pytest.fixture
def listener():
    """A listening TCP socket on 127.0.0.1 (a stand-in scheduler for task code that only
    checks it can connect)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


@pytest.fixture(scope="session")
def multihost():
    """The multi-host cluster (``tests/support/hosts.py``): ``driver`` (Spark Master) and
    ``worker-1``, ``worker-2`` (a Spark Worker each: 4 cores, 3g, two fake GPUs), one for
    the whole session; a test that breaks a host replaces it. Remains of a crashed
    earlier session are removed first."""
    multihost_or_skip()
    hostlib.purge_stale()
    # the Master's spark.worker.timeout as Spark's default (60 s): a host cut off for
    # less (tests/multihost/test_multihost_faults.py) is not dropped; a killed host is
    # noticed at once anyway (its connections reset)
    h = hostlib.Hosts.up(workers=2, cores=4, memory="3g", gpus=MULTIHOST_GPUS, worker_timeout=60)
    yield h
    h.down()


@pytest.fixture(scope="module")
def multihost_driver(multihost):
    """A driver service (``multihost.driver()``) with the default confs, for this module;
    a module that needs other confs defines its own ``multihost_driver`` fixture."""
    d = multihost.driver()
    yield d
    d.close()
