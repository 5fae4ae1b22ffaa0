"""An S3 server for the tests: moto's, on a free local port, and the Beam flags that point the
job at it. Only the tests use it (moto is a dev dependency)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

BUCKET = "corpus-test"
KEYS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
REGION = "us-east-1"


def share_botocore_data() -> None:
    """One boto3 client per S3 endpoint and keys in this process, not one per call.

    Beam's S3 filesystem makes a new boto3 session and client for each FileSystems call
    (`apache_beam.io.aws.clients.s3.boto3_client.Client`): each new session parses botocore's
    endpoint and service JSON again, about 0.5 s of CPU a call (26 of a 39 s run of a
    3-document job, by cProfile), and even with that data loaded once a session and client
    cost about 30 ms, 96 times in a rebuild of 3 documents. The tests share the loader and
    the clients (boto3's clients are thread-safe), so that a run costs what its own work does;
    a real run on S3 still pays it (docs/decisions.md)."""
    import threading

    import botocore.loaders
    import botocore.session
    from apache_beam.io.aws.clients.s3 import boto3_client

    if getattr(botocore.session.create_loader, "shared", False):
        return
    create = functools.lru_cache(maxsize=None)(botocore.loaders.create_loader)
    create.shared = True  # type: ignore[attr-defined]
    botocore.session.create_loader = create

    real_boto3 = boto3_client.boto3
    clients: dict[tuple, Any] = {}
    lock = threading.Lock()

    class SharedSession:
        """What boto3_client.Client asks of `boto3.session.Session()`: a client, here the
        one made before with the same arguments."""

        def client(self, **kwargs: Any) -> Any:
            key = tuple(sorted((k, repr(v)) for k, v in kwargs.items()))
            with lock:
                if key not in clients:
                    clients[key] = real_boto3.session.Session().client(**kwargs)
                return clients[key]

    class Boto3:  # stands in for the module in boto3_client's namespace
        class session:  # the module's attribute name
            Session = SharedSession

    boto3_client.boto3 = Boto3


@dataclass(frozen=True)
class S3Server:
    url: str

    @property
    def flags(self) -> list[str]:
        """Beam's flags that send the job's s3:// reads and writes to this server."""
        return [
            f"--s3_endpoint_url={self.url}",
            f"--s3_access_key_id={KEYS['aws_access_key_id']}",
            f"--s3_secret_access_key={KEYS['aws_secret_access_key']}",
            f"--s3_region_name={REGION}",
        ]

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.url, region_name=REGION, **KEYS)

    def objects(self, prefix: str = "") -> dict[str, bytes]:
        """{key: bytes} of every object under `prefix` in the test bucket."""
        client = self.client()
        keys = [
            o["Key"]
            for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=BUCKET, Prefix=prefix
            )
            for o in page.get("Contents", [])
        ]
        return {k: client.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys}


@contextmanager
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server in a thread of this process, with the bucket `BUCKET` made, empty.

    moto keeps its buckets in this process's memory, not in the server: without a reset, a
    test's bucket held what an earlier test of the same pytest worker wrote there
    (tests/test_pointer.py's `out/CURRENT` in tests/e2e/test_crash_object_store.py's bucket,
    when both files fell to one worker). The server is reset through moto's own API
    (`POST /moto-api/reset`) before the bucket is made."""
    import urllib.request

    from moto.server import ThreadedMotoServer

    share_botocore_data()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        found = S3Server(f"http://{host}:{port}")
        reset = urllib.request.Request(f"{found.url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(reset, timeout=30) as response:
            response.read()
        found.client().create_bucket(Bucket=BUCKET)
        yield found
    finally:
        server.stop()
