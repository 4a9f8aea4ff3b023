"""Which Delta tables the file reader can read right, decided from the protocol and
metadata actions alone: it fails closed (a feature it does not know is refused, never
read wrongly).

Reader features (delta-io/delta ``PROTOCOL.md``, "Table Features"; reader version 1 and
2 tables have none, version 2 means column mapping):

* read right: ``columnMapping`` (``name`` and ``id``), ``deletionVectors``,
  ``timestampNtz``, ``v2Checkpoint``, ``vacuumProtocolCheck`` (a rule for VACUUM,
  nothing for readers), ``typeWidening`` / ``typeWidening-preview`` (a file written
  before a widening holds the narrower type: every column is cast to the table's
  type, as the protocol asks);
* refused: ``catalogManaged`` / ``catalogOwned-preview`` (the newest commits live in
  the catalog, not in ``_delta_log``: the files alone miss them), ``variantType`` and
  its preview (Spark-specific binary values), and any name not listed here.

Writer features (liquid clustering, row tracking, domain metadata, IcebergCompat,
change data feed, check constraints, ...) do not change what a reader sees.
"""

from __future__ import annotations

from spark_dask.errors import DeltaError

READ_RIGHT = {
    "columnMapping": "column mapping",
    "deletionVectors": "deletion vectors",
    "timestampNtz": "TIMESTAMP_NTZ columns",
    "v2Checkpoint": "v2 checkpoints",
    "vacuumProtocolCheck": "VACUUM's protocol check",
    "typeWidening": "type widening",
    "typeWidening-preview": "type widening",
}

WHY_NOT = {
    "catalogManaged": "its newest commits are kept by the catalog (Unity Catalog), not in _delta_log",
    "catalogOwned-preview": "its newest commits are kept by the catalog (Unity Catalog), not in _delta_log",
    "variantType": "VARIANT values are Spark's own binary encoding",
    "variantType-preview": "VARIANT values are Spark's own binary encoding",
    "variantShredding-preview": "VARIANT values are Spark's own binary encoding",
}

MAX_READER_VERSION = 3


def refusal(protocol: dict, metadata: dict) -> str | None:
    """Why the file reader cannot read this table right, or None when it can.

    >>> refusal({"minReaderVersion": 1, "minWriterVersion": 2}, {"format": {"provider": "parquet"}}) is None
    True
    >>> refusal({"minReaderVersion": 3, "readerFeatures": ["deletionVectors", "columnMapping"]}, {}) is None
    True
    >>> refusal({"minReaderVersion": 3, "readerFeatures": ["deletionVectors", "catalogManaged"]}, {})
    "it uses the Delta reader feature 'catalogManaged': its newest commits are kept by the catalog (Unity Catalog), not in _delta_log"
    >>> refusal({"minReaderVersion": 3, "readerFeatures": ["futureThing"]}, {})
    "it uses the Delta reader feature 'futureThing', which spark-dask's file reader does not know"
    >>> refusal({"minReaderVersion": 4}, {})
    'it needs a Delta reader of version 4 (the file reader implements versions 1 to 3)'
    """
    version = int(protocol.get("minReaderVersion", 1))
    if version > MAX_READER_VERSION:
        return f"it needs a Delta reader of version {version} (the file reader implements versions 1 to {MAX_READER_VERSION})"
    features = protocol.get("readerFeatures") or [] if version >= 3 else []
    for feature in features:
        if feature in WHY_NOT:
            return f"it uses the Delta reader feature {feature!r}: {WHY_NOT[feature]}"
        if feature not in READ_RIGHT:
            return f"it uses the Delta reader feature {feature!r}, which spark-dask's file reader does not know"
    provider = (metadata.get("format") or {}).get("provider", "parquet")
    if provider != "parquet":
        return f"its data files are {provider!r}, not Parquet"
    mode = column_mapping_mode(metadata)
    if mode not in ("none", "name", "id"):
        return f"its column mapping mode is {mode!r} (the protocol has none, name and id)"
    return None


def column_mapping_mode(metadata: dict) -> str:
    """``none``, ``name`` or ``id`` (``delta.columnMapping.mode``).

    >>> column_mapping_mode({"configuration": {"delta.columnMapping.mode": "name"}})
    'name'
    >>> column_mapping_mode({})
    'none'
    """
    return ((metadata.get("configuration") or {}).get("delta.columnMapping.mode") or "none").lower()


def check(why: str | None, where: str) -> None:
    """Raise :class:`DeltaError` for a :func:`refusal` (naming the feature and
    ``via="spark"``); nothing when ``why`` is None."""
    if why:
        raise DeltaError(
            f"spark-dask: cannot read the Delta table {where} from its files: {why}. "
            'Read it through Spark instead: spark_dask.read_delta(..., via="spark")'
        )


__all__ = ["READ_RIGHT", "WHY_NOT", "check", "column_mapping_mode", "refusal"]
