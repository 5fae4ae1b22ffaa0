"""A rebuild's second reading: the files of the documents that changed, read again by path.

A rebuild decides which documents changed before their boilerplate is removed, from what
extraction gave (transforms/incremental.py, `ReuseBeforeRemoval`); the text of every document
is dropped there, so that no text waits for the corpus-wide boilerplate counts. The documents
that changed are read again here, file by file, as the first reading read them: a JSONL
file is read whole and only its changed records go on. A document the second reading does not
find (its file gone or edited since the first) is a reject that says so: nothing is lost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems

from schemas.records import RawDocument, Reject
from transforms.common import REJECTS
from transforms.ingest.matching import input_root
from transforms.ingest.read import ReadConfig, _ReadFileFn
from transforms.stage_base import Stage

GONE = "changed_during_run"  # the reason of a document the second reading does not find


class _ReadAgainFn(Stage):
    """(file, [(doc_id, source)]) -> the RawDocuments of those ids in the file, and a reject
    for each one it does not give (the first reading's own reasons, or GONE)."""

    STAGE = "read"
    FAILED = "unreadable"

    def __init__(self, max_file_bytes: int, root: str, patterns: Sequence[str]) -> None:
        self.read = _ReadFileFn(max_file_bytes, root, patterns)

    def identify(self, element: tuple[str, Iterable[tuple[str, str]]]) -> tuple[str, str | None]:
        return element[0], None

    def process_one(self, element: tuple[str, Iterable[tuple[str, str]]]) -> Iterator:
        path, ids = element
        wanted = {source: doc_id for doc_id, source in ids}
        found: set[str] = set()
        try:
            matched = FileSystems.match([path])[0].metadata_list
        except Exception as e:
            matched, why = [], f"listing it again failed: {e!r}"
        else:
            why = "the file is gone"
        if matched:
            for out in self.read.process(fileio.ReadableFile(matched[0])):
                if isinstance(out, beam.pvalue.TaggedOutput):
                    reject: Reject = out.value
                    if reject.source in wanted:
                        found.add(reject.source)
                        if reject.doc_id is None:  # a record no longer parsed: its id, asked
                            # for, so that the reject stands for the document (and keeps the
                            # lines it still counts for, boilerplate_delta.LinesOfRejects)
                            out = beam.pvalue.TaggedOutput(
                                out.tag, dataclasses.replace(reject, doc_id=wanted[reject.source])
                            )
                        yield out
                    elif reject.source == path:  # the whole file: each of its documents
                        for source, doc_id in wanted.items():
                            if source not in found:
                                found.add(source)
                                yield self.reject(source, reject.reason, reject.error, doc_id)
                elif isinstance(out, RawDocument) and wanted.get(out.source) == out.doc_id:
                    found.add(out.source)
                    yield out
        for source, doc_id in sorted(wanted.items()):
            if source not in found:
                yield self.reject(
                    source,
                    GONE,
                    f"changed since this run first read it ({why} or no longer holds it)",
                    doc_id,
                )


def _file_and_id(entry: tuple[str, str, str]) -> tuple[str, tuple[str, str]]:
    file, doc_id, source = entry
    return file, (doc_id, source)


class ReadAgain(beam.PTransform):
    """PCollection[(file, doc_id, source)] -> ReadAgainResult: those documents read again
    (RawDocument) and the rejects of those that could not be (a file is read once, however
    many of its records changed)."""

    def __init__(self, config: ReadConfig) -> None:
        """`config`: the first reading's (`ReadDocuments`), so that a document is read again
        as it was read then: the same size limit, symlink rules and ids."""
        super().__init__()
        self.max_file_bytes = config.max_file_bytes
        self.patterns = list(config.patterns)
        self.root = input_root(self.patterns)

    def expand(self, entries: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        return (
            entries
            | "Key by file" >> beam.Map(_file_and_id)
            | "Group by file" >> beam.GroupByKey()
            | "Read again"
            >> beam.ParDo(_ReadAgainFn(self.max_file_bytes, self.root, self.patterns)).with_outputs(
                REJECTS, main="documents"
            )
        )
