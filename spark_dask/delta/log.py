"""The Delta log replayed on the driver: the table's state at one version.

delta-io/delta ``PROTOCOL.md`` ("Action Reconciliation", "Checkpoints"): start from the
newest complete checkpoint at or before the version (classic single-file, multi-part,
or v2: a top-level JSON or Parquet file whose ``sidecar`` actions name Parquet files
under ``_delta_log/_sidecars``), then apply each JSON commit after it in order. A data
file's key is its path and its deletion vector's unique id: a DELETE that writes a DV
removes ``(path, None)`` and adds ``(path, dv)``.

No maintained Python library hands out what the workers need per file: deltalake's
``get_add_actions()`` has no deletion-vector descriptor, and its
``deletion_vectors()`` builds every file's mask in the calling process; there is no
Python package of delta-kernel-rs. So the replay is here, with pyarrow reading the
checkpoints batch by batch: the driver keeps one small record per live file and never
reads a data file or a deletion vector.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from spark_dask.delta import dv as dvs
from spark_dask.delta import schema as schemas
from spark_dask.errors import DeltaError

COMMIT = re.compile(r"^(\d{20})\.json$")
CLASSIC = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
MULTIPART = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
V2 = re.compile(r"^(\d{20})\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)$")

ADD_FIELDS = ("path", "partitionValues", "size", "stats", "deletionVector")
COMMITS_AT_ONCE = 1000  # commit files fetched together by the replay (their bytes held at once)


@dataclass(frozen=True)
class LogListing:
    """What ``_delta_log`` holds: commit versions (with their modification times, in
    ms) and checkpoints by version (each a list of file names)."""

    commits: dict[int, int]
    checkpoints: dict[int, list[list[str]]]


@dataclass
class Snapshot:
    """A table's state at ``version``: its protocol, metadata and live data files."""

    root: str
    version: int
    protocol: dict
    metadata: dict
    files: list[dict] = field(default_factory=list)
    checkpoint: int | None = None


def list_log(fs, root: str, shown: str | None = None) -> LogListing:
    """List ``root/_delta_log`` as the store has it now (one listing call); ``shown``
    names the table in messages (the source as the user gave it: fsspec's ``root`` has
    no scheme).

    fsspec's object-store filesystems (s3fs, gcsfs, adlfs) keep each listing for the life
    of the filesystem instance, and fsspec hands the same instance to every call with the
    same options: the listing is dropped first, so each read sees the commits made since
    the last one (the read then replays from this listing only: one snapshot).
    """
    log_dir = posixpath.join(root, "_delta_log")
    fs.invalidate_cache(log_dir)
    try:
        entries = fs.ls(log_dir, detail=True)
    except FileNotFoundError:
        raise DeltaError(f"spark-dask: {shown or root} is not a Delta table (no _delta_log)") from None
    commits: dict[int, int] = {}
    classic: dict[int, list[str]] = {}
    parts: dict[tuple[int, int], list[str]] = {}
    v2: dict[int, list[list[str]]] = {}
    for entry in entries:
        name = posixpath.basename(entry["name"].rstrip("/"))
        if m := COMMIT.match(name):
            commits[int(m.group(1))] = modification_ms(entry)
        elif m := CLASSIC.match(name):
            classic[int(m.group(1))] = [name]
        elif m := MULTIPART.match(name):
            parts.setdefault((int(m.group(1)), int(m.group(3))), []).append(name)
        elif m := V2.match(name):
            v2.setdefault(int(m.group(1)), []).append([name])
    checkpoints: dict[int, list[list[str]]] = {}
    for version, names in classic.items():
        checkpoints.setdefault(version, []).append(names)
    for (version, total), names in parts.items():
        if len(names) == total:  # a multi-part checkpoint counts only when whole
            checkpoints.setdefault(version, []).append(sorted(names))
    for version, choices in v2.items():
        checkpoints.setdefault(version, []).extend(choices)
    if not commits and not checkpoints:
        raise DeltaError(f"spark-dask: {shown or root} is not a Delta table (its _delta_log has no commit)")
    return LogListing(commits, checkpoints)


def modification_ms(entry: dict) -> int:
    """A listing entry's modification time in ms since the epoch (fsspec backends name it
    differently)."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "modified", "created"):
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            value = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
            return int(value.timestamp() * 1000)
        if isinstance(value, str):
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        return int(float(value) * 1000)
    return 0


def latest_version(listing: LogListing) -> int:
    return max([*listing.commits, *listing.checkpoints])


def start_point(listing: LogListing, version: int) -> tuple[int | None, list[str] | None]:
    """The newest checkpoint at or before ``version`` (its version and files), then
    checked that every commit after it is there.

    >>> listing = LogListing({0: 0, 1: 0, 2: 0, 3: 0}, {2: [["x.parquet"]]})
    >>> start_point(listing, 3), start_point(listing, 1)
    ((2, ['x.parquet']), (None, None))
    """
    done = [v for v in listing.checkpoints if v <= version]
    start, files = (max(done), listing.checkpoints[max(done)][0]) if done else (None, None)
    first = -1 if start is None else start
    missing = [v for v in range(first + 1, version + 1) if v not in listing.commits]
    if missing:
        raise DeltaError(
            f"spark-dask: version {version} of the table can no longer be rebuilt: commit {missing[0]} is gone "
            f"from _delta_log (log retention, delta.logRetentionDuration) and no checkpoint covers it"
        )
    return start, files


def replay(fs, root: str, version: int, listing: LogListing) -> Snapshot:
    """The table's :class:`Snapshot` at ``version``."""
    start, files = start_point(listing, version)
    state = _State()
    log_dir = posixpath.join(root, "_delta_log")
    if files is not None:
        for name in files:
            for action in checkpoint_actions(fs, log_dir, name):
                state.apply(action)
    versions = list(range((-1 if start is None else start) + 1, version + 1))
    for first in range(0, len(versions), COMMITS_AT_ONCE):
        paths = [posixpath.join(log_dir, f"{v:020d}.json") for v in versions[first : first + COMMITS_AT_ONCE]]
        texts = read_all(fs, paths)
        for path in paths:
            for line in texts[path].splitlines():
                if line.strip():
                    state.apply(json.loads(line))
    if state.protocol is None or state.metadata is None:
        raise DeltaError(f"spark-dask: the Delta log of {root} at version {version} has no protocol or metadata action")
    return Snapshot(root, version, state.protocol, state.metadata, list(state.files.values()), start)


def read_all(fs, paths: list[str]) -> dict[str, bytes]:
    """The bytes of each file: on an object store the requests at once (fsspec's ``cat``
    of a list, an async batch on s3fs, gcsfs, adlfs), one by one where a path has a glob
    character (``cat`` of a list would expand it) or came back under another name."""
    texts = {} if any(c in p for p in paths for c in "*?[") else fs.cat(paths)
    return {p: texts[p] if p in texts else fs.cat_file(p) for p in paths}


class _State:
    """The reconciliation of actions: live files by key, the latest protocol and metadata."""

    def __init__(self):
        self.files: dict[tuple[str, str | None], dict] = {}
        self.protocol: dict | None = None
        self.metadata: dict | None = None

    def apply(self, action: dict) -> None:
        if (add := action.get("add")) is not None:
            record = {k: add.get(k) for k in ADD_FIELDS}
            self.files[(add["path"], dvs.dv_unique_id(add.get("deletionVector")))] = record
        elif (remove := action.get("remove")) is not None:
            self.files.pop((remove["path"], dvs.dv_unique_id(remove.get("deletionVector"))), None)
        elif (protocol := action.get("protocol")) is not None:
            self.protocol = protocol
        elif (metadata := action.get("metaData")) is not None:
            self.metadata = metadata


def checkpoint_actions(fs, log_dir: str, name: str):
    """The actions of one checkpoint file, and of the sidecars a v2 checkpoint names."""
    path = posixpath.join(log_dir, name)
    if name.endswith(".json"):
        with fs.open(path, "rb") as f:
            actions = [json.loads(line) for line in f if line.strip()]
    else:
        actions = list(parquet_actions(fs, path))
    for action in actions:
        if (sidecar := action.get("sidecar")) is not None:
            yield from parquet_actions(fs, posixpath.join(log_dir, "_sidecars", sidecar["path"]))
        else:
            yield action


def parquet_actions(fs, path: str):
    """Actions in a checkpoint (or sidecar) Parquet file, one row group at a time; only the
    columns a reader needs, and only the non-null action of each row. The ``add`` rows
    (nearly all of a large table's) go column by column: a struct column's ``to_pylist``
    builds a dict per row and field, which took twice as long for 100,000 files."""
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as f:
        pf = pq.ParquetFile(f)
        wanted = [c for c in ("add", "protocol", "metaData", "sidecar") if c in pf.schema_arrow.names]
        for batch in pf.iter_batches(columns=wanted, batch_size=8192):
            for name in wanted:
                column = batch.column(name)
                if column.null_count == len(column):
                    continue
                if name == "add":
                    yield from ({"add": record} for record in add_records(column))
                    continue
                for value in column.to_pylist():
                    if value is not None:
                        yield {name: _plain(name, value)}


def add_records(column) -> list[dict]:
    """The non-null rows of a checkpoint's ``add`` struct column, as the JSON ``add``
    actions would have them (only :data:`ADD_FIELDS`; maps as dicts).

    >>> import pyarrow as pa
    >>> t = pa.struct([("path", pa.string()), ("partitionValues", pa.map_(pa.string(), pa.string())), ("size", pa.int64())])
    >>> add_records(pa.array([{"path": "a", "partitionValues": [("p", "1")], "size": 3}, None], type=t))
    [{'path': 'a', 'partitionValues': {'p': '1'}, 'size': 3, 'stats': None, 'deletionVector': None}]
    """
    import pyarrow.compute as pc

    live = column.filter(pc.is_valid(column)) if column.null_count else column
    n = len(live)
    values = []
    for name in ADD_FIELDS:
        index = live.type.get_field_index(name)
        child = live.field(index) if index >= 0 else None
        values.append([None] * n if child is None or child.null_count == n else child.to_pylist())
    records = [dict(zip(ADD_FIELDS, row)) for row in zip(*values)]
    for record in records:
        record["partitionValues"] = dict(record["partitionValues"] or ())
    return records


def _plain(name: str, value: dict) -> dict:
    """A checkpoint row as the JSON action would have it (maps as dicts)."""
    if name == "metaData":
        value = dict(value)
        value["configuration"] = dict(value.get("configuration") or [])
    return value


def commit_times(fs, root: str, listing: LogListing, metadata: dict) -> dict[int, int]:
    """Each commit's timestamp (ms) as Delta's time travel sees it: the in-commit
    timestamp (``commitInfo.inCommitTimestamp``) where the table records them
    (``delta.enableInCommitTimestamps``), else the commit file's modification time,
    made strictly increasing as Delta does (a later commit with an earlier or equal
    time gets the previous one plus 1 ms).

    >>> commit_times(None, "t", LogListing({0: 5, 1: 5, 2: 3, 3: 9}, {}), {})
    {0: 5, 1: 6, 2: 7, 3: 9}
    """
    ict_from = in_commit_timestamps_from(metadata.get("configuration") or {})
    times, last = {}, None
    for version in sorted(listing.commits):
        ms = listing.commits[version]
        if ict_from is not None and version >= ict_from:
            ms = _in_commit_timestamp(fs, root, version, ms)
        elif last is not None and ms <= last:
            ms = last + 1
        times[version] = last = ms
    return times


def in_commit_timestamps_from(conf: dict) -> int | None:
    """The first version with in-commit timestamps, or None where the table has none.
    Delta 3.2 wrote the properties with a ``-preview`` suffix (its feature
    ``inCommitTimestamp-preview``); Delta 3.3 dropped it (delta-io/delta#3416).

    >>> in_commit_timestamps_from({"delta.enableInCommitTimestamps": "true"})
    0
    >>> in_commit_timestamps_from({"delta.enableInCommitTimestamps-preview": "true",
    ...                            "delta.inCommitTimestampEnablementVersion-preview": "3"})
    3
    >>> in_commit_timestamps_from({"delta.enableInCommitTimestamps": "false"}) is None
    True
    """
    for suffix in ("", "-preview"):
        if str(conf.get(f"delta.enableInCommitTimestamps{suffix}", "false")).lower() == "true":
            return int(conf.get(f"delta.inCommitTimestampEnablementVersion{suffix}", 0))
    return None


def _in_commit_timestamp(fs, root: str, version: int, fallback: int) -> int:
    with fs.open(posixpath.join(root, "_delta_log", f"{version:020d}.json"), "rb") as f:
        first = json.loads(f.readline() or b"{}")
    return int((first.get("commitInfo") or {}).get("inCommitTimestamp", fallback))


def version_at(times: dict[int, int], ms: int, shown: str, tz: str = "UTC", table: str = "") -> int:
    """The newest version committed at or before ``ms`` (Spark's ``timestampAsOf``);
    ``shown`` is the time asked, as given (a time without a zone is in ``tz``, the
    session's, in which the messages show the commit times too).

    >>> version_at({0: 10, 1: 20, 2: 30}, 25, "t")
    1
    >>> version_at({0: 10, 1: 20}, 25, "1970-01-01 00:00:00.025", "UTC", "/t")
    Traceback (most recent call last):
    ...
    spark_dask.errors.DeltaError: spark-dask: 1970-01-01 00:00:00.025 (in the session time zone UTC) is after the latest commit of the Delta table /t (version 1, committed 1970-01-01 00:00:00.020 UTC), as Spark's timestampAsOf refuses too: leave timestamp out to read the latest version
    >>> version_at({0: 10, 1: 20}, 5, "1969-12-31 19:00", "America/New_York", "/t")
    Traceback (most recent call last):
    ...
    spark_dask.errors.DeltaError: spark-dask: the Delta table /t has no version as of 1969-12-31 19:00 (in the session time zone America/New_York): its earliest available commit is from 1969-12-31 19:00:00.010 America/New_York
    """
    before = [v for v, t in times.items() if t <= ms]
    where = f" {table}" if table else ""
    if not before:
        raise DeltaError(
            f"spark-dask: the Delta table{where} has no version as of {shown} (in the session time zone {tz}): its "
            f"earliest available commit is from {_shown_ms(min(times.values()), tz)}"
        )
    latest = max(times)
    if ms > times[latest]:
        raise DeltaError(
            f"spark-dask: {shown} (in the session time zone {tz}) is after the latest commit of the Delta "
            f"table{where} (version {latest}, committed {_shown_ms(times[latest], tz)}), as Spark's timestampAsOf "
            "refuses too: leave timestamp out to read the latest version"
        )
    return max(before)


def _shown_ms(ms: int, tz: str = "UTC") -> str:
    """A commit time in ``tz``, named.

    >>> _shown_ms(0, "Europe/Paris")
    '1970-01-01 01:00:00.000 Europe/Paris'
    """
    local = datetime.fromtimestamp(ms / 1000, timezone.utc).astimezone(schemas.zone(tz))
    return local.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + f" {tz}"


__all__ = [
    "LogListing",
    "Snapshot",
    "commit_times",
    "in_commit_timestamps_from",
    "latest_version",
    "list_log",
    "modification_ms",
    "read_all",
    "replay",
    "start_point",
    "version_at",
]
