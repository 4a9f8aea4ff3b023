"""One source per fact: the option table, the files generated from it, and the notebooks.

``spark_dask/options.py`` describes every option once; ``tools/generate.py`` writes the
SparkCluster docstring's parameters, ``spark_dask/spark_dask.yaml``,
``docs/configuration.md``, the README's options table and the ``.ipynb`` notebooks.
These tests fail when a generated file is stale or when the code and the table disagree.
"""

from __future__ import annotations

import inspect
import os

import dask.config
import pytest
import yaml
from click.testing import CliRunner

from spark_dask import SparkCluster, cli, options
from tests.support.paths import ROOT
from tools import generate


def test_generated_files_are_up_to_date():
    stale = generate.stale()
    assert stale == [], (
        f"generated files out of date: {', '.join(stale)}. Edit spark_dask/options.py (or the "
        "notebook sources), then run: python tools/generate.py"
    )


def test_signature_table_and_yaml_agree():
    params = inspect.signature(SparkCluster.__init__).parameters
    keyword_only = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    table = [o.name for o in options.keyword_options()]
    trailing = [name for name, _, _ in options.TRAILING_PARAMETERS]
    assert sorted(keyword_only) == sorted(table + trailing)
    assert [n for n, p in params.items() if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD] == ["self", "spark"]
    for o in options.keyword_options():  # None: take the configured default
        assert params[o.name].default is None, o.name
    # each configured keyword reaches options.resolve: the arguments, before any other local
    body = inspect.getsource(SparkCluster.__init__).split("):\n", 1)[1].lstrip()
    assert body.startswith("self._parts = ClusterParts(options.resolve(**options.given(locals())),"), body[:200]
    arguments = {name: f"<{name}>" for name in params}
    given = options.given(arguments)
    assert given == {o.name: f"<{o.name}>" for o in options.keyword_options() if o.config}
    assert "env" not in given and "spark" not in given and "quiet" not in given

    with open(os.path.join(ROOT, "spark_dask", "spark_dask.yaml")) as f:
        assert yaml.safe_load(f) == options.defaults()
    # what dask.config holds once the package is imported (no overrides in the test env)
    assert dask.config.get("spark-dask") == options.defaults()["spark-dask"]


def test_resolve_options_reads_every_keyword_from_the_table():
    given = {o.name: None for o in options.keyword_options() if o.config}
    resolved = options.resolve(**given)
    for o in options.keyword_options():
        if not o.config:
            continue
        want = o.default
        if o.time:
            want = dask.utils.parse_timedelta(want)
        assert getattr(resolved, o.name) == want, o.name
    for key in options.time_keys():
        assert getattr(resolved, key.replace("-", "_")) == dask.utils.parse_timedelta(
            dict((o.key, o.default) for o in options.OPTIONS)[key]
        )


def test_cli_options_come_from_the_table():
    run = {p.name: p for p in cli.run.params}
    info = {p.name: p for p in cli.info.params}
    for o in options.keyword_options():
        assert o.cli is not None and "run" in o.cli.commands, f"{o.name} has no spark-dask run option"
        assert o.name in run, o.name
        assert options.cli_help(o) == run[o.name].help
    for o in options.OPTIONS:
        if o.cli is not None and "info" in o.cli.commands:
            assert o.name in info, o.name
    # every start() option of `run` is a SparkCluster keyword; the rest are the CLI's own
    own = {"target", "args", "as_module", "master", "spark_conf", "app_name"}
    assert set(run) - own == {o.name for o in options.keyword_options()}
    help_text = CliRunner().invoke(cli.main, ["run", "--help"]).output
    for o in options.keyword_options():
        assert o.cli.name in help_text, o.cli.name


def test_every_option_is_on_the_configuration_page():
    with open(os.path.join(ROOT, "docs", "configuration.md")) as f:
        page = f.read()
    for o in options.OPTIONS:
        assert f"{{#{generate.anchor(o)}}}" in page, o.key
        assert o.help in page, o.key
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    for o in options.keyword_options():
        assert f"| `{o.name}` |" in readme, o.name


def test_cluster_options_are_the_tables_config_options():
    """``ClusterOptions`` has one field per config option, in the table's order, and
    ``resolve()`` makes one; the package reads options as its attributes, never as a
    dict of option names (an ``opts["..."]`` outside options.py would fail here)."""
    import ast
    import dataclasses
    import pathlib

    names = [f.name for f in dataclasses.fields(options.ClusterOptions)]
    assert "timeout" in names and "rapids_dask_fraction" in names  # it read the class
    assert names == [o.name.replace(".", "_") for o in options.config_options()]
    resolved = options.resolve(**{o.name: None for o in options.keyword_options() if o.config})
    assert isinstance(resolved, options.ClusterOptions)
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.timeout = 1  # type: ignore[misc]
    package = pathlib.Path(options.__file__).parent
    subscripts = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "options.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Constant)
                and node.slice.value in names
                and isinstance(node.value, (ast.Name, ast.Attribute))
                and (node.value.id if isinstance(node.value, ast.Name) else node.value.attr) in ("opts", "options")
            ):
                subscripts.append(f"{path.relative_to(package)}:{node.lineno}")
    assert not subscripts, subscripts
