"""The {doc_type: strategy} table and the ChunkDocuments stage.

A strategy is one module with one Chunker class; adding one is one file and one row in
STRATEGIES. `chunk_document` is the pure core: a Document in, its Chunks out, every chunk
within the token budget of the configured tokenizer and, when an embedding model is set,
within the model's own word-piece limit.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import apache_beam as beam

from schemas.records import Chunk, Document, content_hash, stable_hash
from transforms import stat_events
from transforms.chunking.base import Chunker, ChunkSpan, ModelLimit
from transforms.chunking.split import ChunkTimeout, time_limit
from transforms.chunking.tokens import (
    TOKEN_ENGINES,
    TokenizedText,
    Tokenizer,
    TokenizerFailed,
    make_tokenizer,
)
from transforms.common import REJECTS
from transforms.ingest.layout import page_of
from transforms.stage_base import EVENTS, Rejection, Stage
from transforms.token_budget import TokenBudget

DOCUMENTS = "documents"  # the tags of the chunk stage's outputs
PARENTS = "parents"

# strategy name -> "module:Class"
STRATEGIES: dict[str, str] = {
    "recursive": "transforms.chunking.recursive:RecursiveChunker",
    "fixed": "transforms.chunking.fixed:FixedChunker",
    "markdown": "transforms.chunking.markdown:MarkdownChunker",
    "code": "transforms.chunking.code:CodeChunker",
    "semantic": "transforms.chunking.semantic:SemanticChunker",
    "sentence_window": "transforms.chunking.sentence_window:SentenceWindowChunker",
}
DEFAULT_STRATEGY_BY_TYPE: dict[str, str] = {
    "text": "recursive",
    "markdown": "markdown",
    "html": "markdown",  # trafilatura's markdown output: headings become section paths
    "code": "code",
    # PDF, Word and PowerPoint are extracted to Markdown (transforms.ingest.pdf and .office)
    "pdf": "markdown",
    "docx": "markdown",
    "pptx": "markdown",
}


def strategy_class(name: str) -> type[Chunker]:
    if name not in STRATEGIES:
        raise ValueError(f"unknown chunking strategy {name!r}; choose one of {sorted(STRATEGIES)}")
    module, cls = STRATEGIES[name].split(":")
    return getattr(importlib.import_module(module), cls)


@dataclass(frozen=True)
class ChunkingConfig:
    """Everything that decides chunk boundaries (all of it is in the config fingerprint)."""

    # The token limits (chunk size, overlap, header room, the model's limit): checked once,
    # when the budget is built.
    budget: TokenBudget = field(default_factory=TokenBudget)
    strategies: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_STRATEGY_BY_TYPE))
    parent_chunk_size: int | None = None
    config_fingerprint: str = ""
    # How the tokenizer's tokens are computed (tokens.TOKEN_ENGINES). Every engine gives the
    # same tokens, hence the same chunks: it is not in the config fingerprint.
    token_engine: str = "auto"
    # The time limit of one document's chunking (0: none); a slower document is a reject, and
    # the chunks of the others do not depend on it: not in the fingerprint either.
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if not isinstance(self.budget, TokenBudget):
            raise ValueError(f"budget must be a TokenBudget, got {type(self.budget).__name__}")
        if self.timeout_s < 0:
            raise ValueError(f"--chunk_timeout_s must be >= 0 (0: no limit), got {self.timeout_s}")
        if self.token_engine not in TOKEN_ENGINES:
            raise ValueError(
                f"--token_engine={self.token_engine!r} is not an engine; choose one of "
                f"{list(TOKEN_ENGINES)}"
            )
        for doc_type, name in self.strategies.items():
            if name not in STRATEGIES:
                raise ValueError(
                    f"--strategy_{doc_type}={name!r} is not a strategy; choose one of "
                    f"{sorted(STRATEGIES)}"
                )
        chunk_size = self.budget.chunk_size
        if self.parent_chunk_size is not None and self.parent_chunk_size <= chunk_size:
            raise ValueError(
                f"--parent_chunk_size={self.parent_chunk_size} must exceed "
                f"--chunk_size={chunk_size}"
            )

    def strategy_for(self, doc_type: str) -> str:
        """The strategy that chunks documents of `doc_type` (recursive when none is set)."""
        return self.strategies.get(doc_type, "recursive")

    @property
    def emits_parents(self) -> bool:
        """Whether a run writes parent chunks: --parent_chunk_size, or a windowed strategy
        (sentence_window: each embedded sentence's window is its parent)."""
        return self.parent_chunk_size is not None or any(
            getattr(strategy_class(name), "windowed", False) for name in self.strategies.values()
        )


class DocumentChunker:
    """Pure core of the chunk stage: builds the strategy table once, chunks documents."""

    def __init__(self, config: ChunkingConfig) -> None:
        self.config = config
        self.budget = config.budget
        self.tokenizer: Tokenizer = make_tokenizer(self.budget.tokenizer, config.token_engine)
        self._chunkers: dict[tuple[str, int], Chunker] = {}
        self.model_limit: ModelLimit | None = self.budget.model_limit()

    def chunker(self, doc_type: str, size: int) -> Chunker:
        """The chunker of `doc_type` at `size` tokens: the chunks to embed (the body size) get
        the overlap and the model's limit; parents get neither."""
        name = self.config.strategy_for(doc_type)
        key = (name, size)
        if key not in self._chunkers:
            embedded = size == self.budget.body_size
            self._chunkers[key] = strategy_class(name).for_job(
                self.tokenizer,
                size,
                self.budget.chunk_overlap if embedded else 0,
                self.model_limit if embedded else None,
                self.budget.model_tokenizer,
            )
        return self._chunkers[key]

    def spans(
        self, doc: Document, tokenized: TokenizedText | None = None
    ) -> list[tuple[ChunkSpan, int | None]]:
        """(span, index of its parent span or None); parents come before their children.

        `tokenized` is doc.text as this chunker's tokenizer tokenizes it, when already done.
        """
        if tokenized is None:
            tokenized = self.tokenizer.tokenize(doc.text)
        body = self.budget.body_size
        if self.config.parent_chunk_size is None:
            chunker = self.chunker(doc.doc_type, body)
            spans = chunker.chunk_tokenized(tokenized, doc.language)
            if getattr(chunker, "windowed", False):
                return _with_windows(tokenized, spans, chunker.windows(tokenized, spans))
            return [(s, None) for s in spans]
        out: list[tuple[ChunkSpan, int | None]] = []
        parent_chunker = self.chunker(doc.doc_type, self.config.parent_chunk_size)
        child_chunker = self.chunker(doc.doc_type, body)
        for parent in parent_chunker.chunk_tokenized(tokenized, doc.language):
            parent_index = len(out)
            out.append((parent, None))
            # A child is counted alone, so it is chunked from the parent's text alone.
            sub = self.tokenizer.tokenize(doc.text[parent.start : parent.end])
            for child in child_chunker.chunk_tokenized(sub, doc.language):
                # The child chunker sees only the parent's text: headings above it are the
                # parent's path, so a child without a path of its own inherits it.
                shifted = ChunkSpan(
                    child.start + parent.start,
                    child.end + parent.start,
                    child.token_count,
                    child.section_path or parent.section_path,
                    child.strategy,
                )
                out.append((shifted, parent_index))
        return out

    def chunk_document(self, doc: Document) -> list[Chunk]:
        return self.chunk_document_counted(doc)[0]

    def chunk_document_counted(self, doc: Document) -> tuple[list[Chunk], int]:
        """The document's chunks, and its tokens in this chunker's tokenizer.

        The count comes from the tokenization the chunkers use, so pricing the document in
        the same tokenizer needs no second encoding.
        """
        tokenized = self.tokenizer.tokenize(doc.text)
        spans = self.spans(doc, tokenized)
        ids: list[str] = []
        chunks: list[Chunk] = []
        parents = {p for _, p in spans if p is not None}
        seen: dict[tuple[str, bool], int] = {}
        for index, (span, parent) in enumerate(spans):
            is_parent = parent is None and (
                self.config.parent_chunk_size is not None or index in parents
            )
            text = doc.text[span.start : span.end]
            # The id names the chunk's text within its document (the n-th chunk of that text),
            # not its offsets: an edit elsewhere in the document keeps it, so a vector store
            # updates the row's offsets in place instead of deleting and re-inserting it.
            text_hash = content_hash(text)
            occurrence = seen.get((text_hash, is_parent), 0)
            seen[(text_hash, is_parent)] = occurrence + 1
            chunk_id = stable_hash(
                "chunk",
                doc.doc_id,
                text_hash,
                occurrence,
                is_parent,
                self.config.config_fingerprint,
            )
            ids.append(chunk_id)
            chunks.append(
                Chunk(
                    chunk_id=chunk_id,
                    doc_id=doc.doc_id,
                    source=doc.source,
                    doc_type=doc.doc_type,
                    language=doc.language,
                    chunk_index=index,
                    text=text,
                    start_char=span.start,
                    end_char=span.end,
                    token_count=span.token_count,
                    section_path=span.section_path,
                    strategy=span.strategy,
                    config_fingerprint=self.config.config_fingerprint,
                    title=doc.title,
                    content_hash=doc.content_hash,
                    parent_id=ids[parent] if parent is not None else None,
                    is_parent=is_parent,
                    table_header=table_header(doc.text, span.start)
                    if doc.doc_type not in ("code", "text")
                    else None,
                    **chunk_pages(doc, span.start, span.end),
                )
            )
        return chunks, tokenized.n_tokens


MAX_TABLE_LOOKBACK_LINES = 10_000
_TABLE_SEPARATOR = re.compile(r"\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?")


def table_header(text: str, start: int) -> str | None:
    """The header row of the Markdown table whose body row starts at `start` (a chunk cut
    between the rows of a table too large for one), else None. At most
    MAX_TABLE_LOOKBACK_LINES rows are walked back."""
    if not text.startswith("|", start):
        return None
    end = start
    for _ in range(MAX_TABLE_LOOKBACK_LINES):
        if end == 0:
            return None
        line_start = text.rfind("\n", 0, end - 1) + 1
        line = text[line_start : end - 1]
        if not line.startswith("|"):
            return None
        if _TABLE_SEPARATOR.fullmatch(line.strip()):
            if line_start == 0:
                return None
            head_start = text.rfind("\n", 0, line_start - 1) + 1
            head = text[head_start : line_start - 1]
            return head if head.startswith("|") else None
        end = line_start
    return None


def chunk_pages(doc: Document, start: int, end: int) -> dict:
    """page_start, page_end and page_label of the chunk doc.text[start:end] (None for a
    document without pages)."""
    if not doc.page_starts:
        return {}
    first = page_of(doc.page_starts, start)
    last = max(first, page_of(doc.page_starts, max(start, end - 1)))
    label = doc.page_labels[first - 1] if doc.page_labels else None
    return {"page_start": first, "page_end": last, "page_label": label or None}


def _with_windows(
    doc: TokenizedText, spans: list[ChunkSpan], windows: list[tuple[int, int]]
) -> list[tuple[ChunkSpan, int | None]]:
    """Each span after its window as its parent (a window shared by neighbours written once)."""
    out: list[tuple[ChunkSpan, int | None]] = []
    index: dict[tuple[int, int], int] = {}
    for span, (start, end) in zip(spans, windows, strict=True):
        if (start, end) not in index:
            index[(start, end)] = len(out)
            window = ChunkSpan(start, end, doc.count(start, end), span.section_path, span.strategy)
            out.append((window, None))
        out.append((span, index[(start, end)]))
    return out


class _ChunkFn(Stage):
    """Document -> its chunks (by document, with its text), parents, the document and its
    stat event; a document that cannot be chunked in time, or has no chunk, is a reject."""

    STAGE = "chunk"
    FAILED = "chunk_failed"  # one document's failure is a reject, never a failed job
    REJECTED_STAT = "documents_rejected_chunk"

    def __init__(self, config: ChunkingConfig, pricing_tokenizer: str | None = None) -> None:
        self.config = config
        self.pricing_tokenizer = pricing_tokenizer or config.budget.tokenizer
        self.core: DocumentChunker | None = None
        self.pricing: Tokenizer | None = None

    def setup(self) -> None:
        self.core = DocumentChunker(self.config)
        if self.pricing_tokenizer != self.config.budget.tokenizer:
            self.pricing = make_tokenizer(self.pricing_tokenizer, "tiktoken")  # counts only

    def process_one(self, doc: Document) -> Iterator:
        assert self.core is not None
        try:
            with time_limit(self.config.timeout_s):
                chunks, doc_tokens = self.core.chunk_document_counted(doc)
            if chunks and self.pricing is not None:
                doc_tokens = self.pricing.count(doc.text)
        except ChunkTimeout:
            limit = f"chunking took over --chunk_timeout_s={self.config.timeout_s:g} s"
            raise Rejection("chunk_timeout", limit) from None
        except TokenizerFailed as e:  # a panic in any tokenizer call, the pricing count's too
            raise Rejection(e.reason, str(e)) from None
        if not chunks:
            raise Rejection("no_chunks", "no non-whitespace text", stat="documents_without_chunks")
        self.stat("documents_chunked")
        self.stat("chunks", len(chunks))
        strategy = self.config.strategy_for(doc.doc_type)
        yield self.event(stat_events.doc_event(doc, strategy, doc_tokens))
        yield beam.pvalue.TaggedOutput(DOCUMENTS, doc)
        children = []
        for chunk in chunks:
            if chunk.is_parent:
                yield beam.pvalue.TaggedOutput(PARENTS, chunk)
            else:
                children.append(chunk)
        yield doc.text, children


class ChunkResult(NamedTuple):
    documents: beam.PCollection  # Document: each document that has chunks
    by_document: beam.PCollection  # (document text, [Chunk]): the chunks to embed, per document
    parents: beam.PCollection | None  # Chunk: parents (--parent_chunk_size), never embedded
    rejects: beam.PCollection  # Reject
    events: beam.PCollection  # stat_events.DocumentChunked


class ChunkDocuments(beam.PTransform):
    """Document -> ChunkResult.

    A chunked document's event holds its tokens in the pricing tokenizer. Pricing in the
    chunking tokenizer (`pricing_tokenizer` None or the same name) reuses the chunkers'
    tokenization of the document; another tokenizer encodes it once more. The chunks to embed
    stay grouped by document, with its text, for the context stage.
    """

    def __init__(self, config: ChunkingConfig, pricing_tokenizer: str | None = None) -> None:
        super().__init__()
        self.config = config
        self.pricing_tokenizer = pricing_tokenizer

    def expand(self, docs: beam.PCollection) -> ChunkResult:
        chunk = _ChunkFn(self.config, self.pricing_tokenizer)
        out = docs | "Chunk by type" >> beam.ParDo(chunk).with_outputs(
            DOCUMENTS, PARENTS, REJECTS, EVENTS, main="by_document"
        )
        parents = out[PARENTS] if self.config.emits_parents else None
        return ChunkResult(out[DOCUMENTS], out.by_document, parents, out[REJECTS], out[EVENTS])
