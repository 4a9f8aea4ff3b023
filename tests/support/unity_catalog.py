"""A stand-in for Unity Catalog's REST API (Databricks', and the open-source server's) in
front of moto's S3 server (:mod:`.s3`), Azurite (:mod:`.azure`) or the GCS emulator
(:mod:`.gcs`): a table's ``TableInfo``, and temporary table credentials ("credential
vending") for tests of ``read_delta("catalog.schema.table")``: on S3, real, down-scoped and
revocable credentials of moto's IAM; on Azure, a SAS that Azurite checks; on GCS, a token.

    with S3Server.start(log_dir) as s3, CatalogStandIn.start(s3, token="t0ken") as uc:
        uc.add_table("spark_catalog.sales.orders", s3.url("uc", "orders"))
        uc.grant_external_use("spark_catalog.sales")
        env = uc.environment()            # DATABRICKS_HOST, DATABRICKS_TOKEN
        with s3.authenticated():          # moto checks the vended credentials from here
            ...

An HTTP server (:class:`http.server.ThreadingHTTPServer`) on a free port of 127.0.0.1, in
a thread of the test process, answers

- ``GET /api/2.1/unity-catalog/tables/{full_name}``: the table's ``TableInfo`` (the OSS
  OpenAPI spec's fields; a column mask and a row filter as Databricks shows them);
- ``POST /api/2.1/unity-catalog/temporary-table-credentials`` and the same under
  ``/api/2.0/`` (Databricks documents 2.0 and its SDK calls it, the OSS server serves 2.1):
  ``{"table_id", "operation"}`` gives, by the scheme of the table's location,
  ``aws_temp_credentials`` (``s3://``), ``azure_user_delegation_sas`` (``abfss://``,
  ``abfs://``, ``az://``) or ``gcp_oauth_token`` (``gs://``), with ``expiration_time``
  (epoch ms) and ``url`` (the table's location).

Every request needs ``Authorization: Bearer <token>`` (else 401 ``UNAUTHENTICATED``); an
error's body is ``{"error_code", "message", "details": [google.rpc.ErrorInfo]}`` as both
servers send it.

S3 credentials: for each vend, an IAM role of its own whose only (inline) policy allows
reading the table (``s3:GetObject`` on ``<bucket>/<prefix>/*``; ``s3:ListBucket`` and
``s3:GetBucketLocation`` on the bucket; ``READ_WRITE`` adds ``s3:PutObject`` and
``s3:DeleteObject`` on the prefix; plus the operation names moto checks in place of those
actions: :data:`READ_OBJECTS`), assumed with STS: an access key, secret and session
token. moto's IAM checks (on inside :meth:`.S3Server.authenticated`) authorize an
assumed-role key by its role's policies but never look at the session's expiry, so at
``expiration_time`` a timer deletes the role's policy: from then on moto refuses every
request signed with those credentials (403 ``AccessDenied``), as AWS refuses an expired
session. The role itself stays (moto looks a session's policies up through its role).

Azure (``CatalogStandIn.start(s3, token, azure=AzuriteServer)``, ``s3`` may be None): a
*service* SAS for the table's container signed with the account's key (read and list;
``READ_WRITE`` adds write, create, add and delete), expiring after ``lifetime``.
Databricks vends a *user delegation* SAS, which needs an OAuth token from Entra ID: Azurite
grants those over HTTPS only, and the reader sees the same ``sas_token`` either way.
Azurite checks the SAS's signature and expiry itself (403 ``AuthorizationFailure`` once it
expired), so no timer revokes it, and :meth:`CatalogStandIn.revoke` cannot (a SAS is not
revocable before its expiry without a stored access policy). A location is Databricks'
``abfss://container@devstoreaccount1.dfs.core.windows.net/path`` or adlfs's
``abfs://container/path``.

GCS (always on): any ``gs://`` location gets ``gcp_oauth_token``, a made-up token
(``ya29.`` and random hex): the emulator checks no credentials, so only the plumbing to
gcsfs is tested, not a refusal or an expiry.

What this approximates (not the real servers' behaviour):

- the listing is not down-scoped: moto cannot evaluate AWS's ``s3:prefix`` condition, so
  the vended key may list the whole bucket, though it reads objects under the table's
  prefix only; an Azure SAS is for the whole container (Azurite has no directory SAS);
- the 403 when the metastore's ``external_access_enabled`` is off ("External access is not
  enabled on metastore ...") and the 400 ``INVALID_PARAMETER_VALUE`` for a table with a row
  filter or a column mask are our wording of what Databricks refuses; the 401's
  ``error_code`` is ``UNAUTHENTICATED`` (Databricks' gateway words its own);
- one metastore, one principal (the token's), no catalogs or schemas as objects: a schema
  is granted ``EXTERNAL USE SCHEMA`` by name (:meth:`CatalogStandIn.grant_external_use`);
- revocation is late by the timer's delay (milliseconds) and happens only while the
  stand-in runs: :meth:`CatalogStandIn.stop` revokes every S3 credential still valid.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from botocore.exceptions import BotoCoreError, ClientError
from distributed.utils import open_port

from tests.support.azure import ACCOUNT as AZURE_ACCOUNT
from tests.support.azure import AzuriteServer
from tests.support.s3 import S3Server

API = "/api/2.1/unity-catalog"
VEND_PATHS = (
    "/api/2.1/unity-catalog/temporary-table-credentials",
    "/api/2.0/unity-catalog/temporary-table-credentials",
)
DOMAIN = "unity-catalog.databricks.com"
OPERATIONS = ("READ", "READ_WRITE")
AZURE_SCHEMES = ("abfss", "abfs", "az")
OWNER = "spark-dask-test@example.com"
JOIN_TIMEOUT = 10  # seconds for the server's thread to end

# A vended credential's actions: AWS's IAM actions, and the names moto checks in their
# place (it authorizes an S3 request by its API operation's name: HeadObject where AWS
# wants s3:GetObject, ListObjectsV2 where AWS wants s3:ListBucket)
READ_OBJECTS = ["s3:GetObject", "s3:HeadObject", "s3:GetObjectAttributes"]
LIST_BUCKET = ["s3:ListBucket", "s3:GetBucketLocation", "s3:ListObjects", "s3:ListObjectsV2", "s3:HeadBucket"]
WRITE_OBJECTS = [
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:DeleteObjects",
    "s3:CreateMultipartUpload",
    "s3:UploadPart",
    "s3:CompleteMultipartUpload",
    "s3:AbortMultipartUpload",
]

# SQL type text -> ColumnInfo's type_name
TYPE_NAMES = {
    "boolean": "BOOLEAN",
    "tinyint": "BYTE",
    "byte": "BYTE",
    "smallint": "SHORT",
    "short": "SHORT",
    "int": "INT",
    "integer": "INT",
    "bigint": "LONG",
    "long": "LONG",
    "float": "FLOAT",
    "double": "DOUBLE",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
    "string": "STRING",
    "binary": "BINARY",
    "decimal": "DECIMAL",
    "array": "ARRAY",
    "struct": "STRUCT",
    "map": "MAP",
    "variant": "VARIANT",
}


class CatalogError(Exception):
    """An error answer: the HTTP ``status``, Unity Catalog's ``code`` and ``message``."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def body(self) -> dict:
        """The error's JSON body, as Databricks and the OSS server send it."""
        info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": self.code, "domain": DOMAIN}
        return {"error_code": self.code, "message": self.message, "details": [{**info, "metadata": {}}]}


def column_info(position: int, column, masked: dict) -> dict:
    """A ``ColumnInfo`` from ``(name, type_text)``, ``(name, type_text, nullable)`` or a
    dict of ``ColumnInfo``'s fields; ``masked`` maps a column to its mask's function."""
    if isinstance(column, dict):
        info = dict(column)
    else:
        name, type_text, *rest = column
        info = {"name": name, "type_text": type_text, "nullable": rest[0] if rest else True}
    info.setdefault("nullable", True)
    info.setdefault("position", position)
    base = re.match(r"\s*(\w+)", info["type_text"]).group(1).lower()
    info.setdefault("type_name", TYPE_NAMES.get(base, "USER_DEFINED_TYPE"))
    if base == "decimal":
        digits = re.findall(r"\d+", info["type_text"]) or ["10", "0"]
        info.setdefault("type_precision", int(digits[0]))
        info.setdefault("type_scale", int(digits[1]) if len(digits) > 1 else 0)
    if info["name"] in masked:
        info["mask"] = {"function_name": masked[info["name"]], "using_column_names": []}
    return info


def read_policy(location: str, operation: str) -> dict:
    """The IAM policy a vended credential gets: reading (and for ``READ_WRITE`` writing)
    the objects under ``location`` (``s3://bucket/prefix``), listing its bucket."""
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    objects = f"arn:aws:s3:::{bucket}/{prefix.rstrip('/')}/*" if prefix else f"arn:aws:s3:::{bucket}/*"
    statements = [
        {"Effect": "Allow", "Action": READ_OBJECTS, "Resource": objects},
        {"Effect": "Allow", "Action": LIST_BUCKET, "Resource": f"arn:aws:s3:::{bucket}"},
    ]
    if operation == "READ_WRITE":
        statements.append({"Effect": "Allow", "Action": WRITE_OBJECTS, "Resource": objects})
    return {"Version": "2012-10-17", "Statement": statements}


class CatalogStandIn:
    """A Unity Catalog stand-in serving at :attr:`url`, vending credentials of ``s3``
    (moto's IAM) for ``s3://`` locations, SAS tokens of ``azure`` (Azurite) for Azure
    ones, and made-up tokens for ``gs://`` ones; a store given as None gets no credentials
    (400 ``INVALID_PARAMETER_VALUE``, as for any other location).

    Attributes: ``url``; ``token`` (the one bearer token accepted); ``lifetime`` (seconds a
    vended credential lives, settable); ``external_access`` (the metastore's
    ``external_access_enabled``, default True); ``calls`` (``(method, path, JSON body or
    None)`` of every request, a body that is not JSON as its text, never its headers); ``vended`` (a dict per credential:
    ``expiration_time`` in epoch ms, ``table``, ``operation``, and the credential:
    ``access_key_id``, ``secret_access_key`` and ``session_token``; ``sas_token``; or
    ``oauth_token``); ``revoked`` (the access key ids revoked, in order)."""

    def __init__(self, s3: S3Server | None, token: str, lifetime: float = 3600.0, azure: AzuriteServer | None = None):
        self.s3, self.azure, self.token, self.lifetime = s3, azure, token, lifetime
        self.external_access = True
        self.calls: list[tuple[str, str, object]] = []
        self.vended: list[dict] = []
        self.revoked: list[str] = []
        self.threads: set[str] = set()  # the names of the threads that answered (their logs are the catalog's)
        self._tables: dict[str, dict] = {}
        self._granted: set[str] = set()
        self._roles: dict[str, str] = {}  # access key id -> role, while not revoked
        self._timers: dict[str, threading.Timer] = {}
        self._lock = threading.Lock()
        if s3 is not None:
            self._iam, self._sts = s3.admin_client("iam"), s3.admin_client("sts")
            self._admin_arn = self._sts.get_caller_identity()["Arn"]
        port = open_port("127.0.0.1")
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.url = f"http://127.0.0.1:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="unity-catalog", daemon=True
        )

    @classmethod
    def start(
        cls, s3: S3Server | None, token: str, lifetime: float = 3600.0, azure: AzuriteServer | None = None
    ) -> CatalogStandIn:
        """Serve in a thread of this process; vend credentials of ``s3``'s moto and of
        ``azure``'s Azurite (either may be None)."""
        catalog = cls(s3, token, lifetime, azure)
        catalog._thread.start()
        return catalog

    def stop(self) -> None:
        """Stop serving (the thread joined, :data:`JOIN_TIMEOUT` s at most), cancel the
        revocation timers and revoke every S3 credential still valid (an Azure SAS stays
        valid until its expiry)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(JOIN_TIMEOUT)
        with self._lock:
            timers, keys = list(self._timers.values()), list(self._roles)
        for timer in timers:
            timer.cancel()
        for key in keys:
            try:
                self.revoke(key)
            except (BotoCoreError, ClientError):  # moto already gone: nothing is valid any more
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def environment(self) -> dict:
        """What a process needs to reach this catalog as a Databricks workspace (a host not
        on Databricks is taken for an open-source Unity Catalog server)."""
        return {"DATABRICKS_HOST": self.url, "DATABRICKS_TOKEN": self.token}

    def add_table(
        self,
        full_name: str,
        location: str,
        *,
        table_type: str = "MANAGED",
        data_source_format: str = "DELTA",
        columns=None,
        properties: dict | None = None,
        row_filter: str | dict | None = None,
        masked=(),
    ) -> dict:
        """Register the table ``catalog.schema.name`` at ``location``; returns its
        ``TableInfo`` (with a new ``table_id``).

        ``columns``: ``(name, type_text[, nullable])`` tuples or ``ColumnInfo`` dicts;
        ``row_filter``: the filter function's name, or ``{"function_name",
        "input_column_names"}``; ``masked``: the masked columns' names, or a dict of them
        to their mask functions' names."""
        catalog, schema, name = _parts(full_name)
        if not isinstance(masked, dict):
            masked = {column: f"{catalog}.{schema}.mask_{column}" for column in masked}
        info = {
            "name": name,
            "catalog_name": catalog,
            "schema_name": schema,
            "full_name": f"{catalog}.{schema}.{name}",
            "table_type": table_type,
            "data_source_format": data_source_format,
            "storage_location": location.rstrip("/"),
            "table_id": str(uuid.uuid4()),
            "columns": [column_info(i, c, masked) for i, c in enumerate(columns or [])],
            "properties": dict(properties or {}),
            "owner": OWNER,
            "created_at": int(time.time() * 1000),
            "created_by": OWNER,
        }
        if row_filter is not None:
            if isinstance(row_filter, str):
                row_filter = {"function_name": row_filter, "input_column_names": []}
            info["row_filter"] = dict(row_filter)
        with self._lock:
            self._tables[info["full_name"].lower()] = info
        return json.loads(json.dumps(info))

    def grant_external_use(self, schema_full_name: str) -> None:
        """Grant ``EXTERNAL USE SCHEMA`` on ``catalog.schema``: its tables get credentials."""
        with self._lock:
            self._granted.add(schema_full_name.lower())

    def revoke(self, access_key_id: str) -> None:
        """Revoke a vended credential now (its timer's job at expiry): delete its role's
        policy, so moto refuses whatever is signed with it. Once per key."""
        with self._lock:
            role = self._roles.pop(access_key_id, None)
            timer = self._timers.pop(access_key_id, None)
        if timer is not None:
            timer.cancel()
        if role is None:
            return
        self._iam.delete_role_policy(RoleName=role, PolicyName="table")
        with self._lock:
            self.revoked.append(access_key_id)

    # the API

    def get_table(self, full_name: str) -> dict:
        with self._lock:
            info = self._tables.get(full_name.lower())
        if info is None:
            raise CatalogError(404, "TABLE_DOES_NOT_EXIST", f"Table '{full_name}' does not exist.")
        return info

    def vend(self, body) -> dict:
        """``TemporaryCredentials`` for ``body``'s table and operation, or the error."""
        if not isinstance(body, dict):
            raise CatalogError(400, "MALFORMED_REQUEST", "Invalid JSON given in the body of the request.")
        table_id, operation = body.get("table_id"), body.get("operation")
        if not table_id:
            raise CatalogError(400, "INVALID_PARAMETER_VALUE", "Missing required field: table_id")
        if operation not in OPERATIONS:
            raise CatalogError(
                400, "INVALID_PARAMETER_VALUE", f"Invalid operation: {operation!r} (expected READ or READ_WRITE)."
            )
        with self._lock:
            info = next((t for t in self._tables.values() if t["table_id"] == table_id), None)
            granted = info is not None and f"{info['catalog_name']}.{info['schema_name']}" in self._granted
        if info is None:
            raise CatalogError(404, "TABLE_DOES_NOT_EXIST", f"Table with id '{table_id}' does not exist.")
        if not self.external_access:
            raise CatalogError(
                403, "PERMISSION_DENIED", "External access is not enabled on metastore 'spark-dask-test-metastore'."
            )
        if not granted:
            schema = f"{info['catalog_name']}.{info['schema_name']}"
            raise CatalogError(
                403, "PERMISSION_DENIED", f"User does not have EXTERNAL USE SCHEMA on Schema '{schema}'."
            )
        if "row_filter" in info or any("mask" in c for c in info["columns"]):
            raise CatalogError(
                400,
                "INVALID_PARAMETER_VALUE",
                "Credential vending is not supported for tables with row filters or column masks.",
            )
        return {**self._credentials(info, operation), "url": info["storage_location"]}

    def _credentials(self, info: dict, operation: str) -> dict:
        """The credentials for the store of the table's location, with their expiry."""
        location = info["storage_location"]
        scheme = urlsplit(location).scheme
        if scheme == "s3" and self.s3 is not None:
            return self._aws(info, operation)
        if scheme in AZURE_SCHEMES and self.azure is not None:
            return self._azure(info, operation)
        if scheme == "gs":
            return self._gcp(info, operation)
        raise CatalogError(400, "INVALID_PARAMETER_VALUE", f"Cannot vend credentials for location '{location}'.")

    def _record(self, info: dict, operation: str, expiration: int, **credential) -> None:
        with self._lock:
            self.vended.append(
                {**credential, "expiration_time": expiration, "table": info["full_name"], "operation": operation}
            )

    def _azure(self, info: dict, operation: str) -> dict:
        """A service SAS for the location's container, expiring after ``lifetime``
        (whole seconds: a SAS's expiry has no fraction)."""
        container = azure_container(info["storage_location"])
        expiry = (datetime.now(timezone.utc) + timedelta(seconds=self.lifetime)).replace(microsecond=0)
        sas = self.azure.container_sas(expiry, write=operation == "READ_WRITE", container=container)
        expiration = int(expiry.timestamp() * 1000)
        self._record(info, operation, expiration, sas_token=sas)
        return {"azure_user_delegation_sas": {"sas_token": sas}, "expiration_time": expiration}

    def _gcp(self, info: dict, operation: str) -> dict:
        """A made-up OAuth access token (the emulator checks none)."""
        token = f"ya29.{uuid.uuid4().hex}"
        expiration = int((time.time() + self.lifetime) * 1000)
        self._record(info, operation, expiration, oauth_token=token)
        return {"gcp_oauth_token": {"oauth_token": token}, "expiration_time": expiration}

    def _aws(self, info: dict, operation: str) -> dict:
        """A role allowed ``read_policy``, assumed; its revocation timed for expiry."""
        role = f"uc-{uuid.uuid4().hex}"
        trust = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": self._admin_arn}, "Action": "sts:AssumeRole"}],
        }
        arn = self._iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        policy = read_policy(info["storage_location"], operation)
        self._iam.put_role_policy(RoleName=role, PolicyName="table", PolicyDocument=json.dumps(policy))
        lifetime = self.lifetime
        creds = self._sts.assume_role(RoleArn=arn, RoleSessionName="unity-catalog", DurationSeconds=900)["Credentials"]
        key = creds["AccessKeyId"]
        expiration = int((time.time() + lifetime) * 1000)
        timer = threading.Timer(lifetime, self._expire, (key,))
        timer.daemon = True
        with self._lock:
            self._roles[key] = role
            self._timers[key] = timer
        self._record(
            info,
            operation,
            expiration,
            access_key_id=key,
            secret_access_key=creds["SecretAccessKey"],  # for the tests' leak checks
            session_token=creds["SessionToken"],
        )
        timer.start()
        return {
            "aws_temp_credentials": {
                "access_key_id": key,
                "secret_access_key": creds["SecretAccessKey"],
                "session_token": creds["SessionToken"],
            },
            "expiration_time": expiration,
        }

    def _expire(self, key: str) -> None:
        try:
            self.revoke(key)
        except (BotoCoreError, ClientError):  # moto gone: nothing to revoke
            pass

    def answer(self, method: str, path: str, authorization: str | None, body) -> tuple[int, dict]:
        """The status and JSON body for a request (``path`` without its query)."""
        try:
            if not authorization or not authorization.startswith("Bearer "):
                raise CatalogError(
                    401, "UNAUTHENTICATED", "Credential was not sent or was of an unsupported type for this API."
                )
            if authorization.removeprefix("Bearer ").strip() != self.token:
                raise CatalogError(401, "UNAUTHENTICATED", "Invalid access token.")
            name = path.removeprefix(f"{API}/tables/")
            if method == "GET" and name != path and name and "/" not in name:
                return 200, self.get_table(unquote(name))
            if method == "POST" and path in VEND_PATHS:
                return 200, self.vend(body)
            raise CatalogError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{method} {path}'")
        except CatalogError as e:
            return e.status, e.body()


def azure_container(location: str) -> str:
    """The container of an Azure location on Azurite: ``abfss://container@account.dfs.core.windows.net/path``
    (Databricks' form; the account must be Azurite's) or ``abfs://container/path``."""
    netloc = urlsplit(location).netloc
    if "@" not in netloc:
        return netloc
    container, host = netloc.split("@", 1)
    if host.split(".", 1)[0] != AZURE_ACCOUNT:
        raise CatalogError(400, "INVALID_PARAMETER_VALUE", f"Cannot vend credentials for location '{location}'.")
    return container


def _parts(full_name: str) -> tuple[str, str, str]:
    parts = full_name.split(".")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"a table's full name is catalog.schema.table, not {full_name!r}")
    return parts[0], parts[1], parts[2]


def _handler(catalog: CatalogStandIn) -> type:
    """The request handler class for ``catalog``'s server."""

    class Handler(BaseHTTPRequestHandler):
        def _serve(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            with catalog._lock:
                catalog.calls.append((self.command, self.path, body))
                catalog.threads.add(threading.current_thread().name)
            try:
                status, answer = catalog.answer(
                    self.command, urlsplit(self.path).path, self.headers.get("Authorization"), body
                )
            except Exception as e:  # noqa: BLE001 - a bug or moto failing: a 500 that says so
                status, answer = 500, CatalogError(500, "INTERNAL_ERROR", f"{type(e).__name__}: {e}").body()
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def log_message(self, format, *args):  # no request lines on stderr
            pass

    return Handler


__all__ = ["CatalogError", "CatalogStandIn", "azure_container", "column_info", "read_policy"]
