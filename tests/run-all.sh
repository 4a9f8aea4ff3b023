#!/usr/bin/env bash
# The test command of README.md and of CI (.ci/run): ruff, then two environments side by side.
#
#   .venv    the newest pyspark, every test extra: the whole suite (Spark Connect included,
#            the documentation site built in strict mode, the notebooks executed, the
#            announcement post's code, the Databricks specs, the Node.js client and worker)
#   .venv35  pyspark 3.5.5 with pandas<3, numpy<2, pyarrow<18 (pyspark 3.5's connect
#            extra excludes NumPy 2; the newest pyarrow needs it) and the lowest dask and
#            distributed that pyproject declares (2024.8.0: the range the package
#            declares is the range CI runs; spark_dask/internals.py lists what of
#            distributed's internals that range must keep): the core tests
#            (pytest -m "core and not newest": start, compute, teardown, bad input, GPU
#            pinning with fake GPUs, CLI run, Spark Connect, Delta Lake written by Spark,
#            the RAPIDS Accelerator's plugin; a few slow variants run on the newest only).
#            3.5.5 is the newest 3.5 patch that Maven Central's Spark Connect server jar,
#            Delta Lake 3.3 and the RAPIDS Accelerator's Scala 2.12 jar all support:
#            tests/support/jars.py fetches those (pinned, sha1-checked) into ~/.cache/spark-dask/jars
#   .venv40  pyspark 4.0.5 (Databricks 17.3 LTS's Spark line, the newest 4.0 patch) with
#            Delta Lake 4.0.1 and pandas<3: the Delta filter and read tests
#            (tests/spark/test_delta_filters.py, test_delta_read.py) on Spark 4.0's own
#            defaults, ANSI mode on (string-to-number casts and comparisons otherwise than 3.5)
#
# First ruff (lint and format check, pyproject.toml's [tool.ruff]); then the .venv suite
# (multi-host tests excepted, and a few that run later: LATER below) in two halves side by
# side (HALF below), then the .venv35 core
# tests beside the multi-host tests and, once those end, the LATER tests and a short
# benchmark (python -m benchmarks --quick: N = 2, 1 repetition) that prints its table; it
# fails only if the benchmark breaks, not on timings. Last, alone, the .venv40 Delta tests.
#
# Needs Python >= 3.10 as python3 (or $PYTHON) and Java 17. Arguments go to every pytest
# run (e.g. -x). Exit status: non-zero when an environment fails to install, ruff finds
# something, a pytest run fails, or the benchmark fails.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

venv() {  # venv DIR PIP-ARGS...: create DIR (once) and install into it
    # --no-compile: pip would compile every installed file in turn, in the install's time;
    # bytecode() does it after, on both cores, beside other work
    local dir=$1
    shift
    [ -x "$dir/bin/python" ] || "$PYTHON" -m venv "$dir" || return 1
    "$dir/bin/pip" install -q --no-compile "$@"
}

bytecode() {  # bytecode DIR: the bytecode of DIR's packages and of this repository's code
    # Where PYTHONDONTWRITEBYTECODE is set (this project's machines set it) Python writes
    # no .pyc as it imports: without these, every process the tests start (each Dask
    # worker, pyspark's Python workers, the CLI, the examples) compiles all it imports
    # again (tests/unit's subprocess-heavy modules took twice the CPU: 33 s, 16 s with
    # them). compileall writes them whatever that setting says; a file it cannot compile
    # only costs speed.
    "$1/bin/python" -m compileall -q -j 2 "$1"/lib/python3*/site-packages \
        spark_dask tests tools examples benchmarks conftest.py >/dev/null 2>&1
    return 0
}

fetches() {  # the downloads that need no venv, beside the pip installs below
    # the MLflow tracking server the MLflow tests start, in an environment of its own (the full
    # mlflow package caps pyarrow below the newest that .venv tests): ~650 MB, once; beside
    # the jars (both mostly downloads)
    timeout 900 "$PYTHON" -m tests.support.mlflow_server install >/dev/null &
    local mlflow_pid=$!
    # Spark's own artifacts the pyspark 3.5 and 4.0 tests load (Connect server, Delta, RAPIDS)
    timeout 900 "$PYTHON" -m tests.support.jars fetch >/dev/null ||
        { echo "run-all: fetching the jars from Maven Central failed (python -m tests.support.jars fetch)" >&2; kill "$mlflow_pid"; return 1; }
    wait "$mlflow_pid" ||
        { echo "run-all: installing the MLflow server failed (python -m tests.support.mlflow_server install)" >&2; return 1; }
    # the Node.js client and worker examples' packages (tests/spark/test_connection.py,
    # test_xlang.py and test_node_worker.py run them) and Azurite, Azure Storage's emulator
    # (tests/spark/test_delta_azure.py); without npm those checks skip locally and fail
    # under CI
    if command -v npm >/dev/null 2>&1; then
        for dir in examples/clients/node examples/workers/node tests/support/azurite; do
            (cd "$dir" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) ||
                { echo "run-all: npm ci in $dir failed" >&2; return 1; }
        done
    else
        echo "run-all: npm not found: the Node.js client and worker examples will not run (bash .ci/install-node)" >&2
    fi
}

lowest() {  # lowest NAME: the lower bound pyproject.toml declares for NAME ("NAME>=X")
    sed -n "s/^ *\"$1>=\([0-9][0-9.]*\)\",.*/\1/p" pyproject.toml | head -1
}

t0=$SECONDS
logs=$(mktemp -d)
fetches &
fetches_pid=$!
# the environments install at the same time (downloads, mostly)
venv .venv -e '.[test]' > "$logs/install-venv.log" 2>&1 &
venv_pid=$!
# .venv40 beside them (a download, mostly: 64 s alone from an empty pip cache), then its
# bytecode and class-data archives (~30 s, beside whatever runs then); only its Delta tests,
# at the end, wait for it. pyspark 4.0.5 pinned with no connect extra: pip does not backtrack.
{
    venv .venv40 -e '.[test-core]' 'pyspark==4.0.5' 'pandas<3' 'deltalake>=0.18' 'dask-deltatable>=0.3' \
        > "$logs/install-venv40.log" 2>&1 || exit 1
    bytecode .venv40
    .venv40/bin/python -m tests.support.cds build || true  # a failed build only costs speed
} &
venv40_pid=$!
# pyspark[connect] pinned as such: with the connect extra's 'pyspark[connect]>=3.5' beside
# 'pyspark==3.5.5', pip backtracks through every pyspark 4.x sdist (450 MB each; 7 min)
venv .venv35 -e '.[test-core]' 'pyspark[connect]==3.5.5' 'pandas<3' 'numpy<2' 'pyarrow<18' \
    'deltalake>=0.18' 'dask-deltatable>=0.3' "dask[dataframe,array]==$(lowest dask)" "distributed==$(lowest distributed)" \
    > "$logs/install-venv35.log" 2>&1 ||
    { cat "$logs/install-venv35.log" >&2; echo "run-all: installing .venv35 failed" >&2; kill "$fetches_pid" "$venv_pid" "$venv40_pid"; exit 1; }
# .venv35's bytecode, then the class-data archives of its JVMs (tests/support/cds.py: each
# Spark application of the tests then starts ~35 % quicker), built once per JDK and pyspark
# (~/.cache/spark-dask/cds): .venv35 installs first (.venv has the more packages: 287 s
# against 395 s side by side on a loaded machine), and the pip installs leave a core
# mostly idle, so they start here rather than beside the unit tests of the first pytest
# run. A failed build only costs that speed.
{ bytecode .venv35; .venv35/bin/python -m tests.support.cds build; } &
cds_old=$!
wait "$venv_pid" ||
    { cat "$logs/install-venv.log" >&2; echo "run-all: installing .venv failed" >&2; kill "$fetches_pid" "$cds_old" "$venv40_pid"; exit 1; }
# .venv's bytecode beside ruff, its class-data archives and the first unit tests (a module
# imported before its .pyc is written is compiled in memory, as without them)
bytecode .venv &
bytecode_newest=$!
t1=$SECONDS
wait "$fetches_pid" || exit 1
t2=$SECONDS
newest=$(.venv/bin/python -c 'import pyspark; print(pyspark.__version__)')
old=$(.venv35/bin/python -c 'import pyspark; print(pyspark.__version__)')
lowest_dask=$(.venv35/bin/python -c 'import distributed; print(distributed.__version__)')
echo "run-all: installed .venv (pyspark $newest) and .venv35 (pyspark $old) in $((t1 - t0)) s (the jars and the Node.js examples beside them: $((t2 - t0)) s)"

# Lint and format (ruff, configured in pyproject.toml): seconds
echo "run-all: ruff check and ruff format --check"
.venv/bin/ruff check . && .venv/bin/ruff format --check .
status_lint=$?

# The pytest runs: the newest pyspark's suite without the multi-host tests (in two halves
# side by side, HALF below); then the core tests on pyspark 3.5 and the lowest
# dask/distributed beside the multi-host tests. The newest suite and the 3.5 core tests side
# by side (tried at 3e97e8d, before the bytecode and the class-data archives above) took
# 1987 s for what took some 1550 s in turn; the newest suite's two halves side by side took
# 646 s for what took 968 s in one run (c4d192c's tree, this project's 2-core machine).
# The multi-host run mostly waits (fault windows, link shaping) and keeps ~0.9 of the two
# cores busy, so the 3.5 core tests fill the rest (~1100 s in turn, ~800 s side by side).
# The .venv35 run keeps to itself what the two could share: its own
# XDG_RUNTIME_DIR (the state directory of named clusters), its own pytest temporary
# directory, no pytest cache; its output goes to a log printed when it ends.
# --durations: where the CI time goes.
#
# LATER: tests of the newest pyspark only (none of them core) that each run a Spark
# application of their own in a subprocess (the examples, the notebooks, the post's
# walk-through): ~185 s of the first run on CI's two cores, keeping ~0.9 of them busy
# (164 s of CPU, the process tree's, measured). They run after the multi-host tests
# instead, beside the rest of the 3.5 core tests, which outlast the multi-host tests by
# ~240 s and there had the machine to themselves but for the benchmark. Node ids
# (file::name) are deselected from the first run, modules ignored: the two runs together
# are the whole suite.
LATER=(tests/spark/test_examples.py tests/spark/test_notebooks.py tests/spark/test_docs.py::test_post_python_blocks_run)
not_later=()
for t in "${LATER[@]}"; do
    case $t in
        *::*) not_later+=(--deselect "$t") ;;
        *) not_later+=(--ignore "$t") ;;
    esac
done
t2=$SECONDS
# The class-data archives of .venv's JVMs (.venv35's: above), built beside the unit
# tests, which start no JVM; the first Spark test of each run waits for its environment's
# (tests/conftest.py).
.venv/bin/python -m tests.support.cds build &
cds_newest=$!
# The newest pyspark's suite in two halves side by side: alone, a run of it keeps ~1.07
# of the two cores busy (tests/spark/test_cluster.py and test_reliability.py: 141 core-s
# in 132 s, /proc/stat), its tests mostly waiting on Spark, on workers' start and on the
# timeouts they test; the two halves fill the other core, as the 3.5 core tests and the
# multi-host tests do below. HALF: the second half, modules of ~half the time
# (--durations=0 of a whole run); the first half is the rest, so a new module runs in it,
# and the two runs together are the whole suite. The second keeps to itself what the
# two could share (its state directory, its pytest temporary directory, no pytest cache);
# its output goes to a log printed when the first ends.
HALF=(tests/spark/test_cli.py tests/spark/test_cluster.py tests/spark/test_drain.py tests/spark/test_faults.py
    tests/spark/test_gpu_shared.py tests/spark/test_handoff.py tests/spark/test_logdir_cluster.py
    tests/spark/test_reliability.py tests/spark/test_scale.py tests/spark/test_signals.py
    tests/spark/test_workers_without_spark_dask.py tests/spark/test_yarn.py tests/spark/test_yarn_preemption.py)
not_half=()
for t in "${HALF[@]}"; do not_half+=(--ignore "$t"); done
echo "run-all: pyspark $newest: the whole suite but the multi-host tests (-m 'not multihost')" \
    "and the ones that run after them (${LATER[*]}), in two halves side by side (the second: ${HALF[*]})"
state_half=$(mktemp -d)
(
    XDG_RUNTIME_DIR=$state_half env --default-signal=INT .venv/bin/python -m pytest -m "not multihost" \
        "${not_later[@]}" --durations=25 -p no:cacheprovider --basetemp="$state_half/pytest" "$@" "${HALF[@]}" \
        > "$logs/half.log" 2>&1
    echo $? > "$logs/half.rc"
    echo $((SECONDS - t2)) > "$logs/half.s"
) &
half_pid=$!
.venv/bin/python -m pytest -m "not multihost" "${not_later[@]}" "${not_half[@]}" --durations=25 "$@"
status_newest=$?
first_s=$((SECONDS - t2))
wait "$half_pid"
echo "run-all: pyspark $newest: the second half's output (${HALF[*]})"
cat "$logs/half.log"
status_half=$(cat "$logs/half.rc" 2>/dev/null || echo 1)
[ "$status_half" -eq 0 ] || status_newest=$status_half
echo "run-all: pyspark $newest: the first half took $first_s s, the second $(cat "$logs/half.s" 2>/dev/null || echo "?") s"
wait "$cds_newest" "$cds_old" "$bytecode_newest"
t3=$SECONDS
echo "run-all: pyspark $old, distributed $lowest_dask: the core tests (-m 'core and not newest')," \
    "beside the multi-host tests; their output follows the multi-host tests'"
state35=$(mktemp -d)
# env --default-signal=INT: bash starts a background command with SIGINT ignored, and Python
# then keeps ignoring it; with it restored, ^C stops both runs and their teardown still runs
(
    XDG_RUNTIME_DIR=$state35 env --default-signal=INT .venv35/bin/python -m pytest \
        -m "core and not newest" --durations=15 -p no:cacheprovider --basetemp="$state35/pytest" "$@" \
        > "$logs/core35.log" 2>&1
    echo $? > "$logs/core35.rc"
    echo $((SECONDS - t3)) > "$logs/core35.s"
) &
old_pid=$!
echo "run-all: pyspark $newest: the multi-host tests (-m multihost)"
.venv/bin/python -m pytest -m multihost --durations=10 "$@"
status_multihost=$?
t4=$SECONDS
echo "run-all: pyspark $newest: the tests that run after the multi-host tests (${LATER[*]})," \
    "beside the rest of the 3.5 core tests"
.venv/bin/python -m pytest -m "not multihost" --durations=10 "$@" "${LATER[@]}"
status_later=$?
t4b=$SECONDS
# A short benchmark (N = 2, 1 repetition, one master): it prints the start-up and
# teardown table; it fails only when the benchmark itself breaks, never on timings. It
# runs beside the rest of the 3.5 core tests (the multi-host tests' slack, with the LATER
# tests); its figures are a smoke check, not figures: docs/benchmarks.md's come from
# runs with nothing beside them.
echo "run-all: short benchmark (python -m benchmarks --quick), beside the rest of the 3.5 core tests"
bench_json=$(mktemp -d)/bench.json
timeout 900 .venv/bin/python -m benchmarks --quick --reps 1 --master 'local-cluster[2,1,1024]' \
    --json "$bench_json" --plot-dir "$(dirname "$bench_json")"
status_bench=$?
t5=$SECONDS
wait "$old_pid"
t6=$SECONDS
echo "run-all: pyspark $old, distributed $lowest_dask: the core tests' output"
cat "$logs/core35.log"
status_old=$(cat "$logs/core35.rc" 2>/dev/null || echo 1)
old_s=$(cat "$logs/core35.s" 2>/dev/null || echo "?")

# The Delta filter, read and write tests on pyspark 4.0 with Delta 4.0.1, in Spark 4.0's own
# defaults (ANSI mode on, as on Databricks 17.3 LTS): the file reader must give that Spark's
# answers (spark_dask/delta/compare.py, ansi.py), and an overwrite from an older read is
# refused as on 3.5 (test_delta_write.py: ~35 s more). Alone, last: ~93 s on this project's 2-core machine
# (the Delta session's start, the tables of tests/support/delta_tables.py, every version
# read both ways; 300 filter cases take ~9 s of it), within CI's 38 min (the phases above:
# ~31.5 min); beside phase 2, whose two runs keep both cores busy, it would lengthen them
# about as much. Seed 54, not the 3.5 run's 53: other filters than there.
if wait "$venv40_pid"; then
    v40=$(.venv40/bin/python -c 'import pyspark; print(pyspark.__version__)')
    echo "run-all: pyspark $v40: the Delta filter, read and write tests (Spark 4.0's defaults: ANSI mode on)"
    SPARK_DASK_FILTER_SEED=54 .venv40/bin/python -m pytest tests/spark/test_delta_filters.py \
        tests/spark/test_delta_read.py tests/spark/test_delta_write.py --durations=5 -p no:cacheprovider "$@"
    status_delta40=$?
else
    cat "$logs/install-venv40.log" >&2
    echo "run-all: installing .venv40 failed" >&2
    v40=4.0
    status_delta40=1
fi
t7=$SECONDS

echo "run-all: ruff: exit $status_lint;" \
    "pyspark $newest suite (not multihost): exit $status_newest in $((t3 - t2)) s;" \
    "pyspark $old core tests: exit $status_old in $old_s s;" \
    "multi-host tests: exit $status_multihost in $((t4 - t3)) s;" \
    "the tests after them: exit $status_later in $((t4b - t4)) s;" \
    "short benchmark: exit $status_bench in $((t5 - t4b)) s (the four together: $((t6 - t3)) s);" \
    "pyspark $v40 Delta tests: exit $status_delta40 in $((t7 - t6)) s; total $((t7 - t0)) s"
[ "$status_lint" -eq 0 ] && [ "$status_newest" -eq 0 ] && [ "$status_old" -eq 0 ] &&
    [ "$status_multihost" -eq 0 ] && [ "$status_later" -eq 0 ] && [ "$status_bench" -eq 0 ] &&
    [ "$status_delta40" -eq 0 ]
