"""docs/design.md's map of the package against the package itself: every module file under
spark_dask/ (subpackages included) has a row in one of the map's module tables and a place
in its layer table, every module the map names exists, and each module imports only
modules above it in the layer table or to its left in its row. Fast, no Spark.

The map is design.md before its first ``## `` heading: the tables whose header is
``| module | what it is |`` (the first column names files by their path under
spark_dask/, in backquotes: ``spark/conf.py``) and the one whose header is
``| layer | modules |`` (modules by path without ``.py``: ``spark/conf``, or every module
of a subpackage: ``delta/*``). A package's ``__init__.py`` that defines no function or
class (a docstring, imports, ``__all__``, constants) is its face, excused from both.
"""

from __future__ import annotations

import ast
import os
import re

from tests.support.paths import ROOT
from tools import structure

PACKAGE = os.path.join(ROOT, "spark_dask")
DESIGN = os.path.join(ROOT, "docs", "design.md")
NAME = re.compile(r"`([^`]+)`")


def is_face(path: str) -> bool:
    """An ``__init__.py`` that defines no function or class."""
    if os.path.basename(path) != "__init__.py":
        return False
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    return not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in ast.walk(tree))


def package_modules(package: str = PACKAGE) -> set[str]:
    """Every module file under ``package``, as its path under it (``spark/conf.py``), faces
    excused."""
    found = set()
    for directory, dirs, files in os.walk(package):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
        for name in files:
            path = os.path.join(directory, name)
            if name.endswith(".py") and not is_face(path):
                found.add(os.path.relpath(path, package).replace(os.sep, "/"))
    return found


def tables(text: str) -> dict[str, list[list[str]]]:
    """The map's tables (the text before the first ``## `` heading), by header: each a
    list of rows, each row its cells."""
    head = re.split(r"^## ", text, maxsplit=1, flags=re.M)[0]
    found: dict[str, list[list[str]]] = {}
    header = None
    for line in head.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = " | ".join(cells)
            found.setdefault(header, [])
        elif not all(set(c) <= set("-: ") for c in cells):
            found[header].append(cells)
    return found


def map_names(text: str) -> tuple[set[str], set[str]]:
    """The files the module tables name (first column) and the names of the layer table."""
    found = tables(text)
    files = {n for row in found.get("module | what it is", []) for n in NAME.findall(row[0])}
    layers = {n for row in found.get("layer | modules", []) for n in NAME.findall(row[1])}
    return files, layers


def layer_covers(name: str, module: str) -> bool:
    """Whether layer-table entry ``name`` (``spark/conf``, ``delta/*``) covers ``module``
    (``spark/conf.py``)."""
    if name.endswith("/*"):
        return module.startswith(name[:-1])
    return module == name + ".py"


def differences(text: str, modules: set[str], exists) -> list[str]:
    """What the map and the package disagree on, one line each (empty: they agree)."""
    files, layers = map_names(text)
    problems = []
    if not files or not layers:
        return ["docs/design.md: no '| module | what it is |' table or no '| layer | modules |' table before '## '"]
    problems += [
        f"{m}: a module of spark_dask/ with no row in design.md's module tables" for m in sorted(modules - files)
    ]
    problems += [
        f"{f}: in design.md's module tables, but spark_dask/{f} does not exist" for f in sorted(files) if not exists(f)
    ]
    problems += [
        f"{m}: a module of spark_dask/ in none of design.md's layers"
        for m in sorted(modules)
        if not any(layer_covers(n, m) for n in layers)
    ]
    problems += [
        f"{n}: in design.md's layer table, but no module of spark_dask/ is {n}"
        for n in sorted(layers)
        if not any(layer_covers(n, m) for m in modules)
    ]
    return problems


def layer_order(text: str) -> list[str]:
    """The layer table's names, row by row, left to right."""
    return [n for row in tables(text).get("layer | modules", []) for n in NAME.findall(row[1])]


def module_path(dotted: str) -> str:
    """A module's path under spark_dask/ without ``.py``: ``spark_dask.spark.conf`` is
    ``spark/conf``."""
    return dotted.partition(".")[2].replace(".", "/")


def out_of_order(order: list[str], edges) -> list[str]:
    """The imports (``(importer, imported)`` paths without ``.py``) that go down or right
    in the layer table ``order``; modules it does not place (faces) are left out."""

    def place(module: str) -> int | None:
        return next((k for k, n in enumerate(order) if layer_covers(n, module + ".py")), None)

    problems = []
    for source, target in sorted(set(edges)):
        at, to = place(source), place(target)
        if at is None or to is None or to <= at:  # above, to the left, or within one pkg/*
            continue
        problems.append(f"{source} imports {target}, which design.md's layer table puts below it or to its right")
    return problems


def test_design_map_names_every_module_and_only_modules():
    with open(DESIGN, encoding="utf-8") as f:
        text = f.read()
    problems = differences(text, package_modules(), lambda f: os.path.exists(os.path.join(PACKAGE, f)))
    assert not problems, (
        "docs/design.md's map (its module tables and layer table) and spark_dask/ differ:\n  " + "\n  ".join(problems)
    )


def test_design_map_layers_follow_the_imports():
    """How they stand on each other, as the map says: each module imports only modules
    above it in the layer table or to its left in its row (within a ``pkg/*`` entry,
    anything of that package)."""
    with open(DESIGN, encoding="utf-8") as f:
        order = layer_order(f.read())
    edges = [(module_path(i.source), module_path(i.target)) for i in structure.measure().imports]
    assert len(edges) > 100  # it read the package
    problems = out_of_order(order, edges)
    assert not problems, "docs/design.md's layer table and spark_dask/'s imports differ:\n  " + "\n  ".join(problems)


MADE_UP = """# Design

| module | what it is |
|---|---|
| `a.py` | a |
| `b.py`, `b.yaml` | b |
| `gone.py` | moved away |

| module | what it is |
|---|---|
| `sub/c.py` | c |

| layer | modules |
|---|---|
| leaves | `a`, `b`, `old` |
| top | `sub/*` |

## Later

| module | what it is |
|---|---|
| `later.py` | not the map |
"""


def test_the_check_finds_each_kind_of_difference():
    """On a made-up package: a module without a row or a layer, a row or a layer entry
    naming what does not exist; a table after the first ``## `` is not the map."""
    modules = {"a.py", "b.py", "sub/c.py", "new.py"}
    present = modules | {"b.yaml"}
    problems = differences(MADE_UP, modules, present.__contains__)
    assert problems == [
        "new.py: a module of spark_dask/ with no row in design.md's module tables",
        "gone.py: in design.md's module tables, but spark_dask/gone.py does not exist",
        "new.py: a module of spark_dask/ in none of design.md's layers",
        "old: in design.md's layer table, but no module of spark_dask/ is old",
    ]
    assert differences(MADE_UP, {"a.py", "b.py", "sub/c.py"}, present.__contains__) == [
        "gone.py: in design.md's module tables, but spark_dask/gone.py does not exist",
        "old: in design.md's layer table, but no module of spark_dask/ is old",
    ]
    assert differences("# nothing\n", modules, present.__contains__)[0].startswith("docs/design.md: no ")


def test_the_order_check_finds_imports_down_or_right():
    order = layer_order(MADE_UP)
    assert order == ["a", "b", "old", "sub/*"]
    edges = [("b", "a"), ("sub/c", "b"), ("sub/c", "sub/d"), ("a", "b"), ("b", "sub/c"), ("a", "face/__init__")]
    assert out_of_order(order, edges) == [
        "a imports b, which design.md's layer table puts below it or to its right",
        "b imports sub/c, which design.md's layer table puts below it or to its right",
    ]


def test_faces_are_excused(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text('"""Face."""\nfrom pkg.m import f\n\n__all__ = ["f"]\n')
    (tmp_path / "pkg" / "m.py").write_text("def f():\n    return 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("class Real:\n    pass\n")
    assert package_modules(str(tmp_path)) == {"pkg/m.py", "sub/__init__.py"}
