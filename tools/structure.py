"""The package's structure measured against the bounds of issue 23 (``ast``, nothing imported).

    python -m tools.structure                          # the table; exit 1 when a bound is not met
    python -m tools.structure --ratchet tools/structure-baseline.json
                                                       # exit 1 only when something got worse
    python -m tools.structure --write-baseline tools/structure-baseline.json

What is measured on every module under ``spark_dask/`` (subpackages included):

- the largest class and the largest function or method, in lines (``def``/``class`` line
  to the last line of its body, its own docstring left out: numpydoc sections, some
  generated from the option table, are no code to read; a nested function counts on
  its own and inside its parent);
- import cycles between the package's modules: every ``import`` and ``from ... import``
  counts, at module level, inside a function or under ``if TYPE_CHECKING``;
  ``from spark_dask import plan`` is an import of ``spark_dask.plan``, ``from spark_dask
  import start`` one of the package's ``__init__``;
- private names (a leading underscore, not ``__dunder__`` nor ``_sunder_``) of one
  module used by another: imported (``from spark_dask.executor.gang_task import _host_memory``), read
  as an attribute of a module or of an object (``handoff._map_collect(...)``,
  ``cluster._exit_stack``, ``getattr(cluster, "_dashboard", None)``) when a *different*
  package module defines that name (at module level, as a method, or as
  ``self._name = ...``) and the reading module does not, or set on an object other
  than ``self``/``cls`` (``cluster._handoff = ...``,
  ``setattr(cluster, "_handoff", ...)``). Private attributes of other libraries
  (``sc._jsc``, ``ddf._meta``) are not the package's and are left out.

- the executor boundary: code the package ships by value to the executors and Dask
  workers (which need not have spark_dask) is listed in a module-level tuple named
  ``SHIPPED`` (``spark_dask/executor/__init__.py``, the hand-off's, the Delta reader's).
  Each module of a ``SHIPPED`` tuple imports at module level only the standard library
  and modules of the same tuple, plus the third-party modules its tuple's module names
  in ``SHIPPED_NEEDS`` (the Delta reader's ``numpy``); a module of an ``AS_SOURCE``
  tuple (shipped as text and loaded by distributed in the worker process) imports the
  standard library, ``dask`` and ``distributed`` only. Every module under
  ``spark_dask/executor/`` is in its ``SHIPPED`` or ``AS_SOURCE`` tuple.

- the door to Spark: only the modules under ``spark_dask/spark/`` and the shipped task
  code (the modules of a ``SHIPPED`` or ``AS_SOURCE`` tuple, which run inside Spark's
  tasks) import ``pyspark`` or ``py4j``, at module level or inside a function. The rest
  of the package asks ``spark/`` (a version quirk: ``spark/compat.py``).

- the layering of the package's rooms: a room is one top-level module (``cluster.py``:
  room ``cluster``), one top-level subpackage taken whole (``gangs/...``: room
  ``gangs/``) or the package's own ``__init__`` (room ``__init__``). Room A imports room B
  when a module of A imports one of B (the imports of the cycles above, every kind; an
  import of a subpackage's ``__init__`` is one of its room). Measured: the room cycles
  (each strongly connected group of two or more rooms, shown as one shortest cycle
  through its first room, and its rooms) and the levels (each group collapsed to one
  node: a room that imports no other room is on level 1, any other one level above the
  highest room it imports; ``levels`` is the highest level, the number of levels).

Bounds: a class of at most 600 lines, a function of at most 80, no cycle, no private
name across modules, nothing across the executor boundary, no Spark import outside its door. ``--ratchet FILE`` compares with a baseline written by
``--write-baseline`` (``tools/structure-baseline.json``) and fails only on what is worse
than it: a class or function over its bound that was not over before, or that grew; an
import inside a cycle that the baseline did not have; a private-name use that is new,
or more frequent in its module. What got better is reported, so that the baseline can be
lowered in the same commit. The rooms are no bound but are ratcheted too: a group of rooms
in a cycle that is not inside one of the baseline's groups (a new cycle, or one that drew
in more rooms), or more levels than the baseline's, is worse. A baseline without these
keys has no room cycle and no bound on the levels (without ``room_groups``, the rooms of
its ``room_cycles`` are its groups). ``tests/unit/test_structure.py`` runs the ratchet.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_CLASS = 600
MAX_FUNCTION = 80
SPARK_DOOR = "spark"  # the subpackage that talks to Spark
SPARK_LIBRARIES = ("pyspark", "py4j")


@dataclass(frozen=True)
class Block:
    """A class or a function: where it starts and how many lines it spans."""

    path: str  # relative to the directory above the package, e.g. spark_dask/cluster.py
    line: int
    name: str  # qualified inside its module: SparkCluster._start, run_task.stop
    lines: int

    @property
    def key(self) -> str:
        return f"{self.path}::{self.name}"


@dataclass(frozen=True)
class Import:
    """One import statement's edge between two of the package's modules."""

    source: str  # dotted module names
    target: str
    path: str
    line: int
    in_function: bool

    @property
    def key(self) -> str:
        return f"{self.source} -> {self.target}"


@dataclass(frozen=True)
class Private:
    """A private name of one module imported, read or set by another."""

    path: str
    line: int
    kind: str  # "imports", "reads", "sets"
    name: str
    owner: str  # the module(s) defining the name, or "" when set on a foreign object

    @property
    def key(self) -> str:
        return f"{self.path}: {self.kind} {self.name}" + (f" ({self.owner})" if self.owner else "")


@dataclass(frozen=True)
class Boundary:
    """A module-level import (or a missing listing) that crosses the executor boundary."""

    path: str
    line: int
    module: str  # the shipped module
    text: str  # what it imports, or why it is a finding

    @property
    def key(self) -> str:
        return f"{self.module}: {self.text}"


@dataclass(frozen=True)
class SparkImport:
    """An import of pyspark or py4j outside the door to Spark (and outside shipped code)."""

    path: str
    line: int
    module: str  # the importing module
    target: str  # what it imports

    @property
    def key(self) -> str:
        return f"{self.module} imports {self.target}"


@dataclass
class Report:
    """Everything measured on one package."""

    package: str
    classes: list[Block] = field(default_factory=list)
    functions: list[Block] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    cycles: list[list[str]] = field(default_factory=list)  # strongly connected groups, sorted
    privates: list[Private] = field(default_factory=list)
    boundary: list[Boundary] = field(default_factory=list)
    spark_imports: list[SparkImport] = field(default_factory=list)
    room_arrows: dict[str, list[str]] = field(default_factory=dict)  # room -> the rooms it imports
    room_groups: list[list[str]] = field(default_factory=list)  # rooms in a cycle: strongly connected, sorted
    room_cycles: list[list[str]] = field(default_factory=list)  # one shortest cycle of each group, same order
    room_levels: dict[str, int] = field(default_factory=dict)  # room -> its level (1: imports none)

    @property
    def levels(self) -> int:
        """The number of levels of the room graph (its highest level; 0 without rooms)."""
        return max(self.room_levels.values(), default=0)

    def largest(self, kind: str) -> Block | None:
        blocks = self.classes if kind == "class" else self.functions
        return max(blocks, key=lambda b: b.lines, default=None)

    def over(self, kind: str) -> list[Block]:
        blocks, bound = (self.classes, MAX_CLASS) if kind == "class" else (self.functions, MAX_FUNCTION)
        return sorted((b for b in blocks if b.lines > bound), key=lambda b: -b.lines)

    def cycle_imports(self) -> list[Import]:
        """Imports whose two modules are in the same cycle."""
        group = {m: i for i, members in enumerate(self.cycles) for m in members}
        return [e for e in self.imports if e.source in group and group[e.source] == group.get(e.target)]

    def ok(self) -> bool:
        return not (
            self.over("class") or self.over("function") or self.cycles or self.privates or self.boundary
            or self.spark_imports
        )  # fmt: skip

    def baseline(self) -> dict:
        """The JSON the ratchet compares with: keys without line numbers, so edits that
        only move code do not change it."""
        counts: dict[str, int] = defaultdict(int)
        for p in self.privates:
            counts[p.key] += 1
        return {
            "bounds": {"class": MAX_CLASS, "function": MAX_FUNCTION},
            "classes_over": {b.key: b.lines for b in self.over("class")},
            "functions_over": {b.key: b.lines for b in self.over("function")},
            "cycle_imports": sorted({e.key for e in self.cycle_imports()}),
            "private_names": dict(sorted(counts.items())),
            "boundary": sorted({b.key for b in self.boundary}),
            "spark_door": sorted({s.key for s in self.spark_imports}),
            "room_cycles": self.room_cycles,
            "room_groups": self.room_groups,
            "levels": self.levels,
        }


# ------------------------------------------------------------------------------ reading
def _modules(package_dir: str) -> dict[str, str]:
    """``{dotted module name: path}`` of every ``.py`` file under the package."""
    base = os.path.dirname(os.path.abspath(package_dir))
    out = {}
    for folder, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, base)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                out[".".join(parts)] = path
    return out


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and not name.endswith("_")


class _Blocks(ast.NodeVisitor):
    """Classes and functions of one module, with qualified names."""

    def __init__(self, path: str):
        self.path, self.stack = path, []
        self.classes: list[Block] = []
        self.functions: list[Block] = []

    def _block(self, node) -> Block:
        name = ".".join([*self.stack, node.name])
        lines = node.end_lineno - node.lineno + 1
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            lines -= first.end_lineno - first.lineno + 1  # the docstring
        return Block(self.path, node.lineno, name, lines)

    def visit_ClassDef(self, node):
        self.classes.append(self._block(node))
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    def visit_FunctionDef(self, node):
        self.functions.append(self._block(node))
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef


@dataclass
class _Defined:
    """The private names one module defines."""

    module: set[str]  # at module level: functions, classes, assignments, imports
    members: set[str]  # of its classes: methods, class attributes, ``self._x = ...``


def _defined_privates(tree: ast.Module) -> _Defined:
    """Private names a module defines, at module level and as members of its classes."""
    module, members = set(), set()

    def top(statements):
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                module.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                module.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for block in ("body", "orelse", "finalbody", "handlers"):
                    top(getattr(node, block, []))
            elif isinstance(node, ast.ExceptHandler):
                top(node.body)
            else:
                module.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))

    top(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    members.add(item.name)
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    members.update(
                        n.id for n in ast.walk(item) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                    )
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):  # fmt: skip
            members.add(node.attr)
    return _Defined({n for n in module if _is_private(n)}, {n for n in members if _is_private(n)})


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module name of a ``from ... import`` (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, node.module] if node.module else base)


def _imports(module: str, path: str, rel: str, tree: ast.Module, modules: dict[str, str]) -> list[Import]:
    """The package-internal edges of one module's import statements."""
    is_package = os.path.basename(path) == "__init__.py"
    out = []

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets = []
            if isinstance(child, ast.Import):
                targets = [known(a.name) for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, is_package, child)
                for a in child.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in modules else known(base))
            for target in dict.fromkeys(targets):
                if target and target != module:
                    out.append(Import(module, target, rel, child.lineno, in_function))
            visit(child, nested)

    visit(tree, False)
    return out


def _module_aliases(module: str, path: str, tree: ast.Module, modules: dict[str, str]) -> dict[str, str]:
    """Local names bound to one of the package's modules (``from spark_dask import handoff``,
    ``import spark_dask.plan as plan``), anywhere in the module."""
    is_package = os.path.basename(path) == "__init__.py"
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in modules and a.asname:
                    out[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node)
            for a in node.names:
                if f"{base}.{a.name}" in modules:
                    out[a.asname or a.name] = f"{base}.{a.name}"
    return out


def _privates(module: str, path: str, rel: str, tree: ast.Module, modules: dict[str, str],
              defined: dict[str, _Defined]) -> list[Private]:  # fmt: skip
    """Private names of other modules that this module imports, reads or sets."""
    is_package = os.path.basename(path) == "__init__.py"
    own = defined[module].members
    aliases = _module_aliases(module, path, tree, modules)
    out = []

    def owners(name: str) -> str:
        """The other modules whose classes have a member ``name``."""
        return ", ".join(sorted(m for m, d in defined.items() if m != module and name in d.members))

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node)
            if base in modules and base != module:
                out += [Private(rel, node.lineno, "imports", a.name, base) for a in node.names if _is_private(a.name)]
        elif isinstance(node, ast.Attribute) and _is_private(node.attr):
            obj = node.value
            if isinstance(obj, ast.Name) and obj.id in ("self", "cls"):
                continue
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                out.append(Private(rel, node.lineno, "sets", node.attr, owners(node.attr)))
            elif isinstance(obj, ast.Name) and obj.id in aliases:  # module._name
                target = aliases[obj.id]
                if target in defined and node.attr in defined[target].module | defined[target].members:
                    out.append(Private(rel, node.lineno, "reads", node.attr, target))
            elif node.attr not in own and owners(node.attr):  # an object's private attribute
                out.append(Private(rel, node.lineno, "reads", node.attr, owners(node.attr)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr", "delattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _is_private(node.args[1].value)
              and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))):  # fmt: skip
            name = node.args[1].value
            if node.func.id in ("setattr", "delattr"):
                out.append(Private(rel, node.lineno, "sets", name, owners(name)))
            elif name not in own and owners(name):  # getattr(cluster, "_dashboard", None)
                out.append(Private(rel, node.lineno, "reads", name, owners(name)))
    return out


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of a graph (Tarjan), each sorted, single nodes included;
    a group comes after every group it reaches."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []

    def connect(v: str):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                members.append(w)
                if w == v:
                    break
            groups.append(sorted(members))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return groups


def _cycles(imports: list[Import]) -> list[list[str]]:
    """Strongly connected groups of two or more modules, each sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for e in imports:
        graph[e.source].add(e.target)
    return sorted(g for g in _components(graph) if len(g) > 1)


def shortest_cycle(group: list[str], imports: list[Import]) -> list[str]:
    """One shortest cycle through a group's first module, as module names (first = last)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for e in imports:
        graph[e.source].add(e.target)
    return _shortest_cycle(group, graph)


def _shortest_cycle(group: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One shortest cycle of ``graph`` through a group's first node, inside the group
    (first = last); the group itself when there is none."""
    members = set(group)
    start = group[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(w for w in graph.get(v, ()) if w in members):
            if w == start:
                return [*paths[v], start]
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    return group


# ------------------------------------------------------------------------------ rooms
def _room(module: str, path: str) -> str:
    """The room of a module: ``pkg.cluster`` -> ``cluster``, ``pkg.gangs`` and
    ``pkg.gangs.x.y`` -> ``gangs/``, ``pkg`` -> ``__init__``."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__"
    if len(parts) == 1 and os.path.basename(path) != "__init__.py":
        return parts[0]
    return parts[0] + "/"


def _room_arrows(imports: list[Import], modules: dict[str, str]) -> dict[str, set[str]]:
    """``{room: the other rooms it imports}``, every room of ``modules`` a key."""
    room = {m: _room(m, path) for m, path in modules.items()}
    arrows: dict[str, set[str]] = {r: set() for r in room.values()}
    for e in imports:
        if room[e.source] != room[e.target]:
            arrows[room[e.source]].add(room[e.target])
    return arrows


def _room_cycles(arrows: dict[str, set[str]]) -> tuple[list[list[str]], list[list[str]]]:
    """``(groups, cycles)``: the strongly connected groups of two or more rooms (each
    sorted, in order) and one shortest cycle through each group's first room."""
    groups = sorted(g for g in _components(arrows) if len(g) > 1)
    return groups, [_shortest_cycle(g, arrows) for g in groups]


def _room_levels(arrows: dict[str, set[str]]) -> dict[str, int]:
    """``{room: level}`` with each strongly connected group collapsed to one node: 1 for
    a group that imports no other room, else 1 + the highest level of what it imports."""
    level: dict[str, int] = {}
    for group in _components(arrows):  # what a group reaches comes before it
        below = {w for v in group for w in arrows[v]} - set(group)
        here = 1 + max((level[w] for w in below), default=0)
        level.update(dict.fromkeys(group, here))
    return dict(sorted(level.items()))


def measure(package_dir: str | None = None) -> Report:
    """Measure a package directory (default: ``spark_dask/`` of this repository)."""
    package_dir = os.path.abspath(package_dir or os.path.join(ROOT, "spark_dask"))
    base = os.path.dirname(package_dir)
    modules = _modules(package_dir)
    trees, rels = {}, {}
    for module, path in modules.items():
        with open(path, encoding="utf-8") as f:
            trees[module] = ast.parse(f.read(), filename=path)
        rels[module] = os.path.relpath(path, base).replace(os.sep, "/")
    report = Report(os.path.basename(package_dir))
    defined = {m: _defined_privates(t) for m, t in trees.items()}
    for module, tree in trees.items():
        blocks = _Blocks(rels[module])
        blocks.visit(tree)
        report.classes += blocks.classes
        report.functions += blocks.functions
        report.imports += _imports(module, modules[module], rels[module], tree, modules)
        report.privates += _privates(module, modules[module], rels[module], tree, modules, defined)
    report.cycles = _cycles(report.imports)
    arrows = _room_arrows(report.imports, modules)
    report.room_arrows = {r: sorted(a) for r, a in sorted(arrows.items())}
    report.room_groups, report.room_cycles = _room_cycles(arrows)
    report.room_levels = _room_levels(arrows)
    report.boundary = _boundary(trees, modules, rels)
    report.spark_imports = _spark_imports(trees, modules, rels)
    report.privates.sort(key=lambda p: (p.path, p.line, p.name))
    return report


# ------------------------------------------------------------------------------ boundary
SOURCE_MAY_IMPORT = ("dask", "distributed")  # what an AS_SOURCE module runs inside


def _tuple_names(tree: ast.Module, name: str) -> tuple[int, list[str]] | None:
    """``(line, [names])`` of a module-level ``NAME = (a, b, ...)``; None without one."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(x, ast.Name) and x.id == name for x in node.targets):
            if isinstance(node.value, (ast.Tuple, ast.List)):
                elts = node.value.elts
                return node.lineno, [e.id if isinstance(e, ast.Name) else ast.literal_eval(e) for e in elts]
    return None


def _bound_modules(module: str, path: str, tree: ast.Module, modules: dict[str, str]) -> dict[str, str]:
    """``{local name: package module}`` for the modules a module imports under a name."""
    is_package = os.path.basename(path) == "__init__.py"
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node)
            for a in node.names:
                if f"{base}.{a.name}" in modules:
                    out[a.asname or a.name] = f"{base}.{a.name}"
    return out


def _top_imports(tree: ast.Module):
    """``(line, absolute-or-relative module name, ImportFrom node or None)`` of the
    module-level imports (``if``/``try`` blocks included, functions and classes not)."""

    def walk(body):
        for node in body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    yield node.lineno, a.name, None
            elif isinstance(node, ast.ImportFrom):
                yield node.lineno, node.module or "", node
            elif isinstance(node, (ast.If, ast.Try)):
                yield from walk(node.body + node.orelse + getattr(node, "finalbody", []))
                for h in getattr(node, "handlers", []):
                    yield from walk(h.body)

    yield from walk(tree.body)


def _boundary(trees: dict, modules: dict[str, str], rels: dict[str, str]) -> list[Boundary]:
    """The executor boundary's findings (see the module's text)."""
    out = []
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    package = next(iter(modules)).split(".")[0] if modules else ""
    executor = f"{package}.executor"
    listed: set[str] = set()
    for owner, tree in trees.items():
        bound = _bound_modules(owner, modules[owner], tree, modules)
        needs = set((_tuple_names(tree, "SHIPPED_NEEDS") or (0, []))[1])
        for kind in ("SHIPPED", "AS_SOURCE"):
            found = _tuple_names(tree, kind)
            if not found:
                continue
            line, names = found
            members = {bound[n] for n in names if n in bound}
            for n in names:
                if n not in bound:
                    out.append(Boundary(rels[owner], line, owner, f"{kind} lists {n}, not a module of the package"))
            listed |= members
            for member in sorted(members):
                is_package = os.path.basename(modules[member]) == "__init__.py"
                for lineno, name, node in _top_imports(trees[member]):
                    base = _resolve(member, is_package, node) if node is not None else name
                    if node is not None and base.split(".")[0] == package:
                        targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
                    else:
                        targets = [base]
                    for target in dict.fromkeys(targets):
                        top = target.split(".")[0]
                        if kind == "SHIPPED":
                            ok = top in stdlib or top in needs or target in members
                        else:
                            ok = top in stdlib or top in SOURCE_MAY_IMPORT
                        if not ok:
                            out.append(Boundary(rels[member], lineno, member, f"imports {target} at module level "
                                                f"(not the standard library, nor a module of {owner}.{kind})"))  # fmt: skip
    for module in modules:
        if module.startswith(executor + ".") and module not in listed:
            out.append(Boundary(rels[module], 1, module, f"in {executor} but in neither its SHIPPED nor AS_SOURCE"))
    return sorted(set(out), key=lambda b: (b.path, b.line, b.text))


# ------------------------------------------------------------------------------ the door to Spark
def _shipped(trees: dict, modules: dict[str, str]) -> set[str]:
    """The modules of every ``SHIPPED`` and ``AS_SOURCE`` tuple of the package."""
    out: set[str] = set()
    for owner, tree in trees.items():
        bound = _bound_modules(owner, modules[owner], tree, modules)
        for kind in ("SHIPPED", "AS_SOURCE"):
            _, names = _tuple_names(tree, kind) or (0, [])
            out |= {bound[n] for n in names if n in bound}
    return out


def _spark_imports(trees: dict, modules: dict[str, str], rels: dict[str, str]) -> list[SparkImport]:
    """Imports of pyspark or py4j (anywhere in a module) outside ``<package>.spark`` and
    the shipped modules."""
    package = next(iter(modules)).split(".")[0] if modules else ""
    door = f"{package}.{SPARK_DOOR}"
    allowed = _shipped(trees, modules)
    out = []
    for module, tree in trees.items():
        if module == door or module.startswith(door + ".") or module in allowed:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                if name.split(".")[0] in SPARK_LIBRARIES:
                    out.append(SparkImport(rels[module], node.lineno, module, name))
    return sorted(set(out), key=lambda s: (s.path, s.line, s.target))


# ------------------------------------------------------------------------------ ratchet
def worse_than(report: Report, baseline: dict) -> list[str]:
    """What is worse in ``report`` than in ``baseline`` (empty: nothing)."""
    now = report.baseline()
    out = []
    for kind, label, bound in (("classes_over", "class", MAX_CLASS), ("functions_over", "function", MAX_FUNCTION)):
        before = baseline.get(kind, {})
        for key, lines in now[kind].items():
            if key not in before:
                out.append(f"{label} {key}: {lines} lines, over the bound of {bound} (was not over it)")
            elif lines > before[key]:
                out.append(f"{label} {key}: {lines} lines, grew from {before[key]} (bound {bound})")
    for key in sorted(set(now["cycle_imports"]) - set(baseline.get("cycle_imports", []))):
        out.append(f"import in a cycle: {key} (new)")
    before = baseline.get("private_names", {})
    for key, count in now["private_names"].items():
        if count > before.get(key, 0):
            out.append(f"private name: {key}: {count} use(s), was {before.get(key, 0)}")
    for key in sorted(set(now["boundary"]) - set(baseline.get("boundary", []))):
        out.append(f"executor boundary: {key} (new)")
    for key in sorted(set(now["spark_door"]) - set(baseline.get("spark_door", []))):
        out.append(f"Spark imported outside spark_dask/{SPARK_DOOR}/: {key} (new)")
    before = _room_groups(baseline)
    for cycle, group in zip(now["room_cycles"], now["room_groups"]):
        if not any(set(group) <= b for b in before):
            out.append(f"room cycle: {' -> '.join(cycle)} (new, or more rooms in it: {', '.join(group)})")
    if baseline.get("levels") is not None and now["levels"] > baseline["levels"]:
        out.append(f"room levels: {now['levels']}, was {baseline['levels']}")
    return out


def _room_groups(baseline: dict) -> list[frozenset[str]]:
    """A baseline's groups of rooms in a cycle (the rooms of its cycles in a baseline
    written before the groups were; none in one written before the rooms)."""
    groups = baseline.get("room_groups", baseline.get("room_cycles", []))
    return [frozenset(g) for g in groups]


def better_than(report: Report, baseline: dict) -> list[str]:
    """What improved on the baseline (to lower it with ``--write-baseline``)."""
    now = report.baseline()
    out = []
    for kind in ("classes_over", "functions_over"):
        for key, lines in baseline.get(kind, {}).items():
            if key not in now[kind]:
                out.append(f"{key}: within its bound now (was {lines} lines), or renamed")
            elif now[kind][key] < lines:
                out.append(f"{key}: {now[kind][key]} lines, was {lines}")
    gone = set(baseline.get("cycle_imports", [])) - set(now["cycle_imports"])
    out += [f"import no longer in a cycle: {k}" for k in sorted(gone)]
    for key, count in baseline.get("private_names", {}).items():
        if now["private_names"].get(key, 0) < count:
            out.append(f"private name: {key}: {now['private_names'].get(key, 0)} use(s), was {count}")
    gone = set(baseline.get("boundary", [])) - set(now["boundary"])
    out += [f"executor boundary kept now: {k}" for k in sorted(gone)]
    gone = set(baseline.get("spark_door", [])) - set(now["spark_door"])
    out += [f"Spark import behind its door now: {k}" for k in sorted(gone)]
    still = _room_groups(now)
    out += [f"room cycle gone, or fewer rooms in it: {', '.join(sorted(b))}" for b in _room_groups(baseline)
            if b not in still]  # fmt: skip
    if baseline.get("levels") is not None and now["levels"] < baseline["levels"]:
        out.append(f"room levels: {now['levels']}, was {baseline['levels']}")
    return out


# ------------------------------------------------------------------------------ table
def render(report: Report) -> str:
    """The report as text a person reads: a summary, then each finding with file:line."""

    def state(ok: bool) -> str:
        return "ok" if ok else "OVER"

    lines = [f"structure of {report.package}/ (bounds: class <= {MAX_CLASS} lines, function <= {MAX_FUNCTION} "
             "lines, no import cycle, no private name across modules, the executor boundary, the door to Spark)",
             ""]  # fmt: skip
    rows = []
    for kind, bound in (("class", MAX_CLASS), ("function", MAX_FUNCTION)):
        b = report.largest(kind)
        if b:
            rows.append((f"largest {kind}", f"{b.lines} lines", f"{b.path}:{b.line} {b.name}", state(b.lines <= bound)))
    rows.append(("import cycles", str(len(report.cycles)),
                 f"{len(report.cycle_imports())} imports inside them", state(not report.cycles)))  # fmt: skip
    rows.append(("private names", str(len(report.privates)), "uses across modules", state(not report.privates)))
    rows.append(("executor boundary", str(len(report.boundary)), "imports across it", state(not report.boundary)))
    rows.append(("door to Spark", str(len(report.spark_imports)), f"pyspark/py4j imports outside {SPARK_DOOR}/",
                 state(not report.spark_imports)))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines += [f"  {a:<{widths[0]}}  {b:>{widths[1]}}  {c:<{widths[2]}}  {d}" for a, b, c, d in rows]

    for kind, bound in (("class", MAX_CLASS), ("function", MAX_FUNCTION)):
        over = report.over(kind)
        if over:
            lines += ["", f"{'classes' if kind == 'class' else 'functions'} over {bound} lines ({len(over)}):"]
            lines += [f"  {b.lines:>5}  {b.path}:{b.line}  {b.name}" for b in over]
    if report.cycles:
        lines += ["", f"import cycles ({len(report.cycles)}):"]
        inside = report.cycle_imports()
        for group in report.cycles:
            lines.append("  " + " -> ".join(shortest_cycle(group, report.imports)) + f"   (group of {len(group)})")
            for e in sorted((e for e in inside if e.source in group), key=lambda e: (e.path, e.line)):
                where = "inside a function" if e.in_function else "module level"
                lines.append(f"      {e.path}:{e.line}  {e.source} -> {e.target}  ({where})")
    if report.privates:
        lines += ["", f"private names across modules ({len(report.privates)}):"]
        for p in report.privates:
            owner = f" of {p.owner}" if p.kind != "sets" or p.owner else " on another module's object"
            lines.append(f"  {p.path}:{p.line}  {p.kind} {p.name}{owner}")
    if report.boundary:
        lines += ["", f"across the executor boundary ({len(report.boundary)}):"]
        lines += [f"  {b.path}:{b.line}  {b.text}" for b in report.boundary]
    if report.spark_imports:
        lines += [
            "",
            f"Spark imported outside {report.package}/{SPARK_DOOR}/ and shipped code ({len(report.spark_imports)}):",
        ]
        lines += [f"  {s.path}:{s.line}  imports {s.target}" for s in report.spark_imports]
    lines += ["", f"rooms ({len(report.room_levels)}): {report.levels} levels, {len(report.room_cycles)} room cycles"]
    for cycle, group in zip(report.room_cycles, report.room_groups):
        lines.append("  " + " -> ".join(cycle) + f"   (group of {len(group)}: {', '.join(group)})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.structure", description=__doc__.split("\n\n")[0])
    parser.add_argument("package", nargs="?", help="the package directory (default: spark_dask/)")
    parser.add_argument("--ratchet", metavar="FILE", help="fail only on what is worse than this baseline")
    parser.add_argument("--write-baseline", metavar="FILE", help="write the current findings as the baseline")
    args = parser.parse_args(argv)
    report = measure(args.package)
    print(render(report))
    if args.write_baseline:
        with open(args.write_baseline, "w", encoding="utf-8") as f:
            json.dump(report.baseline(), f, indent=1)
            f.write("\n")
        print(f"\nwrote {args.write_baseline}")
        return 0
    if args.ratchet:
        with open(args.ratchet, encoding="utf-8") as f:
            baseline = json.load(f)
        worse, better = worse_than(report, baseline), better_than(report, baseline)
        if better:
            print(f"\nbetter than {args.ratchet} (lower it: --write-baseline {args.ratchet}):")
            print("\n".join(f"  {b}" for b in better))
        if worse:
            print(f"\nWORSE than {args.ratchet}:")
            print("\n".join(f"  {w}" for w in worse))
            return 1
        print(f"\nratchet: nothing worse than {args.ratchet}")
        return 0
    return 0 if report.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
