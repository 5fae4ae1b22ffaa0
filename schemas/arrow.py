"""The explicit Arrow schema of every Parquet table the job writes, from `schemas.columns`."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from schemas.columns import (
    BOILERPLATE,
    CHANGES,
    CHUNKS,
    DOCUMENTS,
    REJECTS,
    Column,
    column_names,
    schema,
)
from schemas.records import Chunk, Document, Reject


def chunk_schema(embedding_dim: int | None) -> pa.Schema:
    """`chunks/`: one row per chunk. `embedding_dim=None` when the run embeds nothing."""

    def embedding(column: Column) -> pa.DataType | None:
        if column.name == "embedding" and embedding_dim:
            return pa.list_(pa.float32(), embedding_dim)
        return None

    return schema(CHUNKS, embedding)


CHUNK_COLUMNS = column_names(CHUNKS)
DOCUMENT_SCHEMA = schema(DOCUMENTS)
REJECT_SCHEMA = schema(REJECTS)
CHANGE_SCHEMA = schema(CHANGES)
BOILERPLATE_SCHEMA = schema(BOILERPLATE)


def document_row(doc: Document) -> dict:
    row = {name: getattr(doc, name) for name in DOCUMENT_SCHEMA.names}
    for name in ("page_starts", "page_labels"):
        row[name] = list(row[name]) if row[name] is not None else None
    return row


def reject_row(reject: Reject) -> dict:
    return {name: getattr(reject, name) for name in REJECT_SCHEMA.names}


def chunk_row(chunk: Chunk) -> dict:
    row = {f.name: getattr(chunk, f.name) for f in dataclasses.fields(chunk)}
    row["section_path"] = list(chunk.section_path)
    row["embedding"] = list(chunk.embedding) if chunk.embedding is not None else None
    return {name: row[name] for name in CHUNK_COLUMNS}
