"""One source per fact: the option table, the files generated from it, and the notebooks.

``spark_dask/options/table.py`` describes every option once; ``tools/generate.py`` writes the
SparkCluster docstring's parameters (``start()`` takes them at import),
``spark_dask/spark_dask.yaml``, ``docs/configuration.md``, the README's options table and
the ``.ipynb`` notebooks.
These tests fail when a generated file is stale or when the code and the table disagree.
"""

from __future__ import annotations

import inspect
import os
import re

import dask.config
import pytest
import yaml
from click.testing import CliRunner

import spark_dask
from spark_dask import PlanError, SparkCluster, UnknownKeywordError, cli, client, options
from tests.support.paths import ROOT
from tools import generate


def test_generated_files_are_up_to_date():
    stale = generate.stale()
    assert stale == [], (
        f"generated files out of date: {', '.join(stale)}. Edit spark_dask/options/table.py (or the "
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
    assert body.startswith("opts = options.resolve(**options.given(locals()))\n"), body[:200]
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
        assert cli.cli_help(o) == run[o.name].help
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
    package = pathlib.Path(options.__file__).parent.parent
    subscripts = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).as_posix() == "options/resolving.py":
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


def test_start_takes_and_shows_every_option():
    """``start()`` shows SparkCluster's keywords (but ``asynchronous`` and ``loop``) to
    ``help()``, IPython and editors, with SparkCluster's parameter docs (taken at import,
    not generated into client.py: ``tests/unit/test_start_signature.py`` has the rest); a
    misspelled keyword is refused with the closest option, naming what the user called,
    before anything starts (issue 42)."""
    cluster = inspect.signature(SparkCluster).parameters
    start = inspect.signature(spark_dask.start)
    assert list(start.parameters) == [n for n in cluster if n not in client.START_LEAVES_OUT]
    assert start.return_annotation == "Client"
    for o in options.keyword_options():
        assert f"\n{o.name} : " in inspect.getdoc(spark_dask.start), o.name
    with pytest.raises(UnknownKeywordError, match=r"^spark-dask: start\(\) got an unexpected keyword argument "
                       r"'n_worker'\. Did you mean 'n_workers'\? help\(start\) lists every option\.$") as e:  # fmt: skip
        spark_dask.start(object(), n_worker=2)
    assert isinstance(e.value, TypeError)
    with pytest.raises(TypeError, match=r"SparkCluster\(\) got .* 'memory_limt'\. Did you mean 'memory_limit'\?"):
        SparkCluster(object(), memory_limt="2GiB")
    with pytest.raises(TypeError, match=r"'asynchronous'\. help\(start\)"):
        spark_dask.start(object(), asynchronous=True)


@pytest.mark.parametrize(
    "value, meant",
    [(512, "Did you mean memory_limit='512MiB'?"), ("512", "Did you mean memory_limit='512MiB'?"),
     (8, "Did you mean memory_limit='8GiB'?"), ("100MB", "below the 256 MiB a Dask worker needs")],
)  # fmt: skip
def test_a_memory_limit_too_small_for_a_worker_is_refused_with_its_unit(value, meant):
    """A bare number is bytes in Dask, MiB in Spark: ``memory_limit=512`` is refused at
    once (it started a worker of 512 bytes), naming the unit it was read in and the likely
    intent; a size large enough is kept (issue 42)."""
    given = {o.name: None for o in options.keyword_options() if o.config}
    with pytest.raises(PlanError, match=re.escape(meant)):
        options.resolve(**{**given, "memory_limit": value})
    with pytest.raises(PlanError, match="was read as|below the"):
        SparkCluster(object(), memory_limit=value)  # before any Spark call
    assert options.resolve(**{**given, "memory_limit": "512MiB"}).memory_limit == 512 * 2**20
