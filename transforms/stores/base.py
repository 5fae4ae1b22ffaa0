"""What `corpus-chunker load` needs of a vector store, and the columns every store holds.

A store holds one table of chunk rows (STORE_COLUMNS, keyed by chunk_id) and, beside it, a
record of the run it holds (LoadState), so that a later load can tell whether a run's
changes/ table applies to it. Each backend (postgres.py, lance.py) implements VectorStore; the
Beam stages in transforms/stores/loading.py only call these methods.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from schemas.arrow import chunk_schema
from schemas.columns import Column

DEFAULT_TABLE = "corpus_chunks"
# One row per chunk table: the run it holds, and the run being loaded into it, if any.
STATE_TABLE = "corpus_chunker_loads"

# The chunk columns a store keeps, as chunks/ declares them (schemas/columns.py). The embedding
# is null where the run has none: parent chunks (--parent_chunk_size), which the job does not
# embed, are stored so that small-to-big retrieval can fetch a hit's parent text by parent_id.
CHUNK_COLUMNS = (
    "chunk_id",
    "doc_id",
    "source",
    "text",
    "context",
    "section_path",
    "start_char",
    "end_char",
    "page_start",
    "page_end",
    "page_label",
    "chunk_index",
    "title",
    "doc_type",
    "language",
    "parent_id",
    "is_parent",
    "strategy",
    "embedding_model",
    "embedding",
)
RUN_ID = Column(
    "run_id",
    pa.string(),
    "run_id (run_manifest.json) of the load that last wrote the row; a full load deletes "
    "every row of another run once its upserts are done",
    nullable=False,
)
STORE_COLUMNS = (*CHUNK_COLUMNS, RUN_ID.name)
# Columns added after tables were first made: a store adds them to an older table.
ADDED_COLUMNS = ("page_start", "page_end", "page_label")

_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def store_schema(embedding_dim: int) -> pa.Schema:
    """The Arrow schema of a store's chunk table: chunks/ columns, then run_id."""
    chunks = chunk_schema(embedding_dim)
    return pa.schema([*(chunks.field(name) for name in CHUNK_COLUMNS), RUN_ID.field()])


def check_table_name(table: str) -> str:
    """`table` when it is a plain lower-case SQL identifier (no quoting needed in queries)."""
    if not _TABLE_NAME.fullmatch(table) or table == STATE_TABLE:
        raise ValueError(
            f"--table={table!r}: use a lower-case name of letters, digits and _ (at most 63, "
            f"not starting with a digit, not {STATE_TABLE!r})"
        )
    return table


def store_table(chunks: pa.RecordBatch | pa.Table, run_id: str, embedding_dim: int) -> pa.Table:
    """Rows of chunks/ (as read from Parquet, at least CHUNK_COLUMNS) -> the rows a store
    holds (store_schema), each tagged with `run_id`. Stays in Arrow: embeddings never become
    Python floats."""
    schema = store_schema(embedding_dim)
    columns = [chunks.column(name) for name in CHUNK_COLUMNS]
    columns.append(pa.array([run_id] * chunks.num_rows, type=pa.string()))
    return pa.Table.from_arrays(columns, names=list(STORE_COLUMNS)).cast(schema)


@dataclass(frozen=True)
class LoadState:
    """What a store records of its chunk table. `run_id`: the run whose load finished last
    (None: never loaded); `loading_run_id`: a load begun and not finished (None: none)."""

    run_id: str | None = None
    loading_run_id: str | None = None


class VectorStore(ABC):
    """One connection to one chunk table of a store. Every write is idempotent: upserts by
    chunk_id, deletes by id or by run, so a retried bundle or a rerun changes nothing."""

    table: str

    @abstractmethod
    def prepare(self, embedding_dim: int) -> None:
        """Create the chunk table (and its indexes) and the state table if missing; raise
        ValueError naming --table when the table holds vectors of another dimension. A chunk
        table created here starts with no recorded run."""

    @abstractmethod
    def state(self) -> LoadState: ...

    @abstractmethod
    def begin(self, run_id: str) -> None:
        """Record that a load of `run_id` has begun (before its first write)."""

    @abstractmethod
    def upsert(self, rows: pa.Table) -> int:
        """Insert or replace `rows` (store_schema; ids unique) by chunk_id, leaving a row
        that is already identical untouched; the number of rows sent."""

    @abstractmethod
    def delete(self, chunk_ids: Sequence[str]) -> int:
        """Delete these chunks (ids not held are ignored); the number deleted."""

    @abstractmethod
    def delete_other_runs(self, run_id: str) -> int:
        """Delete every chunk that the load of `run_id` did not write; the number deleted."""

    @abstractmethod
    def count(self) -> int:
        """The number of chunks the table holds."""

    @abstractmethod
    def finish(self, run_id: str) -> None:
        """Record that the table now holds exactly the run `run_id` (the load's last write)."""

    @abstractmethod
    def close(self) -> None: ...
