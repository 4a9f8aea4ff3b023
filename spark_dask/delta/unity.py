"""Unity Catalog, asked for a table's files: the table's storage location and short-lived,
down-scoped credentials for it (credential vending), on the driver only.

Two calls of Unity Catalog's REST API, authenticated as the databricks-sdk finds this
process's user:

* ``GET /api/2.1/unity-catalog/tables/{full_name}``: the ``TableInfo`` (``table_id``,
  ``table_type``, ``data_source_format``, ``storage_location``, the columns' ``mask`` and
  the table's ``row_filter`` on Databricks, ``properties``);
* ``POST .../unity-catalog/temporary-table-credentials`` with ``{"table_id": ...,
  "operation": "READ"}``: ``aws_temp_credentials``, ``azure_user_delegation_sas`` or
  ``gcp_oauth_token``, their ``expiration_time`` (epoch ms) and ``url``. A Databricks
  workspace documents it under ``/api/2.0/`` (the SDK's own path); the open-source server
  serves ``/api/2.1/`` (its OpenAPI ``api/all.yaml``).

Databricks vends only where a metastore admin enabled *External data access* and the
caller holds ``EXTERNAL USE SCHEMA`` on the table's schema (Databricks, "Enable external
data access to Unity Catalog"). Governance is never bypassed: a view, a table with a
row filter or a column mask, a table whose commits the catalog manages, or another format
is read through Spark (:func:`spark_only`). The workspace token stays in this process:
only the vended storage credentials reach the workers (:mod:`.vending`).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from spark_dask.errors import DeltaError, PlanError
from spark_dask.spark import databricks

TABLES = "/api/2.1/unity-catalog/tables/"
VEND_DATABRICKS = "/api/2.0/unity-catalog/temporary-table-credentials"
VEND_OPEN_SOURCE = "/api/2.1/unity-catalog/temporary-table-credentials"
VIEWS = ("VIEW", "MATERIALIZED_VIEW", "STREAMING_TABLE", "METRIC_VIEW")
# table properties saying the catalog keeps the newest commits (Delta's catalogManaged
# table feature and its preview name): the log's files alone miss them
CATALOG_COMMITS = ("delta.feature.catalogManaged", "delta.feature.catalogOwned-preview")
HTTP_TIMEOUT = 30  # seconds per request
CONFIG_FILE = "~/.databrickscfg"


def refusal(why: str, missing: str = "") -> DeltaError:
    """The catalog did not give a table's files: a :class:`~spark_dask.DeltaError` whose
    text says why, in words that never hold a token, and whose ``missing`` names a
    privilege or setting to ask for (``""``: none)."""
    error = DeltaError(why)
    error.missing = missing
    return error


@dataclass
class Catalog:
    """A Unity Catalog reached as this process's user: the SDK's configuration (its
    authentication), the host and the path its server vends credentials on. The calls
    are made here, not through the SDK's API client, whose debug log of a round trip
    shows a response's body with no credential field of this API masked."""

    config: Any  # databricks.sdk.config.Config
    host: str
    vend_path: str

    def table(self, full_name: str) -> dict:
        """The table's ``TableInfo``; :func:`refusal` where the catalog refuses."""
        return self.call("GET", TABLES + urllib.parse.quote(full_name, safe=".`"), None, full_name)

    def vend(self, table_id: str, full_name: str) -> dict:
        """Read credentials for the table (``TemporaryCredentials``)."""
        return self.call("POST", self.vend_path, {"table_id": table_id, "operation": "READ"}, full_name)

    def call(self, method: str, path: str, body, full_name: str) -> dict:
        """One request with the SDK's authentication headers; :func:`refusal` for an
        error answer or an unreachable catalog."""
        try:
            headers = {"Accept": "application/json", "Content-Type": "application/json"}
            headers.update(self.config.authenticate())
            data = json.dumps(body).encode() if body is not None else None
            request = urllib.request.Request(self.host.rstrip("/") + path, data, headers, method=method)
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as e:
            with e:  # its response's socket
                code, text = answer_error(e.code, e.read())
            raise refused(code, text, full_name) from None
        except Exception as e:  # noqa: BLE001 - the network's or the SDK's authentication
            code, text = error_text(e)
            if isinstance(e, OSError):  # no answer: refused connection, timeout, DNS
                raise refusal(f"Unity Catalog could not be reached ({code}: {text})") from None
            raise refused(code, text, full_name) from None


def answer_error(status: int, body: bytes) -> tuple[str, str]:
    """An error answer's ``error_code`` and ``message`` (both servers send
    ``{"error_code", "message", "details"}``).

    >>> answer_error(403, b'{"error_code": "PERMISSION_DENIED", "message": "no"}')
    ('PERMISSION_DENIED', 'no')
    >>> answer_error(502, b"<html>Bad Gateway</html>")
    ('HTTP 502', '')
    """
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = {}
    if not isinstance(parsed, dict):
        parsed = {}
    message = " ".join(str(parsed.get("message") or "").split())[:300]
    return str(parsed.get("error_code") or f"HTTP {status}"), message


def error_text(error: BaseException) -> tuple[str, str]:
    """The code and message of an error on the way to the catalog (the SDK failing to
    authenticate, the network), without the SDK's appended configuration (which masks
    the token, but says nothing).

    >>> class PermissionDenied(Exception):
    ...     error_code = "PERMISSION_DENIED"
    >>> error_text(PermissionDenied("User does not have EXTERNAL USE SCHEMA on Schema 'a.b'. Config: host=h"))
    ('PERMISSION_DENIED', "User does not have EXTERNAL USE SCHEMA on Schema 'a.b'.")
    """
    code = getattr(error, "error_code", None) or type(error).__name__
    text = " ".join(str(error).split(" Config: ")[0].split())
    return str(code), text[:300]


def refused(code: str, text: str, full_name: str) -> DeltaError:
    """The catalog's error answer as a :func:`refusal` naming what to ask an admin for.

    >>> str(refused("PERMISSION_DENIED", "User does not have EXTERNAL USE SCHEMA on Schema 'm.s'.", "m.s.t"))[:68]
    'Unity Catalog refused credentials for m.s.t (PERMISSION_DENIED: User'
    >>> refused("PERMISSION_DENIED", "User does not have EXTERNAL USE SCHEMA on Schema 'm.s'.", "m.s.t").missing
    'EXTERNAL USE SCHEMA on m.s'
    >>> refused("PERMISSION_DENIED", "External access is not enabled on metastore 'x'.", "m.s.t").missing
    "External data access on the metastore (a metastore admin's setting)"
    """
    lowered = text.lower()
    missing = ""
    if "external use" in lowered:
        missing = f"EXTERNAL USE SCHEMA on {full_name.rsplit('.', 1)[0]}"
    elif "external" in lowered and ("metastore" in lowered or "access" in lowered):
        missing = "External data access on the metastore (a metastore admin's setting)"
    if code in ("TABLE_DOES_NOT_EXIST", "NOT_FOUND", "TABLE_NOT_FOUND"):
        return refusal(f"Unity Catalog has no table {full_name} ({code}: {text})")
    if code in ("UNAUTHENTICATED", "HTTP 401"):
        return refusal(f"Unity Catalog did not accept this process's credentials ({code}: {text})")
    return refusal(f"Unity Catalog refused credentials for {full_name} ({code}: {text})", missing)


def spark_only(info: dict) -> str | None:
    """Why the table's files must not be read without Spark, or None: a view, another
    format, a row filter, a column mask, commits the catalog keeps.

    >>> spark_only({"table_type": "MANAGED", "data_source_format": "DELTA", "table_id": "1", "storage_location": "s3://b/t"})
    >>> spark_only({"table_type": "MANAGED", "data_source_format": "DELTA"})
    'the catalog gave no storage location for it'
    >>> spark_only({"table_type": "VIEW"})
    'it is a view (VIEW): Spark computes it'
    >>> spark_only({"table_type": "MANAGED", "data_source_format": "DELTA", "row_filter": {"function_name": "m.s.f"}})
    'it has a row filter (m.s.f), which only Spark applies'
    >>> spark_only({"data_source_format": "DELTA", "columns": [{"name": "ssn", "mask": {"function_name": "m.s.h"}}]})
    'its column ssn is masked (m.s.h), which only Spark applies'
    """
    kind = info.get("table_type") or ""
    if kind in VIEWS:
        return f"it is a view ({kind}): Spark computes it"
    form = info.get("data_source_format") or "DELTA"
    if form != "DELTA":
        return f"it is a {form} table, not a Delta table"
    if info.get("row_filter"):
        return f"it has a row filter ({info['row_filter'].get('function_name', '?')}), which only Spark applies"
    for column in info.get("columns") or []:
        if column.get("mask"):
            name = column["mask"].get("function_name", "?")
            return f"its column {column.get('name')} is masked ({name}), which only Spark applies"
    properties = info.get("properties") or {}
    if any(properties.get(p) for p in CATALOG_COMMITS):
        return "its newest commits are kept by the catalog (catalogManaged), not in _delta_log"
    if not info.get("storage_location") or not info.get("table_id"):
        return "the catalog gave no storage location for it"
    return None


def _sdk_config():
    try:
        from databricks.sdk.config import Config
    except ImportError:
        return None
    return Config


def connect(catalog=None, env=None) -> tuple[Catalog | None, str]:
    """The catalog to ask, or None and why (``""``: none configured, names go through
    Spark without a word).

    ``catalog``: a ``databricks.sdk.WorkspaceClient`` (any of its authentications), a
    URL (a workspace or an open-source Unity Catalog server; the SDK finds its token:
    ``DATABRICKS_TOKEN``, a profile of ``~/.databrickscfg``), ``False`` (never ask), or
    None: ``DATABRICKS_HOST`` and its token or OAuth pair in the environment, else the
    notebook context's API URL and token on a Databricks driver, else a
    ``DATABRICKS_CONFIG_PROFILE`` or ``~/.databrickscfg``.
    """
    env = os.environ if env is None else env
    if catalog is False:
        return None, ""
    if hasattr(catalog, "api_client") and hasattr(catalog, "config"):  # a WorkspaceClient
        return _catalog(catalog.config), ""
    settings = _settings(catalog, env)
    if settings is None:
        return None, ""
    config = _sdk_config()
    if config is None:
        return None, "the databricks-sdk, which asks Unity Catalog, does not import here (pip install databricks-sdk)"
    try:
        made = config(**settings, http_timeout_seconds=HTTP_TIMEOUT)
    except Exception as e:  # noqa: BLE001 - the SDK's message names the sources it tried, never a value
        return None, f"no credentials for Unity Catalog ({' '.join(str(e).split())[:200]})"
    return _catalog(made), ""


def _settings(catalog, env) -> dict | None:
    """The SDK ``Config`` arguments for ``catalog`` (None: no catalog configured)."""
    if isinstance(catalog, str):
        return {"host": catalog}
    if catalog is not None:
        raise PlanError(
            f"spark-dask: catalog must be a URL, a databricks.sdk.WorkspaceClient or False, got {type(catalog).__name__}"
        )
    if databricks.env_credentials(env):
        return {}
    if env.get(databricks.RUNTIME_ENV):
        found, _ = databricks.notebook_credentials(databricks.entry_point())
        if found:
            return {"host": found[databricks.HOST_ENV], "token": found[databricks.TOKEN_ENV]}
    if env.get("DATABRICKS_CONFIG_PROFILE") or os.path.exists(os.path.expanduser(CONFIG_FILE)):
        return {}
    return None


def _catalog(config) -> Catalog:
    host = config.host or ""
    name = host.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0]
    path = VEND_DATABRICKS if databricks.is_workspace_host(name) else VEND_OPEN_SOURCE
    return Catalog(config, host, path)


__all__ = [
    "CATALOG_COMMITS",
    "Catalog",
    "TABLES",
    "VEND_DATABRICKS",
    "VEND_OPEN_SOURCE",
    "VIEWS",
    "answer_error",
    "connect",
    "error_text",
    "refusal",
    "refused",
    "spark_only",
]
