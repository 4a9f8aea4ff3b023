"""MkDocs hooks (mkdocs.yml ``hooks:``) for the spark-dask site.

mkdocs-click's option tables print ``option.default`` as is: with click >= 8.3 an option
without a default shows click's internal ``Sentinel.UNSET``, and spark-dask's start()
options (default ``None``: "take the configured default") would show ``None`` where the
description says the real default. The table's default cell is left empty for those; the
description (generated from spark_dask/options/table.py) carries ``[default: ...]``.
"""

from __future__ import annotations


def on_startup(command, dirty):
    import mkdocs_click._docs as docs

    original = docs._format_table_option_row
    if getattr(original, "_spark_dask", False):
        return

    def row(option):
        text = original(option)
        default = option.default
        if default is None or default == () or "UNSET" in repr(default):
            cells = text.rsplit("|", 2)
            text = cells[0] + "| |"
        return text

    row._spark_dask = True
    docs._format_table_option_row = row
