"""Incremental rebuilds: reuse the rows of documents that did not change since a previous run.

Against a previous run of the same config fingerprint, a document is unchanged when extraction
gives it what it gave then (its extracted hash) and its group's boilerplate lines are the ones
it was cleaned with (a digest per group): its document row and chunks (embeddings included)
are copied from the previous output, and it is neither cleaned, chunked nor embedded again.
The decision is made on that small index before boilerplate removal (`ReuseBeforeRemoval`),
so no text waits for the corpus-wide line counts; the documents that changed are read and
extracted again (transforms/ingest/reread.py). A document the previous run holds that is
rejected this time for a reason that may pass (TRANSIENT_REJECTS: its extraction ran over the
time limit, say on a busy night, at the first reading or the second) is kept: the previous
run's document row and chunks are carried over, beside its reject row, so that the index does
not lose it for one night. A
previous run of another config reuses no chunk, but still gives the change log
(transforms/changes.py) and the vectors of identical embedded texts (the embedding cache,
transforms/embedding/embed.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.parquetio import ReadAllFromParquet

from runs.manifest import CheckShards
from runs.run_folder import previous_output_folder
from schemas.columns import BOILERPLATE, CHUNKS, DOCUMENTS, REJECTS
from schemas.records import Document, Reject, file_of
from transforms.boilerplate import boilerplate_group
from transforms.changes import PreviousTables, Reused
from transforms.stage_base import Counts
from transforms.stat_events import ChunkReused, DocumentUnchanged

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
    if BOILERPLATE not in previous.shards:
        logging.warning(
            "--previous_output %s was written by an older version of corpus-chunker, without "
            "boilerplate counts to update: every document is chunked again (the chunk ids stay "
            "the same, and the vectors of texts that stay the same are reused)",
            previous.output,
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
KEPT_IDS = "kept_ids"  # documents rejected this run for a transient reason, carried over
NOT_REUSED_IDS = "not_reused_ids"  # documents of the previous run whose rows are not copied


def _embed_failure(row: dict) -> Iterator[tuple[str, bool]]:
    if row["stage"] == "embed":
        yield row["doc_id"], True


OTHERS = "others"  # the tag of ReuseChunks' rows of documents that are not reused


class _RowsOfReused(beam.DoFn):
    """A previous chunk row -> itself (main) when its document is reused, with the source its
    document has now, else `others`."""

    def process(
        self, row: dict, not_reused: Mapping[str, bool], moved: Mapping[str, str]
    ) -> Iterator:
        doc_id = row["doc_id"]
        if doc_id in not_reused:
            yield beam.pvalue.TaggedOutput(OTHERS, row)
        elif doc_id in moved:
            yield {**row, "source": moved[doc_id]}
        else:
            yield row


class ReuseChunks(beam.PTransform):
    """The previous run's chunk rows -> those of the documents it reuses, as written then
    (main), and the rows of every other document (`others`: the embedding cache's). The rows
    are split where they are read, by the ids of the documents not reused (a side input as
    large as the change): no row is shuffled."""

    def __init__(self, not_reused_ids: beam.PCollection, moved: beam.PCollection) -> None:
        """`moved`: (doc_id, source) of the reused documents whose source is another now."""
        super().__init__()
        self.not_reused_ids = not_reused_ids
        self.moved = moved

    def expand(self, previous_chunks: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        return previous_chunks | "Split rows" >> beam.ParDo(
            _RowsOfReused(),
            beam.pvalue.AsDict(self.not_reused_ids),
            beam.pvalue.AsDict(self.moved),
        ).with_outputs(OTHERS, main="reused")


def _transient_id(reject: Reject) -> Iterator[tuple[str, bool]]:
    if reject.doc_id and (reject.stage, reject.reason) in TRANSIENT_REJECTS:
        yield reject.doc_id, True


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


INDEX_HASH_BYTES = 12  # of a sha256 hex digest in the index: what the decision compares
SOURCE_DIGEST_BYTES = 8  # of a previous source: only compared, within one doc_id


def _index_key(doc_id: str) -> str | bytes:
    """A doc_id as the index's join key: its bytes when it is lowercase hex (as the job's ids
    are), half the size; any other id as it is. `_doc_id` gives it back."""
    if len(doc_id) % 2 == 0 and doc_id == doc_id.lower():
        try:
            return bytes.fromhex(doc_id)
        except ValueError:
            pass
    return doc_id


def _doc_id(key: str | bytes) -> str:
    return key.hex() if isinstance(key, bytes) else key


def _short(hex_digest: str, size: int = INDEX_HASH_BYTES) -> bytes:
    return bytes.fromhex(hex_digest)[:size]


def _source_digest(source: str) -> bytes:
    return hashlib.blake2b(
        source.encode("utf-8", "surrogatepass"), digest_size=SOURCE_DIGEST_BYTES
    ).digest()


def _from_root(source: str, root: str) -> str:
    """A source as the index carries it: after the input root the job reads (most of a long
    `gs://bucket/corpus/...` path is that root); a source outside it, whole, after a NUL."""
    if not root:
        return source
    return source[len(root) :] if source.startswith(root) else "\0" + source


def _full_source(carried: str, root: str) -> str:
    """The source `_from_root` carried."""
    if not root:
        return carried
    return carried[1:] if carried.startswith("\0") else root + carried


TO_READ = "to_read"  # the tag of the (file, doc_id, source) of each document to read again
MOVED = "moved"  # the tag of (doc_id, source) of a reused JSONL record on another line now


UNCOUNTED = "uncounted"  # the tag of (doc_id, True): previous documents whose lines come off


class _DecideExtracted(beam.DoFn):
    """(doc_id, {current: (extracted hash, counted, source), previous: (extracted hash,
    counted, source digest), counted_reject, embed_failed, transient}) -> the doc_id under the
    verdicts that concern what changed: `to_read`, (file, doc_id, source) of this run's
    documents that changed (edited, added, retried after an embedding failure or a rejection
    at chunking, or not counted for boilerplate last time); `kept_ids` (rejected this run for a
    transient reason, the previous run's rows carried over); `moved` (a reused JSONL record on
    another line); `uncounted` (previous documents whose lines the previous run counted for
    boilerplate and this run does not count as they were: changed, removed, kept or
    rejected); and `not_reused_ids` (main: the previous run's documents whose rows are not
    copied). A document is unchanged when extraction gave it what it gave last time and it was
    counted for boilerplate as it is now; then its rows are the previous run's unless its
    group's boilerplate lines changed (transforms/boilerplate_delta.py decides that). An
    unchanged document, the bulk of a night, gets no verdict."""

    def __init__(self, root: str = "") -> None:
        self.root = root  # the input root the current sources are carried after

    def process(self, item: tuple[str | bytes, dict]) -> Iterator:
        key, grouped = item
        doc_id = _doc_id(key)
        previous = list(grouped["previous"])
        # a document some of whose chunks failed to embed last time is rebuilt
        failed = bool(list(grouped["embed_failed"]))
        previous_keys = set() if failed else {(extracted, c) for extracted, c, _ in previous}
        previous_sources = {source for _, _, source in previous}
        counted_before = any(c for _, c, _ in previous) or bool(list(grouped["counted_reject"]))
        current = [
            (extracted, counted, _full_source(source, self.root))
            for extracted, counted, source in grouped["current"]
        ]
        if current:
            versions = [(extracted, counted) for extracted, counted, _ in current]
            reused = all(version in previous_keys for version in versions)
            if not reused:
                for _, _, source in current:
                    yield beam.pvalue.TaggedOutput(TO_READ, (file_of(source), doc_id, source))
            elif len(current) == 1 and _source_digest(current[0][2]) not in previous_sources:
                # the same record of the same file, on another line: its rows, with its source
                yield beam.pvalue.TaggedOutput(MOVED, (doc_id, current[0][2]))
        else:
            reused = bool(previous) and bool(list(grouped["transient"]))
            if reused:  # kept, but not counted: a scratch run would not have read it
                yield beam.pvalue.TaggedOutput(KEPT_IDS, (doc_id, True))
        if counted_before and not (current and reused):
            yield beam.pvalue.TaggedOutput(UNCOUNTED, (doc_id, True))
        if previous and not reused:
            yield doc_id, True


def _extracted_index(
    doc: Document, counted: bool, root: str = ""
) -> tuple[str | bytes, tuple[bytes, bool, str]]:
    """(doc_id, (extracted hash, whether its lines are counted for boilerplate, source after
    `root`)), ids and hashes as bytes; `counted`: whether boilerplate is removed at all."""
    counted = bool(counted) and boilerplate_group(doc) is not None
    return _index_key(doc.doc_id), (
        _short(doc.extracted_hash),
        counted,
        _from_root(doc.source, root),
    )


def _previous_extracted(row: dict) -> tuple[str | bytes, tuple[bytes, bool, bytes]]:
    """(doc_id, (extracted hash, whether its lines were counted, digest of the source)) of a
    previous document row, as `_extracted_index` gives them."""
    index = (
        _short(row["extracted_hash"]),
        row["line_digests"] is not None,
        _source_digest(row["source"]),
    )
    return _index_key(row["doc_id"]), index


def _counted_reject(row: dict) -> Iterator[tuple[str | bytes, bool]]:
    """A previous reject of a document whose lines were counted (rejected at chunking)."""
    if row["line_digests"] is not None and row["doc_id"]:
        yield _index_key(row["doc_id"]), True


def _keyed(pair: tuple[str, bool]) -> tuple[str | bytes, bool]:
    return _index_key(pair[0]), pair[1]


class _SplitPrevious(Counts, beam.DoFn):
    """A previous document row -> its Document, unchanged (main) or `kept`, unless its id is
    among those not reused. A kept document is written as not counted (its row holds no line
    digests), so that the next rebuild reads it again: its lines came off its group's counts
    (`uncounted`), or, when it was kept at a regrouped reading, they are on its reject."""

    def process(
        self,
        row: dict,
        not_reused: Mapping[str, bool],
        kept: Mapping[str, bool],
        moved: Mapping[str, str],
    ) -> Iterator:
        doc_id = row["doc_id"]
        if doc_id in not_reused:
            return
        doc = Document(**{**row, "source": moved.get(doc_id, row["source"])})
        if doc_id in kept:
            yield beam.pvalue.TaggedOutput(KEPT, dataclasses.replace(doc, line_digests=None))
        else:
            self.stat("documents_unchanged")
            yield doc


KEPT = "kept"


class EarlySplit(NamedTuple):
    # the index join's verdicts on the documents that changed (`ReuseRows` takes them)
    verdicts: beam.pvalue.DoOutputsTuple

    @property
    def to_read(self) -> beam.PCollection:
        """(file, doc_id, source) of this run's documents that changed: to read again, clean
        and chunk."""
        return self.verdicts[TO_READ]


class ReuseBeforeRemoval(beam.PTransform):
    """Documents as extracted -> EarlySplit, against a previous run of the same config.

    A decision on the text after boilerplate removal would wait for the corpus-wide line
    counts: every document would wait with its text (a shuffle of the corpus on a quiet
    night). This decides before the removal, on a small index: each document's extracted hash
    and whether its lines are counted for boilerplate, against what the previous run recorded;
    every text is dropped where it was extracted. The changed documents are read again by path
    (transforms/ingest/reread.py); their lines, and those the previous run counted of the
    documents that changed or went, update the previous run's boilerplate counts
    (transforms/boilerplate_delta.py), and the unchanged documents of a group whose
    boilerplate lines changed are read again too. Only those are cleaned, chunked and
    embedded; `ReuseRows` takes the others' rows and chunks from the previous run, read where
    they are. The price: reading and extracting the changed documents twice.
    """

    def __init__(
        self,
        previous: PreviousRun,
        counted: bool,
        rejects: beam.PCollection,
        root: str = "",
    ) -> None:
        super().__init__()
        if not previous.reusable:
            raise ValueError(f"{previous.output}: another config's run reuses nothing")
        self.previous = previous
        self.counted = counted  # whether lines are counted for boilerplate (--boilerplate on)
        self.rejects = rejects  # this run's rejects so far: its transient ones are kept
        self.root = root  # the input root (transforms/ingest/matching.py): sources are after it

    def expand(self, docs: beam.PCollection) -> EarlySplit:
        p = docs.pipeline
        previous_rejects = p | "Read previous rejects" >> self.previous.read_table(
            REJECTS, ["doc_id", "stage", "line_digests"]
        )
        index = {
            "current": docs
            | "Index current" >> beam.Map(_extracted_index, self.counted, self.root),
            "previous": (
                p
                | "Read previous index"
                >> self.previous.read_table(
                    DOCUMENTS, ["doc_id", "extracted_hash", "line_digests", "source"]
                )
                | "Index previous" >> beam.Map(_previous_extracted)
            ),
            "counted_reject": previous_rejects | "Counted rejects" >> beam.FlatMap(_counted_reject),
            "embed_failed": (
                previous_rejects
                | "Embedding failures" >> beam.FlatMap(_embed_failure)
                | "Key failures" >> beam.Map(_keyed)
            ),
            "transient": (
                self.rejects
                | "Transient rejects" >> beam.FlatMap(_transient_id)
                | "Key transient rejects" >> beam.Map(_keyed)
            ),
        }
        verdicts = (
            index
            | "Join on doc_id" >> beam.CoGroupByKey()
            | "Decide"
            >> beam.ParDo(_DecideExtracted(self.root)).with_outputs(
                TO_READ, KEPT_IDS, MOVED, UNCOUNTED, main=NOT_REUSED_IDS
            )
        )
        return EarlySplit(verdicts)


def _not_late(pair: tuple[str, bool], late: Mapping[str, bool]) -> Iterator[tuple[str, bool]]:
    if pair[0] not in late:
        yield pair


class ReuseRows(beam.PTransform):
    """The rejects of the later readings -> RebuildResult: the previous run's rows and chunks
    of the documents `ReuseBeforeRemoval` found unchanged, and of those kept.

    Kept: the documents rejected this run for a reason that may pass (TRANSIENT_REJECTS),
    whether at the first reading (the index join's verdict) or at a later one (a changed or
    regrouped document whose extraction ran over its time limit when read again: its
    previous rows are carried over, as they would be had the first reading timed out, and
    written as not counted for boilerplate)."""

    def __init__(
        self,
        previous: PreviousRun,
        tables: PreviousTables,
        verdicts: beam.pvalue.DoOutputsTuple,
        regrouped: beam.PCollection | None = None,
    ) -> None:
        """`regrouped`: (doc_id, True) of the unchanged documents read again because their
        group's boilerplate lines changed (their rows are not copied)."""
        super().__init__()
        self.previous = previous
        self.tables = tables
        self.verdicts = verdicts
        self.regrouped = regrouped

    def expand(self, late_rejects: beam.PCollection) -> RebuildResult:
        p = late_rejects.pipeline
        verdicts = self.verdicts
        late = late_rejects | "Late transient rejects" >> beam.FlatMap(_transient_id)
        not_reused_ids = verdicts[NOT_REUSED_IDS]
        if self.regrouped is not None:
            not_reused_ids = (
                not_reused_ids,
                self.regrouped,
            ) | "Changed and regrouped" >> beam.Flatten()
        not_reused_ids = not_reused_ids | "Less the late kept" >> beam.FlatMap(
            _not_late, beam.pvalue.AsDict(late)
        )
        kept_ids = (verdicts[KEPT_IDS], late) | "Kept ids" >> beam.Flatten()
        moved = beam.pvalue.AsDict(verdicts[MOVED])
        previous_docs = (
            p
            | "Read previous document rows" >> self.previous.read_table(DOCUMENTS)
            | "Split previous documents"
            >> beam.ParDo(
                _SplitPrevious(),
                beam.pvalue.AsDict(not_reused_ids),
                beam.pvalue.AsDict(kept_ids),
                moved,
            ).with_outputs(KEPT, main="unchanged")
        )
        unchanged, kept = previous_docs.unchanged, previous_docs[KEPT]
        reused = (unchanged, kept) | "Unchanged and kept" >> beam.Flatten()
        copied = self.tables.chunks | "Reuse chunks" >> ReuseChunks(not_reused_ids, verdicts[MOVED])
        events = (
            unchanged | "Unchanged events" >> beam.Map(_unchanged_event),
            copied.reused | "Reused events" >> beam.Map(_reused_event),
        ) | "Rebuild events" >> beam.Flatten()
        return RebuildResult(
            None,
            reused,
            copied.reused,
            events,
            copied[OTHERS],
            Reused(unchanged, kept, not_reused_ids),
        )
