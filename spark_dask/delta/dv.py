"""Deletion vectors: which rows of one data file a Delta table has deleted.

Runs on the Dask worker that reads the file (shipped by value, like the hand-off's
task code), so no mask of the whole table is ever built on the driver. The format is
the Delta protocol's (delta-io/delta ``PROTOCOL.md``, "Deletion Vector Format"):

* a descriptor in the ``add`` action: ``storageType`` ``u`` (a file beside the table,
  named from a Z85-encoded UUID with an optional prefix), ``i`` (the bitmap inline,
  Z85-encoded), ``p`` (an absolute path); ``offset`` into the file, ``sizeInBytes``,
  ``cardinality``;
* a DV file: a version byte, then per DV a big-endian 4-byte size, the bitmap, a
  big-endian CRC-32 of the bitmap (``offset`` points at the size);
* the bitmap: a little-endian 4-byte magic number, then a 64-bit roaring bitmap
  array, either "portable" (magic 1681511377: the Roaring format spec's 64-bit
  extension, which :class:`pyroaring.BitMap64` reads) or the older "native" layout
  (magic 1681511376: a bucket count, then per bucket its size and a 32-bit bitmap).

Only the standard library and numpy at module level; pyroaring is imported when a DV
is decoded (a table without DVs never needs it).
"""

from __future__ import annotations

import struct
import uuid
import zlib
from urllib.parse import unquote, urlparse

import numpy as np

from spark_dask.errors import DeltaError

Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(Z85_ALPHABET)}
PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376


def z85_decode(text: str) -> bytes:
    """Decode Z85 (ZeroMQ's Base85: 5 characters per big-endian 4-byte block).

    >>> z85_decode("HelloWorld").hex()
    '864fd26fb559f75b'
    >>> z85_decode("abc")
    Traceback (most recent call last):
    ...
    spark_dask.errors.DeltaError: spark-dask: not Z85 (length 3 is not a multiple of 5): 'abc'
    """
    if len(text) % 5:
        raise DeltaError(f"spark-dask: not Z85 (length {len(text)} is not a multiple of 5): {text[:40]!r}")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for c in text[start : start + 5]:
            digit = _Z85_INDEX.get(c)
            if digit is None:
                raise DeltaError(f"spark-dask: not Z85 (character {c!r}): {text[:40]!r}")
            value = value * 85 + digit
        if value > 0xFFFFFFFF:
            raise DeltaError(f"spark-dask: not Z85 (block {text[start : start + 5]!r} is over 32 bits)")
        out += value.to_bytes(4, "big")
    return bytes(out)


def relative_dv_path(path_or_inline: str) -> str:
    """The file a ``u`` descriptor names, relative to the table's root.

    >>> relative_dv_path("ab^-aqEH.-t@S}K{vb[*k^")
    'ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin'
    >>> relative_dv_path("^-aqEH.-t@S}K{vb[*k^")
    'deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin'
    """
    prefix, encoded = path_or_inline[:-20], path_or_inline[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
    return f"{prefix}/{name}" if prefix else name


def absolute_path(uri: str) -> str:
    """What to open for an absolute URI of the log (a data file's ``path`` or a ``p``
    deletion vector's): its path percent-decoded, as Delta opens ``new Path(new
    URI(path))`` (DeltaFileOperations.absolutePath); a ``file:`` URI as a local path.

    >>> absolute_path("s3://b/t/d%3D1/x%20y.parquet"), absolute_path("file:/t/dv%25.bin")
    ('s3://b/t/d=1/x y.parquet', '/t/dv%.bin')
    """
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    return f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"


def dv_file(dv: dict, table_root: str) -> str:
    """Where an on-disk (``u`` or ``p``) deletion vector lives: a URI or path."""
    if dv["storageType"] == "p":
        return absolute_path(dv["pathOrInlineDv"])
    return table_root.rstrip("/") + "/" + relative_dv_path(dv["pathOrInlineDv"])


def dv_unique_id(dv: dict | None) -> str | None:
    """The descriptor's unique id (part of a file's key in the log replay).

    >>> dv_unique_id({"storageType": "u", "pathOrInlineDv": "^-aqEH.-t@S}K{vb[*k^", "offset": 1})
    'u^-aqEH.-t@S}K{vb[*k^@1'
    >>> dv_unique_id(None) is None
    True
    """
    if not dv:
        return None
    offset = dv.get("offset")
    return f"{dv['storageType']}{dv['pathOrInlineDv']}" + (f"@{offset}" if offset is not None else "")


def bitmap_rows(data: bytes) -> np.ndarray:
    """The row indexes (uint64, ascending) in a serialized RoaringBitmapArray."""
    if len(data) < 4:
        raise DeltaError("spark-dask: deletion vector too short for its magic number")
    (magic,) = struct.unpack_from("<i", data, 0)
    if magic == PORTABLE_MAGIC:
        from pyroaring import BitMap64

        return np.frombuffer(BitMap64.deserialize(bytes(data[4:])).to_array(), dtype=np.uint64)
    if magic == NATIVE_MAGIC:
        return _native_rows(data)
    raise DeltaError(f"spark-dask: deletion vector with unknown magic number {magic} (not a RoaringBitmapArray)")


def _native_rows(data: bytes) -> np.ndarray:
    from pyroaring import BitMap

    (buckets,) = struct.unpack_from("<i", data, 4)
    position, parts = 8, []
    for high in range(buckets):
        (size,) = struct.unpack_from("<i", data, position)
        low = np.frombuffer(BitMap.deserialize(bytes(data[position + 4 : position + 4 + size])).to_array(), np.uint32)
        parts.append(low.astype(np.uint64) | np.uint64(high << 32))
        position += 4 + size
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


def read_stored(fs, path: str, dv: dict) -> bytes:
    """The bitmap bytes of an on-disk DV, its size and CRC-32 checked."""
    offset, size = int(dv.get("offset") or 0), int(dv["sizeInBytes"])
    with fs.open(path, "rb") as f:
        f.seek(offset)
        record = f.read(size + 8)
    if len(record) != size + 8:
        raise DeltaError(f"spark-dask: deletion vector file {path} ends before its DV (offset {offset}, size {size})")
    (stored_size,) = struct.unpack_from(">i", record, 0)
    bitmap = record[4 : 4 + size]
    (crc,) = struct.unpack_from(">I", record, 4 + size)
    if stored_size != size or zlib.crc32(bitmap) != crc:
        raise DeltaError(
            f"spark-dask: deletion vector in {path} at offset {offset} is corrupt "
            f"(size {stored_size} for {size} in the log, CRC-32 {'ok' if zlib.crc32(bitmap) == crc else 'wrong'})"
        )
    return bitmap


def deleted_rows(dv: dict | None, table_root: str, fs) -> np.ndarray:
    """The deleted row indexes of one data file (empty without a DV)."""
    if not dv or not int(dv.get("cardinality") or 0):
        return np.empty(0, np.uint64)
    kind = dv["storageType"]
    if kind == "i":
        bitmap = z85_decode(dv["pathOrInlineDv"])[: int(dv["sizeInBytes"])]
    elif kind in ("u", "p"):
        bitmap = read_stored(fs, dv_file(dv, table_root), dv)
    else:
        raise DeltaError(f"spark-dask: deletion vector storage type {kind!r} is not in the Delta protocol (u, i, p)")
    rows = bitmap_rows(bitmap)
    if len(rows) != int(dv["cardinality"]):
        raise DeltaError(
            f"spark-dask: deletion vector holds {len(rows)} rows where the log says {dv['cardinality']} "
            f"({dv_unique_id(dv)})"
        )
    return rows


def keep_mask(num_rows: int, deleted: np.ndarray) -> np.ndarray | None:
    """A boolean mask of the rows to keep, or None when every row stays.

    >>> keep_mask(5, np.array([1, 3], dtype=np.uint64)).tolist()
    [True, False, True, False, True]
    >>> keep_mask(5, np.empty(0, np.uint64)) is None
    True
    """
    if not len(deleted):
        return None
    if int(deleted[-1]) >= num_rows:
        raise DeltaError(f"spark-dask: deletion vector names row {int(deleted[-1])} of a file of {num_rows} rows")
    mask = np.ones(num_rows, dtype=bool)
    mask[deleted.astype(np.int64)] = False
    return mask


__all__ = [
    "absolute_path",
    "bitmap_rows",
    "deleted_rows",
    "dv_file",
    "dv_unique_id",
    "keep_mask",
    "relative_dv_path",
    "z85_decode",
]
