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
change data feed, check constraints, ...) do not change what a reader sees, with two
exceptions:

* ``coordinatedCommits-preview`` (or a ``delta.coordinatedCommits.*`` property): a commit
  coordinator accepts the commits, which sit in ``_delta_log/_commits/`` until they are
  backfilled into ``_delta_log``: listing ``_delta_log`` alone would read an older
  version with no word, so such tables are refused as ``catalogManaged`` ones are;
* ``collations`` / ``collations-preview``: a string column with a collation other than
  ``UTF8_BINARY`` (``spark.UTF8_LCASE``, ICU's) is compared by it (``'abc' = 'ABC'``
  under ``UTF8_LCASE``), where the file reader compares bytes: a filter on such a
  column is refused (its values read right; :func:`filter_refusal`).
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

# Writer features and table properties that move commits out of _delta_log
COORDINATED = "coordinatedCommits-preview"
COORDINATED_PROPERTY = "delta.coordinatedCommits."
# Spark's field metadata key of a string field's collation (StructField JSON), and the
# collation that compares bytes, as the file reader does
COLLATIONS_KEY = "__COLLATIONS"
BINARY_COLLATION = "UTF8_BINARY"


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
    coordinated = _coordinated(protocol, metadata)
    if coordinated:
        return (
            f"its commits go through a commit coordinator ({coordinated}): the newest ones stay in "
            "_delta_log/_commits until they are backfilled, and the file reader lists _delta_log only"
        )
    provider = (metadata.get("format") or {}).get("provider", "parquet")
    if provider != "parquet":
        return f"its data files are {provider!r}, not Parquet"
    mode = column_mapping_mode(metadata)
    if mode not in ("none", "name", "id"):
        return f"its column mapping mode is {mode!r} (the protocol has none, name and id)"
    return None


def _coordinated(protocol: dict, metadata: dict) -> str | None:
    """What says the table's commits are coordinated (the feature or a property), or None.

    >>> _coordinated({"writerFeatures": ["coordinatedCommits-preview"]}, {})
    "the writer feature 'coordinatedCommits-preview'"
    >>> _coordinated({}, {"configuration": {"delta.coordinatedCommits.commitCoordinator-preview": "dynamodb"}})
    'delta.coordinatedCommits.commitCoordinator-preview = dynamodb'
    >>> _coordinated({"writerFeatures": ["deletionVectors"]}, {"configuration": {"delta.appendOnly": "true"}}) is None
    True
    """
    if COORDINATED in (protocol.get("writerFeatures") or []):
        return f"the writer feature {COORDINATED!r}"
    for key, value in sorted((metadata.get("configuration") or {}).items()):
        if key.startswith(COORDINATED_PROPERTY) and value:
            return f"{key} = {value}"
    return None


def collation(field: dict) -> str | None:
    """The collation of a top-level column where it compares otherwise than bytes
    (Spark's ``__COLLATIONS`` field metadata, as Delta's ``collations`` feature keeps
    it), or None.

    >>> collation({"name": "s", "type": "string", "metadata": {"__COLLATIONS": {"s": "spark.UTF8_LCASE"}}})
    'spark.UTF8_LCASE'
    >>> collation({"name": "s", "type": "string", "metadata": {"__COLLATIONS": {"s": "spark.UTF8_BINARY"}}}) is None
    True
    >>> collation({"name": "s", "type": "string", "metadata": {}}) is None
    True
    """
    found = (field.get("metadata") or {}).get(COLLATIONS_KEY) or {}
    if not isinstance(found, dict):
        return None
    for name in sorted(found):
        value = str(found[name])
        if value.rsplit(".", 1)[-1].upper() != BINARY_COLLATION:
            return value
    return None


def filter_refusal(fields: list[dict], filters) -> str | None:
    """Why the file reader cannot give Spark's answer to ``filters`` on these columns
    (a filter on a collated string column), or None. Malformed filters pass here: the
    filters' own check names them.

    >>> fields = [{"name": "s", "type": "string", "metadata": {"__COLLATIONS": {"s": "spark.UTF8_LCASE"}}},
    ...           {"name": "k", "type": "long"}]
    >>> filter_refusal(fields, [("k", "==", 1)]) is None
    True
    >>> filter_refusal(fields, [[("k", "==", 1)], [("s", "==", "abc")]])
    "its column 's' has the collation spark.UTF8_LCASE, which Spark compares by (the file reader compares bytes) for the filter on it"
    """
    if not filters or not isinstance(filters, (list, tuple)):
        return None
    groups = [filters] if isinstance(filters[0], tuple) else filters
    named = {t[0] for g in groups if isinstance(g, (list, tuple)) for t in g if isinstance(t, (list, tuple)) and t}
    for field in fields:
        if field.get("name") in named and (found := collation(field)):
            return (
                f"its column {field['name']!r} has the collation {found}, which Spark compares by (the file reader "
                "compares bytes) for the filter on it"
            )
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


__all__ = ["READ_RIGHT", "WHY_NOT", "check", "collation", "column_mapping_mode", "filter_refusal", "refusal"]
