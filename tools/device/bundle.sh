#!/usr/bin/env bash
# Builds what `python -m tools.gpu_check` needs on a bare GPU machine of this workplace's
# `device` tool (no Java, Spark, Dask or RAPIDS Python packages; Python 3.12 with CuPy, numba-cuda,
# pandas, pyarrow, nvidia-ml-py; at most 64 MiB sent per call; /tmp kept only while the machine
# stays warm): one xz stream of a jlink'ed Java 17, a trimmed pyspark 3.5, Delta Lake's Spark
# connector and the Python wheels (dask / distributed, dask-cuda, rmm, cudf, dask-cudf, XGBoost,
# ...), cut into folders .dev/c1 ... .dev/cN of at most 60 MiB each, one per device call, in order.
# Prints the calls; see tools/device/README.md. Takes about 20 minutes here (xz -9 of 1.2 GB).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
mkdir -p .git/info && { grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude; }
pyspark_src=${PYSPARK_SRC:-$root/.venv35/lib/python3.11/site-packages/pyspark}
jdk=${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
limit=${CHUNK_BYTES:-62914560}  # 60 MiB a folder, scripts included; each call also carries the ~3 MiB tree
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sd=$work/sd  # what the device unpacks into /tmp/sd

# The payload in parts of even sizes, as few as fit $limit bytes a folder with the scripts; each
# folder gets its part, the manifest (every part's sha256) and stepc.sh; the first step1.sh, the
# last step2.sh and probe.py. Prints the device calls and keeps them in .dev/calls.txt.
cut_into_folders() {
  local payload=$1 total max n part i c script timeout
  total=$(stat -c %s "$payload")
  max=$(( limit - 65536 ))
  n=$(( (total + max - 1) / max ))
  part=$(( (total + n - 1) / n ))  # even parts: more room left for the working tree in each call
  rm -f "$work"/part-*
  split -b $part -a 2 --numeric-suffixes=1 "$payload" "$work/part-"
  { echo "# part sha256 bytes; payload: $total bytes, sha256 $(sha256sum "$payload" | cut -d' ' -f1)"
    for f in "$work"/part-*; do echo "$(basename "$f") $(sha256sum "$f" | cut -d' ' -f1) $(stat -c %s "$f")"; done
  } > "$work/manifest.txt"
  rm -rf .dev/c[0-9]* && mkdir -p .dev
  for i in $(seq 1 "$n"); do
    c=.dev/c$i
    mkdir -p $c && mv "$work/part-$(printf %02d "$i")" $c/ && cp "$work/manifest.txt" tools/device/stepc.sh $c/
    if [ "$i" = 1 ]; then cp tools/device/step1.sh $c/; fi
    if [ "$i" = "$n" ]; then cp tools/device/step2.sh tools/device/probe.py $c/; fi
  done
  echo "payload $total bytes in $n folders (limit $limit bytes each):"
  du -sb .dev/c[0-9]* | sort -V -k2
  echo "device calls, one right after the other (a machine stays 30 s after a call):"
  for i in $(seq 1 "$n"); do
    script=stepc.sh timeout=60
    if [ "$i" = 1 ]; then script=step1.sh; fi
    if [ "$i" = "$n" ]; then script=step2.sh timeout=600; fi
    echo "  run(command=\"bash .dev/c$i/$script 2>&1\", carry=[\".dev/c$i\"], timeout_s=$timeout)"
  done | tee .dev/calls.txt
  du -sb .dev/c[0-9]* | awk -v l="$limit" '$1 > l { print "bundle.sh: " $2 " is over the limit" > "/dev/stderr"; bad = 1 } END { exit bad }'
}

# --recut: the folders again from the parts in .dev (another CHUNK_BYTES, edited step scripts), no rebuild.
if [ "${1:-}" = --recut ]; then
  n=$(grep -c '^part-' .dev/c1/manifest.txt)
  for i in $(seq 1 "$n"); do cat ".dev/c$i/part-$(printf %02d "$i")"; done > "$work/payload.tar.xz"
  want=$(sed -n '1s/.*sha256 //p' .dev/c1/manifest.txt)
  [ "$(sha256sum "$work/payload.tar.xz" | cut -d' ' -f1)" = "$want" ] || { echo "bundle.sh: the parts in .dev do not make the payload" >&2; exit 1; }
  cut_into_folders "$work/payload.tar.xz"
  exit
fi

[ -f "$pyspark_src/jars/spark-core_2.12-3.5."*.jar ] || { echo "bundle.sh: no pyspark 3.5 at $pyspark_src (PYSPARK_SRC)" >&2; exit 2; }
mkdir -p "$sd/whl" "$sd/fallback" "$sd/jars" "$sd/site"
# Python 3.12 wheels the machine lacks, without their dependencies (the image's pandas 3.0,
# pyarrow, numba, numba-cuda, nvjitlink, cuda-bindings and cupy stay; tools/device/README.md).
download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$@"
}
download "$sd/whl" "dask==2026.7.1" "distributed==2026.7.1" "dask-cuda==26.8.0" "rapids-dask-dependency==26.8.0" \
  "rmm-cu13==26.8.*" "librmm-cu13==26.8.*" "rapids-logger==0.2.*" tornado tblib zict partd locket \
  cryptography cffi pycparser "py4j==0.10.9.7" bokeh xyzservices "pyroaring>=1.0" \
  "cudf-cu13==26.8.*" "dask-cudf-cu13==26.8.*" "pylibcudf-cu13==26.8.*" "libcudf-cu13==26.8.*" \
  "libkvikio-cu13==26.8.*" "nvidia-libnvcomp-cu13==5.3.0.16" nvtx cachetools "xgboost==3.4.1"
# numba-cuda < 0.31 as cudf 26.08 asks: put first on PYTHONPATH only when cudf does not import without it
download "$sd/fallback" "numba-cuda==0.30.*"

# Java 17: the modules Spark 3.5 uses, uncompressed (xz does better on the whole).
"$jdk/bin/jlink" --module-path "$jdk/jmods" --add-modules java.base,java.compiler,java.datatransfer,java.desktop,java.instrument,java.logging,java.management,java.management.rmi,java.naming,java.net.http,java.prefs,java.rmi,java.scripting,java.security.jgss,java.security.sasl,java.sql,java.sql.rowset,java.transaction.xa,java.xml,java.xml.crypto,jdk.crypto.ec,jdk.crypto.cryptoki,jdk.management,jdk.unsupported,jdk.zipfs,jdk.net,jdk.naming.dns,jdk.security.auth,jdk.httpserver,jdk.jdwp.agent,jdk.localedata \
  --include-locales=en --strip-debug --no-header-files --no-man-pages --compress=0 --output "$sd/jre17"

# pyspark without what local-cluster + SQL + Arrow never load (Hive, ML, streaming, YARN,
# Kubernetes, Mesos, RocksDB).
cp -a "$pyspark_src" "$sd/site/pyspark"
rm -rf "$sd/site/pyspark/work"
find "$sd/site/pyspark" -name __pycache__ -type d -prune -exec rm -rf {} +
find "$sd/site/pyspark" -name tests -type d -prune -exec rm -rf {} +
(cd "$sd/site/pyspark/jars" && rm -f rocksdbjni* breeze* spire* spark-mllib* mesos* kubernetes* hive-* spark-hive* \
  derby* datanucleus* libthrift* libfb303* jdo-api* javolution* bonecp* HikariCP* antlr-runtime-3* scala-compiler* \
  orc-* arpack* lapack* blas* JTransforms* JLargeArrays* algebra* cats-kernel* shapeless* spark-streaming* \
  spark-graphx* spark-yarn* spark-kubernetes* spark-mesos* zookeeper* curator* jline* snakeyaml* okhttp* okio* \
  logging-interceptor* jackson-dataformat-yaml* pmml-model* ST4*)
# Delta Lake's Spark connector for the check's read_delta row (tests/support/jars.py's cache)
cp $(python3 -m tests.support.jars fetch delta-3.5 | cut -d' ' -f2 | tr ',' ' ') "$sd/jars/"

# Jars and wheels re-stored uncompressed, so that xz sees their contents (pip installs stored wheels).
python3 - "$sd"/site/pyspark/jars/*.jar "$sd"/jars/*.jar "$sd"/whl/*.whl "$sd"/fallback/*.whl <<'PY'
import os, sys, zipfile
for path in sys.argv[1:]:
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            info.compress_type = zipfile.ZIP_STORED
            zout.writestr(info, data)
    os.replace(path + ".tmp", path)
PY
ls "$sd/whl" | sed 's/-[0-9].*//' | sort | uniq -d | grep . && { echo "bundle.sh: two versions of a wheel" >&2; exit 1; }
tar -C "$sd" -cf - jre17 site jars fallback whl | nice -n 10 xz -T2 -9 > "$work/payload.tar.xz"

cut_into_folders "$work/payload.tar.xz"
