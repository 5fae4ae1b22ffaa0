"""Run folders built by hand (pyarrow), and what a store holds, for the `load` tests."""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from schemas.arrow import chunk_schema
from schemas.columns import CHANGES, CHUNKS, schema
from transforms.account import file_inventory
from transforms.stores import StoreSpec
from transforms.stores.base import LoadState

DIM = 4


def vector(seed: int) -> list[float]:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return (v / np.linalg.norm(v)).tolist()


def chunk(doc: str, index: int, text: str, parent: bool = False, seed: int = 0) -> dict:
    """A chunks/ row of document `doc`; its id says which document and text it is."""
    return {
        "chunk_id": f"{doc}-{index}-{text[:12]}".replace(" ", "_"),
        "doc_id": doc,
        "source": f"corpus/{doc}.md",
        "doc_type": "markdown",
        "language": None,
        "title": doc.upper(),
        "chunk_index": index,
        "text": text,
        "context": f"{doc} > part {index}",
        "context_source": "path",
        "start_char": 10 * index,
        "end_char": 10 * index + len(text),
        "token_count": len(text.split()),
        "embed_tokens": len(text.split()) + 3,
        "model_tokens": None,
        "section_path": [doc, f"part {index}"],
        "parent_id": None,
        "is_parent": parent,
        "strategy": "markdown",
        "embedding": None if parent else vector(seed or zlib.crc32(text.encode())),
        "embedding_model": None if parent else "test-model",
        "config_fingerprint": "f" * 16,
        "content_hash": f"hash-of-{doc}",
    }


def change(
    doc: str,
    kind: str,
    added: Sequence[str] = (),
    removed: Sequence[str] = (),
    updated: Sequence[str] = (),
) -> dict[str, object]:
    return {
        "doc_id": doc,
        "source": f"corpus/{doc}.md",
        "change": kind,
        "content_hash": None if kind == "removed" else f"hash-of-{doc}",
        "previous_content_hash": None if kind == "added" else f"old-hash-of-{doc}",
        "chunks_added": list(added),
        "chunks_removed": list(removed),
        "chunks_updated": list(updated),
    }


def write_run(
    output: str,
    chunks: Sequence[dict],
    run_id: str,
    previous_run_id: str | None = None,
    changes: Sequence[dict] | None = None,
    embedding_model: str = "test-model",
    mode: str = "run",
) -> str:
    """A finished run folder: chunks/ (and changes/) shards and a manifest listing them. The
    embeddings are list<float>, as the job writes them."""
    os.makedirs(os.path.join(output, CHUNKS), exist_ok=True)
    paths = [os.path.join(output, CHUNKS, "part-00000-of-00001.parquet")]
    pq.write_table(pa.Table.from_pylist(list(chunks), schema=chunk_schema(None)), paths[0])
    if changes is not None:
        os.makedirs(os.path.join(output, CHANGES), exist_ok=True)
        paths.append(os.path.join(output, CHANGES, "part-00000-of-00001.parquet"))
        pq.write_table(pa.Table.from_pylist(list(changes), schema=schema(CHANGES)), paths[1])
    none = embedding_model == "none"
    manifest = {
        "run_id": run_id,
        "previous_run_id": previous_run_id,
        "mode": mode,
        "config": {
            "embedding_model": embedding_model,
            "embedding_dimension": None if none else DIM,
        },
        "config_fingerprint": "f" * 16,
        "files": file_inventory(output, paths),
    }
    with open(os.path.join(output, "run_manifest.json"), "w") as f:
        json.dump(manifest, f)
    return output


def held(spec: StoreSpec) -> dict[str, dict]:
    """chunk_id -> the row the store holds (embedding as a numpy array, or None)."""
    if spec.kind == "lancedb":
        import lancedb

        table = lancedb.connect(spec.uri[len("lancedb://") :]).open_table(spec.table)
        rows = table.to_arrow().to_pylist()
    else:
        import psycopg
        from pgvector.psycopg import register_vector
        from psycopg.rows import dict_row

        with psycopg.connect(spec.uri, row_factory=dict_row) as conn:
            register_vector(conn)
            rows = conn.execute(f"SELECT * FROM {spec.table}").fetchall()
    out = {}
    for row in rows:
        embedding = row["embedding"]
        if embedding is not None:
            # pgvector's Vector (psycopg), or a list (LanceDB)
            values = embedding.to_numpy() if hasattr(embedding, "to_numpy") else embedding
            row["embedding"] = np.asarray(values, dtype=np.float32)
        row["section_path"] = list(row["section_path"])
        out[row["chunk_id"]] = row
    return out


def assert_holds_exactly(spec: StoreSpec, chunks: Sequence[dict]) -> None:
    """The store holds these chunks, no more, no fewer: ids, texts, metadata and vectors."""
    rows = held(spec)
    assert sorted(rows) == sorted(c["chunk_id"] for c in chunks)
    for c in chunks:
        row = rows[c["chunk_id"]]
        for name in ("doc_id", "source", "text", "context", "section_path", "start_char"):
            assert row[name] == c[name], (c["chunk_id"], name)
        for name in ("end_char", "chunk_index", "title", "is_parent", "parent_id", "strategy"):
            assert row[name] == c[name], (c["chunk_id"], name)
        if c["embedding"] is None:
            assert row["embedding"] is None
        else:
            assert np.allclose(row["embedding"], c["embedding"], atol=1e-6)


def store_state(spec: StoreSpec) -> LoadState:
    """What the store records of the runs loaded into it."""
    store = spec.open()
    try:
        return store.state()
    finally:
        store.close()
