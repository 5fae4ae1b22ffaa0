"""The stages' stat events: one small typed record (a tuple underneath, so the shuffle stays
small) per thing that happened; `cost_combine.CostReportFn` folds them into the run's totals."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from schemas.records import Chunk, Document, Reject, file_of


class DocumentIn(NamedTuple):
    """One input document (a file or a JSONL record), read or rejected at the read stage.

    `file`: the file it came from, given only on an --estimate_sample run (the projection
    counts each sampled file's documents)."""

    file: str = ""


class FileMatched(NamedTuple):
    """On an --estimate_sample run: a file the inputs matched that the job would read, with
    its size on disk and whether the sample reads it."""

    file: str
    size: int
    sampled: bool


class FileChunk(NamedTuple):
    """On an --estimate_sample run: one embedded chunk of a file the sample read."""

    file: str
    embed_tokens: int


class DocumentChunked(NamedTuple):
    doc_type: str
    strategy: str
    doc_tokens: int  # in the pricing tokenizer
    boilerplate_lines: int
    boilerplate_tokens: int
    contents_pages: int = 0  # a PDF's contents pages left out of its text
    index_pages: int = 0  # and its back-of-book index pages


class ChunkMade(NamedTuple):
    doc_type: str
    strategy: str
    text_tokens: int
    embed_tokens: int
    header_tokens: int
    is_parent: bool
    truncated: bool  # longer than the model reads
    embed_seconds: float
    context_source: str | None


class Rejected(NamedTuple):
    stage: str
    reason: str
    chunk_level: bool  # one chunk of a document (embedding), not a whole document


class LLMUsage(NamedTuple):
    prompt_tokens: int
    completion_tokens: int
    requests: int
    cache_hits: int


class DocumentUnchanged(NamedTuple):
    """A document whose chunks are reused from --previous_output."""

    doc_type: str


class ChunkReused(NamedTuple):
    """One chunk row copied from --previous_output."""

    embed_tokens: int


class DocumentChange(NamedTuple):
    """One row of changes/: what became of a document since --previous_output."""

    change: str  # schemas.columns.CHANGE_KINDS
    chunks_added: int
    chunks_removed: int
    chunks_updated: int = 0


class EmbeddingReused(NamedTuple):
    """A chunk whose vector came from the embedding cache (an earlier run's vector of exactly
    the same embedded text, by the same model), so the model did not read it."""

    embed_tokens: int


class ChunkDeduplicated(NamedTuple):
    """A chunk whose embedded text (header and text) another chunk of the run has too: the
    model read it once, and both got that vector."""

    embed_tokens: int


class FileSkipped(NamedTuple):
    """A matched file not read, by rule."""

    why: str  # "hidden" or "output_folder"


def doc_event(doc: Document, strategy: str, doc_tokens: int) -> DocumentChunked:
    return DocumentChunked(
        doc.doc_type,
        strategy,
        doc_tokens,
        doc.boilerplate_lines_removed,
        doc.boilerplate_tokens_removed,
        doc.contents_pages_removed,
        doc.index_pages_removed,
    )


def chunk_events(
    chunk: Chunk, max_seq_length: int | None, per_file: bool = False
) -> Iterator[ChunkMade | LLMUsage | FileChunk]:
    """What one written chunk costs: its tokens, and the LLM call of its context line;
    `per_file` (an --estimate_sample run): also its tokens against its file."""
    truncated = bool(max_seq_length and (chunk.model_tokens or 0) > max_seq_length)
    yield ChunkMade(
        chunk.doc_type,
        chunk.strategy,
        chunk.token_count,
        chunk.embed_tokens,
        chunk.context_tokens,
        chunk.is_parent,
        truncated,
        chunk.embed_seconds,
        chunk.context_source,
    )
    if chunk.llm_usage is not None:
        yield LLMUsage(*chunk.llm_usage)
    if per_file and not chunk.is_parent:
        yield FileChunk(file_of(chunk.source), chunk.embed_tokens)


def reject_event(reject: Reject) -> Rejected:
    return Rejected(reject.stage, reject.reason, reject.chunk_id is not None)


StatEvent = (
    DocumentIn
    | FileMatched
    | FileChunk
    | DocumentChunked
    | ChunkMade
    | Rejected
    | LLMUsage
    | DocumentUnchanged
    | ChunkReused
    | DocumentChange
    | EmbeddingReused
    | ChunkDeduplicated
    | FileSkipped
)
