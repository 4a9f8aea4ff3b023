# Device step 1: unpack the JRE and the Python wheels into /tmp/sd, keep pyspark's first half, probe the machine.
set -u
S=/tmp/sd; mkdir -p $S/site
cd "$(dirname "$0")"
t0=$(date +%s.%N)
tar -xJf jre17.tar.xz -C $S || exit 3
cp pyspark.part-aa $S/ || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $S/site py/*.whl 2>&1 | tail -3
echo "unpacked in $(python3 -c "import time; print(round(time.time() - $t0, 1))") s"
$S/jre17/bin/java -version 2>&1 | head -1
which java || echo "no java on the machine"
nvidia-smi --query-gpu=index,pci.bus_id,name,memory.total,driver_version --format=csv
nproc; free -g | head -2; df -h /tmp | tail -1; hostname; getent hosts $(hostname) || echo "hostname does not resolve"
PYTHONPATH=$S/site python3 - <<'PY'
import importlib, sys
print(sys.executable, sys.version.split()[0])
for m in ["numpy", "pandas", "pyarrow", "cupy", "numba", "numba_cuda", "cuda.bindings", "cuda.core", "pynvml", "dask", "distributed", "dask_cuda", "rmm", "cryptography", "bokeh", "tornado", "click", "yaml", "psutil", "msgpack"]:
    try:
        mod = importlib.import_module(m)
        print(f"{m:14} {getattr(mod, '__version__', '?')}")
    except Exception as e:
        print(f"{m:14} FAILED {type(e).__name__}: {e}")
PY
ls $S
