"""Read raw documents: files matched by Beam's fileio (local, gs://, s3://) and JSONL records.

Each file becomes one RawDocument; a `.jsonl` file becomes one RawDocument per record line.
Unreadable inputs (too large, bad JSON line, record without text) go to the rejects output.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes, FileMetadata
from apache_beam.io.filesystems import FileSystems

from schemas.records import RawDocument, Reject, stable_hash
from transforms.common import REJECTS
from transforms.ingest.detect import JSONL_EXTENSIONS, extension
from transforms.ingest.files import (
    ReadError,
    decompressed_budget,
    is_local,
    open_matched,
    read_up_to,
    special_file,
)
from transforms.stage_base import Counts, Rejection, Stage
from transforms.stat_events import DocumentIn, FileMatched, FileSkipped, file_of


def relative_source(path: str, root: str) -> str:
    """`path` relative to the input root, so ids survive moving the corpus (checkout, bucket)."""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if root and path.startswith(prefix) else path


def literal_folder(pattern: str) -> str:
    """The folder above a pattern's first wildcard ('' when there is none)."""
    literal = re.split(r"[*?\[{]", pattern, maxsplit=1)[0]
    return literal.rsplit("/", 1)[0] if "/" in literal else ""


def has_wildcard(pattern: str) -> bool:
    """Whether a pattern holds a wildcard of Beam's (*, ?, [...])."""
    return re.search(r"[*?\[]", pattern) is not None


def _has_hidden_name(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/"))


def hidden_below(path: str, folders: Sequence[str]) -> bool:
    """Whether `path` lies in a hidden file or folder (a name starting with ".") below the
    deepest of `folders` that holds it: what a wildcard matches there, as a shell's would not."""
    base = max((f for f in folders if path.startswith(f.rstrip("/") + "/")), key=len, default=None)
    return base is not None and _has_hidden_name(path[len(base.rstrip("/")) + 1 :])


def names_hidden(pattern: str) -> bool:
    """Whether a pattern spells a hidden name past its literal folder (`docs/.*`, `**/.ci/*`)."""
    return _has_hidden_name(pattern[len(literal_folder(pattern)) :])


def input_root(patterns: Sequence[str]) -> str:
    """The deepest folder above every pattern's first wildcard ('' when they share none)."""
    folders = [literal_folder(pattern) for pattern in patterns]
    # character-wise on purpose: commonpath would fold the "//" of gs:// and s3:// URIs
    common = os.path.commonprefix(folders)  # noqa: RUF071
    if all(f == common or f.startswith(common + "/") for f in folders):
        return common
    return common.rsplit("/", 1)[0] if "/" in common else ""


def document_id(source: str, root: str = "") -> str:
    """A file's doc_id: a stable hash of its path under the input root."""
    return stable_hash("file", relative_source(source, root))


def record_id(path: str, line_no: int, record: dict, root: str = "") -> str:
    """A JSONL record's doc_id: its own id when it has one, which names the document across
    the corpus (a record that moves to another file keeps its id and so its chunks; a second
    record with the id is a duplicate), else its file and line."""
    key = record.get("id")
    if key not in (None, ""):
        return stable_hash("record", type(key).__name__, key)
    return stable_hash("record", relative_source(path, root), "line", line_no)


def in_sample(path: str, fraction: float, root: str = "") -> bool:
    """Deterministic file sample for --estimate_sample: the same files on every run."""
    if fraction >= 1.0:
        return True
    key = stable_hash("sample", relative_source(path, root), length=8)
    return int(key, 16) / 0xFFFFFFFF < fraction


RECORD_FIELDS = ("id", "text", "title", "url", "doc_type")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: object) -> int | None:
    """Where a string holds a lone surrogate (which cannot be encoded as UTF-8), else None."""
    if not isinstance(value, str) or value.isascii():
        return None
    m = _SURROGATE.search(value)
    return m.start() if m else None


def parse_jsonl_line(path: str, line_no: int, line: str, root: str = "") -> RawDocument:
    """One JSONL line: a record {"id", "text", "title"?, "url"?, "doc_type"?}; a line that is
    not one raises Rejection, naming the line (its source) and the reason."""
    source = f"{path}#L{line_no}"
    try:
        record = json.loads(line)
    except RecursionError:
        raise Rejection(
            "too_deep",
            f"line {line_no}: JSON nested deeper than Python's recursion limit "
            f"({sys.getrecursionlimit()})",
            source,
            record_id(path, line_no, {}, root),
        ) from None
    except ValueError as e:  # JSONDecodeError, and integers past Python's digit limit
        raise Rejection("invalid_json", f"line {line_no}: {e}", source) from None
    if not isinstance(record, dict):
        raise Rejection("record_not_object", f"line {line_no}: {line[:200]}", source)
    for field in RECORD_FIELDS:
        at = lone_surrogate(record.get(field))
        if at is not None:
            # JSON's "\ud800" escapes decode to text no UTF-8 writer (Beam's coders, Parquet)
            # can encode: one record rejected here, rather than a failed job downstream.
            raise Rejection(
                "invalid_unicode",
                f"line {line_no}: field {field!r} holds a lone surrogate "
                f"(U+{ord(record[field][at]):04X}) at character {at}",
                source,
                record_id(path, line_no, {} if field == "id" else record, root),
            )
    text = record.get("text")
    doc_id = record_id(path, line_no, record, root)
    if not isinstance(text, str):
        reason = "missing_text" if text is None else "text_not_string"
        raise Rejection(reason, f"line {line_no}: no string 'text' field", source, doc_id)
    hint = record.get("doc_type")
    return RawDocument(
        source=source,
        doc_id=doc_id,
        text=text,
        title=record.get("title") if isinstance(record.get("title"), str) else None,
        url=record.get("url") if isinstance(record.get("url"), str) else None,
        hint_type=hint if isinstance(hint, str) else None,
    )


class SymlinkPolicy:
    """Which local symlinks the job reads: one an --input names itself, or one whose real path
    lies inside the literal folder of a wildcard pattern. `_SkipFn` skips the others as they are
    matched; the read applies it again as it opens a file (O_NOFOLLOW), for a file that became a
    symlink in between."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.literals = {p for p in patterns if not has_wildcard(p)}
        folders = [literal_folder(p) for p in patterns if has_wildcard(p)]
        self.roots = [os.path.realpath(f or ".") for f in folders if is_local(f)]

    def allows(self, path: str) -> bool:
        """Whether the symlink `path` may be read (through to its real path)."""
        if path in self.literals:
            return True
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root.rstrip("/") + "/") for root in self.roots)


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


def bounded_lines(f, limit: int, chunk_bytes: int = 1 << 20) -> Iterator[tuple[bytes | None, int]]:
    """(line, its size in bytes) of a binary file, newline kept; a line over `limit` bytes comes
    as (None, size) and is skipped as it is read, never held whole.

    Reads `chunk_bytes` at a time with `read` alone, which Beam's CompressedFile (a .jsonl.gz)
    and plain files both have.
    """
    pending = bytearray()
    skipped = -1  # bytes of an over-long line skipped so far; -1 while not skipping
    while data := f.read(chunk_bytes):
        start = 0
        while start < len(data):
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline + 1
            if skipped >= 0:
                skipped += end - start
            else:
                pending += data[start:end]
                if len(pending) > limit:
                    skipped = len(pending)
                    pending.clear()
            if newline >= 0:
                if skipped >= 0:
                    yield None, skipped
                    skipped = -1
                else:
                    yield bytes(pending), len(pending)
                    pending.clear()
            start = end
    if skipped >= 0:
        yield None, skipped
    elif pending:
        yield bytes(pending), len(pending)


def printable_path(path: str) -> str:
    """`path` as UTF-8 can hold it: bytes of a non-UTF-8 file name (which Python keeps as lone
    surrogates) written as backslash escapes."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


# The lock older runs took inside their --output; a run now takes `lock_beside(output)`.
OUTPUT_LOCK_NAME = ".corpus-chunker.lock"


def lock_beside(folder: str) -> str:
    """The lock file a run holds on its output `folder`: `.NAME.lock` beside it (defined here,
    where the read stage skips it, and used by pipelines.output_lock)."""
    parent, _, name = folder.rstrip("/").rpartition("/")
    return f"{parent}/.{name}.lock"


BAD_NAMES = "bad_names"
# why a matched file is not read: "hidden" or "output_folder" (by rule), or for a local path
# "fifo", "socket", "device", "dangling_symlink", "symlink_loop" or "outside_input_root" (a
# symlink whose real path lies outside every input folder)
SKIPPED = "skipped"
RUN_MARKERS = frozenset({"run_manifest.json", "cost_report.json"})  # what every run writes


def broken_links(pattern: str) -> Iterator[str]:
    """The symlinks a local wildcard pattern matches whose target is missing or loops back.

    Beam's local match lists a folder and drops every file it cannot stat, silently; these are
    what it drops, found with the same listing (symlinked folders are not followed either).
    """
    if not is_local(pattern) or not has_wildcard(pattern):
        return
    from apache_beam.io.filesystem import FileSystem

    if pattern.endswith("/"):
        pattern += "*"
    prefix = re.match(r"^[^[*?]*", pattern).group(0)
    match = re.compile(FileSystem.translate_pattern(pattern)).match
    folders = [os.path.dirname(prefix) or "."]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                listed = list(entries)
        except OSError:  # a folder that vanished or cannot be listed: Beam's match saw the same
            continue
        for entry in listed:
            try:
                is_dir = entry.is_dir()  # follows a link, as os.walk does, then does not enter it
            except OSError:  # a symlink loop
                is_dir = False
            if is_dir:
                if not entry.is_symlink():
                    folders.append(entry.path)
            elif entry.is_symlink() and match(entry.path) and not os.path.exists(entry.path):
                yield entry.path


class _MatchFn(beam.DoFn):
    """A pattern's matched files (FileMetadata), and its broken symlinks (size 0)."""

    def process(self, pattern: str) -> Iterator[FileMetadata]:
        yield from FileSystems.match([pattern])[0].metadata_list
        for path in broken_links(pattern):
            yield FileMetadata(path, 0, 0.0)  # what cannot be stat-ed; skipped before the read


def _utf8_path(metadata: FileMetadata) -> Iterator:
    """(a matched file's path, its metadata); a name that is not UTF-8 (which nothing
    downstream, Beam's coders included, can carry as text) goes to BAD_NAMES with its bytes
    written as escapes, and no metadata."""
    path = metadata.path
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        yield beam.pvalue.TaggedOutput(BAD_NAMES, (printable_path(path), None))
        return
    yield path, metadata


def _first(items: Iterable):
    """Any one of `items` (they are the same file's metadata, matched by several patterns)."""
    return next(iter(items))


class _SkipFn(Counts, beam.DoFn):
    """Drops what the job must not read: files of its own output folders; hidden files (a name
    starting with "." below a pattern's literal folder) that a wildcard matched, unless that
    pattern spells a hidden name or another pattern names the file; and, on a local disk, what
    is not a regular file (a FIFO, whose open would wait forever, a socket, a device, a broken
    symlink) and symlinks that a wildcard matched whose real path lies outside every input
    folder (a file the corpus only points to; name it in an --input to read it).

    Elements are (path, FileMetadata or None); each skip goes to SKIPPED with its reason."""

    def __init__(self, patterns: Sequence[str], exclude: Sequence[str] = ()) -> None:
        self.patterns = list(patterns)
        self.exclude = tuple(e.rstrip("/") + "/" for e in exclude)
        # the locks runs take beside these folders (pipelines/output_lock.py): no corpus files
        self.locks = {lock_beside(e) for e in exclude}

    def setup(self) -> None:
        from apache_beam.io.filesystem import FileSystem

        self.literals = {p for p in self.patterns if not has_wildcard(p)}
        self.wild = [
            (re.compile(FileSystem.translate_pattern(p)), names_hidden(p), literal_folder(p))
            for p in self.patterns
            if has_wildcard(p)
        ]
        # where a symlink may lead: into the real folder of any wildcard pattern
        self.symlinks = SymlinkPolicy(self.patterns)

    def _outside_roots(self, path: str) -> bool:
        return os.path.islink(path) and not self.symlinks.allows(path)

    def process(self, element: tuple) -> Iterator[tuple]:
        path, metadata = element
        if path in self.locks:
            return
        if path.startswith(self.exclude):
            if path.rsplit("/", 1)[-1] == OUTPUT_LOCK_NAME:
                # this run's own lock on its output: no file of the corpus, and no skip
                return
            self.stat("output_files_skipped")
            yield beam.pvalue.TaggedOutput(SKIPPED, "output_folder")
            return
        if path not in self.literals:
            matched = [(spells, folder) for rx, spells, folder in self.wild if rx.match(path)]
            if (
                matched
                and not any(spells for spells, _ in matched)
                and hidden_below(path, [folder for _, folder in matched])
            ):
                self.stat(
                    "hidden_files_skipped"
                )  # .git/, .venv/, .DS_Store: name them in a pattern to read them
                yield beam.pvalue.TaggedOutput(SKIPPED, "hidden")
                return
        if metadata is not None and is_local(path):
            why = special_file(path) or (
                "outside_input_root" if self._outside_roots(path) else None
            )
            if why is not None:
                self.stat("special_files_skipped")
                yield beam.pvalue.TaggedOutput(SKIPPED, why)
                return
        yield element


def _sampled(element: tuple, fraction: float, root: str) -> bool:
    return in_sample(element[0], fraction, root)


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


def _record_order(doc: RawDocument) -> tuple[str, int]:
    """A JSONL record's place in the corpus: its file, then its line."""
    path, _, line = doc.source.rpartition("#L")
    return path, int(line) if line.isdigit() else 0


class _KeepFirstFn(Stage):
    """(record id, its records) -> the first by file and line; the others are rejects."""

    STAGE = "read"
    FAILED = "invalid_record"

    def identify(self, item: tuple[str, Iterable[RawDocument]]) -> tuple[str, str | None]:
        return next(iter(item[1])).source, item[0]

    def process_one(self, item: tuple[str, Iterable[RawDocument]]) -> Iterator:
        _, docs = item
        first, *others = sorted(docs, key=_record_order)
        yield first
        for doc in others:
            yield self.reject(
                doc.source,
                "duplicate_id",
                f"the record id of {first.source} again; the first one is kept",
                doc.doc_id,
            )


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
        checked = (
            records
            | "Key by id" >> beam.Map(lambda d: (d.doc_id, d))
            | "Group by id" >> beam.GroupByKey()
            | "First of an id" >> beam.ParDo(_KeepFirstFn()).with_outputs(REJECTS, main="kept")
        )
        documents = (files, checked.kept) | "Unique documents" >> beam.Flatten()
        return UniqueResult(documents, checked[REJECTS])


class ReadResult(NamedTuple):
    documents: beam.PCollection  # RawDocument
    rejects: beam.PCollection  # Reject
    skipped: beam.PCollection  # str: why a matched file was not read (one per file)
    events: beam.PCollection  # accounting: DocumentIn per input, FileSkipped per skipped file


def _input_event(_: RawDocument | Reject) -> DocumentIn:
    return DocumentIn()


def _sampled_input_event(document: RawDocument | Reject) -> DocumentIn:
    return DocumentIn(file_of(document.source))


def _matched_event(element: tuple, fraction: float, root: str) -> FileMatched:
    path, metadata = element
    size = metadata.size_in_bytes if metadata is not None else 0
    return FileMatched(path, size, in_sample(path, fraction, root))


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
            | "Match files" >> beam.ParDo(_MatchFn())
            | "Paths" >> beam.FlatMap(_utf8_path).with_outputs(BAD_NAMES, main="paths")
        )

        skipped, matched = [], []
        sampling = self.sample < 1.0

        def keep(pcoll: beam.PCollection, label: str) -> beam.PCollection:
            # once per file however many patterns match it, then as --estimate_sample says
            split = (
                pcoll
                | f"Dedupe {label}" >> beam.CombinePerKey(_first)
                | f"Skip hidden, special and output {label}"
                >> beam.ParDo(_SkipFn(self.patterns, self.exclude)).with_outputs(
                    SKIPPED, main="kept"
                )
            )
            skipped.append(split[SKIPPED])
            if sampling:  # every file the job would read, for the projection of the rest
                matched.append(
                    split.kept
                    | f"Matched {label} events" >> beam.Map(_matched_event, self.sample, self.root)
                )
            return split.kept | f"Sample {label}" >> beam.Filter(_sampled, self.sample, self.root)

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
        return ReadResult(unique.documents, rejects, skipped, events)


def check_patterns(patterns: Sequence[str]) -> list[str]:
    """Fail fast, naming the pattern, when an --input pattern matches nothing.

    Returns the folders of earlier runs of this job that the patterns match (a folder holding
    run_manifest.json and cost_report.json): their files are output, not input.
    """
    runs: dict[str, set[str]] = {}
    for pattern in patterns:
        result = FileSystems.match([pattern])[0]
        if not result.metadata_list:
            why = special_file(pattern) if is_local(pattern) and not has_wildcard(pattern) else None
            detail = f" (it is a {why.replace('_', ' ')})" if why else ""
            raise ValueError(f"--input pattern {pattern!r} matches no file{detail}")
        for metadata in result.metadata_list:
            folder, _, name = metadata.path.rpartition("/")
            if name in RUN_MARKERS:
                runs.setdefault(folder, set()).add(name)
    return sorted(folder for folder, names in runs.items() if names == RUN_MARKERS)
