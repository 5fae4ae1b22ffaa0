"""A rebuild's boilerplate counts: the previous run's, updated with the lines of what changed.

A build counts, per group (a folder, or a JSONL file), the documents holding each line key and
the documents of the group (transforms/boilerplate.py, `CountLines`), and writes the counts as
the `boilerplate` table; each document row records the line digests it added
(`documents.line_digests`; a document rejected at chunking, on its reject row). A rebuild does
not count the corpus again: the documents that changed add their lines as read again, those
that changed or went (`uncounted`) take off the lines the previous run recorded of them, and
only the sum of those (+1/-1 per group and line) is shuffled. The previous counts are read where
they are, and only those of the groups the change touches are joined with it. A line is
boilerplate by the same rule (`is_boilerplate`) against its group's new size, so the counts,
and every group's lines, are those a scratch run would give; a group whose lines change has its
unchanged documents read again and cleaned (`regroup`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, NamedTuple

import apache_beam as beam

from schemas.columns import BOILERPLATE, DOCUMENTS, REJECTS
from schemas.records import Document, Reject, file_of
from transforms.boilerplate import (
    DIGEST_BYTES,
    BoilerplateConfig,
    boilerplate_group,
    count_row,
    digest,
    group_of_source,
    is_boilerplate,
    split_digests,
    with_line_digests,
)
from transforms.ingest.reread import GONE
from transforms.stage_base import Counts

if TYPE_CHECKING:
    from transforms.incremental import PreviousRun

REGROUP = "regroup"  # the tag of (file, doc_id, source) of the documents to read again
EXPECTED = "expected"  # the tag of (doc_id, (extracted hash, line digests)) of those documents


def _plus(doc: Document) -> Iterator[tuple[bytes, int]]:
    """What a document as extracted adds: 1 to its group's size and to each of its lines."""
    group = boilerplate_group(doc)
    if group is None:  # HTML, PDF, DOCX, PPTX: never counted
        return
    yield group, 1
    for line in split_digests(with_line_digests(doc).line_digests or b""):
        yield group + line, 1


def _minus(row: dict, uncounted: Mapping[str, bool]) -> Iterator[tuple[bytes, int]]:
    """What a previous row (document or reject) of an uncounted document takes off."""
    if row["line_digests"] is None or row["doc_id"] not in uncounted:
        return
    group = digest(group_of_source(row["source"]))
    yield group, -1
    for line in split_digests(row["line_digests"]):
        yield group + line, -1


def _nonzero(entry: tuple[bytes, int]) -> bool:
    return entry[1] != 0


def _group_of_entry(entry: tuple[bytes, int]) -> Iterator[tuple[bytes, bool]]:
    if len(entry[0]) == DIGEST_BYTES:  # a group's size: one per document, not per line
        yield entry[0], True


def _count_key(row: dict) -> bytes:
    return row["group"] + row["line"]


def _touched(
    row: dict, needed: Mapping[bytes, bool], delta: Mapping[bytes, int], min_docs: int
) -> Iterator[tuple[bytes, int]]:
    """A previous count that may decide a line of a group the change touches: the group's
    size, a line the change adds to or takes from, or one already in min_docs documents (a
    line in fewer, which the change leaves alone, stays under min_docs)."""
    if row["group"] not in needed:
        return
    key = _count_key(row)
    if not row["line"] or row["docs"] >= min_docs or key in delta:
        yield key, row["docs"]


def _untouched_row(row: dict, delta: Mapping[bytes, int]) -> Iterator[dict]:
    if _count_key(row) not in delta:
        yield row


def _old_and_new(item: tuple[bytes, dict]) -> tuple[bytes, tuple[int, int]]:
    key, grouped = item
    old = sum(grouped["previous"])
    return key, (old, old + sum(grouped["delta"]))


def _size(entry: tuple[bytes, tuple[int, int]]) -> Iterator[tuple[bytes, tuple[int, int]]]:
    if len(entry[0]) == DIGEST_BYTES:
        yield entry


def _new_row(entry: tuple[bytes, tuple[int, int]], delta: Mapping[bytes, int]) -> Iterator[dict]:
    key, (_, new) = entry
    if key in delta and new > 0:
        yield count_row(key, new)


CHANGED_GROUPS = "changed_groups"


def _decide(
    entry: tuple[bytes, tuple[int, int]],
    sizes: Mapping[bytes, tuple[int, int]],
    config: BoilerplateConfig,
) -> Iterator:
    """(group + line, (documents before, after)) -> (group, line) when it is boilerplate now,
    and (group, True) on `changed_groups` when it was boilerplate before and is not, or the
    reverse."""
    key, (old, new) = entry
    if len(key) == DIGEST_BYTES:
        return
    group, line = key[:DIGEST_BYTES], key[DIGEST_BYTES:]
    old_size, new_size = sizes.get(group, (0, 0))
    now = is_boilerplate(new, new_size, config)
    if now:
        yield group, line
    if now != is_boilerplate(old, old_size, config):
        yield beam.pvalue.TaggedOutput(CHANGED_GROUPS, (group, True))


class _Regroup(beam.DoFn):
    """A previous document row -> (file, doc_id, source) to read again, when it is unchanged
    (no verdict), counted, and in a group whose boilerplate lines changed; and its extracted
    hash and line digests on `expected`."""

    def process(
        self,
        row: dict,
        changed: Mapping[bytes, bool],
        decided: Mapping[str, bool],
        moved: Mapping[str, str],
    ) -> Iterator:
        doc_id, lines = row["doc_id"], row["line_digests"]
        if lines is None or doc_id in decided:
            return
        if digest(group_of_source(row["source"])) not in changed:
            return
        source = moved.get(doc_id, row["source"])
        yield file_of(source), doc_id, source
        yield beam.pvalue.TaggedOutput(EXPECTED, (doc_id, (row["extracted_hash"], lines)))


def id_of_entry(entry: tuple[str, str, str]) -> tuple[str, bool]:
    """(doc_id, True) of a (file, doc_id, source) to read again."""
    return entry[1], True


class CountUpdate(NamedTuple):
    # (group, line) digests: the boilerplate lines of every group this run cleans a document of
    lines: beam.PCollection
    # (file, doc_id, source): the unchanged documents of groups whose lines changed, to read again
    regroup: beam.PCollection
    regrouped_ids: beam.PCollection  # (doc_id, True) of those
    # (doc_id, (extracted hash, line digests)) of those: what the reading again must give
    expected: beam.PCollection
    rows: beam.PCollection  # the `boilerplate` table's rows of this run


class UpdateCounts(beam.PTransform):
    """The changed documents as read again -> CountUpdate, from the previous run's counts.

    `uncounted`: (doc_id, True) of the previous documents whose recorded lines come off (the
    index join's verdict); `decided`: (doc_id, True) of every document with a verdict (to read
    again, not reused, kept), which are never regrouped; `moved`: (doc_id, source) of reused
    JSONL records on another line."""

    def __init__(
        self,
        previous: PreviousRun,
        config: BoilerplateConfig,
        uncounted: beam.PCollection,
        decided: beam.PCollection,
        moved: beam.PCollection,
    ) -> None:
        super().__init__()
        self.previous = previous
        self.config = config
        self.uncounted = uncounted
        self.decided = decided
        self.moved = moved

    def expand(self, docs: beam.PCollection) -> CountUpdate:
        p = docs.pipeline
        previous = self.previous
        uncounted = beam.pvalue.AsDict(self.uncounted)
        previous_docs = p | "Read previous lines" >> previous.read_table(
            DOCUMENTS, ["doc_id", "source", "line_digests", "extracted_hash"]
        )
        previous_rejects = p | "Read previous rejected lines" >> previous.read_table(
            REJECTS, ["doc_id", "source", "line_digests"]
        )
        changes = (
            docs | "Lines added" >> beam.FlatMap(_plus),
            previous_docs | "Lines taken off" >> beam.FlatMap(_minus, uncounted),
            previous_rejects | "Rejected lines taken off" >> beam.FlatMap(_minus, uncounted),
        ) | "Changes of the counts" >> beam.Flatten()
        delta = (
            changes
            | "Sum per line" >> beam.CombinePerKey(sum)
            | "Lines that changed" >> beam.Filter(_nonzero)
        )
        needed = changes | "Groups touched" >> beam.FlatMap(_group_of_entry)
        delta_map = beam.pvalue.AsDict(delta)
        previous_counts = p | "Read previous counts" >> previous.read_table(BOILERPLATE)
        touched = previous_counts | "Counts touched" >> beam.FlatMap(
            _touched, beam.pvalue.AsDict(needed), delta_map, self.config.min_docs
        )
        counts = (
            {"previous": touched, "delta": delta}
            | "Join counts and changes" >> beam.CoGroupByKey()
            | "Before and after" >> beam.Map(_old_and_new)
        )
        sizes = counts | "Group sizes" >> beam.FlatMap(_size)
        decided = counts | "Decide boilerplate lines" >> beam.FlatMap(
            _decide, beam.pvalue.AsDict(sizes), self.config
        ).with_outputs(CHANGED_GROUPS, main="lines")
        rows = (
            previous_counts | "Counts kept" >> beam.FlatMap(_untouched_row, delta_map),
            counts | "Counts changed" >> beam.FlatMap(_new_row, delta_map),
        ) | "Counts of this run" >> beam.Flatten()
        regroup = previous_docs | "Documents of changed groups" >> beam.ParDo(
            _Regroup(),
            beam.pvalue.AsDict(decided[CHANGED_GROUPS]),
            beam.pvalue.AsDict(self.decided),
            beam.pvalue.AsDict(self.moved),
        ).with_outputs(EXPECTED, main=REGROUP)
        regrouped_ids = regroup[REGROUP] | "Regrouped ids" >> beam.Map(id_of_entry)
        return CountUpdate(decided.lines, regroup[REGROUP], regrouped_ids, regroup[EXPECTED], rows)


REJECTED = "rejected"


class _AsRecorded(Counts, beam.DoFn):
    """A regrouped document read again -> itself when extraction gives what it gave last time
    (its lines are counted as they were); else a reject `changed_during_run` that keeps those
    lines, as every reject of a regrouped document must (`LinesOfRejects`)."""

    def process(self, doc: Document, expected: Mapping[str, tuple[str, bytes]]) -> Iterator:
        recorded = expected.get(doc.doc_id)
        if recorded is not None and recorded[0] == doc.extracted_hash:
            yield doc
            return
        self.stat("documents_rejected_read")
        reject = Reject(
            doc.source,
            "read",
            GONE,
            "the file changed between the readings of this run",
            doc.doc_id,
            line_digests=recorded[1] if recorded is not None else None,
        )
        yield beam.pvalue.TaggedOutput(REJECTED, reject)


class AsRecorded(beam.PTransform):
    """Regrouped documents read again -> (those extraction gives as recorded, rejects)."""

    def __init__(self, expected: beam.PCollection) -> None:
        super().__init__()
        self.expected = expected

    def expand(self, docs: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        return docs | "Compare" >> beam.ParDo(
            _AsRecorded(), beam.pvalue.AsDict(self.expected)
        ).with_outputs(REJECTED, main="documents")


def _keep_lines(reject: Reject, expected: Mapping[str, tuple[str, bytes]]) -> Reject:
    """A reject of a regrouped document keeps the lines it still counts for: the only record
    of them, whether the document goes or (a transient reject) is kept with a row that holds
    none."""
    recorded = expected.get(reject.doc_id or "")
    if recorded is None or reject.line_digests is not None:
        return reject
    return dataclasses.replace(reject, line_digests=recorded[1])


class LinesOfRejects(beam.PTransform):
    """The rejects of reading regrouped documents again -> the same, each with the lines its
    document still counts for (the next rebuild takes them off)."""

    def __init__(self, expected: beam.PCollection) -> None:
        super().__init__()
        self.expected = expected

    def expand(self, rejects: beam.PCollection) -> beam.PCollection:
        return rejects | "Keep their lines" >> beam.Map(
            _keep_lines, beam.pvalue.AsDict(self.expected)
        )
