"""Embedded LanceDB as a chunk store: `lancedb:///path/to/db`, one Lance table per --table.

Each batch is one `merge_insert` on chunk_id (update if held, insert if not); the load state
is a second table, `corpus_chunker_loads`, with one row per chunk table.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from transforms.stores.base import STATE_TABLE, LoadState, VectorStore, store_schema

INSTALL = "pip install 'corpus-chunker[load]' (lancedb)"

STATE_SCHEMA = pa.schema(
    [
        pa.field("table_name", pa.string(), nullable=False),
        pa.field("run_id", pa.string()),
        pa.field("loaded_at", pa.string()),  # ISO 8601, UTC
        pa.field("loading_run_id", pa.string()),
        pa.field("loading_started_at", pa.string()),
    ]
)


def _lancedb() -> Any:
    try:
        import lancedb
    except ImportError as e:
        raise ImportError(f"--to=lancedb://... needs lancedb: {INSTALL}") from e
    return lancedb


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


class LanceStore(VectorStore):
    """`table` in the LanceDB database (a folder) at `path`."""

    def __init__(self, path: str, table: str) -> None:
        self.db = _lancedb().connect(path)
        self.path = path
        self.table = table
        self._chunks: Any = None

    def _open(self, name: str) -> Any | None:
        try:
            return self.db.open_table(name)
        except (ValueError, FileNotFoundError):
            return None

    @property
    def chunks(self) -> Any:
        if self._chunks is None:
            self._chunks = self._open(self.table)
            if self._chunks is None:
                raise ValueError(f"--table={self.table} is not in the LanceDB at {self.path}")
        return self._chunks

    def _state_table(self) -> Any:
        return self.db.create_table(STATE_TABLE, schema=STATE_SCHEMA, exist_ok=True)

    def _write_state(self, row: dict) -> None:
        full = {name: None for name in STATE_SCHEMA.names} | row
        batch = pa.Table.from_pylist([full], schema=STATE_SCHEMA)
        (
            self._state_table()
            .merge_insert("table_name")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(batch)
        )

    def prepare(self, embedding_dim: int) -> None:
        table = self._open(self.table)
        if table is None:
            schema = store_schema(embedding_dim)
            self._chunks = self.db.create_table(self.table, schema=schema)
            # a state row left from a dropped table would claim a run it no longer holds
            self._state_table().delete(f"table_name = {_quoted(self.table)}")
            return
        held = table.schema.field("embedding").type
        expected = pa.list_(pa.float32(), embedding_dim)
        if held != expected:
            raise ValueError(
                f"--table={self.table} exists with embeddings {held}, and this run's are "
                f"{expected}: load it into another --table"
            )
        self._chunks = table

    def state(self) -> LoadState:
        rows = (
            self._state_table()
            .search()
            .where(f"table_name = {_quoted(self.table)}")
            .limit(1)
            .to_list()
        )
        if not rows:
            return LoadState()
        return LoadState(rows[0]["run_id"], rows[0]["loading_run_id"])

    def begin(self, run_id: str) -> None:
        held = self.state()
        self._write_state(
            {
                "table_name": self.table,
                "run_id": held.run_id,
                "loading_run_id": run_id,
                "loading_started_at": _now(),
            }
        )

    def upsert(self, rows: pa.Table) -> int:
        batch = rows.cast(self.chunks.schema)
        (
            self.chunks.merge_insert("chunk_id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            # keep the null embeddings of parent chunks null (the default refuses them)
            .execute(batch, on_bad_vectors="null")
        )
        return rows.num_rows

    def delete(self, chunk_ids: Sequence[str]) -> int:
        if not chunk_ids:
            return 0
        where = "chunk_id IN (" + ", ".join(_quoted(i) for i in chunk_ids) + ")"
        return self.chunks.delete(where).num_deleted_rows

    def delete_other_runs(self, run_id: str) -> int:
        return self.chunks.delete(f"run_id != {_quoted(run_id)}").num_deleted_rows

    def count(self) -> int:
        return self.chunks.count_rows()

    def finish(self, run_id: str) -> None:
        # one file set instead of one small fragment per batch
        self.chunks.optimize()
        self._write_state({"table_name": self.table, "run_id": run_id, "loaded_at": _now()})

    def close(self) -> None:
        self._chunks = None
