"""The cluster widget (``_repr_html_``), ``repr`` and ``get_logs()["Spark tasks"]``:
pure parts without Spark; the widget of a real cluster rendered in headless chromium."""

from __future__ import annotations

import asyncio
from html.parser import HTMLParser

import pytest

from spark_dask import widget
from tests.support.processes import wait_until
from tests.support.web import Chromium, chromium_or_skip

TABLE_PARTS = {"table", "thead", "tbody", "tfoot", "tr"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Structure(HTMLParser):
    """Finds tables placed directly in a table (invalid: browsers move them out) and
    end tags that close something else than the open element."""

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "table" and self.stack and self.stack[-1] in TABLE_PARTS:
            self.problems.append(f"<table> directly inside <{self.stack[-1]}> at {self.getpos()}")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}> at {self.getpos()}")
            if tag in self.stack:
                while self.stack.pop() != tag:
                    pass
            return
        self.stack.pop()


def html_problems(text: str) -> list[str]:
    parser = _Structure()
    parser.feed(text)
    parser.close()
    return parser.problems + [f"<{t}> never closed" for t in parser.stack]


def test_structure_check_finds_a_table_in_a_table():
    assert html_problems("<table><tr><td><table><tr><td>x</td></tr></table></td></tr></table>") == []
    assert html_problems("<table><tr><td>a</td></tr><table><tr><td>b</td></tr></table></table>")
    assert html_problems("<div><span></div>")


# ----------------------------------------------------------------------------- pure

WORKERS = {
    "tls://10.0.0.5:4001": {"name": "spark-0", "nthreads": 2, "memory_limit": 1000, "status": "init",
                            "spark": {"executor_id": "0", "host": "10.0.0.5", "partition": 0, "gpu": None}},
    "tls://10.0.0.6:4001": {"name": "spark-1-gpu1", "nthreads": 1, "memory_limit": 500, "status": "init",
                            "spark": {"executor_id": "1", "host": "10.0.0.6", "partition": 1, "gpu": "1"}},
}  # fmt: skip


def test_scheduler_totals_count_the_workers():
    assert widget.scheduler_totals(WORKERS) == {"n_workers": 2, "total_threads": 3, "total_memory": 1500}
    assert widget.scheduler_totals({}) == {"n_workers": 0, "total_threads": 0, "total_memory": 0}


def test_live_tasks_one_per_barrier_task_with_placement_and_status():
    status = {"tls://10.0.0.5:4001": "running", "tls://10.0.0.6:4001": "paused"}
    tasks = widget.live_tasks(3, WORKERS, status)
    assert [t["partition"] for t in tasks] == [0, 1, 2]
    assert tasks[0] == {
        "partition": 0, "executor_id": "0", "host": "10.0.0.5", "gpu": None,
        "workers": ["spark-0 (tls://10.0.0.5:4001) running"], "status": "running",
    }  # fmt: skip
    assert tasks[1]["gpu"] == "1" and tasks[1]["status"] == "spark-1-gpu1: paused"
    assert tasks[2]["status"] == "no Dask worker connected" and tasks[2]["host"] is None
    text = widget.task_log("Spark barrier stage t: running", tasks)
    lines = text.splitlines()
    assert lines[0] == "Spark barrier stage t: running"
    assert [ln for ln in lines if ln.startswith("task ")] == [
        "task 0 on executor 0 (10.0.0.5): running",
        "task 1 on executor 1 (10.0.0.6), gpu 1: spark-1-gpu1: paused",
        "task 2: no Dask worker connected",
    ]
    # The status falls back to the worker info when the scheduler does not know it.
    assert widget.live_tasks(1, {"a": WORKERS["tls://10.0.0.5:4001"]}, {})[0]["status"] == "spark-0: init"


def test_ended_tasks_from_status_rows():
    rows = [
        {"partition": 1, "executor_id": "1", "host": "h1", "status": "ok",
         "workers": [{"name": "spark-1", "gpu": None, "exit_code": 0, "log_tail": "bye\nclosed"}]},
        {"partition": 0, "executor_id": "0", "host": "h0", "status": "ok",
         "workers": [{"name": "spark-0", "gpu": "0", "exit_code": -15, "log_tail": ""}]},
    ]  # fmt: skip
    tasks = widget.ended_tasks(rows)
    assert [t["partition"] for t in tasks] == [0, 1] and tasks[0]["gpu"] == "0"
    text = widget.task_log("Spark barrier stage t: ended", tasks)
    assert "task 0 on executor 0 (h0), gpu 0: ok\n  worker spark-0 exit=-15" in text
    assert "task 1 on executor 1 (h1): ok\n  worker spark-1 exit=0\n    bye\n    closed" in text


def test_spark_rows_are_rows_not_a_table():
    rows = widget.spark_rows_html(
        {"job tag": "t<1>", "barrier tasks": 2, "x": "y"}, widget.live_tasks(2, WORKERS, {}), "running"
    )
    page = f"<table><tr><td>a</td></tr>{rows}</table>"
    assert html_problems(page) == []
    assert rows.startswith("<tr>") and "t&lt;1&gt;" in rows
    assert "Spark barrier tasks: 2 (running)" in rows


# ------------------------------------------------------------------------ real cluster


@pytest.fixture(scope="module")
def chromium():
    return chromium_or_skip()


def _executor_ids(spark) -> list[str]:
    """The session's executors (the shared ``spark`` of tests/conftest.py: its first two,
    or those Spark's master started in place of lost ones)."""
    ids = spark.sparkContext._jsc.sc().getExecutorIds()
    return sorted(ids.apply(i) for i in range(ids.size()))


OPEN_ALL_DETAILS = "document.querySelectorAll('details').forEach(d => d.open = true); true"

# What a person reads: the cell texts of the top table, "Scheduler Info" and the task table.
READ_WIDGET_JS = r"""
(() => {
  const top = document.querySelector('table');
  const cells = [...top.querySelectorAll(':scope > tbody > tr > td, :scope > tr > td')].map(td => td.innerText.trim());
  const details = [...document.querySelectorAll('details')];
  const sched = details.find(d => d.querySelector('summary').innerText.includes('Scheduler Info'));
  const tasks = details.find(d => d.querySelector('summary').innerText.includes('Spark barrier tasks'));
  const taskRows = tasks ? [...tasks.querySelectorAll(':scope table > tbody > tr')].map(tr => [...tr.cells].map(c => c.innerText.trim())) : null;
  const nested = [...document.querySelectorAll('table')].filter(t => t.parentElement && ['TABLE', 'TBODY', 'THEAD', 'TR'].includes(t.parentElement.tagName)).length;
  return {cells, sched: sched ? sched.innerText : null, taskSummary: tasks ? tasks.querySelector('summary').innerText : null,
          taskRows, nested, topTables: document.querySelectorAll('body > div > div > table').length};
})()
"""


async def _render(chromium: str, page_html: str, path: str, shot: str) -> dict:
    with open(path, "w") as f:
        f.write(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>widget</title></head>"
                f"<body style='font-family: sans-serif; margin: 16px;'>{page_html}</body></html>")  # fmt: skip
    async with Chromium(chromium, width=1100, height=1100) as browser:
        await browser.open("file://" + path)
        await browser.evaluate(OPEN_ALL_DETAILS)
        seen = await browser.evaluate(READ_WIDGET_JS)
        await browser.screenshot(shot)
        seen["errors"] = browser.record.errors
    return seen


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_widget_repr_and_task_log_of_a_real_cluster(chromium, spark, tmp_path):
    # chromium first: a skipped test starts no Spark; spark: the shared local-cluster[2,1,1024]
    from spark_dask import SparkCluster

    live = _executor_ids(spark)
    assert len(live) == 2, live
    cluster = SparkCluster(spark, n_workers=2, progress=False)
    try:
        assert wait_until(lambda: len(cluster.scheduler_info["workers"]) == 2, 30)
        # While running: one line per barrier task with its placement and status.
        log = cluster.get_logs(scheduler=False, workers=False)["Spark tasks"]
        lines = log.splitlines()
        assert lines[0] == f"Spark barrier stage {cluster.tag}: running"
        task_lines = [ln for ln in lines if ln.startswith("task ")]
        executors = sorted(w["spark"]["executor_id"] for w in cluster.scheduler_info["workers"].values())
        assert task_lines == [
            f"task {p} on executor {w['spark']['executor_id']} ({w['spark']['host']}): running"
            for p, w in sorted((w["spark"]["partition"], w) for w in cluster.scheduler_info["workers"].values())
        ], log
        assert len(task_lines) == 2 and executors == live
        assert "workers=2, status=running" in repr(cluster)

        page = cluster._repr_html_()
        assert html_problems(page) == [], html_problems(page)
        seen = asyncio.run(_render(chromium, page, str(tmp_path / "widget.html"), str(tmp_path / "widget-running.png")))
        print("screenshot:", tmp_path / "widget-running.png")
        assert seen["nested"] == 0 and not seen["errors"], seen
        assert "Workers: 2" in seen["cells"] and "Total threads: 2" in seen["cells"], seen["cells"]
        assert f"Spark job tag: {cluster.tag}" in seen["cells"], seen["cells"]
        # "Scheduler Info" agrees with the header (it said 0 workers before).
        assert "Workers: 2" in seen["sched"] and "Total threads: 2" in seen["sched"], seen["sched"]
        assert seen["taskSummary"] == "Spark barrier tasks: 2 (running)"
        assert [r[0] for r in seen["taskRows"]] == ["0", "1"] and all(r[-1] == "running" for r in seen["taskRows"])
        assert sorted(r[1] for r in seen["taskRows"]) == live
        assert all(r[2] and "spark-" in r[4] for r in seen["taskRows"]), seen["taskRows"]
    finally:
        cluster.close()

    # After close: no workers claimed anywhere; the tasks' status rows remain.
    assert repr(cluster).endswith("workers=0, status=closed)"), repr(cluster)
    log = cluster.get_logs()["Spark tasks"]
    assert len([ln for ln in log.splitlines() if ln.startswith("task ") and ln.endswith(": ok")]) == 2, log
    page = cluster._repr_html_()
    assert html_problems(page) == []
    seen = asyncio.run(
        _render(chromium, page, str(tmp_path / "widget-closed.html"), str(tmp_path / "widget-closed.png"))
    )
    assert "Workers: 0" in seen["cells"] and "Workers: 0" in seen["sched"], seen
    assert seen["taskSummary"] == "Spark barrier tasks: 2 (ended)"
    assert all(r[-1] == "ok" and "exit=0" in r[4] for r in seen["taskRows"]), seen["taskRows"]
