"""A Unity Catalog table read by name on the Dask workers, with the credentials the
catalog vends (:mod:`.unity`), renewed for as long as a DataFrame read from it lives.

:func:`open_table` asks the catalog for the table (its location, its governance) and for
read credentials; the driver replays the log with them, and the workers get them by
name through a :class:`~spark_dask.delta.stores.Lease` (a ``distributed.Variable`` on
the scheduler), never in the graph. A :class:`Renewer` thread asks the catalog again
ahead of each expiry and publishes the new credentials; it ends when no DataFrame holds
the lease any more, when the client closes, or with the process. A worker that still
meets an expired credential waits for the renewed one (:meth:`Lease.renewed`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from urllib.parse import urlsplit

from spark_dask.delta import stores, unity

logger = logging.getLogger("spark_dask")

CHECK_EVERY = 30.0  # seconds between the renewer's looks at its client, at most
RETRY_AFTER = 5.0  # seconds before the renewer asks again after the catalog failed it
EARLY = 0.25  # renew when this share of the credentials' life is left (at most MAX_EARLY s)
MAX_EARLY = 300.0


@dataclass
class Vended:
    """A table the catalog vended credentials for: where its files are, the options the
    driver reads its log with, and the lease the workers read its files with."""

    location: str
    options: stores.StorageOptions
    lease: stores.Lease


def plain_credentials(answer: dict) -> tuple[dict, float]:
    """The catalog's ``TemporaryCredentials`` as the plain text a lease publishes
    (:func:`~spark_dask.delta.stores.vended_options` reads it), and the expiry (epoch s).

    >>> plain_credentials({"aws_temp_credentials": {"access_key_id": "A", "secret_access_key": "S",
    ...     "session_token": "T"}, "expiration_time": 1700000000000, "url": "s3://b/t"})
    ({'aws': ['A', 'S', 'T']}, 1700000000.0)
    >>> plain_credentials({"azure_user_delegation_sas": {"sas_token": "sv=1"}, "expiration_time": 0,
    ...     "url": "abfss://c@acct.dfs.core.windows.net/t"})
    ({'azure_sas': 'sv=1', 'account_name': 'acct'}, 0.0)
    >>> plain_credentials({"azure_user_delegation_sas": {"sas_token": "sv=1"}, "url": "abfs://c/t@2024"})
    ({'azure_sas': 'sv=1'}, 0.0)
    """
    expires = float(answer.get("expiration_time") or 0) / 1000
    if answer.get("aws_temp_credentials"):
        aws = answer["aws_temp_credentials"]
        return {"aws": [aws.get("access_key_id"), aws.get("secret_access_key"), aws.get("session_token")]}, expires
    if answer.get("azure_user_delegation_sas"):
        vended = {"azure_sas": answer["azure_user_delegation_sas"].get("sas_token")}
        account = azure_account(answer.get("url") or "")
        return ({**vended, "account_name": account} if account else vended), expires
    if answer.get("gcp_oauth_token"):
        return {"gcp_token": answer["gcp_oauth_token"].get("oauth_token")}, expires
    raise unity.refusal("the catalog vended no credential this reader knows (AWS, Azure SAS or a GCP token)")


def azure_account(url: str) -> str:
    """The storage account an Azure location names, or "" where it names none (then the
    caller's ``account_name`` option is the account).

    >>> azure_account("abfss://c@acct.dfs.core.windows.net/t"), azure_account("abfs://c/t"), azure_account("abfs://c/a@b.c")
    ('acct', '', '')
    """
    netloc = urlsplit(url).netloc
    return netloc.split("@", 1)[1].split(".", 1)[0] if "@" in netloc else ""


def renew_in(expires: float, vended_at: float, now: float) -> float:
    """Seconds until the renewer asks again: when :data:`EARLY` of the credentials' life
    is left (at most :data:`MAX_EARLY` s before the expiry), never less than half a second.

    >>> renew_in(expires=3600, vended_at=0, now=0)
    3300.0
    >>> renew_in(expires=8, vended_at=0, now=0)
    6.0
    >>> renew_in(expires=8, vended_at=0, now=9)
    0.5
    """
    early = min(MAX_EARLY, EARLY * max(0.0, expires - vended_at))
    return max(0.5, expires - early - now)


class Renewer:
    """Publishes a table's credentials under a lease's name, and again ahead of each
    expiry, on a thread of its own until :meth:`stop` (or its client closes)."""

    def __init__(self, catalog: unity.Catalog, info: dict, full_name: str, client, name: str):
        self.catalog, self.info, self.full_name, self.client, self.name = catalog, info, full_name, client, name
        self.stopped = threading.Event()
        self.vended_at = self.expires = 0.0
        self.thread = threading.Thread(target=self.run, name=f"spark-dask-renew-{full_name}", daemon=True)

    def vend(self) -> dict:
        """Ask the catalog for credentials and publish them; returns them."""
        from distributed import Variable

        answer = self.catalog.vend(self.info["table_id"], self.full_name)
        vended, expires = plain_credentials(answer)
        Variable(self.name, client=self.client).set({"vended": vended, "expires": expires})
        self.vended_at, self.expires = time.time(), expires
        return vended

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()

    def due_in(self) -> float:
        """Seconds until the next renewal (:func:`renew_in`; 0.5 once due)."""
        return renew_in(self.expires, self.vended_at, time.time())

    def run(self) -> None:
        wait = self.due_in()
        while not self.stopped.wait(min(wait, CHECK_EVERY)):  # wakes at least to look at the client
            if self.client.status in ("closing", "closed"):
                return
            if self.due_in() <= 0.5:
                try:
                    self.vend()
                except Exception as e:  # noqa: BLE001 - kept trying: the catalog may answer again
                    logger.warning(
                        "spark-dask: renewing the credentials for %s failed (%s), trying again", self.full_name, e
                    )
                    wait = RETRY_AFTER
                    continue
            wait = self.due_in()
        self._forget()

    def _forget(self) -> None:
        from distributed import Variable

        try:
            if self.client.status == "running":
                Variable(self.name, client=self.client).delete()
        except Exception:  # noqa: BLE001 - the scheduler may be gone with its client
            pass


def open_table(catalog: unity.Catalog, full_name: str, base_options: dict, client) -> Vended:
    """The table ``full_name`` for the file reader: its ``TableInfo`` checked
    (:func:`unity.spark_only`), read credentials vended and published, a renewer
    started. :func:`unity.refusal` (a :class:`~spark_dask.DeltaError`) where the
    catalog refuses or the table must go through Spark."""
    info = catalog.table(full_name)
    why = unity.spark_only(info)
    if why:
        raise unity.refusal(why)
    name = f"spark-dask-vended-{uuid.uuid4().hex}"
    renewer = Renewer(catalog, info, full_name, client, name)
    vended = renewer.vend()
    lease = stores.Lease(name, base_options)
    weakref.finalize(lease, renewer.stop)  # no DataFrame holds the lease: no more renewals
    renewer.start()
    location = info["storage_location"].rstrip("/")
    return Vended(location, stores.vended_options(base_options, vended), lease)


__all__ = ["CHECK_EVERY", "Renewer", "Vended", "azure_account", "open_table", "plain_credentials", "renew_in"]
