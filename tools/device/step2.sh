# Device step 2, the last call (.dev/cN, built by tools/device/bundle.sh): keep this folder's part
# (stepc.sh), check that the machine holds every part (exit 4 naming the missing ones), join and
# unpack them into /tmp/sd (Java, pyspark, the Delta jars, the wheels), install the wheels with
# --no-deps against the image's pandas / pyarrow / numba / numba-cuda, print what imports (again
# with numba-cuda 0.30 first on the path when cudf does not import), then run the GPU check with
# spark.task.resource.gpu.amount 1 and 0.5 (CHECKS="1" for one) and probe.py (PROBE=0: not),
# each while time is left (BUDGET seconds in all, 570 by default: the call's timeout_s is 600).
# Outputs in $OUT. Run it again after a failure: a machine that unpacked and installed skips that.
set -u
S=/tmp/sd
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."  # the repository's root: spark_dask from the working tree that came with the call
deadline=$(( $(date +%s) + ${BUDGET:-570} ))
left() { echo $(( deadline - $(date +%s) )); }
bash "$here/stepc.sh" || exit 3
missing=$(awk '/^part-/ { print $1 }' "$here/manifest.txt" | while read -r p; do [ -f "$S/parts/$p" ] || echo "$p"; done)
if [ -n "$missing" ]; then
  echo "missing parts: $(echo $missing) (part-K comes with the call that carries .dev/cK; a machine given back in between holds none)"
  exit 4
fi
if [ ! -f $S/.installed ]; then
  t0=$(date +%s)
  rm -rf $S/jre17 $S/site $S/whl $S/fallback $S/jars $S/numba030
  parts=$(awk -v s="$S/parts/" '/^part-/ { print s $1 }' "$here/manifest.txt")
  set -o pipefail
  cat $parts | xz -d -T0 | tar -x -C $S || { echo "unpacking the payload failed"; exit 3; }
  set +o pipefail
  t1=$(date +%s)
  python3 -m pip install -q --no-index --no-deps --no-compile --target $S/site $S/whl/*.whl > $S/pip.log 2>&1 &&
    python3 -m pip install -q --no-index --no-deps --no-compile --target $S/numba030 $S/fallback/*.whl >> $S/pip.log 2>&1 ||
    { tail -20 $S/pip.log; echo "pip install failed"; exit 3; }
  grep -v "^\s*$" $S/pip.log | tail -5
  echo "unpacked in $(( t1 - t0 )) s, $(ls $S/whl | wc -l) wheels installed in $(( $(date +%s) - t1 )) s; $(du -sh $S/site | cut -f1) in $S/site"
  touch $S/.installed
fi
export JAVA_HOME=$S/jre17 PATH=$S/jre17/bin:$PATH PYTHONUNBUFFERED=1
imports() {  # PYTHONPATH=$1: each module's version and folder, or the first line of its error; 0 when cudf imports
  PYTHONPATH=$1 timeout 150 python3 - > $S/imports.txt 2>&1 <<'PY'
import importlib, os, sys
bad = False
for name in ["rmm", "cupy", "numba_cuda", "pylibcudf", "cudf", "dask_cudf", "xgboost", "dask_cuda", "pyroaring",
             "pyspark", "pandas", "pyarrow", "numba"]:
    try:
        module = importlib.import_module(name)
        print(f"  {name:10} {getattr(module, '__version__', '?'):14} {os.path.dirname(module.__file__)}")
    except BaseException as e:  # noqa: BLE001 - printed
        print(f"  {name:10} FAILED {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:300]}")
        bad = bad or name in ("cudf", "dask_cudf")
sys.exit(1 if bad else 0)
PY
  status=$?
  grep -v "^\s*$" $S/imports.txt | head -40
  return $status
}
path=$PWD:$S/site
echo "=== imports (the image's numba-cuda)"
if ! imports "$path"; then
  echo "=== imports with numba-cuda 0.30.4 first ($S/numba030)"
  imports "$S/numba030:$path" && path=$S/numba030:$path
fi
export PYTHONPATH=$path
echo "PYTHONPATH=$PYTHONPATH"
jars=$(ls $S/jars/*.jar | paste -sd,)
rm -rf $S/site/pyspark/work
for amount in ${CHECKS-1 0.5}; do
  t=$(( $(left) - 30 )); [ $t -gt 240 ] && t=240
  if [ $t -lt 60 ]; then echo "=== gpu check, gpu.amount=$amount: not run, $(left) s left"; continue; fi
  echo "=== gpu check, spark.task.resource.gpu.amount=$amount (timeout $t s)"
  timeout $t python3 -m tools.gpu_check --gpu-amount $amount --timeout 120 --memory 16384 --delta-jars "$jars" \
    > $OUT/check-$amount.txt 2>&1
  echo "exit status $?"
  grep -v "^\s*$" $OUT/check-$amount.txt | sed -n '/gpu check:/,$p'
  grep -n "Traceback\|Error\|error" $OUT/check-$amount.txt | head -20
  for f in $S/site/pyspark/work/*/*/stderr; do echo "== $f"; tail -n 150 "$f"; done > $OUT/executor-$amount.txt 2>&1
  rm -rf $S/site/pyspark/work
done
ls /tmp/spark-dask* -d 2>/dev/null
ps -eo pid,ppid,etime,args | grep -i "dask" | grep -v grep
t=$(( $(left) - 15 )); [ $t -gt 180 ] && t=180
if [ "${PROBE-1}" = 0 ] || [ $t -lt 45 ]; then echo "=== probe: not run (PROBE=${PROBE-1}, $(left) s left)"; exit 0; fi
echo "=== probe (timeout $t s)"
timeout $t python3 "$here/probe.py" > $OUT/probe.txt 2>&1; echo "probe exit $?"
grep -v "WARN\|^\s*$" $OUT/probe.txt | grep -v "^   log:" | tail -60
ps -eo pid,ppid,etime,args | grep -i "dask\|java\|spark" | grep -v grep
