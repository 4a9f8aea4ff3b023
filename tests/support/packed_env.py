"""A packed Python environment for the executors, as ``venv-pack`` makes one, built from
what the running environment has installed (no download): a fresh virtual environment
(``python -m venv``: its ``bin/python`` a link to the same base interpreter, which the
nodes must have at the same path, as with ``venv-pack``) holding copies of ``packages``
and everything they require, as a ``.tar.gz`` that Spark ships with ``spark.archives``
and YARN unpacks in each container::

    archive = pack_env(tmp / "env.tar.gz", ["distributed", "pandas", "pyarrow"])
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def closure(packages) -> dict[str, importlib.metadata.Distribution]:
    """``packages`` and what they require (the markers of this interpreter, no extras
    but those asked for), installed here: canonical name -> distribution."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [Requirement(p) for p in packages]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in found:
            continue
        dist = importlib.metadata.distribution(req.name)
        found[name] = dist
        for text in dist.requires or ():
            dep = Requirement(text)
            extras = req.extras or {""}
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in extras):
                todo.append(dep)
    return found


def site_packages(prefix: str) -> str:
    """The ``site-packages`` directory of the environment at ``prefix``."""
    return sysconfig.get_path("purelib", vars={"base": prefix, "platbase": prefix})


def pack_env(archive: str, packages, workdir: str | None = None) -> str:
    """Build the environment (under ``workdir``, default beside ``archive``) and pack it
    into ``archive`` (gzip level 1: fast; the packages' own files are mostly
    compressed); ``archive``."""
    env = os.path.join(workdir or os.path.dirname(os.path.abspath(archive)), "env")
    shutil.rmtree(env, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env], check=True, timeout=60)
    here, there = site_packages(sys.prefix), site_packages(env)
    for dist in closure(packages).values():
        for f in dist.files or ():
            src = os.path.abspath(str(dist.locate_file(f)))
            if not src.startswith(here + os.sep) or src.endswith(".pyc") or not os.path.isfile(src):
                continue  # scripts outside site-packages; bytecode is made where it runs
            dst = os.path.join(there, os.path.relpath(src, here))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.add(env, arcname=".")
    return archive
