"""Incremental rebuilds: reuse the chunks of documents that did not change since a previous run.

A document is unchanged when the previous run (same config fingerprint) holds the same doc_id
with the same content_hash. Its chunks (embeddings included) are copied from the previous
output instead of being chunked and embedded again; everything else is rebuilt. A document the
previous run holds that is rejected this time for a reason that may pass (TRANSIENT_REJECTS:
its extraction ran over the time limit, say on a busy night) is kept: the previous run's
document row and chunks are carried over, beside its reject row, so that the index does not
lose it for one night. A previous run
of another config reuses no chunk, but still gives the change log (transforms/changes.py) and
the vectors of identical embedded texts (the embedding cache, transforms/embedding/embed.py).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.parquetio import ReadAllFromParquet

from runs.run_folder import previous_output_folder
from schemas.columns import CHUNKS, DOCUMENTS, REJECTS
from schemas.records import Document, Reject
from transforms.changes import PreviousTables
from transforms.stage_base import Counts
from transforms.stat_events import ChunkReused, DocumentUnchanged

UNCHANGED = "unchanged"  # the tag of SplitUnchanged's output of unchanged documents
# (stage, reason) of the rejects that may not happen again on a rerun: the document is kept
TRANSIENT_REJECTS = frozenset({("extract", "extract_timeout")})


@dataclass(frozen=True)
class PreviousRun:
    output: str
    fingerprint: str
    # The shards that run wrote, per table (from its manifest, each checked against it)
    shards: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    run_id: str | None = None  # None: a dry run's stand-in, which reads no manifest
    embedding_cache_key: str | None = (
        None  # its model's key (transforms/embedding/embedding_cache.py)
    )
    # Whether its chunks may be reused: the same config fingerprint as this run.
    reusable: bool = True

    def read_table(self, table: str, columns: list[str] | None = None) -> beam.PTransform:
        """A read of one of that run's tables (the shards it wrote), of `columns` or all."""
        return _ReadShards(self.shards.get(table, ()), columns)


class _ReadShards(beam.PTransform):
    def __init__(self, paths: tuple[str, ...], columns: list[str] | None) -> None:
        super().__init__()
        self.paths = paths
        self.columns = columns

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            | "Shards" >> beam.Create(self.paths)
            | "Read shards" >> ReadAllFromParquet(columns=self.columns)
        )


def load_previous_run(output: str) -> PreviousRun:
    """The previous run, its manifest checked (runs/manifest.py), its shards checked against it
    and its fingerprint recomputed from its recorded config."""
    folder = previous_output_folder(output)
    folder.require_chunks()
    return PreviousRun(
        output=output,
        fingerprint=folder.fingerprint,
        shards=folder.shards,
        run_id=folder.run_id,
        embedding_cache_key=folder.embedding_cache_key,
    )


def previous_run(output: str | None, fingerprint: str) -> PreviousRun | None:
    """The run at `output` (None: none given); `reusable` only when its config is this run's."""
    if not output:
        return None
    previous = load_previous_run(output)
    if previous.fingerprint != fingerprint:
        logging.warning(
            "--previous_output %s was made with config %s, this run is %s: every document is "
            "chunked again (the vectors of texts that stay the same are still reused)",
            previous.output,
            previous.fingerprint,
            fingerprint,
        )
        return dataclasses.replace(previous, reusable=False)
    return previous


def stand_in_previous_run(
    output: str | None, fingerprint: str, embedding_cache_key: str | None
) -> PreviousRun | None:
    """For a dry run, which must read no data path: the run at `output` taken, unread, as a
    reusable run of this config and model with no shards, so that the translated job holds
    every stage a real previous run of this config gives (None: none given)."""
    if not output:
        return None
    return PreviousRun(output, fingerprint, embedding_cache_key=embedding_cache_key)


def read_previous(pipeline: beam.Pipeline, previous: PreviousRun) -> PreviousTables:
    """The previous run's documents (doc_id, source, content_hash) and chunk rows (all
    columns), each read once for every stage that needs them."""
    documents = pipeline | "Read previous documents" >> previous.read_table(
        DOCUMENTS, ["doc_id", "source", "content_hash"]
    )
    chunks = pipeline | "Read previous chunks" >> previous.read_table(CHUNKS)
    return PreviousTables(documents, chunks)


class _Route(Counts, beam.DoFn):
    """(doc_id, this run's and the previous run's) -> changed documents (main) and `unchanged`
    ones (counted)."""

    def process(self, item: tuple[str, dict]) -> Iterator:
        _, grouped = item
        previous_hashes = set(grouped["previous"])
        # A document some of whose chunks failed to embed last time is rebuilt, so a rerun
        # retries them rather than copying an incomplete set of rows.
        if list(grouped["embed_failed"]):
            previous_hashes = set()
        for doc in grouped["current"]:
            if doc.content_hash in previous_hashes:
                self.stat("documents_unchanged")
                yield beam.pvalue.TaggedOutput(UNCHANGED, doc)
            else:
                yield doc


class SplitUnchanged(beam.PTransform):
    """Document -> changed documents (main) and `unchanged` Documents."""

    def __init__(self, previous: PreviousRun, previous_documents: beam.PCollection) -> None:
        super().__init__()
        self.previous = previous
        self.previous_documents = previous_documents

    def expand(self, docs: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        previous = self.previous_documents | "Key previous" >> beam.Map(
            lambda row: (row["doc_id"], row["content_hash"])
        )
        failed = (
            docs.pipeline
            | "Read previous rejects" >> self.previous.read_table(REJECTS, ["doc_id", "stage"])
            | "Embedding failures" >> beam.Filter(lambda row: row["stage"] == "embed")
            | "Key failures" >> beam.Map(lambda row: (row["doc_id"], True))
        )
        current = docs | "Key current" >> beam.Map(lambda d: (d.doc_id, d))
        joined = {"current": current, "previous": previous, "embed_failed": failed}
        return (
            joined
            | "Join on doc_id" >> beam.CoGroupByKey()
            | "Route" >> beam.ParDo(_Route()).with_outputs(UNCHANGED, main="changed")
        )


OTHERS = "others"  # the tag of ReuseChunks' rows of documents that are not reused


def _rows_of_unchanged(item: tuple[str, dict]) -> Iterator:
    _, grouped = item
    if list(grouped["unchanged"]):
        yield from grouped["rows"]
    else:
        for row in grouped["rows"]:
            yield beam.pvalue.TaggedOutput(OTHERS, row)


class ReuseChunks(beam.PTransform):
    """Unchanged Documents -> their chunk rows from the previous output, as written then (main),
    and the previous rows of every other document (`others`: the embedding cache's)."""

    def __init__(self, previous_chunks: beam.PCollection) -> None:
        super().__init__()
        self.previous_chunks = previous_chunks

    def expand(self, unchanged: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        rows = self.previous_chunks | "Key rows" >> beam.Map(lambda row: (row["doc_id"], row))
        ids = unchanged | "Unchanged ids" >> beam.Map(lambda d: (d.doc_id, True))
        return (
            {"unchanged": ids, "rows": rows}
            | "Join rows" >> beam.CoGroupByKey()
            | "Rows of unchanged documents"
            >> beam.FlatMap(_rows_of_unchanged).with_outputs(OTHERS, main="reused")
        )


def _transient_id(reject: Reject) -> Iterator[tuple[str, bool]]:
    if reject.doc_id and (reject.stage, reject.reason) in TRANSIENT_REJECTS:
        yield reject.doc_id, True


def _carried(item: tuple[str, dict]) -> Iterator[Document]:
    _, grouped = item
    if list(grouped["rejected"]):
        for row in grouped["previous"]:
            yield Document(**row)


class KeepTransientRejects(beam.PTransform):
    """Rejects of this run -> the previous run's Documents of those rejected for a reason that
    may pass (TRANSIENT_REJECTS), which that run holds."""

    def __init__(self, previous: PreviousRun) -> None:
        super().__init__()
        self.previous = previous

    def expand(self, rejects: beam.PCollection) -> beam.PCollection:
        documents = (
            rejects.pipeline
            | "Read previous document rows" >> self.previous.read_table(DOCUMENTS)
            | "Key previous rows" >> beam.Map(lambda row: (row["doc_id"], row))
        )
        rejected = rejects | "Transient rejects" >> beam.FlatMap(_transient_id)
        return (
            {"rejected": rejected, "previous": documents}
            | "Join kept" >> beam.CoGroupByKey()
            | "Previous documents" >> beam.FlatMap(_carried)
        )


def _unchanged_event(doc: Document) -> DocumentUnchanged:
    return DocumentUnchanged(doc.doc_type)


def _reused_event(row: dict) -> ChunkReused:
    return ChunkReused(row["embed_tokens"] or 0)


class RebuildResult(NamedTuple):
    changed: beam.PCollection  # Document: to chunk and embed
    # Document whose chunks are reused (unchanged or kept: transient rejects); None: no reuse
    unchanged: beam.PCollection | None
    reused_rows: beam.PCollection | None  # chunk rows (dicts) copied from the previous run
    events: beam.PCollection | None  # accounting events of the above
    # The previous run's chunk rows not copied (the embedding cache's); None: no previous run
    other_rows: beam.PCollection | None = None


class ReuseUnchanged(beam.PTransform):
    """Documents -> RebuildResult: against a previous run of the same config, what changed goes
    on to be chunked, and what did not keeps the previous run's chunk rows; without one,
    everything is changed."""

    def __init__(
        self,
        previous: PreviousRun | None,
        tables: PreviousTables | None,
        rejects: beam.PCollection | None = None,
    ) -> None:
        super().__init__()
        self.previous = previous if previous is not None and previous.reusable else None
        self.tables = tables
        self.rejects = rejects  # this run's rejects so far: its transient ones are kept

    def expand(self, docs: beam.PCollection) -> RebuildResult:
        if self.tables is None:
            return RebuildResult(docs, None, None, None)
        if self.previous is None:  # another config: nothing reused but the vectors
            return RebuildResult(docs, None, None, None, self.tables.chunks)
        routed = docs | "Split unchanged" >> SplitUnchanged(self.previous, self.tables.documents)
        reused = routed.unchanged
        if self.rejects is not None:
            kept = self.rejects | "Keep transient rejects" >> KeepTransientRejects(self.previous)
            reused = (routed.unchanged, kept) | "Unchanged and kept" >> beam.Flatten()
        copied = reused | "Reuse chunks" >> ReuseChunks(self.tables.chunks)
        events = (
            routed.unchanged | "Unchanged events" >> beam.Map(_unchanged_event),
            copied.reused | "Reused events" >> beam.Map(_reused_event),
        ) | "Rebuild events" >> beam.Flatten()
        return RebuildResult(routed.changed, reused, copied.reused, events, copied[OTHERS])
