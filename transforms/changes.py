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

from collections.abc import Iterable, Iterator
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


class ChangeResult(NamedTuple):
    rows: beam.PCollection  # dict rows of changes/
    events: beam.PCollection  # DocumentChange


def change_row(
    doc_id: str,
    current: Document | None,
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


def _document_key(doc: Document) -> tuple[str, Document]:
    return doc.doc_id, doc


def _previous_key(row: dict) -> tuple[str, dict]:
    return row["doc_id"], row


def _rejected_key(reject: Reject) -> Iterator[tuple[str, bool]]:
    if reject.doc_id and reject.chunk_id is None:  # a whole document, not one of its chunks
        yield reject.doc_id, True


class _IdSet(beam.CombineFn):
    """The set of a document's chunk ids, as a sorted list."""

    def create_accumulator(self) -> set[str]:
        return set()

    def add_input(self, ids: set[str], chunk_id: str) -> set[str]:
        ids.add(chunk_id)
        return ids

    def merge_accumulators(self, accumulators: Iterable[set[str]]) -> set[str]:
        return set().union(*accumulators)

    def extract_output(self, ids: set[str]) -> list[str]:
        return sorted(ids)


class ChangeLog(beam.PTransform):
    """ChangeInputs -> ChangeResult: one changes/ row per document, joined on doc_id.

    `reused_rows`: the chunk rows copied from the previous run (dicts), when there are any.
    """

    def __init__(
        self, previous: PreviousTables | None, reused_rows: beam.PCollection | None = None
    ) -> None:
        super().__init__()
        self.previous = previous
        self.reused_rows = reused_rows

    def expand(self, inputs: ChangeInputs) -> ChangeResult:
        # A document's chunk ids gathered where its chunks are made (a combine), so that one
        # element per document, not per chunk, goes through the join's shuffle.
        chunk_ids = inputs.chunks | "Chunk ids" >> beam.Map(_chunk_key)
        if self.reused_rows is not None:
            chunk_ids = (
                chunk_ids,
                self.reused_rows | "Reused chunk ids" >> beam.Map(_row_key),
            ) | "All chunk ids" >> beam.Flatten()
        chunk_ids = chunk_ids | "Chunk ids of each document" >> beam.CombinePerKey(_IdSet())
        joined = {
            "current": inputs.documents | "Key documents" >> beam.Map(_document_key),
            "chunk_ids": chunk_ids,
            "rejected": inputs.rejects | "Rejected documents" >> beam.FlatMap(_rejected_key),
        }
        if self.previous is not None:
            joined["previous"] = self.previous.documents | "Key previous" >> beam.Map(_previous_key)
            joined["previous_chunk_ids"] = self.previous.chunks | "Previous ids" >> beam.Map(
                _row_key
            )
        diffed = (
            joined
            | "Join on doc_id" >> beam.CoGroupByKey()
            | "Diff" >> beam.ParDo(_Diff()).with_outputs(_Diff.EVENTS, main="rows")
        )
        return ChangeResult(diffed.rows, diffed[_Diff.EVENTS])
