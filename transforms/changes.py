"""The change log of a run: what a vector store holding --previous_output must do to hold it.

One row of `changes/` per document of this run or of the previous one: added, changed,
unchanged, removed (no longer an input) or rejected (an input, rejected this time), with the
chunk ids to upsert (`chunks_added`, and `chunks_updated`: those a changed document keeps) and to
delete (`chunks_removed`). A chunk id names the chunk's text within its document and the config,
not its offsets, so an edit keeps the ids of the chunks it did not touch. A document is
unchanged when its text and its chunk ids are the previous run's; a document whose text is the
same but whose settings changed is `changed`. A document rejected this time for a reason that may
pass (TRANSIENT_REJECTS: a time limit) is `kept`: the previous run's text and chunks are carried
over (transforms/incremental.py), so one busy night does not empty it from the index. Without a
previous run every document is `added`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import apache_beam as beam

from schemas.columns import ADDED, CHANGED, KEPT, REJECTED, REMOVED, UNCHANGED
from schemas.records import Chunk, Document, Reject
from transforms.stat_events import DocumentChange


class ChangeInputs(NamedTuple):
    documents: beam.PCollection  # Document: every document of this run with chunks
    chunks: beam.PCollection  # Chunk of this run (new, parents included)
    rejects: beam.PCollection  # Reject: every reject of this run


class PreviousTables(NamedTuple):
    documents: beam.PCollection  # rows of the previous documents/ (doc_id, source, content_hash)
    chunks: beam.PCollection  # rows of the previous chunks/ (at least doc_id, chunk_id)


class Reused(NamedTuple):
    """What a rebuild reused (transforms/incremental.py), whose change rows are known without a
    join: its chunk rows are the previous run's, as they were."""

    unchanged: beam.PCollection  # Document: the same text as in the previous run
    kept: beam.PCollection | None  # Document: the previous run's, of transient rejects
    not_reused_ids: beam.PCollection  # (doc_id, True): the previous documents not reused


class DocumentVersion(NamedTuple):
    """What the change log needs of a document of this run: not its text."""

    source: str
    content_hash: str


class ChangeResult(NamedTuple):
    rows: beam.PCollection  # dict rows of changes/
    events: beam.PCollection  # DocumentChange


def change_row(
    doc_id: str,
    current: Document | DocumentVersion | None,
    current_chunk_ids: set[str],
    previous: dict | None,
    previous_chunk_ids: set[str],
    rejected: bool,
) -> dict[str, Any] | None:
    """The row of one document, or None for one that neither run holds (a reject of this run
    alone, which rejects/ lists)."""
    if current is not None:
        if rejected and previous is not None:  # rejected, and carried over (incremental.py)
            change = KEPT
        elif previous is None:
            change = ADDED
        elif (
            current_chunk_ids == previous_chunk_ids
            and current.content_hash == previous["content_hash"]
        ):
            change = UNCHANGED
        else:
            change = CHANGED
        source = current.source
    elif previous is not None:
        change = REJECTED if rejected else REMOVED
        source = previous["source"]
    else:
        return None
    return {
        "doc_id": doc_id,
        "source": source,
        "change": change,
        "content_hash": current.content_hash if current is not None else None,
        "previous_content_hash": previous["content_hash"] if previous is not None else None,
        "chunks_added": sorted(current_chunk_ids - previous_chunk_ids),
        "chunks_removed": sorted(previous_chunk_ids - current_chunk_ids),
        # same text, same id; where the text around it changed, its offsets (or section
        # path, header) may have: the store rewrites those rows, and leaves identical ones be
        "chunks_updated": sorted(current_chunk_ids & previous_chunk_ids)
        if change == CHANGED
        else [],
    }


class _Diff(beam.DoFn):
    EVENTS = "events"

    def process(self, item: tuple[str, dict[str, Any]]) -> Iterator[Any]:
        doc_id, grouped = item
        current = next(iter(grouped["current"]), None)
        previous = next(iter(grouped.get("previous", ())), None)
        row = change_row(
            doc_id,
            current,
            set().union(*grouped["chunk_ids"]),
            previous,
            set(grouped.get("previous_chunk_ids", ())),
            bool(list(grouped["rejected"])),
        )
        if row is None:
            return
        yield row
        yield beam.pvalue.TaggedOutput(
            self.EVENTS,
            DocumentChange(
                row["change"],
                len(row["chunks_added"]),
                len(row["chunks_removed"]),
                len(row["chunks_updated"]),
            ),
        )


def _chunk_key(chunk: Chunk) -> tuple[str, str]:
    return chunk.doc_id, chunk.chunk_id


def _row_key(row: dict) -> tuple[str, str]:
    return row["doc_id"], row["chunk_id"]


def _document_key(doc: Document) -> tuple[str, DocumentVersion]:
    return doc.doc_id, DocumentVersion(doc.source, doc.content_hash)


def _reused_row(doc: Document, kept: bool) -> Iterator[Any]:
    """The change row of a reused document, and its event: unchanged, or kept (rejected this
    run, carried over); the same chunk ids in both runs."""
    previous = {"source": doc.source, "content_hash": doc.content_hash}
    row = change_row(doc.doc_id, doc, set(), previous, set(), rejected=kept)
    assert row is not None
    yield row
    yield beam.pvalue.TaggedOutput(_Diff.EVENTS, DocumentChange(row["change"], 0, 0, 0))


class _NotReused(beam.DoFn):
    """A previous run's row -> itself when its document is not reused (`not_reused`)."""

    def process(self, row: dict, not_reused: Mapping[str, bool]) -> Iterator[dict]:
        if row["doc_id"] in not_reused:
            yield row


def _previous_key(row: dict) -> tuple[str, dict]:
    return row["doc_id"], row


def _rejected_key(reject: Reject) -> Iterator[tuple[str, bool]]:
    if reject.doc_id and reject.chunk_id is None:  # a whole document, not one of its chunks
        yield reject.doc_id, True


class ChangeLog(beam.PTransform):
    """ChangeInputs -> ChangeResult: one changes/ row per document, joined on doc_id.

    `reused`: what a rebuild reused; their rows are made where they are, and only the other
    documents (this run's new ones, the previous run's not reused) are joined, without text.
    `inputs.documents` are then this run's documents less the reused ones.
    """

    def __init__(self, previous: PreviousTables | None, reused: Reused | None = None) -> None:
        super().__init__()
        self.previous = previous
        self.reused = reused

    def expand(self, inputs: ChangeInputs) -> ChangeResult:
        # A document's chunk ids gathered where its chunks are made (a combine), so that one
        # element per document, not per chunk, goes through the join's shuffle.
        chunk_ids = inputs.chunks | "Chunk ids" >> beam.Map(_chunk_key)
        chunk_ids = chunk_ids | "Chunk ids of each document" >> beam.CombinePerKey(
            beam.combiners.ToSetCombineFn()
        )
        joined = {
            "current": inputs.documents | "Key documents" >> beam.Map(_document_key),
            "chunk_ids": chunk_ids,
            "rejected": inputs.rejects | "Rejected documents" >> beam.FlatMap(_rejected_key),
        }
        if self.previous is not None:
            documents, chunks = self.previous.documents, self.previous.chunks
            if self.reused is not None:
                not_reused = beam.pvalue.AsDict(self.reused.not_reused_ids)
                documents = documents | "Previous documents not reused" >> beam.ParDo(
                    _NotReused(), not_reused
                )
                chunks = chunks | "Previous chunks not reused" >> beam.ParDo(
                    _NotReused(), not_reused
                )
            joined["previous"] = documents | "Key previous" >> beam.Map(_previous_key)
            joined["previous_chunk_ids"] = chunks | "Previous ids" >> beam.Map(_row_key)
        diffed = (
            joined
            | "Join on doc_id" >> beam.CoGroupByKey()
            | "Diff" >> beam.ParDo(_Diff()).with_outputs(_Diff.EVENTS, main="rows")
        )
        rows, events = [diffed.rows], [diffed[_Diff.EVENTS]]
        if self.reused is not None:
            for label, docs, kept in (
                ("unchanged", self.reused.unchanged, False),
                ("kept", self.reused.kept, True),
            ):
                if docs is None:
                    continue
                made = docs | f"Rows of {label} documents" >> beam.FlatMap(
                    _reused_row, kept
                ).with_outputs(_Diff.EVENTS, main="rows")
                rows.append(made.rows)
                events.append(made[_Diff.EVENTS])
        return ChangeResult(
            rows[0] if len(rows) == 1 else tuple(rows) | "All rows" >> beam.Flatten(),
            events[0] if len(events) == 1 else tuple(events) | "All events" >> beam.Flatten(),
        )
