"""A rebuild's routing (transforms/incremental.py, transforms/changes.py) on every kind of
document at once: unchanged, edited, added, removed, retried after an embedding failure, kept
after a transient reject (at the first reading, or at the second: an edited document whose
extraction runs over its time limit when read again), and rejected without a previous row.
The decision is a join of (doc_id, extracted hash) pairs; the changed documents are to be read
again, and the previous rows are routed by side inputs of ids."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import NamedTuple

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from runs.manifest import file_entry
from schemas.arrow import DOCUMENT_SCHEMA, REJECT_SCHEMA
from schemas.columns import BOILERPLATE, DOCUMENTS, REJECTS
from schemas.records import Document, Reject, content_hash
from transforms.changes import ChangeInputs, ChangeLog, PreviousTables
from transforms.incremental import (
    KEPT_IDS,
    TO_READ,
    UNCOUNTED,
    PreviousRun,
    ReuseBeforeRemoval,
    ReuseRows,
    _DecideExtracted,
    _from_root,
    _full_source,
    _source_digest,
)


class ChunkIds(NamedTuple):
    """What the change log reads of a Chunk."""

    doc_id: str
    chunk_id: str


def _doc(doc_id: str, text: str) -> Document:
    return Document(
        doc_id=doc_id,
        source=f"/c/{doc_id}.txt",
        doc_type="text",
        text=text,
        content_hash=f"hash of {text}",
        extracted_hash=content_hash(f"as extracted: {text}"),
    )


def _previous_doc(doc_id: str, text: str) -> dict:
    """The row the previous run's documents table holds of a document."""
    return {
        name: value
        for name, value in dataclasses.asdict(_doc(doc_id, text)).items()
        if name in DOCUMENT_SCHEMA.names
    }


def _chunk_row(doc_id: str, n: int) -> dict:
    return {"doc_id": doc_id, "chunk_id": f"{doc_id}-{n}", "embed_tokens": 10}


def test_every_kind_of_document_is_routed_as_a_join_of_whole_documents_would(
    tmp_path: Path,
) -> None:
    # the previous run failed to embed one of d's chunks: d is rebuilt though its text is the same
    failures = tmp_path / "rejects.parquet"
    failed = {"source": "/c/d.txt", "stage": "embed", "reason": "embedding_failed"}
    failed |= {"error": "OOM", "doc_id": "d", "chunk_id": "d-0"}
    pq.write_table(pa.Table.from_pylist([failed], schema=REJECT_SCHEMA), failures)
    current = [_doc("a", "same"), _doc("b", "edited"), _doc("c", "new"), _doc("d", "same")]
    current.append(_doc("h", "edited"))  # its second extraction runs over the time limit
    previous_docs = [_previous_doc(i, "same") for i in ("a", "d", "e", "f")]
    previous_docs += [_previous_doc("b", "before"), _previous_doc("h", "before")]
    documents = tmp_path / "documents.parquet"  # whole rows: a kept document's come from here
    pq.write_table(pa.Table.from_pylist(previous_docs, schema=DOCUMENT_SCHEMA), documents)
    shards = {REJECTS: (str(failures),), DOCUMENTS: (str(documents),)}
    checks = tuple(
        (path, file_entry(path), f"{path} changed") for paths in shards.values() for path in paths
    )
    previous = PreviousRun("/previous", "fp", shards=shards, checks=checks, run_id="r1")
    with pytest.raises(ValueError, match="shards without a check"):
        PreviousRun("/previous", "fp", shards=shards, run_id="r1")
    previous_chunks = [_chunk_row(i, n) for i in "abdefh" for n in range(2)]
    previous_chunks.remove(_chunk_row("d", 0))  # the chunk that failed to embed
    rejects = [  # f timed out (kept: the previous run holds it); g timed out, never held
        Reject("/c/f.txt", "extract", "extract_timeout", doc_id="f"),
        Reject("/c/g.txt", "extract", "extract_timeout", doc_id="g"),
    ]

    p = beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"]))
    docs = p | "Current" >> beam.Create(current)
    tables = PreviousTables(
        p | "Previous documents" >> beam.Create(previous_docs),
        p | "Previous chunks" >> beam.Create(previous_chunks),
    )
    rejected = p | "Rejects" >> beam.Create(rejects)
    # the index carries each source after the input root, /c: the verdicts give it whole
    split = docs | "Rebuild" >> ReuseBeforeRemoval(previous, False, rejected, "/c")
    # the second reading gives the documents to read again (transforms/ingest/reread.py), but h
    again = split.to_read | "Read again" >> beam.Map(lambda entry: entry[1])
    changed = docs | "Changed" >> beam.Filter(
        lambda doc, ids: doc.doc_id in ids and doc.doc_id != "h", beam.pvalue.AsList(again)
    )
    late = [Reject("/c/h.txt", "extract", "extract_timeout", doc_id="h")]
    late_rejects = p | "Second reading's rejects" >> beam.Create(late)
    rebuild = late_rejects | "Reuse" >> ReuseRows(previous, tables, split.verdicts)
    all_rejects = (rejected, late_rejects) | "All rejects" >> beam.Flatten()

    def ids(label: str, pcoll: beam.PCollection, key: str = "doc_id") -> beam.PCollection:
        return pcoll | label >> beam.Map(
            lambda x: x[key] if isinstance(x, dict) else getattr(x, key)
        )

    files = split.to_read | "Files" >> beam.Map(lambda entry: entry)
    expected_files = [(f"/c/{i}.txt", i, f"/c/{i}.txt") for i in "bcdh"]
    assert_that(files, equal_to(expected_files), label="to read")
    assert_that(ids("Reused", rebuild.unchanged), equal_to(["a", "f", "h"]), label="reused")
    reused_rows = ids("Reused rows", rebuild.reused_rows, "chunk_id")
    expected_rows = ["a-0", "a-1", "f-0", "f-1", "h-0", "h-1"]
    assert_that(reused_rows, equal_to(expected_rows), label="reused rows")
    other_rows = ids("Other rows", rebuild.other_rows, "chunk_id")
    others = ["b-0", "b-1", "d-1", "e-0", "e-1"]
    assert_that(other_rows, equal_to(others), label="other rows")

    # the change log: the reused documents' rows made where they are, the others joined
    new_chunks = [("b", "b-0"), ("b", "b-9"), ("c", "c-0"), ("d", "d-0"), ("d", "d-1")]
    chunks = p | "New chunks" >> beam.Create([ChunkIds(d, c) for d, c in new_chunks])
    changes = ChangeInputs(changed, chunks, all_rejects) | "Changes" >> ChangeLog(
        tables, rebuild.reused
    )
    summary = changes.rows | "Summary" >> beam.Map(
        lambda r: (r["doc_id"], r["change"], r["chunks_added"], r["chunks_removed"])
    )
    expected = [
        ("a", "unchanged", [], []),
        ("b", "changed", ["b-9"], ["b-1"]),
        ("c", "added", ["c-0"], []),
        ("d", "changed", ["d-0"], []),
        ("e", "removed", [], ["e-0", "e-1"]),
        ("f", "kept", [], []),
        ("h", "kept", [], []),
    ]
    assert_that(summary, equal_to(expected), label="change rows")
    events = changes.events | "Kinds" >> beam.Map(lambda e: e.change)
    kinds = ["unchanged", "changed", "added", "changed", "removed", "kept", "kept"]
    assert_that(events, equal_to(kinds), label="change events")
    p.run().wait_until_finish()


@pytest.mark.parametrize(
    ("source", "root", "carried"),
    [
        ("gs://bucket/corpus/a/b.md", "gs://bucket/corpus", "/a/b.md"),
        ("/data/x.jsonl#L7", "/data", "/x.jsonl#L7"),
        ("/elsewhere/y.txt", "/data", "\0/elsewhere/y.txt"),  # outside the root: whole
        ("/data/z.txt", "", "/data/z.txt"),  # no root: whole
    ],
)
def test_the_index_carries_a_source_after_the_input_root(
    source: str, root: str, carried: str
) -> None:
    assert _from_root(source, root) == carried
    assert _full_source(carried, root) == source


def _decide(grouped: dict) -> dict:
    """`_DecideExtracted`'s verdicts on one doc_id, by tag."""
    entry = {"current": [], "previous": [], "counted_reject": [], "embed_failed": []}
    entry["transient"] = []
    out: dict = {}
    for verdict in _DecideExtracted().process((b"\x01" * 16, {**entry, **grouped})):
        tag = verdict.tag if isinstance(verdict, beam.pvalue.TaggedOutput) else "not_reused"
        out.setdefault(tag, []).append(verdict)
    return out


def test_the_lines_a_previous_run_counted_come_off_unless_the_document_is_the_same() -> None:
    s = _source_digest("/c/a.txt")
    same = {"current": [(b"h", True, "/c/a.txt")], "previous": [(b"h", True, s)]}
    assert _decide(same) == {}  # unchanged: no verdict
    edited = {"current": [(b"h2", True, "/c/a.txt")], "previous": [(b"h", True, s)]}
    assert set(_decide(edited)) == {TO_READ, UNCOUNTED, "not_reused"}
    # kept last time (its row not counted): read again, and counted as it is now
    uncounted_row = {"current": [(b"h", True, "/c/a.txt")], "previous": [(b"h", False, s)]}
    assert set(_decide(uncounted_row)) == {TO_READ, "not_reused"}
    gone = {"previous": [(b"h", True, s)]}
    assert set(_decide(gone)) == {UNCOUNTED, "not_reused"}
    kept = {"previous": [(b"h", True, s)], "transient": [True]}
    assert set(_decide(kept)) == {UNCOUNTED, KEPT_IDS}
    # rejected at chunking last time: no row, its lines on its reject
    rejected_then_gone = {"counted_reject": [True]}
    assert set(_decide(rejected_then_gone)) == {UNCOUNTED}
    rejected_then_read = {"current": [(b"h", True, "/c/a.txt")], "counted_reject": [True]}
    assert set(_decide(rejected_then_read)) == {TO_READ, UNCOUNTED}


def test_a_run_without_boilerplate_counts_is_chunked_again(monkeypatch, caplog) -> None:
    """A run an older version wrote has no counts to update: nothing of it is reused but its
    vectors (the chunk ids stay the same, so no vector store rewrites a row)."""
    from transforms import incremental

    older = PreviousRun("/previous", "fp", shards={DOCUMENTS: (), REJECTS: ()}, run_id="r1")
    monkeypatch.setattr(incremental, "load_previous_run", lambda output: older)
    previous = incremental.previous_run("/previous", "fp")
    assert previous is not None and not previous.reusable
    assert "without boilerplate counts" in caplog.text
    current = dataclasses.replace(older, shards={**older.shards, BOILERPLATE: ()})
    monkeypatch.setattr(incremental, "load_previous_run", lambda output: current)
    assert incremental.previous_run("/previous", "fp").reusable


def test_a_kept_document_is_written_as_not_counted() -> None:
    """A document kept after a transient reject keeps its previous row but not its line
    digests: the next rebuild then reads it again and counts it as it is (its lines came off
    this night's counts, or are on its reject)."""
    from transforms.incremental import KEPT, _SplitPrevious

    row = {**_previous_doc("f", "same"), "line_digests": b"8 bytes!"}
    out = list(_SplitPrevious().process(row, {}, {"f": True}, {}))
    assert [o.tag for o in out] == [KEPT] and out[0].value.line_digests is None
    unchanged = list(_SplitPrevious().process(row, {}, {}, {}))
    assert unchanged[0].line_digests == b"8 bytes!"
