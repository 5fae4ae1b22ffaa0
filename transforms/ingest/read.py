"""Read raw documents: files matched by Beam's fileio (local, gs://, s3://) and JSONL records.

Each file becomes one RawDocument; a `.jsonl` file becomes one RawDocument per record line.
Unreadable inputs (too large, bad JSON line, record without text) go to the rejects output.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes, FileMetadata

from schemas.records import RawDocument, Reject, file_of
from transforms.common import REJECTS
from transforms.ingest.detect import JSONL_EXTENSIONS, extension
from transforms.ingest.files import (
    ReadError,
    decompressed_budget,
    open_matched,
    read_up_to,
)
from transforms.ingest.jsonl import bounded_lines, document_id, parse_jsonl_line, record_id
from transforms.ingest.matching import (
    BAD_NAMES,
    SKIPPED,
    MatchFn,
    SkipFn,
    SymlinkPolicy,
    earlier_runs,
    first_of,
    in_sample,
    input_root,
    run_marker,
    sampled,
    utf8_path,
)
from transforms.stage_base import Rejection, Stage
from transforms.stat_events import DocumentIn, FileMatched, FileSkipped


class _ReadFileFn(Stage):
    """A matched file -> its RawDocument, or one per JSONL record; a file or line that cannot be
    read is a reject."""

    STAGE = "read"
    FAILED = "unreadable"  # an unreadable file is one reject, never a failed job

    def __init__(self, max_file_bytes: int, root: str, patterns: Sequence[str] = ()) -> None:
        """`patterns`: the --input patterns, whose `SymlinkPolicy` the open applies (none:
        every symlink is followed)."""
        self.max_file_bytes = max_file_bytes
        self.root = root
        self.patterns = list(patterns)
        self._policy: SymlinkPolicy | None = None

    def identify(self, readable: fileio.ReadableFile) -> tuple[str, str | None]:
        path = readable.metadata.path
        return path, document_id(path, self.root)

    def _follow(self, path: str) -> bool:
        if self._policy is None:
            self._policy = SymlinkPolicy(self.patterns)
        return self._policy.allows(path)

    def process_one(self, readable: fileio.ReadableFile) -> Iterator:
        path = readable.metadata.path
        self.stat("files_read")
        if extension(path) in JSONL_EXTENSIONS:
            yield from self._records(readable.metadata, path)
            return
        try:
            follow = self._follow if self.patterns else None
            with open_matched(path, readable.metadata, follow=follow) as (f, compression, size):
                if (
                    compression == CompressionTypes.UNCOMPRESSED
                    and (size or 0) > self.max_file_bytes
                ):
                    data = None  # over the limit on disk: not read at all
                else:  # a compressed file stops decompressing one step past the limit
                    data = read_up_to(f, self.max_file_bytes + 1)
        except ReadError as e:
            raise Rejection(e.reason, str(e)) from None
        if data is None or len(data) > self.max_file_bytes:
            what = "decompressed to" if compression != CompressionTypes.UNCOMPRESSED else "is"
            raise Rejection(
                "too_large", f"{what} over --max_file_bytes={self.max_file_bytes} bytes"
            )
        self.stat("bytes_read", len(data))
        yield RawDocument(source=path, doc_id=document_id(path, self.root), data=data)

    def _records(self, matched, path: str) -> Iterator:
        """The records of a JSONL file, each line on its own: a bad line is one reject."""
        try:
            # its records are out as they are read, so only a change before the first line
            # can reject the file
            follow = self._follow if self.patterns else None
            size = matched.size_in_bytes if matched is not None else None
            budget = decompressed_budget(self.max_file_bytes, size)
            with open_matched(path, matched, check_after=False, follow=follow, budget=budget) as (
                f,
                _,
                _,
            ):
                seen: dict[str, int] = {}  # record id -> the line that first used it
                lines = bounded_lines(f, self.max_file_bytes)
                for line_no, (raw, size) in enumerate(lines, start=1):
                    try:
                        doc = self._record(path, line_no, raw, size, seen)
                    except Rejection as r:
                        yield self.reject(r.source or path, r.reason, r.error, r.doc_id)
                        continue
                    if doc is not None:
                        yield doc
        except ReadError as e:
            raise Rejection(e.reason, str(e)) from None

    def _record(
        self, path: str, line_no: int, raw: bytes | None, size: int, seen: dict[str, int]
    ) -> RawDocument | None:
        """One line's record (None for a blank line); Rejection when it is not one."""
        source = f"{path}#L{line_no}"
        if raw is None:
            raise Rejection(
                "too_large",
                f"line {line_no}: a record of {size} bytes, over "
                f"--max_file_bytes={self.max_file_bytes}",
                source,
                record_id(path, line_no, {}, self.root),
            )
        self.stat("bytes_read", size)
        try:
            line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
        except UnicodeDecodeError as e:
            raise Rejection("invalid_utf8", str(e), source) from None
        if not line.strip():
            return None
        self.stat("jsonl_records_read")
        try:
            doc = parse_jsonl_line(path, line_no, line, self.root)
        except Rejection:
            raise
        except Exception as e:  # one bad record is one reject, never the whole file
            raise Rejection("invalid_record", repr(e), source) from None
        first = seen.setdefault(doc.doc_id, line_no)
        if first != line_no:
            raise Rejection(
                "duplicate_id",
                f"line {line_no}: the record id of line {first} again; the first one is kept",
                doc.source,
            )
        return doc


@dataclass(frozen=True)
class ReadConfig:
    """What the read stage reads; validated at construction, errors naming the flag."""

    patterns: tuple[str, ...]
    max_file_bytes: int = 20_000_000
    sample: float = 1.0  # --estimate_sample: the fraction of files read (deterministic)

    def __post_init__(self) -> None:
        if not self.patterns:
            raise ValueError("--input is required: a file path or glob (repeat for several)")
        if self.max_file_bytes <= 0:
            raise ValueError(f"--max_file_bytes must be positive, got {self.max_file_bytes}")
        if not 0.0 < self.sample <= 1.0:
            raise ValueError(f"--estimate_sample must be in (0, 1], got {self.sample}")


def _record_order(source: str) -> tuple[str, int]:
    """A JSONL record's place in the corpus, from its source: its file, then its line."""
    path, _, line = source.rpartition("#L")
    return path, int(line) if line.isdigit() else 0


class _KeepFirstFn(Stage):
    """(record id, the sources of its records) -> (source, True) of each record but the first
    by file and line (main), and a duplicate_id reject of each of them."""

    STAGE = "read"
    FAILED = "invalid_record"

    def identify(self, item: tuple[str, Iterable[str]]) -> tuple[str, str | None]:
        return next(iter(item[1])), item[0]

    def process_one(self, item: tuple[str, Iterable[str]]) -> Iterator:
        doc_id, sources = item
        first, *others = sorted(sources, key=_record_order)
        for source in others:
            yield source, True
            yield self.reject(
                source,
                "duplicate_id",
                f"the record id of {first} again; the first one is kept",
                doc_id,
            )


def _record_source(doc: RawDocument) -> tuple[str, str]:
    return doc.doc_id, doc.source


class _NotDuplicate(beam.DoFn):
    def process(self, doc: RawDocument, duplicates: Mapping[str, bool]) -> Iterator[RawDocument]:
        if doc.source not in duplicates:
            yield doc


class _RejectBadNameFn(Stage):
    """(a file name that is not UTF-8, written with escapes, None) -> its reject."""

    STAGE = "read"
    FAILED = "invalid_file_name"

    def __init__(self, root: str) -> None:
        self.root = root

    def identify(self, element: tuple) -> tuple[str, str | None]:
        return element[0], document_id(element[0], self.root)

    def process_one(self, element: tuple) -> Iterator:
        source, doc_id = self.identify(element)
        yield self.reject(
            source,
            "invalid_file_name",
            "the file name is not valid UTF-8; rename the file to read it",
            doc_id,
        )


def _is_record(doc: RawDocument) -> bool:
    return doc.text is not None  # a JSONL record, whose id the record gives


class UniqueResult(NamedTuple):
    documents: beam.PCollection  # RawDocument
    rejects: beam.PCollection  # Reject: duplicate_id


class UniqueRecordIds(beam.PTransform):
    """RawDocument -> the same (main), less JSONL records whose id a record of another file
    has too (`rejects`: duplicate_id, naming the first by file and line, which is kept).
    A file's own duplicates are rejected as it is read; files' ids are their paths'."""

    def expand(self, docs: beam.PCollection) -> UniqueResult:
        records = docs | "Records" >> beam.Filter(_is_record)
        files = docs | "Files" >> beam.Filter(lambda d: not _is_record(d))
        # Only (id, source) pairs are grouped; the records stay where they are read and the
        # later ones of an id (few) are dropped there, by their sources.
        checked = (
            records
            | "Key by id" >> beam.Map(_record_source)
            | "Group by id" >> beam.GroupByKey()
            | "First of an id"
            >> beam.ParDo(_KeepFirstFn()).with_outputs(REJECTS, main="duplicates")
        )
        kept = records | "Drop duplicates" >> beam.ParDo(
            _NotDuplicate(), beam.pvalue.AsDict(checked.duplicates)
        )
        documents = (files, kept) | "Unique documents" >> beam.Flatten()
        return UniqueResult(documents, checked[REJECTS])


class ReadResult(NamedTuple):
    documents: beam.PCollection  # RawDocument
    rejects: beam.PCollection  # Reject
    skipped: beam.PCollection  # str: why a matched file was not read (one per file)
    events: beam.PCollection  # accounting: DocumentIn per input, FileSkipped per skipped file
    earlier_runs: beam.PCollection  # str: folders of earlier runs the patterns matched, not read


def _input_event(_: RawDocument | Reject) -> DocumentIn:
    return DocumentIn()


def _sampled_input_event(document: RawDocument | Reject) -> DocumentIn:
    return DocumentIn(file_of(document.source))


def _matched_event(element: tuple, fraction: float, root: str) -> FileMatched:
    path, metadata = element
    size = metadata.size_in_bytes if metadata is not None else 0
    return FileMatched(path, size, in_sample(path, fraction, root))


def _compact_match(element: tuple) -> tuple:
    """(path, FileMetadata or None) -> (path, (size, mtime) or None): what the dedupe carries,
    not the pickled FileMetadata (266 bytes an element, 81 this way, for a path of 66)."""
    path, metadata = element
    if metadata is None:
        return path, None
    return path, (metadata.size_in_bytes, metadata.last_updated_in_seconds)


def _full_match(element: tuple) -> tuple:
    """The inverse of `_compact_match`."""
    path, compact = element
    return path, None if compact is None else FileMetadata(path, *compact)


class ReadDocuments(beam.PTransform):
    """Match file patterns and read each file (or JSONL record) as a RawDocument.

    Outputs a ReadResult: `documents` of RawDocument, `rejects` of Reject and `skipped`, why
    each matched file that is not read by rule (hidden, in an output folder) was skipped.
    """

    def __init__(self, config: ReadConfig, exclude: Sequence[str] = ()) -> None:
        """`exclude`: folders whose files are never read (the job's output folders)."""
        super().__init__()
        self.exclude = [e for e in exclude if e]
        self.patterns = list(config.patterns)
        self.max_file_bytes = config.max_file_bytes
        self.sample = config.sample
        self.root = input_root(self.patterns)

    def expand(self, pbegin: beam.pvalue.PBegin) -> ReadResult:
        names = (
            pbegin
            | "File patterns" >> beam.Create(self.patterns)
            | "Match files" >> beam.ParDo(MatchFn())
            | "Paths" >> beam.FlatMap(utf8_path).with_outputs(BAD_NAMES, main="paths")
        )

        # folders of earlier runs of this job that the patterns match: output, not input
        earlier = (
            names.paths
            | "Run markers" >> beam.FlatMap(run_marker)
            | "Markers per folder" >> beam.GroupByKey()
            | "Earlier runs"
            >> beam.FlatMap(lambda kv: earlier_runs((kv[0], name) for name in kv[1]))
        )
        runs = beam.pvalue.AsList(earlier)
        skipped, matched = [], []
        sampling = self.sample < 1.0

        def keep(pcoll: beam.PCollection, label: str) -> beam.PCollection:
            # once per file however many patterns match it, then as --estimate_sample says.
            # With one pattern too: the dedupe's shuffle is also what spreads the reading (and
            # the extraction fused with it) over the workers, which one pattern's match, one
            # element, would otherwise leave on one worker; it carries no FileMetadata.
            split = (
                pcoll
                | f"Compact {label}" >> beam.Map(_compact_match)
                | f"Dedupe {label}" >> beam.CombinePerKey(first_of)
                | f"Full {label}" >> beam.Map(_full_match)
                | f"Skip hidden, special and output {label}"
                >> beam.ParDo(SkipFn(self.patterns, self.exclude), runs).with_outputs(
                    SKIPPED, main="kept"
                )
            )
            skipped.append(split[SKIPPED])
            if sampling:  # every file the job would read, for the projection of the rest
                matched.append(
                    split.kept
                    | f"Matched {label} events" >> beam.Map(_matched_event, self.sample, self.root)
                )
            return split.kept | f"Sample {label}" >> beam.Filter(sampled, self.sample, self.root)

        read = (
            keep(names.paths, "paths")
            | "Matched metadata" >> beam.Values()
            | "Open files" >> fileio.ReadMatches()
            | "Read contents"
            >> beam.ParDo(_ReadFileFn(self.max_file_bytes, self.root, self.patterns)).with_outputs(
                REJECTS, main="documents"
            )
        )
        bad_names = (
            keep(names[BAD_NAMES], "bad names")
            | "Reject bad names"
            >> beam.ParDo(_RejectBadNameFn(self.root)).with_outputs(REJECTS, main="none")
        )[REJECTS]
        rejects = (bad_names, read[REJECTS]) | "Read rejects" >> beam.Flatten()
        skipped = skipped | "Skipped files" >> beam.Flatten()
        input_event = _sampled_input_event if sampling else _input_event
        events = (
            read.documents | "Input events" >> beam.Map(input_event),
            rejects | "Unread input events" >> beam.Map(input_event),
            skipped | "Skip events" >> beam.Map(FileSkipped),
            *matched,
        ) | "Read events" >> beam.Flatten()
        unique = read.documents | "One record an id" >> UniqueRecordIds()
        rejects = (rejects, unique.rejects) | "All read rejects" >> beam.Flatten()
        return ReadResult(unique.documents, rejects, skipped, events, earlier)
