#!/usr/bin/env bash
# Builds what the GPU check needs on a bare GPU machine of this workplace's `device` tool
# (no Java, no Spark, no Dask; Python 3.12 with CuPy, numba-cuda, nvidia-ml-py; at most
# 64 MiB sent per call): .dev/c1 (a jlink'ed Java 17 runtime, the Python wheels, the first
# part of a trimmed pyspark 3.5.9) and .dev/c2 (the rest of pyspark, the step scripts).
# See tools/device/README.md. Takes about 8 minutes here (xz -9 of ~400 MB).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
pyspark_src=${PYSPARK_SRC:-$root/.venv35/lib/python3.11/site-packages/pyspark}
jdk=${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf .dev/c1 .dev/c2 && mkdir -p .dev/c1/py .dev/c2

# Python 3.12 wheels the machine lacks (dask/distributed at the version dask-cuda 26.08 pins).
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .dev/c1/py \
  "dask==2026.7.1" "distributed==2026.7.1" "dask-cuda==26.8.0" "rapids-dask-dependency==26.8.0" \
  "rmm-cu13==26.8.*" "librmm-cu13==26.8.*" "rapids-logger==0.2.*" tornado tblib zict partd locket \
  cryptography cffi pycparser "py4j==0.10.9.7" bokeh xyzservices

# Java 17: the modules Spark 3.5 uses, uncompressed (xz does better on the whole).
"$jdk/bin/jlink" --module-path "$jdk/jmods" --add-modules java.base,java.compiler,java.datatransfer,java.desktop,java.instrument,java.logging,java.management,java.management.rmi,java.naming,java.net.http,java.prefs,java.rmi,java.scripting,java.security.jgss,java.security.sasl,java.sql,java.sql.rowset,java.transaction.xa,java.xml,java.xml.crypto,jdk.crypto.ec,jdk.crypto.cryptoki,jdk.management,jdk.unsupported,jdk.zipfs,jdk.net,jdk.naming.dns,jdk.security.auth,jdk.httpserver,jdk.jdwp.agent,jdk.localedata \
  --include-locales=en --strip-debug --no-header-files --no-man-pages --compress=0 --output "$work/jre17"
tar -C "$work" -cf - jre17 | xz -T2 -9 > .dev/c1/jre17.tar.xz

# pyspark without what local-cluster + SQL + Arrow never load (Hive, ML, streaming, YARN,
# Kubernetes, Mesos, RocksDB), its jars re-stored uncompressed so that xz sees the classes.
mkdir -p "$work/p" && cp -a "$pyspark_src" "$work/p/pyspark"
rm -rf "$work/p/pyspark/work"
find "$work/p/pyspark" -name __pycache__ -type d -prune -exec rm -rf {} +
find "$work/p/pyspark" -name tests -type d -prune -exec rm -rf {} +
(cd "$work/p/pyspark/jars" && rm -f rocksdbjni* breeze* spire* spark-mllib* mesos* kubernetes* hive-* spark-hive* \
  derby* datanucleus* libthrift* libfb303* jdo-api* javolution* bonecp* HikariCP* antlr-runtime-3* scala-compiler* \
  orc-* arpack* lapack* blas* JTransforms* JLargeArrays* algebra* cats-kernel* shapeless* spark-streaming* \
  spark-graphx* spark-yarn* spark-kubernetes* spark-mesos* zookeeper* curator* jline* snakeyaml* okhttp* okio* \
  logging-interceptor* jackson-dataformat-yaml* pmml-model* ST4*)
python3 - "$work/p/pyspark/jars" <<'PY'
import os, sys, zipfile
os.chdir(sys.argv[1])
for jar in sorted(f for f in os.listdir(".") if f.endswith(".jar")):
    with zipfile.ZipFile(jar) as zin, zipfile.ZipFile(jar + ".tmp", "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            info.compress_type = zipfile.ZIP_STORED
            zout.writestr(info, data)
    os.replace(jar + ".tmp", jar)
PY
tar -C "$work/p" -cf - pyspark | xz -T2 -9 > "$work/pyspark.tar.xz"
# c1 carries the first 23 MB beside the JRE and the wheels; c2 the rest (each call < 64 MiB).
head -c 23000000 "$work/pyspark.tar.xz" > .dev/c1/pyspark.part-aa
tail -c +23000001 "$work/pyspark.tar.xz" > .dev/c2/pyspark.part-ab
cp tools/device/step1.sh .dev/c1/ && cp tools/device/step2.sh tools/device/probe.py .dev/c2/
du -sh .dev/c1 .dev/c2
