"""``start()``'s keywords and their docs are ``SparkCluster``'s, written once (in
``spark_dask/cluster.py``) and handed on at import by :func:`spark_dask.client.client_of`:
``inspect.signature(start)`` (``help()``, IPython, Jupyter and Databricks completion)
and ``help(start)``'s ``Parameters`` show each of them but ``asynchronous`` and ``loop``,
which ``start()`` refuses like any unknown keyword, before anything starts. Fast, no
Spark."""

from __future__ import annotations

import inspect
import re
import typing

import pytest

import spark_dask
from spark_dask import SparkCluster, UnknownKeywordError, client, options

LEFT_OUT = ("asynchronous", "loop")
REFUSED = r"^spark-dask: start\(\) got an unexpected keyword argument "


def _entries(doc: str) -> dict[str, str]:
    """``{name: its whole entry}`` of a cleaned docstring's ``Parameters`` section."""
    section = doc.split("\nParameters\n----------\n", 1)[1]
    section = re.split(r"\n\n\w+\n-+\n", section, maxsplit=1)[0]
    return {m.group(1): m.group(0) for m in re.finditer(r"^(\w+) : .*\n(?:[ ]+.*\n?)*", section, re.MULTILINE)}


def test_start_has_sparkclusters_keywords_but_asynchronous_and_loop():
    cluster = inspect.signature(SparkCluster).parameters
    start = inspect.signature(spark_dask.start)
    assert client.START_LEAVES_OUT == LEFT_OUT
    assert set(LEFT_OUT) <= set(cluster)  # SparkCluster does take them
    assert list(start.parameters) == [n for n in cluster if n not in LEFT_OUT]
    for name, p in start.parameters.items():
        c = cluster[name]
        assert (p.kind, p.default, p.annotation) == (c.kind, c.default, c.annotation), name
    assert [n for n, p in start.parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD] == ["spark"]
    assert {o.name for o in options.keyword_options()} <= set(start.parameters)
    assert start.return_annotation == "Client"
    # typing.get_type_hints (pydantic, IDE plugins) resolves the same annotations
    hints = typing.get_type_hints(spark_dask.start)
    want = {k: v for k, v in typing.get_type_hints(SparkCluster.__init__).items() if k not in LEFT_OUT}
    assert {k: v for k, v in hints.items() if k != "return"} == want
    assert hints["return"].__name__ == "Client" and hints["n_workers"] == int | None


def test_help_start_documents_each_keyword_with_sparkclusters_text():
    doc = inspect.getdoc(spark_dask.start)
    cluster_doc = inspect.getdoc(SparkCluster)
    assert doc.startswith("Start a Dask cluster in the Spark application and return a connected Client.")
    entries, cluster_entries = _entries(doc), _entries(cluster_doc)
    assert list(entries) == [n for n in cluster_entries if n not in LEFT_OUT]
    assert set(entries) == set(inspect.signature(spark_dask.start).parameters)
    for name, text in entries.items():
        assert text.rstrip("\n") == cluster_entries[name].rstrip("\n"), name
    notes = cluster_doc.split("\nNotes\n-----\n", 1)[1].split("\n\nExamples\n", 1)[0]
    assert "\nNotes\n-----\n" + notes in doc
    # start()'s own example, not SparkCluster's, and each section once
    assert "spark_dask.start(spark) as client" in doc and "SparkCluster(spark, n_workers=4)" not in doc
    for heading in ("Parameters", "Notes", "Examples"):
        assert doc.count(f"\n{heading}\n") == 1, heading
    assert doc.index("\nParameters\n") < doc.index("\nNotes\n") < doc.index("\nExamples\n")
    assert "**keywords" not in doc  # the static docstring's pointer is replaced at import


@pytest.mark.parametrize(
    "keywords, message",
    [
        ({"n_worker": 2}, r"'n_worker'\. Did you mean 'n_workers'\? help\(start\) lists every option\.$"),
        ({"asynchronous": True}, r"'asynchronous'\. help\(start\) lists every option\.$"),
        ({"loop": None}, r"'loop'\. help\(start\) lists every option\.$"),
    ],
)
def test_a_keyword_start_does_not_take_is_refused_before_anything_starts(monkeypatch, keywords, message):
    made = []
    monkeypatch.setattr(client, "SparkCluster", lambda *a, **k: made.append((a, k)))
    with pytest.raises(UnknownKeywordError, match=REFUSED + message):
        spark_dask.start(object(), **keywords)
    assert made == []


def test_start_hands_its_arguments_to_sparkcluster_and_closes_it_when_no_client_comes(monkeypatch):
    class Cluster:
        closed = False

        def __init__(self, spark, **keywords):
            self.spark, self.keywords = spark, keywords

        def close(self):
            self.closed = True

    made = []

    def cluster(*a, **k):
        made.append(Cluster(*a, **k))
        return made[-1]

    def no_client(cluster):
        raise RuntimeError("no client")

    monkeypatch.setattr(client, "SparkCluster", cluster)
    monkeypatch.setattr(client, "_ClusterClient", no_client)
    spark = object()
    with pytest.raises(RuntimeError, match="no client"):
        spark_dask.start(spark, n_workers=2, memory_limit="8GiB", quiet=True)
    (c,) = made
    assert (c.spark, c.keywords, c.closed) == (spark, {"n_workers": 2, "memory_limit": "8GiB", "quiet": True}, True)
    with pytest.raises(TypeError, match="positional"):
        spark_dask.start(spark, 2)


def test_composed_docstring_replaces_parameters_and_keeps_the_rest():
    own = """Summary.

    Parameters
    ----------
    **keywords
        Those of the cluster.

    Examples
    --------
    >>> start()
    """
    cluster = """Cluster.

    Parameters
    ----------
    a : int
        First,
        on two lines.
    loop : IOLoop, optional
        Left out,
        on two lines.
    b : str

    Notes
    -----
    A note.

    Examples
    --------
    >>> Cluster()
    """
    doc = client.composed_docstring(own, cluster)
    assert doc == (
        "Summary.\n\nParameters\n----------\na : int\n    First,\n    on two lines.\nb : str\n\n"
        "Notes\n-----\nA note.\n\nExamples\n--------\n>>> start()"
    )
    assert client.composed_docstring(own, None) == own  # python -OO: no docstrings at all
    assert client.composed_docstring(None, cluster) is None
    assert client.composed_docstring("Summary only.", cluster) == "Summary only."


def test_completion_in_a_notebook_offers_every_keyword():
    """Jupyter's and Databricks' completion is Jedi's, on the live objects."""
    jedi = pytest.importorskip("jedi")
    source = "spark_dask.start(n_work"
    names = [c.name for c in jedi.Interpreter(source, [{"spark_dask": spark_dask}]).complete()]
    assert "n_workers=" in names
    (signature,) = jedi.Interpreter("spark_dask.start(", [{"spark_dask": spark_dask}]).get_signatures()
    assert [p.name for p in signature.params] == list(inspect.signature(spark_dask.start).parameters)
