"""The job's chunk rows as Beam's own RAG type (`apache_beam.ml.rag.types.Chunk`), and back.

`ReadBeamChunks` reads a finished run's chunks/ as Beam `Chunk`s with their embeddings, ready
for Beam's `VectorDatabaseWriteTransform` (Milvus, Qdrant, BigQuery, AlloyDB, ...);
`ToBeamChunks` does the same for rows already in a pipeline; `FromBeamChunks` turns such
`Chunk`s (embedded again by one of Beam's embedders, say) back into chunks/ rows that
`WriteTable` writes. Docs, with examples that tests/e2e/test_load.py runs: docs/beam_rag.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.rag.types import Chunk, Content, Embedding

from schemas.arrow import CHUNK_COLUMNS, chunk_schema
from schemas.columns import CHUNKS
from schemas.records import CONTEXT_JOINER
from transforms.stage_base import Counts

# How a Beam Chunk's `id` is made from chunk_id: as it is (Milvus, BigQuery, AlloyDB take any
# string), or as the UUID that its 32 hex digits spell, for Qdrant, whose point ids are UUIDs
# or unsigned 64-bit integers: Beam's Qdrant writer turns an id of decimal digits alone into
# an integer, and a chunk_id of digits alone (about 1 in 3.4 million) is far past 2**64.
CHUNK_ID = "chunk_id"
UUID = "uuid"
ID_FORMATS = (CHUNK_ID, UUID)

# chunks/ columns that may not be null: FromBeamChunks needs them in a Chunk's metadata.
_REQUIRED = tuple(
    f.name for f in chunk_schema(None) if not f.nullable and f.name not in ("text", "embedding")
)


def _check_ids(ids: str) -> str:
    if ids not in ID_FORMATS:
        raise ValueError(f"ids={ids!r}: expected one of {ID_FORMATS}")
    return ids


def beam_id(chunk_id: str, ids: str = CHUNK_ID) -> str:
    """The `Chunk.id` of the chunk `chunk_id` in the id format `ids` (CHUNK_ID or UUID)."""
    if _check_ids(ids) == CHUNK_ID:
        return chunk_id
    try:
        return str(uuid.UUID(hex=chunk_id))
    except ValueError:
        raise ValueError(
            f"chunk_id {chunk_id!r} is not 32 hex digits: it has no UUID form (ids={UUID!r})"
        ) from None


def embedded_text(row: dict[str, Any]) -> str:
    """What the job's model read for this chunk: its contextual header, then its text
    (schemas.records.Chunk.embed_text)."""
    context = row.get("context")
    return f"{context}{CONTEXT_JOINER}{row['text']}" if context else row["text"]


def to_beam_chunk(row: dict[str, Any], ids: str = CHUNK_ID) -> Chunk:
    """A chunks/ row -> a Beam Chunk: `content.text` is what the embedding was made from
    (header and text), `embedding` the row's vector (None for a parent chunk, or a run without
    a model), `index` its chunk_index, and `metadata` the whole row but its embedding, so that
    a store that keeps only metadata (Qdrant's payload) has chunk_id, doc_id, text,
    section_path, pages and offsets."""
    metadata = {name: row.get(name) for name in CHUNK_COLUMNS if name != "embedding"}
    metadata["section_path"] = list(row["section_path"])
    vector = row.get("embedding")
    return Chunk(
        content=Content(text=embedded_text(row)),
        id=beam_id(row["chunk_id"], ids),
        index=row["chunk_index"],
        metadata=metadata,
        embedding=None if vector is None else Embedding(dense_embedding=list(vector)),
    )


def from_beam_chunk(chunk: Chunk, embedding_model: str | None = None) -> dict[str, Any]:
    """A Beam Chunk made by `to_beam_chunk` -> its chunks/ row, with the Chunk's dense
    embedding (and `embedding_model` when given: the model of a Beam embedder that embedded
    it again). ValueError, naming the chunk, for a Chunk that did not come from a chunks/ row
    (Beam's own chunkers give no offsets into a documents/ text, no token counts, no config
    fingerprint), whose text was changed, or that has a sparse embedding (chunks/ has no
    column for one)."""
    metadata = chunk.metadata or {}
    missing = [name for name in _REQUIRED if metadata.get(name) is None]
    if missing:
        raise ValueError(
            f"Beam chunk {chunk.id!r}: its metadata has no {', '.join(missing)}; only Chunks "
            "made from chunks/ rows (ToBeamChunks, ReadBeamChunks) become chunks/ rows again"
        )
    row = {name: metadata.get(name) for name in CHUNK_COLUMNS}
    if chunk.content.text != embedded_text(row):
        raise ValueError(
            f"Beam chunk {chunk.id!r} (chunk_id {row['chunk_id']}): its content is not the "
            "header and text of its chunks/ row: a chunk whose text changed needs a new "
            "chunk_id and offsets, which only the job makes"
        )
    if chunk.sparse_embedding is not None:
        raise ValueError(
            f"Beam chunk {chunk.id!r}: has a sparse embedding, and chunks/ holds dense "
            "embeddings only; drop it before FromBeamChunks"
        )
    row["section_path"] = list(row["section_path"])
    vector = chunk.dense_embedding
    row["embedding"] = None if vector is None else [float(v) for v in vector]
    if embedding_model is not None and vector is not None:
        row["embedding_model"] = embedding_model
    return row


class _ToBeamChunks(Counts, beam.DoFn):
    def __init__(self, ids: str, parents: bool) -> None:
        self.ids = ids
        self.parents = parents

    def process(self, row: dict[str, Any]) -> Iterator[Chunk]:
        if row["is_parent"] and not self.parents:
            self.stat("beam_chunks_parents_left_out")
            return
        self.stat("beam_chunks")
        yield to_beam_chunk(row, self.ids)


class ToBeamChunks(beam.PTransform):
    """chunks/ rows (dicts, as `beam.io.ReadFromParquet` or the job's writer has them) ->
    Beam `Chunk`s (`to_beam_chunk`). Parent chunks (`--parent_chunk_size`; they have no
    embedding, and Beam's writers refuse a Chunk without one) are left out and counted as
    `beam_chunks_parents_left_out` unless `parents=True`. `ids`: "chunk_id" or "uuid" (for
    Qdrant), see `beam_id`."""

    def __init__(self, ids: str = CHUNK_ID, parents: bool = False) -> None:
        super().__init__()
        self.ids = _check_ids(ids)
        self.parents = parents

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        return rows | "To Beam chunks" >> beam.ParDo(
            _ToBeamChunks(self.ids, self.parents)
        ).with_output_types(Chunk)


class _ReadChunkRows(beam.DoFn):
    """A chunks/ shard -> its rows as dicts, `batch_size` rows of Arrow at a time. A shard
    of a run made before a column was added (page_start...) gives that column as None."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size

    def process(self, path: str) -> Iterator[dict[str, Any]]:
        import pyarrow.parquet as pq

        with FileSystems.open(path) as f:
            shard = pq.ParquetFile(f)
            held = [name for name in CHUNK_COLUMNS if name in shard.schema_arrow.names]
            absent = {name: None for name in CHUNK_COLUMNS if name not in held}
            for batch in shard.iter_batches(batch_size=self.batch_size, columns=held):
                for row in batch.to_pylist():
                    yield row | absent


class ReadBeamChunks(beam.PTransform):
    """PBegin -> the Beam `Chunk`s of the finished, embedded run in `output` (its manifest
    read and its chunks/ shards checked against it, as `corpus-chunker load` does), ready for
    `VectorDatabaseWriteTransform`. `ids` and `parents` as in `ToBeamChunks`."""

    def __init__(
        self, output: str, ids: str = CHUNK_ID, parents: bool = False, batch_size: int = 1000
    ) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size}: must be at least 1")
        self.output = output
        self.ids = _check_ids(ids)
        self.parents = parents
        self.batch_size = batch_size

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        from transforms.stores.loading import open_run

        return (
            open_run(self.output).checked_shards(pbegin, CHUNKS)
            | "Read chunk rows" >> beam.ParDo(_ReadChunkRows(self.batch_size))
            | "Rows to Beam chunks" >> ToBeamChunks(self.ids, self.parents)
        )


class FromBeamChunks(beam.PTransform):
    """Beam `Chunk`s made by `ToBeamChunks` or `ReadBeamChunks` -> chunks/ rows
    (`from_beam_chunk`), for `transforms.write.WriteTable(output, CHUNKS, chunk_schema(dim))`.
    `embedding_model`: the model id to record for their vectors when a Beam embedder made
    them (None keeps the row's). A Chunk that did not come from a chunks/ row fails the job
    with a ValueError naming it: that is a pipeline wired wrong, not one bad input."""

    def __init__(self, embedding_model: str | None = None) -> None:
        super().__init__()
        self.embedding_model = embedding_model

    def expand(self, chunks: beam.PCollection) -> beam.PCollection:
        return chunks | "Beam chunks to rows" >> beam.Map(
            from_beam_chunk, embedding_model=self.embedding_model
        ).with_output_types(dict[str, Any])
