"""Record types that flow between the stages: raw input, extracted document, chunk, reject."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

DOC_TYPES = ("html", "markdown", "code", "text")


def stable_hash(*parts: object, length: int = 32) -> str:
    """A stable hex id from parts (sha256; never random, the same on every run and runner)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()[:length]


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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


@dataclass(frozen=True)
class Document:
    """An extracted document: clean text ready to chunk."""

    doc_id: str
    source: str
    doc_type: str
    text: str
    content_hash: str
    language: str | None = None  # programming language for code, else the detected language
    title: str | None = None
    url: str | None = None
    date: str | None = None
    lang: str | None = None  # natural language from the page's metadata (e.g. "en")
    boilerplate_lines_removed: int = 0
    boilerplate_tokens_removed: int = 0  # in cl100k_base, for the cost report


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
    content_hash: str = ""
    parent_id: str | None = None
    is_parent: bool = False
    context: str | None = None
    context_source: str | None = None  # "path", "llm", or "path_fallback" when the LLM failed
    embedding: tuple[float, ...] | None = None
    embedding_model: str | None = None
    # Set by the accounting of the chunk stage, in the pricing tokenizer.
    embed_tokens: int = 0
    context_tokens: int = 0
    model_tokens: int | None = None  # the embedding model's own count of the embedded text
    embed_seconds: float = 0.0  # this chunk's share of its batch's model time (not written)
    # (prompt tokens, completion tokens, requests, cache hit) of its LLM context line
    llm_usage: tuple[int, int, int, int] | None = None

    def embed_text(self) -> str:
        """What the embedding model reads: the context header, then the chunk."""
        return f"{self.context}\n\n{self.text}" if self.context else self.text


@dataclass(frozen=True)
class Reject:
    """An input (or one of its chunks) that could not go through a stage, and why."""

    source: str
    stage: str
    reason: str
    error: str = ""
    doc_id: str | None = None
    chunk_id: str | None = None
