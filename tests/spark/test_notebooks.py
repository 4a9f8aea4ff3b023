"""The notebooks of examples/notebooks: Databricks source files that import into a
workspace as they are, and the Jupyter notebooks generated from them, executed here
(nbclient, a real kernel, local-cluster[2,1,1024]) with their outputs checked."""

from __future__ import annotations

import os
import re

import pytest

from tests.support.extras import needs
from tests.support.paths import ROOT
from tests.support.processes import dask_processes, wait_until
from tools import notebooks

NB_DIR = os.path.join(ROOT, "examples", "notebooks")
SOURCES = [os.path.basename(p) for p in notebooks.sources(ROOT)]


def test_there_are_notebooks():
    assert SOURCES == ["quickstart.py", "spark_and_dask.py"]


@pytest.mark.parametrize("name", SOURCES)
def test_sources_are_databricks_notebooks(name):
    """Databricks' source format: the header line, cells split by ``# COMMAND ----------``,
    magic cells as ``# MAGIC`` lines; the first magic is the Markdown title, a ``%pip``
    cell installs spark-dask; the Jupyter notebook has the same cells."""
    nbformat = needs("nbformat", "notebooks")
    with open(os.path.join(NB_DIR, name)) as f:
        text = f.read()
    assert text.startswith(notebooks.HEADER + "\n")
    assert f"\n\n{notebooks.SEPARATOR}\n\n" in text
    cells = notebooks.split_cells(text)
    assert cells[0].startswith("# MAGIC %md\n# MAGIC # ")
    assert any(c.startswith("# MAGIC %pip install ") and "spark_dask" in c for c in cells)
    for cell in cells:  # a cell is either all magic or plain Python
        magic = [line.startswith("# MAGIC") for line in cell.splitlines()]
        assert all(magic) or not any(magic), cell
        if not any(magic):
            compile(cell, name, "exec")
    nb = nbformat.reads(notebooks.dumps(notebooks.to_notebook(text, f"examples/notebooks/{name}")), as_version=4)
    nbformat.validate(nb)
    assert len(nb.cells) == len(cells)
    with open(os.path.join(NB_DIR, name[:-3] + ".ipynb")) as f:
        assert nbformat.reads(f.read(), as_version=4) == nb


def _execute(name: str, tmp_path):
    nbformat = needs("nbformat", "notebooks")
    nbclient = needs("nbclient", "notebooks")
    with open(os.path.join(NB_DIR, name)) as f:
        nb = nbformat.read(f, as_version=4)
    os.environ.pop("DATABRICKS_RUNTIME_VERSION", None)
    client = nbclient.NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    return nb


def _text(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o["text"])
        elif "data" in o and "text/plain" in o["data"]:
            out.append(o["data"]["text/plain"])
    return "".join(out)


def _html(cell) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.get("outputs", []))


def _widget_cell(nb):
    return next(c for c in nb.cells if c.cell_type == "code" and "SparkCluster(spark" in c.source)


def _check_widget(nb):
    html = _html(_widget_cell(nb))
    assert "SparkCluster" in html and "Spark barrier tasks:" in html, html[:2000]
    assert "Dashboard:" in html and "Spark job tag" in html
    assert re.search(r"spark-dask-[0-9a-f]{10}", html)


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_quickstart_notebook_runs(tmp_path):
    nb = _execute("quickstart.ipynb", tmp_path)
    assert nb.cells[1].metadata.get("tags") == ["skip-execution"] and not nb.cells[1].outputs  # %pip
    _check_widget(nb)
    text = "\n".join(_text(c) for c in nb.cells)
    want = [float(sum(range(k, 50_000, 5))) for k in range(5)]
    assert f"sum per k: {want}" in text, text[-3000:]
    assert "Spark job tag: spark-dask-" in text and "dashboard: http" in text
    assert "closed; Spark jobs still active: []" in text
    tag = re.search(r"spark-dask-[0-9a-f]{10}", text).group(0)
    assert wait_until(lambda: not dask_processes(tag), timeout=20)


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_spark_and_dask_notebook_runs(tmp_path):
    nb = _execute("spark_and_dask.ipynb", tmp_path)
    _check_widget(nb)
    text = "\n".join(_text(c) for c in nb.cells)
    assert "spark wrote 200000 orders" in text
    total = sum((i % 7) * 1.5 for i in range(200_000))
    assert f"customers: 50 total amount: {round(total, 1)}" in text, text[-3000:]
    assert f"dask and spark agree: {round(total, 1)}" in text
    assert "closed; Spark jobs still active: []" in text
    tag = re.search(r"spark-dask-[0-9a-f]{10}", _html(_widget_cell(nb))).group(0)
    assert wait_until(lambda: not dask_processes(tag), timeout=20)
