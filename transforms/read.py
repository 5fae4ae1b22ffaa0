"""Read raw documents: files matched by Beam's fileio (local, gs://, s3://) and JSONL records.

Each file becomes one RawDocument; a `.jsonl` file becomes one RawDocument per record line.
Unreadable inputs (too large, bad JSON line, record without text) go to the rejects output.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from schemas.records import RawDocument, Reject, stable_hash
from transforms.detect import JSONL_EXTENSIONS, extension

REJECTS = "rejects"
NAMESPACE = "corpus_chunker"


def document_id(source: str) -> str:
    """A file's doc_id: a stable hash of its URI."""
    return stable_hash("file", source)


def record_id(path: str, line_no: int, record: dict) -> str:
    """A JSONL record's doc_id: its own id when it has one, else its file and line."""
    if record.get("id") not in (None, ""):
        return stable_hash("record", record["id"])
    return stable_hash("record", path, line_no)


def in_sample(path: str, fraction: float) -> bool:
    """Deterministic file sample for --estimate_sample: the same files on every run."""
    if fraction >= 1.0:
        return True
    return int(stable_hash("sample", path, length=8), 16) / 0xFFFFFFFF < fraction


def parse_jsonl_line(path: str, line_no: int, line: str) -> RawDocument | Reject:
    """One JSONL line: a record {"id", "text", "title"?, "url"?, "doc_type"?} or a reject."""
    source = f"{path}#L{line_no}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        return Reject(source, "read", "invalid_json", f"line {line_no}: {e}")
    if not isinstance(record, dict):
        return Reject(source, "read", "record_not_object", f"line {line_no}: {line[:200]}")
    text = record.get("text")
    doc_id = record_id(path, line_no, record)
    if not isinstance(text, str):
        reason = "missing_text" if text is None else "text_not_string"
        return Reject(source, "read", reason, f"line {line_no}: no string 'text' field", doc_id)
    hint = record.get("doc_type")
    return RawDocument(
        source=source,
        doc_id=doc_id,
        text=text,
        title=record.get("title") if isinstance(record.get("title"), str) else None,
        url=record.get("url") if isinstance(record.get("url"), str) else None,
        hint_type=hint if isinstance(hint, str) else None,
    )


class _ReadFileFn(beam.DoFn):
    def __init__(self, max_file_bytes: int) -> None:
        self.max_file_bytes = max_file_bytes
        self.files = Metrics.counter(NAMESPACE, "files_read")
        self.records = Metrics.counter(NAMESPACE, "jsonl_records_read")
        self.bytes_read = Metrics.counter(NAMESPACE, "bytes_read")

    def process(self, readable: fileio.ReadableFile) -> Iterator:
        path = readable.metadata.path
        self.files.inc()
        try:
            if extension(path) in JSONL_EXTENSIONS:
                yield from self._records(readable, path)
                return
            with readable.open(compression_type=CompressionTypes.AUTO) as f:
                data = f.read(self.max_file_bytes + 1)
        except Exception as e:  # an unreadable file is one reject, never a failed job
            yield beam.pvalue.TaggedOutput(
                REJECTS, Reject(path, "read", "unreadable", repr(e)[:500], document_id(path))
            )
            return
        if len(data) > self.max_file_bytes:
            yield beam.pvalue.TaggedOutput(
                REJECTS,
                Reject(
                    path,
                    "read",
                    "too_large",
                    f"over --max_file_bytes={self.max_file_bytes}",
                    document_id(path),
                ),
            )
            return
        self.bytes_read.inc(len(data))
        yield RawDocument(source=path, doc_id=document_id(path), data=data)

    def _records(self, readable: fileio.ReadableFile, path: str) -> Iterator:
        with readable.open(compression_type=CompressionTypes.AUTO) as f:
            for line_no, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
                except UnicodeDecodeError as e:
                    yield beam.pvalue.TaggedOutput(
                        REJECTS, Reject(f"{path}#L{line_no}", "read", "invalid_utf8", str(e))
                    )
                    continue
                if not line.strip():
                    continue
                self.records.inc()
                out = parse_jsonl_line(path, line_no, line)
                yield beam.pvalue.TaggedOutput(REJECTS, out) if isinstance(out, Reject) else out


class ReadDocuments(beam.PTransform):
    """Match file patterns and read each file (or JSONL record) as a RawDocument.

    Outputs a tagged result: the main output of RawDocument and `rejects` of Reject.
    """

    def __init__(
        self, patterns: Sequence[str], max_file_bytes: int = 20_000_000, sample: float = 1.0
    ) -> None:
        super().__init__()
        if not patterns:
            raise ValueError("ReadDocuments needs at least one file pattern (--input)")
        if max_file_bytes <= 0:
            raise ValueError(f"max_file_bytes must be positive, got {max_file_bytes}")
        if not 0.0 < sample <= 1.0:
            raise ValueError(f"sample must be in (0, 1], got {sample}")
        self.patterns = list(patterns)
        self.max_file_bytes = max_file_bytes
        self.sample = sample

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.pvalue.DoOutputsTuple:
        return (
            pbegin
            | "File patterns" >> beam.Create(self.patterns)
            | "Match files" >> fileio.MatchAll()
            | "Paths" >> beam.Map(lambda metadata: metadata.path)
            | "Dedupe paths" >> beam.Distinct()
            | "Sample files" >> beam.Filter(in_sample, self.sample)
            | "Open files" >> fileio.ReadMatches()
            | "Read contents"
            >> beam.ParDo(_ReadFileFn(self.max_file_bytes)).with_outputs(REJECTS, main="documents")
        )


def check_patterns(patterns: Sequence[str]) -> None:
    """Fail fast, naming the pattern, when an --input pattern matches nothing."""
    for pattern in patterns:
        result = FileSystems.match([pattern])[0]
        if not result.metadata_list:
            raise ValueError(f"--input pattern {pattern!r} matches no file")
