"""A real S3 API server for the tests: moto's server mode (``python -m moto.server``) in a
process of its own on a free port of 127.0.0.1, AWS's authentication enforced on demand.

moto accepts any request until ``/moto-api/reset-auth`` sets how many more it lets
through unauthenticated (``0``: none); after that each request must be signed (SigV4)
with an access key of moto's IAM whose policy allows the action, as AWS does: an unknown
key gets ``InvalidAccessKeyId``, a wrong secret ``SignatureDoesNotMatch`` (both 403).
:meth:`S3Server.start` makes a user with an access key allowed ``s3:*`` and a bucket, and
an admin with a key allowed ``iam:*`` and ``sts:*`` too (for what stands in for a
service that vends credentials: tests/support/unity_catalog.py); :meth:`S3Server.authenticated`
turns the checks on for a block.

    with S3Server.start() as server:
        fs = server.filesystem()          # s3fs, with the user's key
        server.storage_options            # for read_delta(..., storage_options=...)
        server.spark_conf()               # s3a:// for Spark (hadoop-aws: benchmarks/delta.py)
"""

from __future__ import annotations

import contextlib
import json
import sys
import urllib.request
from dataclasses import dataclass, field

from tests.support.stores import Emulator, port_and_log, spawn

# botocore without credentials asks the EC2 instance metadata service (a link-local
# address) for them: never from a test
NO_METADATA = {"AWS_EC2_METADATA_DISABLED": "true"}
BUCKET = "spark-dask"
REGION = "us-east-1"
USER = "spark-dask-test"
ADMIN = "spark-dask-admin"


@dataclass
class S3Server(Emulator):
    """A running moto S3 server: its endpoint, the test user's key, the process."""

    name = "moto's S3 server"

    key: str = ""
    secret: str = ""
    bucket: str = BUCKET
    keys: dict = field(default_factory=dict)
    admin_key: str = ""
    admin_secret: str = ""

    @classmethod
    @contextlib.contextmanager
    def for_module(cls, tmp_path_factory, *modules: str):
        """A server for a test module, its log in a fresh temporary folder; skips (under
        CI: fails) without the test-core extra's moto and s3fs, or ``modules``."""
        from tests.support.extras import needs

        for module in ("s3fs", "moto", *modules):
            needs(module, "test-core")
        with cls.start(str(tmp_path_factory.mktemp("moto"))) as server:
            yield server

    @classmethod
    def start(cls, log_dir: str | None = None) -> S3Server:
        """Start the server, make the user, its key and the bucket, enforce auth."""
        port, log = port_and_log(log_dir, "moto")
        proc = spawn([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], log)
        return cls(f"http://127.0.0.1:{port}", proc, log).ready()

    def setup(self) -> None:
        """Make the user, its key and the bucket, and the admin and its key."""
        self.key, self.secret = _user_with_key(self.endpoint)
        self.admin_key, self.admin_secret = _user(self.endpoint, ADMIN, ["s3:*", "iam:*", "sts:*"])

    @contextlib.contextmanager
    def authenticated(self):
        """Within: every request must be signed with a key of moto's IAM (an unknown key,
        a wrong secret or none is refused with 403, as by AWS). Not around Spark's
        ``s3a://``: Hadoop 3.3's AWS SDK v1 signs the ``User-Agent`` header, which moto's
        verifier (botocore's SigV4, which never signs it) leaves out, so moto refuses
        every s3a request then."""
        _post(f"{self.endpoint}/moto-api/reset-auth", b"0")
        try:
            yield self
        finally:
            _post(f"{self.endpoint}/moto-api/reset-auth", b"inf")

    def new_key(self) -> tuple[str, str]:
        """Another access key of the test user (made while authentication is off)."""
        key = _iam(self.endpoint).create_access_key(UserName=USER)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    def revoke(self, key: str) -> None:
        """Delete an access key (while authentication is off): requests signed with it are
        refused from then on (``InvalidAccessKeyId``)."""
        _iam(self.endpoint).delete_access_key(UserName=USER, AccessKeyId=key)

    def admin_client(self, service: str, timeout: float = 10):
        """A boto3 client signed with the admin's key (allowed ``s3:*``, ``iam:*`` and
        ``sts:*``: it works with authentication on), ``timeout`` s a call, no retries."""
        import boto3
        from botocore.config import Config

        config = Config(connect_timeout=timeout, read_timeout=timeout, retries={"total_max_attempts": 1})
        return boto3.session.Session().client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self.admin_key,
            aws_secret_access_key=self.admin_secret,
            config=config,
        )

    @property
    def storage_options(self) -> dict:
        """fsspec (s3fs) options with the user's key and this endpoint."""
        return {"key": self.key, "secret": self.secret, **self.endpoint_options}

    @property
    def endpoint_options(self) -> dict:
        """The endpoint and region only: credentials from the environment."""
        return {"endpoint_url": self.endpoint, "client_kwargs": {"region_name": REGION}}

    def environment(self) -> dict:
        """The user's key as AWS's variables (what an instance profile gives a process)."""
        return {"AWS_ACCESS_KEY_ID": self.key, "AWS_SECRET_ACCESS_KEY": self.secret, "AWS_DEFAULT_REGION": REGION}

    def filesystem(self, **options):
        """A fresh s3fs filesystem on the server (not fsspec's cached instance)."""
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **{**self.storage_options, **options})

    def url(self, *parts: str) -> str:
        return "s3://" + "/".join([self.bucket, *parts])

    def spark_conf(self) -> dict:
        """Confs for Spark's ``s3a://`` (hadoop-aws) on this server, with the user's key."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": REGION,
            "spark.hadoop.fs.s3a.signing-algorithm": "AWSS3V4SignerType",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": self.key,
            "spark.hadoop.fs.s3a.secret.key": self.secret,
            "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            # a wrong key fails the first call instead of after Hadoop's retries
            "spark.hadoop.fs.s3a.attempts.maximum": "1",
            "spark.hadoop.fs.s3a.retry.limit": "1",
        }


def _post(url: str, body: bytes, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(
        urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "text/plain"}), timeout=timeout
    ) as r:
        return r.read()


def _client(service: str, endpoint: str):
    """A boto3 client for moto's setup calls (made while moto lets every request through)."""
    import boto3

    return boto3.client(
        service, endpoint_url=endpoint, region_name=REGION, aws_access_key_id="setup", aws_secret_access_key="setup"
    )


def _iam(endpoint: str):
    return _client("iam", endpoint)


def _user(endpoint: str, name: str, actions: list[str]) -> tuple[str, str]:
    """An IAM user ``name`` allowed ``actions`` on every resource, and its access key."""
    iam = _iam(endpoint)
    iam.create_user(UserName=name)
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
    iam.put_user_policy(UserName=name, PolicyName="allowed", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def _user_with_key(endpoint: str) -> tuple[str, str]:
    """An IAM user allowed ``s3:*`` and its access key, and the bucket."""
    key = _user(endpoint, USER, ["s3:*"])
    _client("s3", endpoint).create_bucket(Bucket=BUCKET)
    return key


__all__ = ["ADMIN", "BUCKET", "REGION", "USER", "S3Server"]
