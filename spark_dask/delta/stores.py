"""Where a Delta table's files are read from: the caller's fsspec storage options kept
out of sight, and a store that refuses the reader turned into one line.

The options (an access key, a SAS token, a service account's key) travel in the read's
plan to the Dask workers; their repr, which Dask and distributed print (a failed task's
arguments in the worker's log, an expression's repr), shows each credential as ``***``.
Credentials the workers find in their own environment (``spark_dask.start(env=...)``,
an instance profile, a managed identity) never travel at all.

A worker or driver that the store refuses (a wrong or missing key) stops at the first
request with a :class:`~spark_dask.errors.DeltaError` that names the table and the way
out, instead of the backend's traceback. Shipped by value to the workers with the file
reader.
"""

from __future__ import annotations

import contextlib
import socket

from spark_dask.delta import files
from spark_dask.errors import DeltaError

# Option names (any case, any part of the name) whose values are credentials: s3fs
# (key, secret, token), botocore (aws_secret_access_key, aws_session_token), adlfs
# (account_key, sas_token, client_secret, connection_string), gcsfs (token), ...
SECRET_PARTS = ("secret", "token", "password", "passwd", "key", "credential", "connection_string", "sas", "signature")
HIDDEN = "***"

# What the backends raise when the store refuses a reader's identity or finds none
# (by class name: botocore, azure-core and google-auth need not be installed here).
DENIED = frozenset(
    {
        "NoCredentialsError",  # botocore: no key anywhere
        "PartialCredentialsError",
        "CredentialRetrievalError",
        "ClientAuthenticationError",  # azure-core
        "DefaultCredentialsError",  # google-auth
        "RefreshError",
    }
)


def is_secret(name) -> bool:
    """Whether an option's name says its value is a credential.

    >>> [is_secret(n) for n in ("key", "secret", "endpoint_url", "account_name", "sas_token", "anon")]
    [True, True, False, False, True, False]
    """
    lowered = str(name).lower()
    return any(part in lowered for part in SECRET_PARTS)


def redacted(options):
    """``options`` with every credential's value shown as ``***`` (nested dicts too).

    >>> redacted({"key": "AKIA", "secret": "s", "client_kwargs": {"region_name": "x", "aws_session_token": "t"}})
    {'key': '***', 'secret': '***', 'client_kwargs': {'region_name': 'x', 'aws_session_token': '***'}}
    """
    if not isinstance(options, dict):
        return options
    return {k: HIDDEN if is_secret(k) and v is not None else redacted(v) for k, v in options.items()}


class StorageOptions(dict):
    """fsspec storage options whose repr hides the credentials; otherwise the dict.

    >>> StorageOptions({"key": "AKIA", "secret": "s", "endpoint_url": "http://h:1"})
    {'key': '***', 'secret': '***', 'endpoint_url': 'http://h:1'}
    >>> dict(StorageOptions({"secret": "s"}))["secret"]
    's'
    """

    def __repr__(self) -> str:
        return repr(redacted(dict(self)))

    __str__ = __repr__


def is_denied(error: BaseException) -> bool:
    """Whether ``error`` is the store refusing the reader (a 403, a missing or wrong key):
    azure-core raises a wrong Shared Key's 403 (``AuthorizationFailure``) as its
    ``HttpResponseError`` with ``status_code`` 403.

    >>> class HttpResponseError(Exception):
    ...     status_code = 403
    >>> is_denied(HttpResponseError("AuthorizationFailure")), is_denied(PermissionError()), is_denied(KeyError("k"))
    (True, True, False)
    """
    if isinstance(error, PermissionError) or type(error).__name__ in DENIED:
        return True
    http = any(c.__name__ == "HttpResponseError" for c in type(error).__mro__)
    return http and getattr(error, "status_code", None) in (401, 403)


def _reason(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:200]


@contextlib.contextmanager
def access(table: str, who: str):
    """Within: the store refusing ``who`` (``"the driver"``, ``"the Dask worker on
    HOST"``) is one :class:`DeltaError` line naming ``table`` and the fix."""
    try:
        yield
    except Exception as e:
        if not is_denied(e):
            raise
        raise DeltaError(
            f"spark-dask: {who} cannot read the Delta table {table}: the store refused it ({_reason(e)}). "
            "Give it credentials: read_delta(..., storage_options={...}) (they travel to the workers), or "
            "the workers' environment (spark_dask.start(env={...}), an instance profile)"
        ) from None


def read_file(task: dict, plan: dict):
    """:func:`spark_dask.delta.files.read_file` on a worker, a refusal made one line."""
    with access(plan["root"], f"the Dask worker on {socket.gethostname()}"):
        return files.read_file(task, plan)


__all__ = ["StorageOptions", "access", "is_denied", "is_secret", "read_file", "redacted"]
