"""chunks/ rows as Beam's `ml.rag` Chunks and back (transforms/stores/beam_chunks.py), and a run
written into Qdrant's local mode through Beam's own `VectorDatabaseWriteTransform`."""

from __future__ import annotations

import glob
import os
import uuid
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.ml.rag.types import Chunk, Content, Embedding
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas.arrow import CHUNK_COLUMNS, chunk_schema
from schemas.columns import CHUNKS
from schemas.records import stable_hash
from tests.load_runs import (
    DIM,
    assert_qdrant_holds,
    chunk,
    create_qdrant_collection,
    vector,
    write_run,
    write_to_qdrant,
)
from transforms.common import NAMESPACE
from transforms.stores.beam_chunks import (
    UUID,
    FromBeamChunks,
    ReadBeamChunks,
    ToBeamChunks,
    beam_id,
    from_beam_chunk,
    to_beam_chunk,
)
from transforms.write import WriteTable


def _hex(row: dict) -> dict:
    """The row, every chunks/ column in order, with a chunk_id as the job makes them (32 hex
    digits)."""
    full = {name: row.get(name) for name in CHUNK_COLUMNS}
    return full | {"chunk_id": stable_hash("chunk", row["chunk_id"])}


def _rows() -> list[dict]:
    parent = _hex(chunk("alpha", 2, "alpha one alpha two", parent=True))
    rows = [
        _hex(chunk("alpha", 0, "alpha one")) | {"page_start": 1, "page_end": 2},
        _hex(chunk("alpha", 1, "alpha two")) | {"page_start": 2, "page_end": 2},
        parent,
        _hex(chunk("beta", 0, "beta one")) | {"context": None, "context_source": None},
        _hex(chunk("beta", 1, "beta two")) | {"model_tokens": 9, "language": "en"},
    ]
    for row in rows[:2]:
        row["parent_id"] = parent["chunk_id"]
    return rows


def _same_row(got: dict, want: dict) -> None:
    assert list(got) == list(CHUNK_COLUMNS)
    for name in CHUNK_COLUMNS:
        if name == "embedding" and want[name] is not None:
            assert np.array_equal(np.float32(got[name]), np.float32(want[name])), name
        else:
            assert got[name] == want[name], name


# --- the conversion, both ways ---------------------------------------------------------------


def test_a_row_becomes_a_beam_chunk_with_its_embedding_and_metadata() -> None:
    row = _rows()[0]
    item = to_beam_chunk(row)
    assert isinstance(item, Chunk)
    assert item.id == row["chunk_id"] and item.index == 0
    # what the model read: the header, then the text
    assert item.content.text == "alpha > part 0\n\nalpha one"
    assert item.dense_embedding == row["embedding"] and item.sparse_embedding is None
    for name in ("chunk_id", "doc_id", "text", "page_start", "page_end", "section_path"):
        assert item.metadata[name] == row[name], name
    assert "embedding" not in item.metadata
    # without a header, the content is the text alone
    assert to_beam_chunk(_rows()[3]).content.text == "beta one"
    assert to_beam_chunk(_rows()[2]).embedding is None  # a parent: no vector


def test_every_row_comes_back_from_its_beam_chunk_unchanged() -> None:
    for row in _rows():
        _same_row(from_beam_chunk(to_beam_chunk(row)), row)
        _same_row(from_beam_chunk(to_beam_chunk(row, ids=UUID)), row)


def test_uuid_ids_spell_the_chunk_id() -> None:
    row = _rows()[0]
    item = to_beam_chunk(row, ids=UUID)
    assert uuid.UUID(item.id).hex == row["chunk_id"]
    assert "-" in item.id  # never digits alone, which Beam's Qdrant writer makes an integer
    assert beam_id("0" * 32, UUID) == "00000000-0000-0000-0000-000000000000"
    with pytest.raises(ValueError, match="chunk_id 'alpha-0' is not 32 hex digits"):
        beam_id("alpha-0", UUID)
    with pytest.raises(ValueError, match="ids='int'"):
        ToBeamChunks(ids="int")


def test_a_new_embedding_and_its_model_are_kept() -> None:
    row = _rows()[0]
    item = to_beam_chunk(row)
    item.embedding = Embedding(dense_embedding=[0.5, 0.5, 0.5, 0.5])  # as Beam's embedders do
    back = from_beam_chunk(item, embedding_model="beam-hf/minilm")
    assert back["embedding"] == [0.5, 0.5, 0.5, 0.5]
    assert back["embedding_model"] == "beam-hf/minilm"
    assert from_beam_chunk(to_beam_chunk(row))["embedding_model"] == "test-model"


def test_a_chunk_that_is_not_from_a_chunks_row_is_refused() -> None:
    foreign = Chunk(content=Content(text="from a LangChain splitter"), metadata={"source": "a"})
    with pytest.raises(ValueError, match=r"its metadata has no chunk_id, doc_id, doc_type"):
        from_beam_chunk(foreign)
    edited = to_beam_chunk(_rows()[0])
    edited.content.text += " and more"
    with pytest.raises(ValueError, match="its content is not the header and text of its"):
        from_beam_chunk(edited)
    sparse = to_beam_chunk(_rows()[0])
    sparse.embedding = Embedding(dense_embedding=[1.0] * DIM, sparse_embedding=([1], [0.5]))
    with pytest.raises(ValueError, match="has a sparse embedding"):
        from_beam_chunk(sparse)


# --- the transforms --------------------------------------------------------------------------


def test_read_beam_chunks_reads_a_run_leaving_parents_out_unless_asked(tmp_path: Path) -> None:
    rows = _rows()
    run = write_run(str(tmp_path / "run"), rows, "run-1")
    children = [r["chunk_id"] for r in rows if not r["is_parent"]]
    p = TestPipeline()
    ids = p | "Read" >> ReadBeamChunks(run, batch_size=2) | "Ids" >> beam.Map(lambda c: c.id)
    assert_that(ids, equal_to(children))
    every = (
        p
        | "Read all" >> ReadBeamChunks(run, parents=True)
        | "All ids" >> beam.Map(lambda c: c.metadata["chunk_id"])
    )
    assert_that(every, equal_to([r["chunk_id"] for r in rows]), label="with parents")
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    counted: dict[str, int] = {}
    for c in counters:  # one counter per step
        counted[c.key.metric.name] = counted.get(c.key.metric.name, 0) + c.committed
    # both reads made every chunk; the first left the parent out, and counted it
    assert counted == {"beam_chunks": len(children) + len(rows), "beam_chunks_parents_left_out": 1}
    with pytest.raises(ValueError, match="batch_size=0"):
        ReadBeamChunks(run, batch_size=0)


def test_beam_chunks_are_written_back_by_the_jobs_writer(tmp_path: Path) -> None:
    """A run read as Beam Chunks, embedded again (here: a fixed vector per chunk), turned back
    into rows and written by WriteTable: the same rows, with the new vectors."""
    rows = _rows()
    run = write_run(str(tmp_path / "run"), rows, "run-1")
    out = str(tmp_path / "out")

    def embed_again(item: Chunk) -> Chunk:
        item.embedding = Embedding(dense_embedding=[0.5] * DIM)
        return item

    with TestPipeline() as p:
        _ = (
            p
            | ReadBeamChunks(run, parents=True)
            | "Embed again" >> beam.Map(embed_again)
            | FromBeamChunks(embedding_model="another-model")
            | WriteTable(out, CHUNKS, chunk_schema(DIM))
        )
    shards = sorted(glob.glob(os.path.join(out, CHUNKS, "*.parquet")))
    written = {r["chunk_id"]: r for s in shards for r in pq.read_table(s).to_pylist()}
    assert sorted(written) == sorted(r["chunk_id"] for r in rows)
    for row in rows:
        want = row | {"embedding": [0.5] * DIM, "embedding_model": "another-model"}
        _same_row(written[row["chunk_id"]], want)


# --- Beam's Qdrant writer, Qdrant's local mode -----------------------------------------------


@pytest.mark.slow
def test_a_run_goes_into_qdrant_through_beams_own_writer(tmp_path: Path) -> None:
    pytest.importorskip("qdrant_client", reason="pip install -e .[qdrant]")
    from qdrant_client import QdrantClient

    # a chunk_id of decimal digits alone: Beam's writer would make it an integer past 2**64
    digits = _rows()[4] | {"chunk_id": "1" * 32, "text": "gamma", "embedding": vector(99)}
    rows = [*_rows(), digits]
    run = write_run(str(tmp_path / "run"), rows, "run-1")
    path = str(tmp_path / "qdrant")
    create_qdrant_collection(path, "chunks", DIM)
    write_to_qdrant(run, path, "chunks")
    assert_qdrant_holds(path, "chunks", rows)
    write_to_qdrant(run, path, "chunks")  # again: upserts by id, nothing added
    assert_qdrant_holds(path, "chunks", rows)
    target = rows[4]
    client = QdrantClient(path=path)
    try:
        hits = client.query_points(
            "chunks", query=target["embedding"], using="dense", limit=3, with_payload=True
        ).points
    finally:
        client.close()
    assert hits[0].payload["chunk_id"] == target["chunk_id"]
