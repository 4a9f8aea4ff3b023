"""The class-data archives' cache keeps what a test run can still use
(tests/support/cds.py's ``prune``): no JVM, only the cache's directory layout."""

from __future__ import annotations

import os

from tests.support import cds


def _key_dir(root, name: str, jars: str | None) -> str:
    path = root / name
    path.mkdir()
    for role in cds.ROLES:
        (path / f"{role}.jsa").write_bytes(b"x")
    if jars is not None:
        (path / cds.SOURCE).write_text(jars)
    (root / f"{name}.lock").write_text("")
    return str(path)


def test_prune_removes_the_archives_of_a_pyspark_that_is_gone(tmp_path, monkeypatch):
    root = tmp_path / "cds"
    root.mkdir()
    monkeypatch.setenv("SPARK_DASK_CDS_CACHE", str(root))
    jars = tmp_path / "venv" / "jars"
    jars.mkdir(parents=True)
    kept = _key_dir(root, "a" * 16, str(jars))
    gone = _key_dir(root, "b" * 16, str(tmp_path / "deleted-venv" / "jars"))
    unknown = _key_dir(root, "c" * 16, None)  # built before the source was recorded
    fresh_work, old_work = root / f"{'a' * 16}.k1", root / f"{'d' * 16}.k2"
    fresh_work.mkdir()
    old_work.mkdir()
    now = os.stat(old_work).st_mtime + cds.STALE_WORK + 1
    os.utime(fresh_work, (now, now))

    assert sorted(cds.prune(now=now)) == sorted([gone, str(old_work)])
    assert sorted(os.listdir(root)) == sorted(
        ["a" * 16, f"{'a' * 16}.lock", "c" * 16, f"{'c' * 16}.lock", fresh_work.name]
    )
    assert os.path.isdir(kept) and os.path.isdir(unknown)
    assert cds.prune(now=now) == []  # nothing more to remove


def test_prune_of_a_cache_never_built(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_DASK_CDS_CACHE", str(tmp_path / "none"))
    assert cds.prune() == []
