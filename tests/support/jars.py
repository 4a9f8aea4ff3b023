"""Spark's own artifacts from Maven Central that some tests load, pinned and checked.

pyspark's pip package carries Spark's jars but not these: the Spark Connect server for
Spark 3.5 (pyspark 4 ships its own), Delta Lake's Spark connector (for Spark 3.5 and 4.0),
the RAPIDS Accelerator and YARN's daemons (``yarn-3.3``: tests/support/yarn.py), which
the tests load (:data:`TESTS`), and Hadoop's S3A filesystem (``s3a://``), which only ``python -m benchmarks.delta``'s S3 runs load.
``tests/run-all.sh`` fetches the tests' once into a cache outside the repository; the
tests that need one ask :func:`require` for its path (a skip locally when it is absent, a
failure under CI)::

    python -m tests.support.jars fetch            # the tests' groups (about 670 MB, once)
    python -m tests.support.jars fetch s3a-3.5    # one group
    python -m tests.support.jars path rapids-3.5  # where a group's jars are

The cache is ``$SPARK_DASK_JAR_CACHE``, by default ``~/.cache/spark-dask/jars``.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import urllib.request

MAVEN = "https://repo1.maven.org/maven2"

# group: [(groupId, artifactId, version, sha1 of the jar as Maven Central lists it)].
# pyspark 3.5.5 in .venv35 is the newest 3.5 patch that all three support: Maven Central
# has spark-connect_2.12 for 3.5.0, 3.5.1, 3.5.4, 3.5.5 and 3.5.7 only, and the Scala 2.12 RAPIDS jar
# 25.04.0 (the last for Scala 2.12) has shims up to spark355.
# Delta Lake 3.3.2, not 3.3.3: their POMs build against Spark 3.5.3 and 3.5.6 (newer than
# the 3.5.5 here); Delta 3.3.x is the Spark 3.5 line.
# Delta Lake 4.0.1 for Spark 4.0 (Databricks 17.3 LTS is Spark 4.0), with pyspark 4.0.5 in
# .venv40, the newest 4.0 patch: delta-spark_2.13 4.0.x is the Spark 4.0 line (4.0.1's POM
# builds against Spark 4.0.1; 4.1.0 and later build against Spark 4.1).
JARS = {
    "connect-3.5": [
        ("org.apache.spark", "spark-connect_2.12", "3.5.5", "e11554155e410b64e6e66e97350e89d8381ec829"),
    ],
    "delta-3.5": [
        ("io.delta", "delta-spark_2.12", "3.3.2", "07fff11b74e7284eec27fe106f31c95b3acc8018"),
        ("io.delta", "delta-storage", "3.3.2", "e24b01486ee7a26df8a2735eb186f4ee1821fc9e"),
    ],
    "delta-4.0": [
        ("io.delta", "delta-spark_2.13", "4.0.1", "3e469898dc4ed083c735ae360beb063adcd12e9d"),
        ("io.delta", "delta-storage", "4.0.1", "ebc5384d953c1d70d0ce4ceee42892da74051a81"),
    ],
    # Spark's s3a:// (benchmarks/delta.py's S3 runs; not the tests': CI does not fetch it): the
    # hadoop-aws of pyspark 3.5.5's Hadoop (its jars/hadoop-client-api-3.3.4.jar) and the AWS SDK
    # bundle that hadoop-aws 3.3.4's POM names (1.12.262, 268 MiB)
    "s3a-3.5": [
        ("org.apache.hadoop", "hadoop-aws", "3.3.4", "a65839fbf1869f81a1632e09f415e586922e4f80"),
        ("com.amazonaws", "aws-java-sdk-bundle", "1.12.262", "02deec3a0ad83d13d032b1812421b23d7a961eea"),
    ],
    "rapids-3.5": [
        ("com.nvidia", "rapids-4-spark_2.12", "25.04.0", "8441bfcb8211ca12b2ed0f0bb853b1c3986ea6e2"),
    ],
    # a YARN ResourceManager and NodeManagers (tests/support/yarn.py): Hadoop's shaded
    # minicluster jar of pyspark 3.5.5's Hadoop (3.3.4) and the BouncyCastle it leaves out
    # (hadoop-project-3.3.4.pom's bouncycastle.version; the RM's ProxyCA needs both)
    "yarn-3.3": [
        ("org.apache.hadoop", "hadoop-client-minicluster", "3.3.4", "85a4188e940bfe5e2661363f998fe1f37ec07831"),
        ("org.bouncycastle", "bcprov-jdk15on", "1.60", "bd47ad3bd14b8e82595c7adaa143501e60842a84"),
        ("org.bouncycastle", "bcpkix-jdk15on", "1.60", "d0c46320fbc07be3a24eb13a56cee4e3d38e0c75"),
    ],
}

# The groups the tests load: what ``fetch`` with no group names fetches (tests/run-all.sh).
TESTS = ("connect-3.5", "delta-3.5", "delta-4.0", "rapids-3.5", "yarn-3.3")


def cache_dir() -> str:
    return os.environ.get("SPARK_DASK_JAR_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "spark-dask", "jars"
    )


def coordinate(group: str) -> str:
    """The group's Maven coordinates, as ``spark.jars.packages`` would take them."""
    return ",".join(f"{g}:{a}:{v}" for g, a, v, _ in JARS[group])


def paths(group: str) -> list[str]:
    """Where the group's jars are (or will be) in the cache."""
    return [os.path.join(cache_dir(), f"{a}-{v}.jar") for _, a, v, _ in JARS[group]]


def _sha1(path: str) -> str:
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(group: str, timeout: float = 600) -> list[str]:
    """Download the group's missing jars, check their sha1, and return their paths."""
    os.makedirs(cache_dir(), exist_ok=True)
    for (g, a, v, sha1), path in zip(JARS[group], paths(group)):
        if os.path.exists(path):
            continue
        url = f"{MAVEN}/{g.replace('.', '/')}/{a}/{v}/{a}-{v}.jar"
        fd, part = tempfile.mkstemp(dir=cache_dir(), suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
                for block in iter(lambda: response.read(1 << 20), b""):
                    out.write(block)
            got = _sha1(part)
            if got != sha1:
                raise RuntimeError(f"{url}: sha1 {got}, expected {sha1}")
            os.chmod(part, 0o644)
            os.replace(part, path)
        finally:
            if os.path.exists(part):
                os.remove(part)
    return paths(group)


def delta_group(pyspark_version: tuple[int, int]) -> str | None:
    """The group of Delta Lake's Spark connector for a pyspark line, ``(3, 5)`` ->
    ``delta-3.5``, ``(4, 0)`` -> ``delta-4.0`` (None: none pinned for that line)."""
    group = f"delta-{pyspark_version[0]}.{pyspark_version[1]}"
    return group if group in JARS else None


def require(group: str) -> list[str]:
    """The group's jar paths for a test: skip when they were not fetched (fail under CI)."""
    import pytest  # here, not above: run-all.sh fetches with a bare interpreter

    missing = [p for p in paths(group) if not os.path.exists(p)]
    if missing:
        message = f"{coordinate(group)} not in {cache_dir()}: python -m tests.support.jars fetch {group}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return paths(group)


def main(argv: list[str]) -> int:
    if len(argv) < 1 or argv[0] not in ("fetch", "path"):
        print(__doc__, file=sys.stderr)
        return 2
    groups = argv[1:] or list(TESTS)
    unknown = [g for g in groups if g not in JARS]
    if unknown:
        print(f"unknown group(s) {unknown}; known: {sorted(JARS)}", file=sys.stderr)
        return 2
    for group in groups:
        found = fetch(group) if argv[0] == "fetch" else paths(group)
        print(f"{group}: {','.join(found)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
