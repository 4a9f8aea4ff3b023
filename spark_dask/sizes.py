"""Sizes in bytes: the one parser (Dask's and the JVM's conventions) and the formatter; and
`plural`, a count in words (the user-facing texts say "1 worker", "2 workers").

Shipped by value with the task code (:mod:`spark_dask.spark.shipping`): it imports nothing
from the package.
"""

from __future__ import annotations

import re

_LETTERS = "kmgtp"
_SIZE = re.compile(r"([0-9.e+-]*)([kmgtp]?)(i?)(b?)")

# bytes per unit a bare number is read in: parse_size("2", bare=MIB)
BYTES = 1
KIB = 2**10
MIB = 2**20


def parse_size(text, bare: int = BYTES, *, binary: bool = False) -> int:
    """Bytes of a size string; a bare number counts units of ``bare`` bytes.

    Units ``k m g t p``, each with an optional ``i`` and ``b`` (``"10GB"``, ``"10GiB"``,
    ``"10g"``, ``"10gi"``), case and spaces ignored; ``b`` alone is bytes. With
    ``binary=False`` (Dask's convention, and so dask-cuda's) ``"10GB"`` is 10**10 bytes
    and only ``i`` makes a unit binary; with ``binary=True`` (the JVM's, as Spark reads
    ``spark.executor.memory`` or ``spark.rapids.memory.gpu.reserve``) every unit is
    binary. Spark reads a bare ``spark.executor.memory`` in MiB (``bare=MIB``). Ints and
    floats are bytes. Raises ValueError for anything else.

    >>> parse_size("10GB"), parse_size("1 GiB"), parse_size("1e6"), parse_size(512)
    (10000000000, 1073741824, 1000000, 512)
    >>> parse_size("10GB", binary=True), parse_size("512", MIB, binary=True), parse_size("512b", MIB)
    (10737418240, 536870912, 512)
    """
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, (int, float)):
        return int(text)
    m = _SIZE.fullmatch(str(text).replace(" ", "").lower())
    if not m:
        raise ValueError(f"not a size: {text!r}")
    number, letter, i, b = m.groups()
    if i and not letter:
        raise ValueError(f"not a size unit: {i + b!r} in {text!r}")
    if letter:
        scale = 1024 ** (_LETTERS.index(letter) + 1) if (binary or i) else 1000 ** (_LETTERS.index(letter) + 1)
    else:
        scale = 1 if b else bare
    try:
        return int(float(number or "1") * scale)
    except ValueError:
        raise ValueError(f"not a size: {text!r}") from None


def human_bytes(n: int) -> str:
    """Bytes as people read them, in binary units.

    >>> human_bytes(10**12), human_bytes(1536 * 2**20), human_bytes(512)
    ('931 GiB', '1.5 GiB', '512 B')
    """
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            break
        value /= 1024
    if unit == "B":
        return f"{int(value)} B"
    return f"{value:.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"


def plural(n: int, noun: str) -> str:
    """``1 worker``, ``2 workers``: a count and its noun (English plural in -s).

    >>> plural(1, "worker"), plural(2, "Dask worker"), plural(0, "task")
    ('1 worker', '2 Dask workers', '0 tasks')
    """
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def either(choices: list[str]) -> str:
    """Choices in words: ``a``, ``a or b``, ``a, b, or c`` (each a whole phrase of the
    same kind: things to do, or things to use).

    >>> either(["close it"]), either(["close it", "wait"]), either(["a", "b", "c"])
    ('close it', 'close it or wait', 'a, b, or c')
    """
    if len(choices) <= 2:
        return " or ".join(choices)
    return ", ".join(choices[:-1]) + ", or " + choices[-1]


__all__ = ["BYTES", "KIB", "MIB", "either", "human_bytes", "parse_size", "plural"]
