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
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.parquetio import ReadAllFromParquet

from runs.manifest import CheckShards
from runs.run_folder import previous_output_folder
from schemas.columns import CHUNKS, DOCUMENTS, REJECTS
from schemas.records import Document, Reject
from transforms.changes import PreviousTables, Reused
from transforms.stage_base import Counts
from transforms.stat_events import ChunkReused, DocumentUnchanged

UNCHANGED = "unchanged"  # the tag of SplitUnchanged's output of unchanged documents
# (stage, reason) of the rejects that may not happen again on a rerun: the document is kept
TRANSIENT_REJECTS = frozenset({("extract", "extract_timeout")})


@dataclass(frozen=True)
class PreviousRun:
    output: str
    fingerprint: str
    # The shards that run wrote, per table (from its manifest, their sizes checked by a listing)
    shards: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    # (path, manifest entry, error) of each shard: its sha256 is checked where the job runs
    checks: tuple[tuple[str, dict, str], ...] = ()
    run_id: str | None = None  # None: a dry run's stand-in, which reads no manifest
    embedding_cache_key: str | None = (
        None  # its model's key (transforms/embedding/embedding_cache.py)
    )
    # Whether its chunks may be reused: the same config fingerprint as this run.
    reusable: bool = True

    def __post_init__(self) -> None:
        checked = {path for path, _, _ in self.checks}
        unchecked = [p for paths in self.shards.values() for p in paths if p not in checked]
        if unchecked:  # a table is read only from shards found to be the files listed
            raise ValueError(f"{self.output}: shards without a check: {unchecked[:3]}")

    def read_table(self, table: str, columns: list[str] | None = None) -> beam.PTransform:
        """A read of one of that run's tables (the shards it wrote), of `columns` or all."""
        return _ReadShards(self, table, columns)


class _ReadShards(beam.PTransform):
    """One table of the previous run: its shards once `CheckShards` has found each to be the
    file the manifest lists, so that no row of a changed shard reaches this run."""

    def __init__(self, previous: PreviousRun, table: str, columns: list[str] | None) -> None:
        super().__init__()
        self.previous = previous
        self.paths = frozenset(previous.shards.get(table, ()))
        self.columns = columns

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            _checked_shards(pbegin.pipeline, self.previous)
            | "Shards" >> beam.Filter(lambda path, paths: path in paths, self.paths)
            | "Read shards" >> ReadAllFromParquet(columns=self.columns)
        )


# {pipeline: {previous output: a weak reference to its checked shards}}: the pipeline holds the
# PCollection, and nothing here holds the pipeline
_CHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _checked_shards(pipeline: beam.Pipeline, previous: PreviousRun) -> beam.PCollection:
    """The paths of the previous run's shards, each checked once in `pipeline` (one step for
    every read of its tables; `read_previous` makes it at the top of the graph)."""
    done = _CHECKED.setdefault(pipeline, {})
    ref = done.get(previous.output)
    checked = ref() if ref is not None else None
    if checked is None:
        paths = [path for table in previous.shards.values() for path in table]
        checked = pipeline | "Check previous shards" >> CheckShards(previous.checks, paths)
        done[previous.output] = weakref.ref(checked)
    return checked


def load_previous_run(output: str) -> PreviousRun:
    """The previous run, its manifest checked (runs/manifest.py), its shards listed and their
    sizes checked against it (their sha256 by `read_previous`, in the job), and its fingerprint
    recomputed from its recorded config."""
    folder = previous_output_folder(output)
    folder.require_chunks()
    return PreviousRun(
        output=output,
        fingerprint=folder.fingerprint,
        shards=folder.listed_shards,
        checks=folder.shard_checks(),
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
    columns), each read once for every stage that needs them. The check of the shards that
    every read takes its paths from is made here, at the top of the graph."""
    _checked_shards(pipeline, previous)
    documents = pipeline | "Read previous documents" >> previous.read_table(
        DOCUMENTS, ["doc_id", "source", "content_hash"]
    )
    chunks = pipeline | "Read previous chunks" >> previous.read_table(CHUNKS)
    return PreviousTables(documents, chunks)


# Tags of the verdicts of the index join: doc ids, each a (doc_id, True) pair
CHANGED_IDS = "changed_ids"  # documents of this run to chunk (edited, added, retried)
KEPT_IDS = "kept_ids"  # documents rejected this run for a transient reason, carried over
NOT_REUSED_IDS = "not_reused_ids"  # documents of the previous run whose rows are not copied


class _Decide(beam.DoFn):
    """(doc_id, {current, previous, embed_failed, transient}: content hashes and flags) -> the
    doc_id under the verdicts that concern what changed: `changed_ids`, `kept_ids` and
    `not_reused_ids` (main). A document that is unchanged, the bulk of a night, gets no
    verdict: it is what is left."""

    def process(self, item: tuple[str, dict]) -> Iterator:
        doc_id, grouped = item
        previous = list(grouped["previous"])
        previous_hashes = set(previous)
        # A document some of whose chunks failed to embed last time is rebuilt, so a rerun
        # retries them rather than copying an incomplete set of rows.
        if list(grouped["embed_failed"]):
            previous_hashes = set()
        current = list(grouped["current"])
        if current:
            reused = all(h in previous_hashes for h in current)
            if not reused:
                yield beam.pvalue.TaggedOutput(CHANGED_IDS, (doc_id, True))
        else:
            reused = bool(previous) and bool(list(grouped["transient"]))
            if reused:
                yield beam.pvalue.TaggedOutput(KEPT_IDS, (doc_id, True))
        if previous and not reused:
            yield doc_id, True


class _Route(Counts, beam.DoFn):
    """Document -> changed documents (main), whose ids `changed` holds, and `unchanged` ones
    (counted)."""

    def process(self, doc: Document, changed: Mapping[str, bool]) -> Iterator:
        if doc.doc_id in changed:
            yield doc
        else:
            self.stat("documents_unchanged")
            yield beam.pvalue.TaggedOutput(UNCHANGED, doc)


def _current_index(doc: Document) -> tuple[str, str]:
    return doc.doc_id, doc.content_hash


def _previous_index(row: dict) -> tuple[str, str]:
    return row["doc_id"], row["content_hash"]


def _embed_failure(row: dict) -> Iterator[tuple[str, bool]]:
    if row["stage"] == "embed":
        yield row["doc_id"], True


class SplitResult(NamedTuple):
    changed: beam.PCollection  # Document: to chunk
    unchanged: beam.PCollection  # Document: whose previous chunk rows are reused
    kept_ids: beam.PCollection  # (doc_id, True): transient rejects the previous run holds
    not_reused_ids: beam.PCollection  # (doc_id, True): previous documents not copied


class SplitUnchanged(beam.PTransform):
    """Document -> SplitResult, decided on a small index: (doc_id, content hash) of this run's
    documents and of the previous run's, the previous run's embedding failures and this run's
    transient rejects, joined on doc_id. No text is shuffled: the documents stay where they
    are and are routed by the ids of the changed ones (a side input as large as the change)."""

    def __init__(
        self,
        previous: PreviousRun,
        previous_documents: beam.PCollection,
        rejects: beam.PCollection | None = None,
    ) -> None:
        super().__init__()
        self.previous = previous
        self.previous_documents = previous_documents
        self.rejects = rejects  # this run's rejects so far: its transient ones are kept

    def expand(self, docs: beam.PCollection) -> SplitResult:
        p = docs.pipeline
        index = {
            "current": docs | "Index current" >> beam.Map(_current_index),
            "previous": self.previous_documents | "Index previous" >> beam.Map(_previous_index),
            "embed_failed": (
                p
                | "Read previous rejects" >> self.previous.read_table(REJECTS, ["doc_id", "stage"])
                | "Embedding failures" >> beam.FlatMap(_embed_failure)
            ),
            "transient": (
                self.rejects | "Transient rejects" >> beam.FlatMap(_transient_id)
                if self.rejects is not None
                else p | "No rejects" >> beam.Create([]).with_output_types(tuple[str, bool])
            ),
        }
        verdicts = (
            index
            | "Join on doc_id" >> beam.CoGroupByKey()
            | "Decide"
            >> beam.ParDo(_Decide()).with_outputs(CHANGED_IDS, KEPT_IDS, main=NOT_REUSED_IDS)
        )
        routed = docs | "Route" >> beam.ParDo(
            _Route(), beam.pvalue.AsDict(verdicts[CHANGED_IDS])
        ).with_outputs(UNCHANGED, main="changed")
        return SplitResult(
            routed.changed, routed[UNCHANGED], verdicts[KEPT_IDS], verdicts[NOT_REUSED_IDS]
        )


OTHERS = "others"  # the tag of ReuseChunks' rows of documents that are not reused


class _RowsOfReused(beam.DoFn):
    """A previous chunk row -> itself (main) when its document is reused, else `others`."""

    def process(self, row: dict, not_reused: Mapping[str, bool]) -> Iterator:
        if row["doc_id"] in not_reused:
            yield beam.pvalue.TaggedOutput(OTHERS, row)
        else:
            yield row


class ReuseChunks(beam.PTransform):
    """The previous run's chunk rows -> those of the documents it reuses, as written then
    (main), and the rows of every other document (`others`: the embedding cache's). The rows
    are split where they are read, by the ids of the documents not reused (a side input as
    large as the change): no row is shuffled."""

    def __init__(self, not_reused_ids: beam.PCollection) -> None:
        super().__init__()
        self.not_reused_ids = not_reused_ids

    def expand(self, previous_chunks: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        return previous_chunks | "Split rows" >> beam.ParDo(
            _RowsOfReused(), beam.pvalue.AsDict(self.not_reused_ids)
        ).with_outputs(OTHERS, main="reused")


def _transient_id(reject: Reject) -> Iterator[tuple[str, bool]]:
    if reject.doc_id and (reject.stage, reject.reason) in TRANSIENT_REJECTS:
        yield reject.doc_id, True


class _KeptDocument(beam.DoFn):
    def process(self, row: dict, kept: Mapping[str, bool]) -> Iterator[Document]:
        if row["doc_id"] in kept:
            yield Document(**row)


class KeepTransientRejects(beam.PTransform):
    """PBegin -> the previous run's Documents whose ids `kept_ids` holds (transient rejects of
    this run), picked from its documents table where it is read (no text is shuffled)."""

    def __init__(self, previous: PreviousRun, kept_ids: beam.PCollection) -> None:
        super().__init__()
        self.previous = previous
        self.kept_ids = kept_ids

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            | "Read previous document rows" >> self.previous.read_table(DOCUMENTS)
            | "Previous documents" >> beam.ParDo(_KeptDocument(), beam.pvalue.AsDict(self.kept_ids))
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
    # What was reused, for the change log; None: nothing reused
    reused: Reused | None = None


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
        routed = docs | "Split unchanged" >> SplitUnchanged(
            self.previous, self.tables.documents, self.rejects
        )
        reused, kept = routed.unchanged, None
        if self.rejects is not None:
            kept = docs.pipeline | "Keep transient rejects" >> KeepTransientRejects(
                self.previous, routed.kept_ids
            )
            reused = (routed.unchanged, kept) | "Unchanged and kept" >> beam.Flatten()
        copied = self.tables.chunks | "Reuse chunks" >> ReuseChunks(routed.not_reused_ids)
        events = (
            routed.unchanged | "Unchanged events" >> beam.Map(_unchanged_event),
            copied.reused | "Reused events" >> beam.Map(_reused_event),
        ) | "Rebuild events" >> beam.Flatten()
        return RebuildResult(
            routed.changed,
            reused,
            copied.reused,
            events,
            copied[OTHERS],
            Reused(routed.unchanged, kept, routed.not_reused_ids),
        )
