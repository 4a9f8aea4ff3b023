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
import time

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
    """Whether ``error`` is the store refusing the reader (a 401 or 403: a missing, wrong
    or expired credential). azure-core raises a wrong Shared Key's or an expired SAS's 403
    (``AuthorizationFailure``) as its ``HttpResponseError`` with ``status_code`` 403;
    gcsfs raises a 401 (an expired or wrong token) as its ``HttpError`` with ``code``
    401, and a 403 as a plain ``OSError("Forbidden: ...")``.

    >>> class HttpResponseError(Exception):
    ...     status_code = 403
    >>> is_denied(HttpResponseError("AuthorizationFailure")), is_denied(PermissionError()), is_denied(KeyError("k"))
    (True, True, False)
    >>> class HttpError(Exception):
    ...     code = 401
    >>> is_denied(HttpError("Invalid Credentials, 401")), is_denied(OSError("Forbidden: b/t/x")), is_denied(OSError("x"))
    (True, True, False)
    """
    if isinstance(error, PermissionError) or type(error).__name__ in DENIED:
        return True
    if type(error) is OSError and str(error).startswith("Forbidden: "):  # gcsfs's 403
        return True
    names = {c.__name__ for c in type(error).__mro__}
    if "HttpResponseError" in names:  # azure-core
        return getattr(error, "status_code", None) in (401, 403)
    return "HttpError" in names and getattr(error, "code", None) in (401, 403)  # gcsfs


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


def vended_options(base: dict, vended: dict) -> StorageOptions:
    """fsspec options for credentials a catalog vended (:mod:`spark_dask.delta.vending`
    keeps them as plain text: ``aws``, ``azure_sas`` or ``gcp_token``) over the caller's
    ``base`` options (an endpoint, a region).

    >>> vended_options({"endpoint_url": "http://h:1"}, {"aws": ["AK", "S", "T"]})
    {'endpoint_url': 'http://h:1', 'key': '***', 'secret': '***', 'token': '***'}
    >>> vended_options({}, {"azure_sas": "sv=1&sig=x", "account_name": "acct"})
    {'account_name': 'acct', 'sas_token': '***'}
    """
    options = dict(base)
    if "aws" in vended:
        key, secret, token = vended["aws"]
        options.update(key=key, secret=secret, token=token)
    if "azure_sas" in vended:
        options = azure_options(options, vended["azure_sas"], vended.get("account_name"))
    if "gcp_token" in vended:
        options["token"] = gcp_credentials(vended["gcp_token"])
    return StorageOptions(options)


# adlfs options (and connection string parts) that adlfs prefers to a SAS: dropped where one is vended
AZURE_CREDENTIALS = ("account_key", "credential")
CONNECTION_CREDENTIALS = ("ACCOUNTKEY", "SHAREDACCESSSIGNATURE")


def azure_options(base: dict, sas: str, account: str | None) -> dict:
    """adlfs options that read with the SAS ``sas``, over ``base``: the storage account
    the table's location names (``container@account.dfs.core.windows.net``), else
    ``base``'s ``account_name`` (a location ``abfs://container/path`` names none); the SAS
    as ``sas_token``, or inside ``base``'s ``connection_string`` where it has one (an
    endpoint of its own: Azurite, a private endpoint), since adlfs then uses that string
    alone. A key or credential of ``base`` is dropped: adlfs would prefer it to the SAS.

    >>> azure_options({"account_key": "k"}, "sv=1&sig=x", "acct")
    {'account_name': 'acct', 'sas_token': 'sv=1&sig=x'}
    >>> azure_options({"account_name": "dev", "connection_string": "BlobEndpoint=http://h:1/dev;AccountKey=k;"}, "?sv=1", None)
    {'account_name': 'dev', 'connection_string': 'BlobEndpoint=http://h:1/dev;SharedAccessSignature=sv=1'}
    """
    options = {k: v for k, v in base.items() if k not in AZURE_CREDENTIALS}
    if account:
        options["account_name"] = account
    sas = sas.lstrip("?")
    connection = options.get("connection_string")
    if not connection:
        options["sas_token"] = sas
        return options
    parts = [p for p in connection.split(";") if p and p.split("=", 1)[0].strip().upper() not in CONNECTION_CREDENTIALS]
    options["connection_string"] = ";".join([*parts, f"SharedAccessSignature={sas}"])
    return options


def gcp_credentials(token: str):
    """google-auth ``Credentials`` for an OAuth access token alone, for gcsfs's ``token``.

    With no refresh token and no expiry, gcsfs uses them as they are and never asks
    Google to refresh them: once they expire the store refuses them (a 401), and the
    reader takes the renewed ones. Their repr is a digest of the token, not the object's
    address: fsspec keys its instance cache by the options' repr, so every file read
    with the same token shares one gcsfs filesystem instead of making (and keeping) its
    own."""
    import hashlib

    from google.oauth2.credentials import Credentials  # gcsfs's own dependency

    digest = hashlib.sha256(token.encode()).hexdigest()[:16]

    class VendedToken(Credentials):
        def __repr__(self) -> str:
            return f"VendedToken(sha256:{digest})"

    return VendedToken(token)


class Lease:
    """Credentials a catalog vended for one table, found by name: the read's plan holds
    the lease, never the credentials. They are in a ``distributed.Variable`` that the
    driver renews ahead of their expiry (:class:`spark_dask.delta.vending.Renewer`); a
    worker asks it for the current ones at each file (one message to the scheduler).
    Pickled, a lease is its name and the caller's base options only."""

    WAIT = 60.0  # seconds a worker waits for credentials renewed after the ones it held expired
    POLL = 0.5

    def __init__(self, name: str, base: dict):
        self.name = name
        self.base = StorageOptions(base)

    def __reduce__(self):
        return (Lease, (self.name, dict(self.base)))

    def __dask_tokenize__(self):
        return ("spark-dask-lease", self.name)

    def __repr__(self) -> str:
        return f"Lease({self.name!r}, {self.base!r})"

    def current(self) -> dict:
        """The credentials now published: ``{"vended": {...}, "expires": epoch s}``; none
        on this scheduler (a frame computed on another cluster than it was read on, or
        after the driver that renewed them went away) is one line."""
        from distributed import Variable, get_client

        try:
            return Variable(self.name, client=get_client()).get(timeout=self.WAIT)
        except TimeoutError:
            raise DeltaError(
                "spark-dask: the credentials Unity Catalog vended for this read are not on this Dask "
                f"scheduler ({self.WAIT:g} s waited): compute the DataFrame on the cluster it was read on, "
                "while the process that read it runs, or read the table again"
            ) from None

    def renewed(self, held: dict) -> dict | None:
        """Credentials other than ``held`` once the driver renewed them, where ``held``
        has expired (None where it has not: a refusal that is no expiry)."""
        if time.time() < held["expires"] - 1:
            return None
        deadline = time.monotonic() + self.WAIT
        while time.monotonic() < deadline:
            now = self.current()
            if now["vended"] != held["vended"]:
                return now
            time.sleep(self.POLL)
        return None

    def read(self, task: dict, plan: dict, who: str):
        """:func:`spark_dask.delta.files.read_file` with the current credentials; where the
        store refuses them because they expired, again with the renewed ones."""
        held = self.current()
        try:
            return self.read_with(held, task, plan)
        except Exception as e:
            if not is_denied(e):
                raise
            fresh = self.renewed(held)
            if fresh is None:
                with access(plan["root"], who):
                    raise
        with access(plan["root"], who):
            return self.read_with(fresh, task, plan)

    def read_with(self, published: dict, task: dict, plan: dict):
        """The file read with the credentials ``published`` (:meth:`current`'s)."""
        return files.read_file(task, {**plan, "storage_options": vended_options(self.base, published["vended"])})


def read_file(task: dict, plan: dict):
    """:func:`spark_dask.delta.files.read_file` on a worker, a refusal made one line."""
    who = f"the Dask worker on {socket.gethostname()}"
    options = plan["storage_options"]
    if not isinstance(options, dict):  # a Lease (by value, its class is rebuilt on the worker)
        return options.read(task, plan, who)
    with access(plan["root"], who):
        return files.read_file(task, plan)


__all__ = [
    "Lease",
    "StorageOptions",
    "access",
    "azure_options",
    "gcp_credentials",
    "is_denied",
    "is_secret",
    "read_file",
    "redacted",
    "vended_options",
]
