"""The structure check (tools/structure.py): the package is no worse than its committed
baseline, and the checker finds each kind of finding on small made-up packages. Fast, no
Spark."""

from __future__ import annotations

import json
import os
import textwrap

from tests.support.paths import ROOT
from tools import structure

BASELINE = os.path.join(ROOT, "tools", "structure-baseline.json")


def test_package_is_no_worse_than_the_baseline():
    report = structure.measure()
    with open(BASELINE, encoding="utf-8") as f:
        baseline = json.load(f)
    assert baseline["bounds"] == {"class": structure.MAX_CLASS, "function": structure.MAX_FUNCTION}
    worse = structure.worse_than(report, baseline)
    assert not worse, (
        "spark_dask/ got worse than tools/structure-baseline.json (python -m tools.structure "
        "--ratchet tools/structure-baseline.json shows where):\n" + "\n".join(f"  {w}" for w in worse)
    )
    assert len(report.classes) > 20 and len(report.functions) > 200  # it read the package


def test_package_holds_the_bounds():
    """Issue 23's bounds hold with nothing excused: the baseline lists no finding, so the
    check above fails on any class over 600 lines, function over 80, import cycle or
    private name used across modules, import across the executor boundary, or import of
    pyspark or py4j outside spark_dask/spark/ and the shipped code."""
    with open(BASELINE, encoding="utf-8") as f:
        baseline = json.load(f)
    assert not any(
        baseline[k]
        for k in ("classes_over", "functions_over", "cycle_imports", "private_names", "boundary", "spark_door")
    )


def package(tmp_path, **modules: str) -> str:
    """A package ``pkg`` under ``tmp_path`` with the given modules (``name=source``)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(modules.pop("__init__", ""))
    for name, source in modules.items():
        path = pkg / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("")
        path.write_text(textwrap.dedent(source))
    return str(pkg)


CLEAN = {
    "a": '''
        """A small module."""
        import os

        _CACHE = {}


        class Small:
            def __init__(self):
                self._state = 1

            def value(self):
                return self._state + len(os.sep)
        ''',
    "b": """
        from pkg.a import Small
        from . import a


        def use():
            import sys  # not the package's

            return Small().value(), a.Small, sys.argv[0]._private_of_another_library
        """,
}


def test_a_clean_package_passes(tmp_path, capsys):
    root = package(tmp_path, **CLEAN)
    report = structure.measure(root)
    assert report.ok()
    assert report.largest("class").name == "Small"
    assert {(e.source, e.target) for e in report.imports} == {("pkg.b", "pkg.a")}
    assert structure.main([root]) == 0
    assert "largest class" in capsys.readouterr().out


def test_a_class_and_a_function_over_their_bounds(tmp_path, capsys):
    body = "\n".join(f"        x{i} = {i}" for i in range(structure.MAX_FUNCTION))  # 80 lines + def
    methods = "\n".join(f"    def m{i}(self):\n        return {i}\n" for i in range(structure.MAX_CLASS // 3 + 1))
    root = package(tmp_path, big=f"class Big:\n{methods}\n\ndef outer():\n    def long():\n{body}\n    return long\n")
    report = structure.measure(root)
    assert [b.name for b in report.over("class")] == ["Big"]
    assert report.over("class")[0].lines > structure.MAX_CLASS
    over = {b.name: b.lines for b in report.over("function")}
    assert over == {"outer": structure.MAX_FUNCTION + 3, "outer.long": structure.MAX_FUNCTION + 1}
    assert not report.ok()
    assert structure.main([root]) == 1
    out = capsys.readouterr().out
    assert "big.py:1  Big" in out and "big.py:" in out and "outer.long" in out


def test_an_import_cycle_through_a_function_local_import(tmp_path, capsys):
    root = package(
        tmp_path,
        a="from pkg import b\n",
        b="def f():\n    from .c import g\n    return g\n",
        c="def g():\n    import pkg.a\n    return pkg.a\n",
        d="from pkg.a import b\n",  # into the cycle, not part of it
    )
    report = structure.measure(root)
    assert report.cycles == [["pkg.a", "pkg.b", "pkg.c"]]
    inside = {(e.source, e.target, e.in_function) for e in report.cycle_imports()}
    assert inside == {("pkg.a", "pkg.b", False), ("pkg.b", "pkg.c", True), ("pkg.c", "pkg.a", True)}
    assert structure.shortest_cycle(report.cycles[0], report.imports) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    assert structure.main([root]) == 1
    out = capsys.readouterr().out
    assert "pkg.a -> pkg.b -> pkg.c -> pkg.a" in out and "pkg/b.py:2" in out and "inside a function" in out


def test_private_names_across_modules(tmp_path, capsys):
    root = package(
        tmp_path,
        owner="""
            _registry = []


            def _helper():
                return 1


            class Thing:
                def __init__(self):
                    self._stack = []
                    self.__mangled = 0

                def _close(self):
                    return self._stack
            """,
        user="""
            from pkg import owner
            from pkg.owner import Thing, _registry


            def f(thing: Thing, sc):
                thing._stack.append(owner._helper())  # an object's private, a module's private
                thing._note = 1  # sets a private attribute on another module's object
                setattr(thing, "_flag", True)
                getattr(thing, "_close", None), getattr(thing, "_elsewhere", None)  # defined in owner / nowhere
                sc._jsc.stop()  # another library's private attribute: not the package's
                thing.__class__, thing._repr_html_  # dunder and sunder names are not private
                return _registry
            """,
    )
    report = structure.measure(root)
    found = {(p.path, p.line, p.kind, p.name, p.owner) for p in report.privates}
    assert found == {
        ("pkg/user.py", 3, "imports", "_registry", "pkg.owner"),
        ("pkg/user.py", 7, "reads", "_stack", "pkg.owner"),
        ("pkg/user.py", 7, "reads", "_helper", "pkg.owner"),
        ("pkg/user.py", 8, "sets", "_note", ""),
        ("pkg/user.py", 9, "sets", "_flag", ""),
        ("pkg/user.py", 10, "reads", "_close", "pkg.owner"),
    }
    assert structure.main([root]) == 1
    assert "pkg/user.py:7  reads _helper of pkg.owner" in capsys.readouterr().out


def test_the_ratchet_fails_only_on_what_got_worse(tmp_path, capsys):
    long = "def long():\n" + "\n".join(f"    x{i} = {i}" for i in range(100)) + "\n"
    root = package(tmp_path, a=long + "def f():\n    from pkg import b\n", b="from pkg import a\n")
    baseline = tmp_path / "baseline.json"
    assert structure.main([root, "--write-baseline", str(baseline)]) == 0
    assert structure.main([root, "--ratchet", str(baseline)]) == 0  # over the bounds, but no worse
    assert structure.main([root]) == 1
    written = json.loads(baseline.read_text())
    assert written["functions_over"] == {"pkg/a.py::long": 101}
    assert written["cycle_imports"] == ["pkg.a -> pkg.b", "pkg.b -> pkg.a"]

    pkg = tmp_path / "pkg"
    (pkg / "a.py").write_text(
        long.replace("    x0 = 0\n", "    x0 = 0\n    y = 1\n") + "def f():\n    from pkg import b\n"
    )
    (pkg / "c.py").write_text("from pkg import b\nfrom pkg.b import _p\n")
    (pkg / "b.py").write_text("from pkg import a\nimport pkg.c\n_p = 1\n")
    (pkg / "d.py").write_text("def short():\n" + "\n".join(f"    z{i} = {i}" for i in range(90)) + "\n")
    capsys.readouterr()
    assert structure.main([root, "--ratchet", str(baseline)]) == 1
    worse = structure.worse_than(structure.measure(root), written)
    assert worse == [
        "function pkg/a.py::long: 102 lines, grew from 101 (bound 80)",
        "function pkg/d.py::short: 91 lines, over the bound of 80 (was not over it)",
        "import in a cycle: pkg.b -> pkg.c (new)",
        "import in a cycle: pkg.c -> pkg.b (new)",
        "private name: pkg/c.py: imports _p (pkg.b): 1 use(s), was 0",
        "room cycle: a -> b -> a (new, or more rooms in it: a, b, c)",  # c drawn into a <-> b
    ]
    assert "WORSE than" in capsys.readouterr().out

    (pkg / "a.py").write_text("def f():\n    from pkg import b\n")  # shorter; the rest as before
    (pkg / "c.py").write_text("")
    (pkg / "b.py").write_text("from pkg import a\n")
    (pkg / "d.py").write_text("")
    capsys.readouterr()
    assert structure.main([root, "--ratchet", str(baseline)]) == 0
    out = capsys.readouterr().out
    assert "better than" in out and "pkg/a.py::long: within its bound now" in out


def test_the_executor_boundary(tmp_path, capsys):
    """What a package ships (``SHIPPED``) imports only the standard library and its own
    tuple at module level; ``AS_SOURCE`` adds dask/distributed; every module of
    ``executor/`` is listed; a lazy import inside a function is the way out."""
    root = package(
        tmp_path,
        errors="class Oops(Exception):\n    pass\n",
        driver="import json\n",
        **{
            "executor.__init__": (
                "from pkg import errors\n"
                "from pkg.executor import ok, bad, source, badsource\n"
                "SHIPPED = (errors, ok, bad)\n"
                "AS_SOURCE = (source, badsource)\n"
            ),
            "executor.ok": (
                "import os\nfrom pkg.errors import Oops\nfrom . import bad\n\n\n"
                "def f():\n    import distributed  # where it is used: fine\n    return distributed, os, Oops, bad\n"
            ),
            "executor.bad": "import numpy\nfrom pkg import driver\nfrom pkg.executor import source\n",
            "executor.source": "import distributed\nfrom dask.utils import parse_bytes\n",
            "executor.badsource": "from pkg import errors\n",
            "executor.unlisted": "import os\n",
            "other": 'import numpy\nfrom pkg import errors\nSHIPPED = (errors,)\nSHIPPED_NEEDS = ("numpy",)\n',
        },
    )
    report = structure.measure(root)
    found = {(b.path, b.text.split(" (")[0]) for b in report.boundary}
    assert found == {
        ("pkg/executor/bad.py", "imports numpy at module level"),
        ("pkg/executor/bad.py", "imports pkg.driver at module level"),
        ("pkg/executor/bad.py", "imports pkg.executor.source at module level"),
        ("pkg/executor/badsource.py", "imports pkg.errors at module level"),
        ("pkg/executor/unlisted.py", "in pkg.executor but in neither its SHIPPED nor AS_SOURCE"),
    }, found
    assert not report.ok() and structure.main([root]) == 1
    assert "across the executor boundary (5)" in capsys.readouterr().out
    baseline = report.baseline()
    assert structure.worse_than(report, baseline) == []
    assert structure.worse_than(report, {**baseline, "boundary": baseline["boundary"][1:]}) == [
        f"executor boundary: {baseline['boundary'][0]} (new)"
    ]


def test_the_door_to_spark(tmp_path, capsys):
    """Only ``spark/`` and the shipped task code import pyspark or py4j, at module level
    or inside a function; a name that only starts alike (``pysparkling``) is another library."""
    root = package(
        tmp_path,
        **{
            "spark.session": "import pyspark\n\n\ndef f():\n    from py4j.protocol import Py4JError\n    return Py4JError\n",
            "spark.jobs.run": "from pyspark.resource import ResourceProfileBuilder\n",
            "executor.__init__": "from pkg.executor import task\nSHIPPED = (task,)\n",
            "executor.task": "def f():\n    from pyspark import TaskContext\n    return TaskContext\n",
            "source": "from pkg import helper\nAS_SOURCE = (helper,)\n",
            "helper": "def f():\n    import pyspark\n    return pyspark\n",
            "driver": (
                "import pysparkling\nfrom .spark import session\n\n\n"
                "def f():\n    from pyspark.sql import functions as F\n    return F, session, pysparkling\n"
            ),
            "cli": "import py4j.java_gateway\nimport os, pyspark.sql\n",
            "sparkly": "from pyspark import cloudpickle\n",
        },
    )
    report = structure.measure(root)
    found = {(s.path, s.line, s.target) for s in report.spark_imports}
    assert found == {
        ("pkg/driver.py", 6, "pyspark.sql"),
        ("pkg/cli.py", 1, "py4j.java_gateway"),
        ("pkg/cli.py", 2, "pyspark.sql"),
        ("pkg/sparkly.py", 1, "pyspark"),  # pkg.sparkly is not pkg.spark
    }, found
    assert not report.ok() and structure.main([root]) == 1
    out = capsys.readouterr().out
    assert (
        "Spark imported outside pkg/spark/ and shipped code (4):" in out
        and "pkg/driver.py:6  imports pyspark.sql" in out
    )
    baseline = report.baseline()
    assert baseline["spark_door"] == ["pkg.cli imports py4j.java_gateway", "pkg.cli imports pyspark.sql",
                                      "pkg.driver imports pyspark.sql", "pkg.sparkly imports pyspark"]  # fmt: skip
    assert structure.worse_than(report, baseline) == []
    assert structure.worse_than(report, {**baseline, "spark_door": baseline["spark_door"][1:]}) == [
        "Spark imported outside spark_dask/spark/: pkg.cli imports py4j.java_gateway (new)"
    ]
    (tmp_path / "clean").mkdir()
    assert structure.better_than(structure.measure(package(tmp_path / "clean", **CLEAN)), baseline)[-1] == (
        "Spark import behind its door now: pkg.sparkly imports pyspark"
    )


MAX_MODULE = 700  # lines of a module (issue 56), the option table excepted
MAX_CLUSTER = 450  # lines of SparkCluster, measured as classes are: the Cluster contract only


def test_modules_and_the_cluster_class_stay_small():
    """Issue 56's bounds: no module of the package over 700 lines but the option table
    (one row an option; it generates the YAML, docstrings, CLI and docs), and
    ``SparkCluster`` under 450 lines: the start sequence, the worker groups and the gangs'
    making live in modules of their own (startup, groups/, gang_maker)."""
    package = os.path.join(ROOT, "spark_dask")
    over = []
    for folder, _, files in os.walk(package):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".py") and os.path.relpath(path, package) != os.path.join("options", "table.py"):
                with open(path, encoding="utf-8") as f:
                    n = sum(1 for _ in f)
                if n > MAX_MODULE:
                    over.append(f"{os.path.relpath(path, ROOT)}: {n} lines")
    assert not over, f"modules over {MAX_MODULE} lines (split them along their jobs):\n" + "\n".join(over)
    cluster = [b for b in structure.measure().classes if b.key == "spark_dask/cluster.py::SparkCluster"]
    assert len(cluster) == 1 and cluster[0].lines < MAX_CLUSTER, cluster


def test_a_room_cycle_between_a_subpackage_and_a_root_module(tmp_path, capsys):
    """A room is a top-level module or a top-level subpackage taken whole: the subpackage's
    inner module and the root module import each other through a function-local import
    and the subpackage's face, a cycle of rooms though no cycle of modules."""
    root = package(
        tmp_path,
        scheduler="def f():\n    from pkg.gangs import Gang\n    return Gang\n",
        **{
            "gangs.__init__": "from pkg.gangs.gang import Gang\n",
            "gangs.gang": "class Gang:\n    pass\n",
            "gangs.pool": "from pkg import scheduler\nfrom .gang import Gang\n",
            "errors": "class Oops(Exception):\n    pass\n",
        },
    )
    report = structure.measure(root)
    assert not report.cycles  # the modules have none
    assert report.room_cycles == [["gangs/", "scheduler", "gangs/"]]
    assert report.room_groups == [["gangs/", "scheduler"]]
    assert report.room_levels == {"__init__": 1, "errors": 1, "gangs/": 1, "scheduler": 1}
    assert report.levels == 1
    assert structure.main([root]) == 0  # the rooms are no bound, only ratcheted
    out = capsys.readouterr().out
    assert "rooms (4): 1 levels, 1 room cycles" in out and "  gangs/ -> scheduler -> gangs/   (group of 2" in out

    baseline = report.baseline()
    assert baseline["room_cycles"] == [["gangs/", "scheduler", "gangs/"]] and baseline["levels"] == 1
    assert structure.worse_than(report, baseline) == []
    assert structure.worse_than(report, {**baseline, "room_cycles": [], "room_groups": []}) == [
        "room cycle: gangs/ -> scheduler -> gangs/ (new, or more rooms in it: gangs/, scheduler)"
    ]
    (tmp_path / "pkg" / "errors.py").write_text("from pkg.scheduler import f\n")  # draws errors in
    (tmp_path / "pkg" / "scheduler.py").write_text("from pkg import errors\nfrom pkg.gangs import Gang\n")
    grown = structure.measure(root)
    assert grown.room_groups == [["errors", "gangs/", "scheduler"]]
    assert [w for w in structure.worse_than(grown, baseline) if w.startswith("room")] == [
        f"room cycle: {' -> '.join(grown.room_cycles[0])} (new, or more rooms in it: errors, gangs/, scheduler)"
    ]
    assert structure.worse_than(report, grown.baseline()) == []  # a smaller group is no worse
    assert [b for b in structure.better_than(report, grown.baseline()) if b.startswith("room")] == [
        "room cycle gone, or fewer rooms in it: errors, gangs/, scheduler"
    ]


LAYERED = {
    "__init__": "from pkg.client import start\n",
    "errors": "class Oops(Exception):\n    pass\n",
    "sizes": "from pkg.errors import Oops\n",
    "plan": "from pkg import sizes\nfrom pkg.errors import Oops\n",
    "spark.__init__": "from pkg.spark.session import active\n",
    "spark.session": "from pkg import plan\n\n\ndef active():\n    return plan\n",
    "client": "def start():\n    from pkg.spark import active\n    return active\n",
}


def test_a_layered_package_has_no_room_cycle_and_its_levels(tmp_path, capsys):
    """Ground level: rooms that import no other room; each other room one above the
    highest room it imports: errors 1, sizes 2, plan 3, spark/ 4, client 5, __init__ 6."""
    report = structure.measure(package(tmp_path, **LAYERED))
    assert report.room_cycles == [] and report.room_groups == []
    assert report.room_arrows["plan"] == ["errors", "sizes"] and report.room_arrows["spark/"] == ["plan"]
    assert report.room_levels == {"__init__": 6, "client": 5, "errors": 1, "plan": 3, "sizes": 2, "spark/": 4}
    assert report.levels == 6 and report.baseline()["levels"] == 6
    assert structure.better_than(report, report.baseline()) == []


def test_the_ratchet_on_the_levels(tmp_path, capsys):
    """More levels than the baseline's fail the ratchet; as many or fewer pass it, fewer
    reported as better; a group of rooms in a cycle counts as one level."""
    root = package(tmp_path, **LAYERED)
    baseline = tmp_path / "baseline.json"
    assert structure.main([root, "--write-baseline", str(baseline)]) == 0
    assert json.loads(baseline.read_text())["levels"] == 6
    assert structure.main([root, "--ratchet", str(baseline)]) == 0

    (tmp_path / "pkg" / "errors.py").write_text("import pkg.base\n")  # a new ground floor under errors
    (tmp_path / "pkg" / "base.py").write_text("")
    capsys.readouterr()
    assert structure.main([root, "--ratchet", str(baseline)]) == 1
    assert "room levels: 7, was 6" in capsys.readouterr().out

    (tmp_path / "pkg" / "plan.py").write_text("from pkg.errors import Oops\n")  # no longer above sizes
    assert structure.measure(root).levels == 6
    assert structure.main([root, "--ratchet", str(baseline)]) == 0

    (tmp_path / "pkg" / "errors.py").write_text("from pkg import plan\n")  # errors <-> plan: one level
    report = structure.measure(root)
    assert report.room_groups == [["errors", "plan"]] and report.room_levels["errors"] == report.room_levels["plan"]
    assert report.room_levels == {"__init__": 4, "base": 1, "client": 3, "errors": 1, "plan": 1, "sizes": 2,
                                  "spark/": 2}  # fmt: skip
    assert structure.better_than(report, json.loads(baseline.read_text())) == ["room levels: 4, was 6"]


def test_a_baseline_written_before_the_rooms_still_loads(tmp_path):
    """Without ``room_cycles`` the baseline has no room cycle, without ``levels`` no bound
    on them; without ``room_groups`` the rooms of its cycles are its groups."""
    cyclic = structure.measure(package(tmp_path, a="from pkg import b\n", b="def f():\n    import pkg.a\n"))
    old = {k: v for k, v in cyclic.baseline().items() if k not in ("room_cycles", "room_groups", "levels")}
    assert structure.worse_than(cyclic, old) == ["room cycle: a -> b -> a (new, or more rooms in it: a, b)"]
    assert structure.better_than(cyclic, old) == []
    (tmp_path / "layered").mkdir()
    layered = structure.measure(package(tmp_path / "layered", **LAYERED))
    old = {k: v for k, v in layered.baseline().items() if k not in ("room_cycles", "room_groups", "levels")}
    assert structure.worse_than(layered, old) == [] and structure.better_than(layered, old) == []
    cycles_only = {**cyclic.baseline(), "room_cycles": [["b", "a", "b"]]}
    del cycles_only["room_groups"]
    assert structure.worse_than(cyclic, cycles_only) == []  # compared as sets of rooms, order-free
