"""Databricks notebook sources (``.py``) to Jupyter notebooks (``.ipynb``), one way.

The Databricks source format, as a workspace exports and imports it::

    # Databricks notebook source
    # MAGIC %md
    # MAGIC # A title
    <blank line>
    # COMMAND ----------
    <blank line>
    import spark_dask

Cells are separated by ``# COMMAND ----------``; a cell whose lines all start with
``# MAGIC`` is a magic cell (``%md``: Markdown, ``%pip``: a package install). The
Jupyter version has the same cells in the same order: Markdown cells as Markdown, code
as code, ``%pip`` cells as code cells tagged ``skip-execution`` (nbclient skips them:
the notebooks are executed in CI against the checked-out package). No outputs are
stored; cell ids are their positions, so the conversion is deterministic and
``tools/generate.py --check`` can tell when a ``.ipynb`` is stale.
"""

from __future__ import annotations

import glob
import json
import os

HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
MAGIC = "# MAGIC"
SKIP_TAG = "skip-execution"


def split_cells(source: str) -> list[str]:
    """The cells of a Databricks source file, without the header, stripped of blank lines."""
    lines = source.splitlines()
    if not lines or lines[0].strip() != HEADER:
        raise ValueError(f"not a Databricks notebook source: the first line must be {HEADER!r}")
    cells, current = [], []
    for line in lines[1:]:
        if line.strip() == SEPARATOR:
            cells.append(current)
            current = []
        else:
            current.append(line)
    cells.append(current)
    out = []
    for cell in cells:
        while cell and not cell[0].strip():
            cell = cell[1:]
        while cell and not cell[-1].strip():
            cell = cell[:-1]
        if cell:
            out.append("\n".join(cell))
    return out


def _unmagic(cell: str) -> str | None:
    """The text of a magic cell without its ``# MAGIC`` prefixes, or None."""
    lines = cell.splitlines()
    if not all(line.startswith(MAGIC) for line in lines):
        return None
    return "\n".join(line[len(MAGIC) + 1 :] if len(line) > len(MAGIC) else "" for line in lines)


def _source(text: str) -> list[str]:
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]]


def to_notebook(source: str, name: str) -> dict:
    """nbformat 4.5 notebook (a dict) with the cells of ``source``."""
    cells = []
    for i, cell in enumerate(split_cells(source)):
        magic = _unmagic(cell)
        meta: dict = {}
        if magic is not None and magic.startswith("%md"):
            text = magic[3:].lstrip(" ").lstrip("\n")
            cells.append({"cell_type": "markdown", "id": f"cell-{i}", "metadata": meta, "source": _source(text)})
            continue
        if magic is not None:  # %pip, %sh, ...: shown, not run by CI
            text = magic
            meta = {"tags": [SKIP_TAG]}
        else:
            text = cell
        cells.append({
            "cell_type": "code", "execution_count": None, "id": f"cell-{i}", "metadata": meta,
            "outputs": [], "source": _source(text),
        })  # fmt: skip
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
            "spark_dask": {"source": name, "generated_by": "tools/notebooks.py"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def sources(root: str) -> list[str]:
    """The Databricks notebook sources: ``examples/notebooks/*.py``."""
    return sorted(glob.glob(os.path.join(root, "examples", "notebooks", "*.py")))


def outputs(root: str) -> dict[str, str]:
    """``{relative .ipynb path: content}`` for every notebook source."""
    out = {}
    for path in sources(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            nb = to_notebook(f.read(), rel)
        out[rel[:-3] + ".ipynb"] = dumps(nb)
    return out
