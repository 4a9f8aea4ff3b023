"""The Unity Catalog stand-in (tests/support/unity_catalog.py) that ``read_delta``'s
catalog tests run against: its answers and error bodies, bearer auth, and vended
credentials that moto (tests/support/s3.py) takes for the table's prefix only, and
refuses once they expire or the stand-in stops."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from tests.support.extras import needs
from tests.support.s3 import S3Server

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(300)]

TOKEN = "dapi-standin-token"
TABLE = "spark_catalog.sales.orders"
VEND = "/api/2.1/unity-catalog/temporary-table-credentials"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    needs("s3fs", "test-core")
    needs("moto", "test-core")
    with S3Server.start(str(tmp_path_factory.mktemp("moto"))) as s:
        fs = s.filesystem()
        fs.pipe(f"{s.bucket}/uc/orders/part-0.parquet", b"orders")
        fs.pipe(f"{s.bucket}/uc/other/part-0.parquet", b"other")
        yield s


@pytest.fixture
def catalog(server):
    from tests.support.unity_catalog import CatalogStandIn

    with CatalogStandIn.start(server, TOKEN) as c:
        yield c


def call(catalog, method: str, path: str, body=None, token: str | None = TOKEN) -> tuple[int, dict]:
    """The status and JSON body of a request to the stand-in."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(catalog.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def assert_error(answer: tuple[int, dict], status: int, code: str, words: str) -> None:
    got_status, body = answer
    assert got_status == status, answer
    assert body["error_code"] == code and words in body["message"], body
    (detail,) = body["details"]
    assert detail == {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": code,
        "domain": "unity-catalog.databricks.com",
        "metadata": {},
    }, body


def reader(server, answer: dict):
    """An s3fs filesystem with the vended credentials of ``answer``."""
    creds = answer["aws_temp_credentials"]
    return server.filesystem(
        key=creds["access_key_id"], secret=creds["secret_access_key"], token=creds["session_token"]
    )


def test_table_info_and_errors(server, catalog):
    info = catalog.add_table(
        TABLE, server.url("uc", "orders"), columns=[("id", "bigint", False), ("amount", "decimal(10,2)")]
    )
    status, got = call(catalog, "GET", f"/api/2.1/unity-catalog/tables/{TABLE}")
    assert status == 200 and got == info, got
    assert got["storage_location"] == "s3://spark-dask/uc/orders" and got["data_source_format"] == "DELTA"
    assert [(c["name"], c["type_name"], c["position"], c["nullable"]) for c in got["columns"]] == [
        ("id", "LONG", 0, False),
        ("amount", "DECIMAL", 1, True),
    ]

    assert_error(call(catalog, "GET", f"/api/2.1/unity-catalog/tables/{TABLE}", token=None), 401, "UNAUTHENTICATED", "")
    assert_error(call(catalog, "POST", VEND, {}, token="wrong"), 401, "UNAUTHENTICATED", "Invalid access token")
    assert_error(
        call(catalog, "GET", "/api/2.1/unity-catalog/tables/spark_catalog.sales.nope"),
        404,
        "TABLE_DOES_NOT_EXIST",
        "Table 'spark_catalog.sales.nope' does not exist.",
    )
    assert_error(call(catalog, "GET", "/api/2.1/unity-catalog/catalogs"), 404, "ENDPOINT_NOT_FOUND", "")
    read = {"table_id": info["table_id"], "operation": "READ"}
    assert_error(call(catalog, "POST", VEND, {**read, "table_id": "0"}), 404, "TABLE_DOES_NOT_EXIST", "'0'")
    assert_error(call(catalog, "POST", VEND, {**read, "operation": "WRITE"}), 400, "INVALID_PARAMETER_VALUE", "WRITE")
    assert_error(
        call(catalog, "POST", VEND, read),
        403,
        "PERMISSION_DENIED",
        "User does not have EXTERNAL USE SCHEMA on Schema 'spark_catalog.sales'.",
    )
    catalog.grant_external_use("spark_catalog.sales")
    catalog.external_access = False
    assert_error(call(catalog, "POST", VEND, read), 403, "PERMISSION_DENIED", "External access is not enabled")
    catalog.external_access = True

    masked = catalog.add_table(
        "spark_catalog.sales.people",
        server.url("uc", "people"),
        columns=[("ssn", "string")],
        masked=["ssn"],
        row_filter="spark_catalog.sales.eu_only",
    )
    _, got = call(catalog, "GET", "/api/2.1/unity-catalog/tables/spark_catalog.sales.people")
    assert got["columns"][0]["mask"] == {"function_name": "spark_catalog.sales.mask_ssn", "using_column_names": []}
    assert got["row_filter"] == {"function_name": "spark_catalog.sales.eu_only", "input_column_names": []}
    assert_error(
        call(catalog, "POST", VEND, {"table_id": masked["table_id"], "operation": "READ"}),
        400,
        "INVALID_PARAMETER_VALUE",
        "row filters or column masks",
    )
    assert not catalog.vended
    assert TOKEN not in repr(catalog.calls) and ("POST", VEND, read) in catalog.calls
    assert catalog.environment() == {"DATABRICKS_HOST": catalog.url, "DATABRICKS_TOKEN": TOKEN}


def test_vended_credentials_are_scoped_and_expire(server, catalog):
    info = catalog.add_table(TABLE, server.url("uc", "orders"))
    catalog.grant_external_use("spark_catalog.sales")
    read = {"table_id": info["table_id"], "operation": "READ"}
    status, long_lived = call(catalog, "POST", "/api/2.0/unity-catalog/temporary-table-credentials", read)
    assert status == 200 and long_lived["url"] == "s3://spark-dask/uc/orders", long_lived
    catalog.lifetime = 2.0
    status, answer = call(catalog, "POST", VEND, read)
    assert status == 200, answer
    key = answer["aws_temp_credentials"]["access_key_id"]
    assert answer["expiration_time"] == catalog.vended[-1]["expiration_time"] <= time.time() * 1000 + 2000

    with server.authenticated():
        fs = reader(server, answer)
        assert fs.cat(f"{server.bucket}/uc/orders/part-0.parquet") == b"orders"
        assert fs.ls(f"{server.bucket}/uc/orders") == [f"{server.bucket}/uc/orders/part-0.parquet"]
        with pytest.raises(PermissionError):  # another prefix of the bucket
            fs.cat(f"{server.bucket}/uc/other/part-0.parquet")
        with pytest.raises(PermissionError):  # READ does not write
            fs.pipe(f"{server.bucket}/uc/orders/new.parquet", b"x")

        deadline = time.monotonic() + 30
        while key not in catalog.revoked and time.monotonic() < deadline:
            time.sleep(0.05)
        assert key in catalog.revoked and time.time() * 1000 >= answer["expiration_time"], catalog.revoked
        with pytest.raises(PermissionError):
            reader(server, answer).cat(f"{server.bucket}/uc/orders/part-0.parquet")
        # the credential vended before, for an hour, still reads; the test user's key too
        assert reader(server, long_lived).cat(f"{server.bucket}/uc/orders/part-0.parquet") == b"orders"
        assert server.filesystem().cat(f"{server.bucket}/uc/other/part-0.parquet") == b"other"

    catalog.stop()  # revokes what is still valid
    assert catalog.revoked == [key, long_lived["aws_temp_credentials"]["access_key_id"]]
    with server.authenticated(), pytest.raises(PermissionError):
        reader(server, long_lived).cat(f"{server.bucket}/uc/orders/part-0.parquet")
