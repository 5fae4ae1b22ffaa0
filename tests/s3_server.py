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
    """Load botocore's service files once per process, not once per client.

    Beam's S3 filesystem makes a new boto3 session and client for each FileSystems call, and
    each new session parses botocore's endpoint and service JSON again: about 0.5 s of CPU a
    call, 26 of a 39 s run of a 3-document job (measured with cProfile). The tests share one
    loader so that a run costs what its own work does."""
    import botocore.loaders
    import botocore.session

    if getattr(botocore.session.create_loader, "shared", False):
        return
    create = functools.lru_cache(maxsize=None)(botocore.loaders.create_loader)
    create.shared = True  # type: ignore[attr-defined]
    botocore.session.create_loader = create


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
    """moto's S3 server in a thread of this process, with the bucket `BUCKET` made."""
    from moto.server import ThreadedMotoServer

    share_botocore_data()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        found = S3Server(f"http://{host}:{port}")
        found.client().create_bucket(Bucket=BUCKET)
        yield found
    finally:
        server.stop()
