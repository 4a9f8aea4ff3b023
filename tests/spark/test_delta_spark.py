"""examples/delta_lake.py with Spark as the writer: ``write_delta`` writes a partitioned
table through Delta Lake's Spark connector, a DELETE marks rows in deletion vectors,
``read_delta`` reads the latest version and version 0 on the spark-dask cluster, and
the example checks both against Spark's own read of those versions.

Delta Lake has a release per Spark line (examples/delta_lake.py's DELTA_SPARK); the
jars tests/support/jars.py pins are Delta 3.3.2 for Spark 3.5, so the Spark writer runs in CI's
pyspark 3.5 environment (``-m "core and not newest"``) and skips elsewhere. The
deltalake writer runs in tests/spark/test_examples.py."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys

import pytest

from tests.support.examples import EXAMPLES, assert_left_nothing, example_env, needs_modules, run_example
from tests.support.jars import JARS, coordinate, require
from tests.support.spark import submit_args

pytestmark = pytest.mark.core

_spec = importlib.util.spec_from_file_location("delta_lake_example", os.path.join(EXAMPLES, "delta_lake.py"))
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)  # its top level imports the standard library only


@pytest.mark.parametrize("version, want", [
    ("3.5.0", "io.delta:delta-spark_2.12:3.3.2"),
    ("3.5.5", "io.delta:delta-spark_2.12:3.3.2"),
    ("4.0.1", "io.delta:delta-spark_2.13:4.0.1"),
    ("4.1.0", "io.delta:delta-spark_4.1_2.13:4.4.0"),
    ("4.2.0.dev1", "io.delta:delta-spark_4.2_2.13:4.4.0"),
    ("4.3.0", None),
    ("3.4.4", None),
    ("5.0.0", None),
])  # fmt: skip
def test_delta_connector_per_spark_line(version, want):
    assert example.delta_connector(version) == want


def test_no_connector_message_names_the_way_out():
    assert example.no_connector_message("4.3.0") == (
        "no Delta Lake release for Spark 4.3 yet: use --writer deltalake or pyspark 4.2"
    )


def test_connector_matches_the_pinned_jars():
    # the coordinate the example fetches without --jars is the jar CI pins for Spark 3.5
    delta_spark = coordinate("delta-3.5").split(",")[0]
    assert example.delta_connector("3.5.5") == delta_spark
    assert [a for _, a, _, _ in JARS["delta-3.5"]] == ["delta-spark_2.12", "delta-storage"]


@pytest.mark.parametrize("writer, jars, databricks, extensions, want", [
    ("auto", None, False, "", "deltalake"),
    ("auto", "/j/delta-spark.jar", False, "", "spark"),
    ("auto", None, True, "", "spark"),
    ("auto", None, False, "a.B," + "io.delta.sql.DeltaSparkSessionExtension", "spark"),
    ("deltalake", "/j/delta-spark.jar", True, "", "deltalake"),
    ("spark", None, False, "", "spark"),
])  # fmt: skip
def test_choose_writer(writer, jars, databricks, extensions, want):
    assert example.choose_writer(writer, jars, databricks, extensions) == want


def _spark_line():
    import pyspark

    return pyspark.__version__, example.spark_line(pyspark.__version__)


def _run_example(tmp_path, *args):
    """examples/delta_lake.py --writer spark with the pinned Delta jars, bounded."""
    version, line = _spark_line()
    if example.delta_connector(version) is None:
        pytest.skip(example.no_connector_message(version))
    if line != (3, 5):
        pytest.skip(f"tests/support/jars.py pins Delta Lake's jars for Spark 3.5 only (pyspark {version})")
    needs_modules(["deltalake", "pyroaring"])
    jars = require("delta-3.5")
    env = example_env(tmp_path)
    # the test sessions' quick JVMs (tests/support/spark.py's submit_args) and no UI
    env["PYSPARK_SUBMIT_ARGS"] = submit_args("--conf", "spark.ui.enabled=false")
    cmd = [
        sys.executable,
        os.path.join(EXAMPLES, "delta_lake.py"),
        "--writer",
        "spark",
        "--jars",
        ",".join(jars),
        *args,
    ]
    return run_example(cmd, env, tmp_path)


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_spark_writes_dask_reads(tmp_path):
    """write_delta writes version 0 from Dask through Spark's Delta writer; with deletion
    vectors on (Databricks' default in many workspaces) the DELETE marks rows in place
    (version 2), and read_delta applies them on the workers: no purge, the table as it
    is. (Without deletion vectors the DELETE rewrites files: tests/spark/test_delta_read.py's
    tables and the deltalake run in tests/spark/test_examples.py.)"""
    proc, output = _run_example(tmp_path, "--deletion-vectors")
    assert proc.returncode == 0, output[-4000:]
    for expected in [
        "table written by Spark (Delta Lake's Spark connector, delta-spark_2.12-3.3.2.jar, delta-storage-3.3.2.jar)",
        "deletion vectors: 4 files of version 2 have them; read_delta applies each on the worker that reads the file",
        # 1000 rows, then DELETE x < 100: sums per k of i in 100..999
        "latest version: 900 rows, sum per k [123300.0, 123525.0, 123750.0, 123975.0]",
        "version 0 (time travel): 1000 rows",
        "Dask's reads equal Spark's read of versions 2 and 0",
        "read by 1 Dask worker",
    ]:
        assert expected in output, (expected, output[-4000:])
    assert "deltalake package" not in output
    commit = re.search(r"version 2; its commit: (.*)", output)
    assert commit, output[-4000:]
    removes = re.search(r"(\d+) remove\b", commit.group(1))
    assert removes and int(removes.group(1)) > 0, commit.group(0)
    assert_left_nothing(output, str(tmp_path / "tmp"))


def _log(tmp_path, commits):
    log = tmp_path / "_delta_log"
    log.mkdir()
    for version, actions in enumerate(commits):
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return str(tmp_path)


def test_files_with_deletion_vectors_replays_the_log(tmp_path):
    dv = {"storageType": "u", "pathOrInlineDv": "x", "offset": 1, "sizeInBytes": 31, "cardinality": 25}
    path = _log(tmp_path, [
        [{"protocol": {}}, {"add": {"path": "a"}}, {"add": {"path": "b"}}],
        # a DELETE in place: Delta 3.3 writes the new add before the old remove
        [{"add": {"path": "a", "deletionVector": dv}}, {"remove": {"path": "a"}}],
        [{"remove": {"path": "a", "deletionVector": dv}}, {"add": {"path": "a2"}}],  # REORG ... APPLY (PURGE)
    ])  # fmt: skip
    assert [example.files_with_deletion_vectors(path, v) for v in range(3)] == [0, 1, 0]
    assert example.log_actions(path, 1) == {"remove": 1, "add": 1}
    os.remove(os.path.join(path, "_delta_log", f"{0:020d}.json"))  # cleaned up after a checkpoint
    assert example.files_with_deletion_vectors(path, 2) is None


def test_via_spark_without_the_connector_or_the_table_says_so(spark, tmp_path, capfd):
    """Issue 55, point 4: a Spark without Delta's connector printed Py4J's
    DATA_SOURCE_NOT_FOUND with a Java stack, an unknown table name Spark's
    REQUIRES_SINGLE_PART_NAMESPACE; now one line each (the default session has no Delta).
    Issue 68, point 7: a three-part name whose catalog the session lacks is said so (not
    "no table in the catalog main"), and pyspark 4's ERROR line of each failed query
    (kilobytes of JSON on stderr) is not printed before ours."""
    import spark_dask
    from spark_dask.delta.read import DELTA_CONNECTORS
    from spark_dask.spark.compat import spark_version

    want = DELTA_CONNECTORS.get(spark_version(spark)[:2], "the Delta Lake connector released for Spark")
    with pytest.raises(spark_dask.DeltaError, match=rf"has no Delta Lake connector, so .*{re.escape(want)}") as e:
        spark_dask.read_delta(str(tmp_path / "t"), via="spark", spark=spark)
    assert "\n" not in str(e.value) and "Py4J" not in str(e.value)
    capfd.readouterr()
    with pytest.raises(spark_dask.DeltaError, match=r"^spark-dask: no catalog main in this Spark session \(Spark: "):
        spark_dask.read_delta("main.sales.nope", spark=spark)
    with pytest.raises(spark_dask.DeltaError, match=r"no table nope_db.nope in the Spark catalog spark_catalog"):
        spark_dask.read_delta("nope_db.nope", spark=spark)
    with pytest.raises(spark_dask.DeltaError, match=r"no table events in the Spark catalog spark_catalog"):
        spark_dask.read_delta("events", spark=spark)
    printed = capfd.readouterr()
    assert "ERROR" not in printed.err + printed.out


def test_the_connector_named_in_refusals_is_the_examples():
    from spark_dask.delta.read import DELTA_CONNECTORS

    assert DELTA_CONNECTORS == example.DELTA_SPARK
