"""Record types that flow between the stages: raw input, extracted document, chunk, reject.

The columns a record shares with its Parquet table are documented once, in `schemas.columns`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from schemas.columns import CHUNKS, DOCUMENTS, REJECTS, documented

DOC_TYPES = ("html", "markdown", "code", "text", "pdf", "docx", "pptx")
CONTEXT_JOINER = "\n\n"  # what the embedding model reads between a chunk's header and its text
ERROR_CHARS = 500  # how much of an error message a reject keeps


def stable_hash(*parts: object, length: int = 32) -> str:
    """A stable hex id from parts (sha256; never random, the same on every run and runner)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()[:length]


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def file_of(source: str) -> str:
    """The file a document or chunk came from: its source less a JSONL record's "#L<line>"."""
    path, sep, line = source.rpartition("#L")
    return path if sep and line.isdigit() else source


def hash_extracted(doc: Document) -> str:
    """sha256 of a document as extracted: its text and every field extraction sets (its file
    and doc type included), before boilerplate removal. Two runs that give a document the same
    extracted hash and the same boilerplate lines of its group give it the same rows, but for
    the line of a JSONL record in its file ("#L<line>" in its source), which moves when a
    record before it comes or goes."""
    fields = (
        doc.doc_id,
        file_of(doc.source),
        doc.doc_type,
        doc.language,
        doc.title,
        doc.url,
        doc.date,
        doc.lang,
        doc.boilerplate_lines_removed,
        doc.boilerplate_tokens_removed,
        doc.page_count,
        list(doc.page_starts) if doc.page_starts is not None else None,
        list(doc.page_labels) if doc.page_labels is not None else None,
        doc.contents_pages_removed,
        doc.index_pages_removed,
        doc.text,
    )
    encoded = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class RawDocument:
    """One input before extraction: a file's bytes, or one JSONL record's text."""

    source: str  # file path/URI; for a JSONL record, "path#L<line>"
    doc_id: str
    data: bytes = b""
    text: str | None = None  # set for JSONL records, whose text is already decoded
    title: str | None = None
    url: str | None = None
    hint_type: str | None = None  # a doc_type given by the record itself


@documented(DOCUMENTS)
@dataclass(frozen=True)
class Document:
    """An extracted document: clean text ready to chunk."""

    doc_id: str
    source: str
    doc_type: str
    text: str
    content_hash: str
    language: str | None = None
    title: str | None = None
    url: str | None = None
    date: str | None = None
    lang: str | None = None
    boilerplate_lines_removed: int = 0
    boilerplate_tokens_removed: int = 0
    page_count: int | None = None
    page_starts: tuple[int, ...] | None = None
    page_labels: tuple[str, ...] | None = None
    # a PDF's contents and back-of-book index pages left out of `text` (for the cost report;
    # not columns of documents/)
    contents_pages_removed: int = 0
    index_pages_removed: int = 0
    # what a rebuild compares before boilerplate removal (transforms/incremental.py): the
    # hash of the document as extracted, and the digest of its group's boilerplate lines
    extracted_hash: str = ""
    boilerplate_digest: str = ""
    # what it added to its group's boilerplate counts (None: nothing), for a rebuild to update
    # the counts with (transforms/boilerplate_delta.py)
    line_digests: bytes | None = None


@documented(CHUNKS)
@dataclass(frozen=True)
class Chunk:
    """A chunk of a document; `document.text[start_char:end_char] == text`."""

    chunk_id: str
    doc_id: str
    source: str
    doc_type: str
    language: str | None
    chunk_index: int
    text: str
    start_char: int
    end_char: int
    token_count: int
    section_path: tuple[str, ...]
    strategy: str
    config_fingerprint: str
    title: str | None = None
    page_start: int | None = None
    page_end: int | None = None
    page_label: str | None = None
    content_hash: str = ""
    parent_id: str | None = None
    is_parent: bool = False
    context: str | None = None
    context_source: str | None = None
    embedding: tuple[float, ...] | None = None
    embedding_model: str | None = None
    # Counted by the count stage (transforms.budget).
    embed_tokens: int = 0
    context_tokens: int = 0  # the header and its joiner, in --pricing_tokenizer (not written)
    # the header row of the Markdown table the chunk starts inside, for its path header (not
    # written: a piece of a split table is embedded under its column names)
    table_header: str | None = None
    model_tokens: int | None = None
    embed_seconds: float = 0.0  # this chunk's share of its batch's model time (not written)
    # (prompt tokens, completion tokens, requests, cache hit) of its LLM context line
    llm_usage: tuple[int, int, int, int] | None = None

    def embed_text(self) -> str:
        """What the embedding model reads: the context header, then the chunk."""
        return f"{self.context}{CONTEXT_JOINER}{self.text}" if self.context else self.text


@documented(REJECTS)
@dataclass(frozen=True)
class Reject:
    """An input (or one of its chunks) that could not go through a stage, and why."""

    source: str
    stage: str
    reason: str
    error: str = ""
    doc_id: str | None = None
    chunk_id: str | None = None
    line_digests: bytes | None = None  # a counted document's lines (documents.line_digests)

    @classmethod
    def of_error(
        cls,
        source: str,
        stage: str,
        reason: str,
        error: BaseException | str,
        doc_id: str | None = None,
        chunk_id: str | None = None,
    ) -> Reject:
        """A reject whose `error` is the message (an exception's repr), cut to ERROR_CHARS."""
        message = error if isinstance(error, str) else repr(error)
        return cls(source, stage, reason, message[:ERROR_CHARS], doc_id, chunk_id)
