# Device step 2: join pyspark, then run the GPU check twice (whole GPU; shared with Spark at 0.5 GPU a task).
set -u
S=/tmp/sd
cd "$(dirname "$0")/../.."
[ -d $S/jre17 ] || { echo "step 1's files are gone (a fresh machine)"; exit 4; }
t0=$(date +%s)
cat $S/pyspark.part-aa .dev/c2/pyspark.part-ab | xz -d -T4 | tar -x -C $S/site || exit 3
echo "pyspark unpacked in $(( $(date +%s) - t0 )) s"
export JAVA_HOME=$S/jre17 PATH=$S/jre17/bin:$PATH PYTHONPATH=$PWD:$S/site PYTHONUNBUFFERED=1
python3 -c "import pyspark, spark_dask, dask_cuda, rmm; print('pyspark', pyspark.__version__, 'dask_cuda', dask_cuda.__version__, 'rmm', rmm.__version__)"
rm -rf $S/site/pyspark/work
for amount in ${CHECKS-1 0.5}; do
  echo "=== gpu check, spark.task.resource.gpu.amount=$amount"
  timeout 200 python3 -m spark_dask.gpu_check --gpu-amount $amount --timeout 120 --memory 16384 > $OUT/check-$amount.txt 2>&1
  echo "exit status $?"
  grep -v "^\s*$" $OUT/check-$amount.txt | sed -n '/gpu check:/,$p'
  grep -n "Traceback\|Error\|error" $OUT/check-$amount.txt | head -20
  for f in $S/site/pyspark/work/*/*/stderr; do echo "== $f"; tail -n 150 "$f"; done > $OUT/executor-$amount.txt 2>&1
  rm -rf $S/site/pyspark/work
done
ls /tmp/spark-dask* -d 2>/dev/null
ps -eo pid,ppid,etime,args | grep -i "dask" | grep -v grep
echo "=== probe"
timeout 240 python3 .dev/c2/probe.py > $OUT/probe.txt 2>&1; echo "probe exit $?"
grep -v "WARN\|^\s*$" $OUT/probe.txt | grep -v "^   log:" | tail -60
ps -eo pid,ppid,etime,args | grep -i "dask\|java\|spark" | grep -v grep
