"""The documentation site: it builds in strict mode, the troubleshooting page lists every
error the package raises, every code block of the announcement post runs, the benchmark
plots can be redrawn from the published run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from tests.support.extras import needs
from tests.support.paths import ROOT
from tests.support.spark import submit_args
from tools import errors

DOCS = os.path.join(ROOT, "docs")
POST = os.path.join(DOCS, "blog", "posts", "announcing-spark-dask.md")
# Files the post includes with `--8<--`, and the test that checks each of them.
VALIDATED_SNIPPETS = {"examples/databricks/cluster-gpu.json": "tests/spark/test_databricks_specs.py"}


def test_troubleshooting_lists_every_error_message():
    with open(os.path.join(DOCS, "troubleshooting.md")) as f:
        page = f.read()
    found = errors.collect(ROOT)
    assert len(found) > 50  # the collector sees the package's raises
    missing = errors.missing_from(page, ROOT)
    assert not missing, "add to docs/troubleshooting.md (cause and fix):\n" + "\n".join(
        f"  {m.module}:{m.line} {m.exception}: {m.key!r}  ({m.text[:120]})" for m in missing
    )


# Raises whose message the collector cannot read, and why each is covered all the same:
# (module, the message argument's source text).
UNREAD_OK = {
    (
        "spark_dask/handoff/arrow_types.py",
        "column",
    ),  # _column_error(column, what, why): its text and the why strings are on the page
    ("spark_dask/commands/run.py", "128 + signum"),  # SystemExit status after a signal, no message
    # a PlanError/SparkDaskError shown by click (--worker-group: the PlanError of groups.parse_flag): listed where raised
    ("spark_dask/cli.py", "str(e)"),
    ("spark_dask/startup.py", "'spark-dask: ' + problem"),  # text from *_problem() functions
    ("spark_dask/startup.py", "problem"),  # connect_session_problem()
    (
        "spark_dask/gangs/waits.py",
        "f'spark-dask: {what}.\\n{detail}'",
    ),  # gang_error(what): its callers raise it with the text
    ("spark_dask/gangs/waits.py", "ended[0]"),  # gang_error(gang, what): the text is its second argument
    ("spark_dask/scheduler.py", "'spark-dask: ' + problem"),  # encryption_problem()'s text
    # memory_findings: the texts of executor/sizing.py's container_advice and
    # pyspark_memory_advice, on the page as the start's warnings
    ("spark_dask/commands/doctor.py", "what"),
    # *_message functions of spark_dask/gangs/slots.py: their texts are read
    ("spark_dask/gangs/waits.py", "no_slots_message(n_tasks, self.slot_wait, self.facts.slots, others, own)"),
    (
        "spark_dask/gangs/waits.py",
        "start_timeout_message(n, want, self.driver_scheduler.scheduler.address, timeout, tag, barrier, f.dynamic_allocation, f.max_executors, silent)",
    ),
    ("spark_dask/handoff/arrow_types.py", "problem"),  # zone_range_problem()'s text, read there
    ("spark_dask/delta/read.py", "problem"),  # spark_read_problem()'s text, read there
    # Unity Catalog's answers become unity.refusal()s, whose texts (in refused(), call(),
    # spark_only()) are read and on the page
    ("spark_dask/delta/unity.py", "code"),  # raise refused(code, text, ...): its texts are read
    ("spark_dask/delta/unity.py", "why"),  # refusal(why): the texts its callers pass are read
    ("spark_dask/delta/vending.py", "why"),  # unity.refusal(why): spark_only()'s text
    (
        "spark_dask/executor/gpu_claims.py",
        "no_free_gpu_message(where, sorted(set(spare) | {w['gpu'] for w in mine}), overlap)",
    ),  # a *_message function: its text is read
    ("spark_dask/delta/read.py", "vending_refusal_message(source, why or NO_CATALOG, missing)"),  # read there
    (
        "spark_dask/options/resolving.py",
        "unknown_keyword_message(function, key, names)",
    ),  # a *_message function, read there
    ("spark_dask/delta/compare.py", "refusal_message(column, shown, kind, why)"),  # a *_message function, read there
    ("spark_dask/delta/literals.py", "refusal_message(column, shown, kind, why)"),  # the same function's text
    ("spark_dask/delta/ansi.py", "refusal_message(column, shown, kind, why)"),  # the same function's text
    ("spark_dask/plan.py", "'spark-dask: ' + where + problem"),  # executor.sizing.small_memory_problem()'s text
    ("spark_dask/scheduler.py", "msg"),  # err_waiting_tasks(msg): faults.no_workers_message()'s text, read there
    ("tools/gpu_check.py", "discovered"),  # caught on the next line, never shown
    ("spark_dask/handoff/driver.py", "refusal"),  # gangs.slots.transfer_room(): no_slot_message()'s text, read there
    # *_message functions of spark_dask/named/store.py: their texts are read
    ("spark_dask/named/owner.py", "name_taken_message(self.name, None)"),
    ("spark_dask/named/owner.py", "name_taken_message(self.name, other)"),
    ("spark_dask/named/handle.py", "unknown_name_message(name, found, root)"),
    ("spark_dask/named/handle.py", "not_running_message(name, record)"),
    ("spark_dask/named/store.py", "locked_message(root, wait)"),
    ("spark_dask/connection.py", "problem"),  # directory_problem()'s text
    ("spark_dask/executor/gang_task.py", "f'spark-dask: {version[1]}'"),  # version_problem()
    # spark-dask doctor's findings: texts of *_message/*_problem functions, read there,
    # and a finding merged from several hosts (its text was read where it was made)
    (
        "spark_dask/commands/doctor.py",
        "unreachable_message(f'a process on executor host {host}', scheduler, answer['reach'])",
    ),
    ("spark_dask/commands/doctor.py", "said[1]"),  # version_problem()
    ("spark_dask/commands/doctor.py", "old.text"),
    ("spark_dask/executor/gang_task.py", "f'spark-dask: on {where}: {problem}'"),  # *_problem() texts
    ("spark_dask/executor/gang_task.py", "'spark-dask: ' + problem"),  # *_problem() texts
    (
        "spark_dask/executor/processes.py",
        "self.args",
    ),  # ForkedNanny.wait: Popen's TimeoutExpired, caught in stop_workers, never shown
    ("spark_dask/executor/gang_task.py", "unreachable_message(_where(t), spec.scheduler_address, t['unreachable'])"),
    ("spark_dask/xlang/graph.py", "problem"),  # carry_problem()'s texts, read there
    (
        "spark_dask/xlang/scheduler.py",
        "no_worker_message(language, key, function)",
    ),  # a *_message function: its text is read
    ("spark_dask/worker_flags.py", "key"),  # raise _unknown(...): its PlanError text is read in _unknown
    (
        "spark_dask/worker_flags.py",
        "f'spark-dask: worker_options[{key!r}]={value!r}: {flag} of {program} {what}'",
    ),  # bad(what): raised with the text
}


def test_every_raised_message_is_readable_or_accounted_for():
    """A message in a variable (``raise PlanError(msg)``) has no text the completeness
    check can look for: it must be one of UNREAD_OK, with the reason it is covered."""
    new = [u for u in errors.unread_raises(ROOT) if (u.module, u.argument) not in UNREAD_OK]
    assert not new, (
        "raises whose message tools/errors.py cannot read: write the text at the raise (or "
        "return it from a function named *_problem / *_message), or add (module, argument) to "
        "UNREAD_OK in tests/spark/test_docs.py saying where its text is checked:\n"
        + "\n".join(f"  {u.module}:{u.line} {u.exception}({u.argument})" for u in new)
    )
    stale = UNREAD_OK - {(u.module, u.argument) for u in errors.unread_raises(ROOT)}
    assert not stale, f"UNREAD_OK entries no longer in the code: {sorted(stale)}"


def test_error_collector_finds_a_new_message(tmp_path):
    """The completeness check would catch a message added without documentation."""
    pkg = tmp_path / "spark_dask"
    pkg.mkdir()
    (pkg / "x.py").write_text(
        "from spark_dask.plan import PlanError\n"
        "def f(n):\n"
        "    raise PlanError(f'spark-dask: {n} brand new failure mode, never documented')\n"
        "def g_problem():\n"
        "    return 'a problem text returned by a checker'\n"
    )
    sub = pkg / "handoff"  # a subpackage is read too
    sub.mkdir()
    (sub / "plan.py").write_text(
        "class HandoffError(Exception):\n    pass\n"
        "def h(msg):\n"
        "    if msg:\n"
        "        raise HandoffError(msg)\n"
        "    raise HandoffError('spark-dask: the hand-off lost a partition on the way')\n"
    )
    keys = {m.key for m in errors.collect(str(tmp_path))}
    assert keys == {"brand new failure mode, never documented", "a problem text returned by a checker",
                    "the hand-off lost a partition on the way"}  # fmt: skip
    assert len(errors.missing_from("nothing here", str(tmp_path))) == 3
    assert [(u.module, u.exception, u.argument) for u in errors.unread_raises(str(tmp_path))] == [
        ("spark_dask/handoff/plan.py", "HandoffError", "msg")
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built once per test module with ``mkdocs build --strict``: its folder."""
    needs("mkdocs", "docs")
    needs("material", "docs")
    out = tmp_path_factory.mktemp("docs") / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return out


class _Paragraphs(HTMLParser):
    """The text of every ``<p>`` of an HTML page, with the line it starts on."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int, str]] = []
        self._open: list[tuple[int, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            self._open.append((self.getpos()[0], []))

    def handle_endtag(self, tag):
        if tag == "p" and self._open:
            line, parts = self._open.pop()
            self.found.append((line, "".join(parts)))

    def handle_data(self, data):
        if self._open:
            self._open[-1][1].append(data)


def unrendered_tables(html: str) -> list[tuple[int, str]]:
    """Markdown tables left as text in a built page.

    Parameters
    ----------
    html : str
        One page of the built site.

    Returns
    -------
    list of (int, str)
        (line in the HTML, the paragraph's first line) of every ``<p>`` one of whose lines
        starts with ``|``: a table whose header and separator row disagree, or one with
        no blank line before it, becomes a paragraph of pipes.
    """
    parser = _Paragraphs()
    parser.feed(html)
    parser.close()
    return [(line, text.strip().splitlines()[0]) for line, text in parser.found
            if any(row.lstrip().startswith("|") for row in text.splitlines())]  # fmt: skip


def escaped_pipes_in_cells(html: str) -> list[str]:
    """Code in table cells that shows ``\\|``: Python-Markdown does not split a cell at a
    ``|`` inside backticks, so an escape there keeps its backslash."""
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)
    return [c for cell in cells for c in re.findall(r"<code>([^<]*)</code>", cell) if "\\|" in c]


def test_unrendered_tables_finds_a_paragraph_of_pipes():
    rendered = "<table><tr><td>a</td></tr></table><p>a | b is not a table row</p><pre>| a |</pre>"
    assert unrendered_tables(rendered) == []
    broken = "<p>x</p>\n<p>| a | b |\n|---|---|---|\n| 1 | 2 |</p>\n<p>text\n| a | b |</p>"
    assert unrendered_tables(broken) == [(2, "| a | b |"), (5, "text")]
    assert escaped_pipes_in_cells("<td><code>a|b</code></td><pre><code>x \\| y</code></pre>") == []
    assert escaped_pipes_in_cells("<td>run <code>auto\\|SIZE</code></td>") == ["auto\\|SIZE"]


@pytest.mark.timeout(600)
def test_site_builds_strictly(site):
    for page in ("index.html", "configuration/index.html", "troubleshooting/index.html", "api/index.html",
                 "cli/index.html", "other-languages/index.html", "benchmarks/index.html",
                 "getting-started/databricks/index.html", "blog/index.html"):  # fmt: skip
        assert (site / page).exists(), page
    api = (site / "api" / "index.html").read_text()
    assert "write_connection" in api and "n_workers" in api  # generated from the docstrings
    cli_page = (site / "cli" / "index.html").read_text()
    assert "--relaunch-attempts" in cli_page and "Sentinel" not in cli_page  # generated from click
    posts = list((site / "blog").rglob("announcing-spark-dask/index.html"))
    assert posts, "the announcement post is published with the site"
    assert "cluster-gpu" not in posts[0].read_text() or "spark.task.resource.gpu.amount" in posts[0].read_text()
    bench = (site / "benchmarks" / "index.html").read_text()
    assert "startup.svg" in bench and (site / "assets" / "benchmarks" / "startup.svg").exists()


@pytest.mark.timeout(600)
def test_every_markdown_table_renders(site):
    """No page of the built site shows a Markdown table as raw pipes (a ``<p>`` of ``|``),
    nor a backslash before a ``|`` in a table cell's code."""
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 15
    broken = [f"  {page.relative_to(site)}:{line}: {text[:100]}" for page in pages
              for line, text in unrendered_tables(page.read_text())]  # fmt: skip
    shown = [f"  {page.relative_to(site)}: {code}" for page in pages
             for code in escaped_pipes_in_cells(page.read_text())]  # fmt: skip
    assert not broken + shown, (
        "Markdown tables that did not render (the header, the separator row and every row need "
        "the same number of cells, and a blank line goes before the table), or code in a cell "
        "that shows \\| (write | there):\n" + "\n".join(broken + shown)
    )


def test_benchmark_plots_redraw_from_the_published_run(tmp_path):
    needs("matplotlib", "docs")
    import json

    from benchmarks.plots import write_plots

    with open(os.path.join(DOCS, "benchmarks-latest.json")) as f:
        run = json.load(f)
    made = sorted(os.path.basename(p) for p in write_plots(run, str(tmp_path)))
    published = sorted(os.listdir(os.path.join(DOCS, "assets", "benchmarks")))
    assert made == published == ["startup.svg", "teardown.svg"]  # no hand-off figures in this run
    run["handoff"] = {"spark -> dask": {"1000": {"seconds": 0.5, "mb": 8.0}, "100000": {"seconds": 2.0, "mb": 800.0}}}
    assert "handoff.svg" in {os.path.basename(p) for p in write_plots(run, str(tmp_path))}


def post_blocks() -> list[tuple[str, str]]:
    """(language, body) of every fenced code block of the announcement post."""
    with open(POST) as f:
        text = f.read()
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)]


def test_post_blocks_are_all_accounted_for():
    blocks = post_blocks()
    assert len([lang for lang, _ in blocks if lang == "python"]) >= 4
    for lang, body in blocks:
        if lang == "python":
            compile(body, POST, "exec")
            continue
        snippets = re.findall(r'^--8<-- "([^"]+)"$', body, re.M)
        assert snippets and len(snippets) == len(body.strip().splitlines()), (
            f"a {lang or 'plain'} block that neither runs nor includes a validated file:\n{body}"
        )
        for path in snippets:
            assert path in VALIDATED_SNIPPETS, path  # checked by the test named there
            assert os.path.exists(os.path.join(ROOT, path))


@pytest.mark.spark
@pytest.mark.timeout(420)
def test_post_python_blocks_run(tmp_path):
    """The walk-through, CPU variant: the post's Python blocks in order, in one fresh
    Python process, on local-cluster[2,4,1024] (two executors of four cores: the gang's
    task profile takes three, so the Spark query inside the block has slots)."""
    needs("xgboost", "examples")
    code = "\n\n".join(body for lang, body in post_blocks() if lang == "python")
    data = tmp_path / "rides"
    assert code.count('"/tmp/spark-dask-blog/rides"') == 1
    code = code.replace('"/tmp/spark-dask-blog/rides"', repr(str(data)))  # keep CI's /tmp clean
    script = tmp_path / "post.py"
    script.write_text(code)
    env = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYSPARK_SUBMIT_ARGS=submit_args(
            "--master",
            "local-cluster[2,4,1024]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.ui.showConsoleProgress=false",
            "--conf",
            "spark.log.level=WARN",
        ),
        TMPDIR=str(tmp_path),
    )
    env.pop("DATABRICKS_RUNTIME_VERSION", None)
    proc = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=400)  # fmt: skip
    out = proc.stdout
    first_errors = [line for line in proc.stderr.splitlines() if " ERROR " in line or "Error" in line][:15]
    assert proc.returncode == 0, out[-3000:] + "\n".join(first_errors) + proc.stderr[-3000:]
    assert "spark wrote 200000 rides" in out
    assert "2 Dask workers, CPU" in out
    assert "cpus=3 per barrier task" in out
    mae = float(re.search(r"mean abs error per zone: ([0-9.]+)", out).group(1))
    assert mae < 0.5, out  # the model learned the fare from distance
    assert re.search(r"top zones by mean fare: \[\d+, \d+, \d+\]", out)
    assert re.search(r"closed in [0-9.]+ s; Spark jobs still active: \[\]", out)
