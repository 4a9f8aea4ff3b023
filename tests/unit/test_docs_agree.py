"""What README.md and docs/ say about the tests and the extras agrees with what runs them
(issue 42, point 7: docs/getting-started/local.md named another pyspark 3.5, another
``-m`` expression and said Spark Connect on 3.5 was not run; its extras table missed two
packages of ``docs``).

Everything compared is read from tests/run-all.sh and pyproject.toml when the test runs:
a change there fails this test until the docs say the same."""

from __future__ import annotations

import glob
import os
import re

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.support.paths import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

RUN_ALL = os.path.join(ROOT, "tests", "run-all.sh")
PAGES = [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))]
SELF = "spark-dask"


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _rel(path: str) -> str:
    return os.path.relpath(path, ROOT)


def _blocks(text: str) -> list[str]:
    """Paragraphs and list items (a list item runs until the next item or blank line)."""
    return [b for b in re.split(r"\n\s*\n|\n(?=\s*- )", text) if b.strip()]


def _pages() -> dict[str, str]:
    return {_rel(p): _read(p) for p in PAGES}


# ---------------------------------------------------------------- what tests/run-all.sh runs
def _run_all_commands() -> list[str]:
    """run-all.sh's command lines, comments dropped, continuation lines joined."""
    lines = [line for line in _read(RUN_ALL).splitlines() if not line.lstrip().startswith("#")]
    return re.sub(r"\\\n", " ", "\n".join(lines)).splitlines()


def _marker_expressions() -> set[str]:
    found = set()
    for line in _run_all_commands():
        if "pytest" in line:
            found.update(a or b for a, b in re.findall(r"""pytest\s+-m\s+(?:"([^"]+)"|([\w-]+))""", line))
    assert found, "tests/run-all.sh runs no pytest -m ...: the pattern here needs updating"
    return found


def _old_environment() -> tuple[str, dict[str, str], bool]:
    """The pyspark 3.5 environment of run-all.sh: the pyspark pin, the upper bounds
    (``'pandas<3'``: name -> bound), whether pyspark's connect extra is in it."""
    for line in _run_all_commands():
        pin = re.search(r"'pyspark(\[[\w,]+\])?==(3\.[\d.]+)'", line)
        if pin:
            bounds = dict(re.findall(r"'([\w-]+)<([\d.]+)'", line))
            return pin.group(2), bounds, "connect" in (pin.group(1) or "")
    raise AssertionError("tests/run-all.sh installs no 'pyspark==3.x' environment: the pattern here needs updating")


# ---------------------------------------------------------------- what pyproject.toml declares
def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _extras() -> dict[str, list[Requirement]]:
    return {name: [Requirement(r) for r in reqs] for name, reqs in _project()["optional-dependencies"].items()}


def _package(req: Requirement) -> str:
    """The name the docs use for a requirement: without a RAPIDS wheel's ``-cu12`` suffix."""
    return re.sub(r"-cu\d+$", "", req.name)


def _lower_bound(req: Requirement) -> Version | None:
    return next((Version(s.version) for s in req.specifier if s.operator == ">="), None)


# ---------------------------------------------------------------- the tests
def test_every_pytest_marker_expression_in_the_docs_is_one_run_all_runs():
    runs = _marker_expressions()
    wrong = []
    for page, text in _pages().items():
        for a, b in re.findall(r"""pytest -m\s+(?:"([^"]+)"|([\w-]+))""", text):
            if (a or b) not in runs:
                wrong.append(f"{page}: pytest -m {a or b!r}")
    assert not wrong, f"tests/run-all.sh runs pytest -m {sorted(runs)}, the docs name:\n" + "\n".join(wrong)


def test_the_core_tests_pyspark_and_pins_are_run_alls():
    pin, bounds, _ = _old_environment()
    wrong, seen = [], 0
    for page, text in _pages().items():
        for block in _blocks(text):
            if "core tests" not in block:
                continue
            for version in re.findall(r"pyspark\W{0,3}(3\.\d+\.[\dx]+|3\.\d+(?![\d.]))", block):
                seen += 1  # "pyspark 3.5" names the line, "3.5.x" or another patch is not the pin
                if version != (pin if version.count(".") == 2 else ".".join(pin.split(".")[:2])):
                    wrong.append(f"{page}: the core tests on pyspark {version}")
            for name, bound in re.findall(r"`([\w-]+)<([\d.]+)`", block):
                if name in bounds and bound != bounds[name]:
                    wrong.append(f"{page}: `{name}<{bound}` beside the core tests")
    assert seen, "no page names the pyspark the core tests run on"
    assert not wrong, f"tests/run-all.sh runs the core tests on pyspark {pin} with {bounds}:\n" + "\n".join(wrong)


def test_no_page_says_spark_connect_on_3_5_is_not_run():
    pin, _, connect = _old_environment()
    if not connect:
        pytest.skip(f"tests/run-all.sh installs pyspark {pin} without its connect extra")
    said = re.compile(r"Connect[^.]*\b3\.5\b[^.]*\bnot (?:run|tested)|\bnot (?:run|tested)[^.]*Connect[^.]*\b3\.5\b")
    wrong = [
        f"{page}: {m.group(0)!r}" for page, text in _pages().items() for m in said.finditer(" ".join(text.split()))
    ]
    assert not wrong, (
        f"tests/run-all.sh runs the core tests, Connect among them, on pyspark[connect] {pin}:\n" + "\n".join(wrong)
    )


def test_the_lowest_dask_the_docs_name_is_pyprojects():
    lowest = {r.name: _lower_bound(r) for r in map(Requirement, _project()["dependencies"])}
    wrong, seen = [], 0
    for page, text in _pages().items():
        for block in _blocks(text):
            if re.search(r"lowest\W+dask", " ".join(block.split())):
                for version in re.findall(r"\b(20\d\d\.\d+\.\d+)\b", block):
                    seen += 1
                    if Version(version) != lowest["dask"]:
                        wrong.append(f"{page}: {version}")
    assert seen, "no page names the lowest dask the core tests run with"
    assert lowest["dask"] == lowest["distributed"]
    assert not wrong, f"pyproject.toml declares dask>={lowest['dask']}:\n" + "\n".join(wrong)


def _extra_tables() -> list[tuple[str, bool, list[list[str]]]]:
    """Each table of extras on the pages: (page, whether it lists every extra: its
    header is ``| extra | installs | for |``, rows of cells)."""
    tables = []
    for page, text in _pages().items():
        for m in re.finditer(r"^\| extra \| installs \| (\w+) \|\n\|[-|]+\|\n((?:\|.*\|\n?)+)", text, re.M):
            rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in m.group(2).splitlines()]
            tables.append((page, m.group(1) == "for", rows))
    return tables


def _named(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def test_the_extras_tables_list_what_pyproject_installs():
    extras, base = _extras(), [Requirement(r) for r in _project()["dependencies"]]
    tables = _extra_tables()
    assert {page for page, *_ in tables} >= {"README.md", "docs/getting-started/local.md"}
    wrong = []
    for page, complete, rows in tables:
        named_extras = set()
        for row in rows:
            names = re.findall(r"`([\w-]+)`", row[0])
            named_extras.update(re.findall(r"`([\w-]+)`", " ".join(row)))
            reqs = base if row[0] == "*(none)*" else [r for n in names for r in extras.get(n, [])]
            wrong += [f"{page}: no extra {n!r} in pyproject.toml" for n in names if n not in extras]
            for req in reqs:
                if req.name == SELF:  # another extra, included: the row names it
                    wrong += [f"{page}, row {row[0]}: {e!r} (included) not named" for e in sorted(req.extras)
                              if not any(_named(e, c) for c in row)]  # fmt: skip
                elif not (_named(_package(req), row[1]) or _named(req.name, row[1])):
                    wrong.append(f"{page}, row {row[0]}: {_package(req)} not listed")
                else:
                    bound = re.search(rf"(?<![\w-]){re.escape(_package(req))}(?:\[[\w,]+\])? ≥ ([\d.]+)", row[1])
                    if bound and Version(bound.group(1)) != _lower_bound(req):
                        wrong.append(f"{page}, row {row[0]}: {req.name} ≥ {bound.group(1)}, pyproject: {req}")
        if complete:
            wrong += [f"{page}: extra {e!r} missing from the table" for e in sorted(set(extras) - named_extras)]
    assert not wrong, "the extras tables disagree with pyproject.toml:\n" + "\n".join(wrong)
