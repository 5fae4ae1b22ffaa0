"""The {doc_type: strategy} table and the ChunkDocuments stage.

A strategy is one module with one Chunker class; adding one is one file and one row in
STRATEGIES. `chunk_document` is the pure core: a Document in, its Chunks out, every chunk
within the token budget of the configured tokenizer and, when an embedding model is set,
within the model's own word-piece limit.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import apache_beam as beam

from schemas.records import Chunk, Document, Reject, stable_hash
from transforms import accounting, progress
from transforms.chunking.base import Chunker, ChunkSpan, trim
from transforms.chunking.recursive import recursive_split
from transforms.chunking.tokens import TOKEN_ENGINES, TokenizedText, Tokenizer, make_tokenizer
from transforms.models import resolve_model_path

NAMESPACE = "corpus_chunker"
REJECTS = "rejects"
DOC_EVENTS = "doc_events"

# strategy name -> "module:Class"
STRATEGIES: dict[str, str] = {
    "recursive": "transforms.chunking.recursive:RecursiveChunker",
    "fixed": "transforms.chunking.fixed:FixedChunker",
    "markdown": "transforms.chunking.markdown:MarkdownChunker",
    "code": "transforms.chunking.code:CodeChunker",
    "semantic": "transforms.chunking.semantic:SemanticChunker",
}
DEFAULT_STRATEGY_BY_TYPE: dict[str, str] = {
    "text": "recursive",
    "markdown": "markdown",
    "html": "markdown",  # trafilatura's markdown output: headings become section paths
    "code": "code",
}


def strategy_class(name: str) -> type[Chunker]:
    if name not in STRATEGIES:
        raise ValueError(f"unknown chunking strategy {name!r}; choose one of {sorted(STRATEGIES)}")
    module, cls = STRATEGIES[name].split(":")
    return getattr(importlib.import_module(module), cls)


@dataclass(frozen=True)
class ChunkingConfig:
    """Everything that decides chunk boundaries (all of it is in the config fingerprint)."""

    chunk_size: int = 256
    chunk_overlap: int = 0
    tokenizer: str = "cl100k_base"
    strategies: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_STRATEGY_BY_TYPE))
    header_reserve: int = 0  # tokens left free in every chunk for its context header
    parent_chunk_size: int | None = None
    # The embedding model (flag value: "default" or a folder) and its limit in word pieces.
    model_tokenizer: str | None = None
    model_max_tokens: int | None = None
    model_header_reserve: int = 0  # word pieces left free for the header in the model's count
    config_fingerprint: str = ""
    # How the tokenizer's tokens are computed (tokens.TOKEN_ENGINES). Every engine gives the
    # same tokens, hence the same chunks: it is not in the config fingerprint.
    token_engine: str = "auto"

    def __post_init__(self) -> None:
        body = self.chunk_size - self.header_reserve
        if body < 16:
            raise ValueError(
                f"--chunk_size={self.chunk_size} leaves {body} tokens after the context header "
                f"reserve of {self.header_reserve}; raise --chunk_size or lower the header size"
            )
        if not 0 <= self.chunk_overlap < body // 2:
            raise ValueError(
                f"--chunk_overlap={self.chunk_overlap} must be in [0, {body // 2}) "
                f"(half of the {body} tokens a chunk has after its header)"
            )
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
        if self.parent_chunk_size is not None and self.parent_chunk_size <= self.chunk_size:
            raise ValueError(
                f"--parent_chunk_size={self.parent_chunk_size} must exceed "
                f"--chunk_size={self.chunk_size}"
            )

    def strategy_for(self, doc_type: str) -> str:
        """The strategy that chunks documents of `doc_type` (recursive when none is set)."""
        return self.strategies.get(doc_type, "recursive")

    @property
    def body_size(self) -> int:
        return self.chunk_size - self.header_reserve


def _drop_nested(spans: list[ChunkSpan]) -> list[ChunkSpan]:
    """Drop spans lying wholly inside an earlier one.

    Re-splitting overlapping chunks for the model can make the tail piece of one chunk equal
    to, or fall inside, the head piece of the next; the text is in the kept span already.
    """
    out: list[ChunkSpan] = []
    furthest = -1
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if span.end <= furthest:
            continue
        out.append(span)
        furthest = span.end
    return out


class DocumentChunker:
    """Pure core of the chunk stage: builds the strategy table once, chunks documents."""

    def __init__(self, config: ChunkingConfig) -> None:
        self.config = config
        self.tokenizer: Tokenizer = make_tokenizer(config.tokenizer, config.token_engine)
        self._chunkers: dict[tuple[str, int], Chunker] = {}
        self.model_tokenizer: Tokenizer | None = None
        if config.model_tokenizer and config.model_max_tokens:
            # Resolved here, on the worker: the bundled model's folder differs between the
            # launcher's environment and a worker image.
            folder = resolve_model_path(config.model_tokenizer)
            self.model_tokenizer = make_tokenizer(f"hf:{folder}")

    def chunker(self, doc_type: str, size: int) -> Chunker:
        name = self.config.strategy_for(doc_type)
        key = (name, size)
        if key not in self._chunkers:
            overlap = self.config.chunk_overlap if size == self.config.body_size else 0
            cls = strategy_class(name)
            if name == "semantic":  # it embeds sentences with the job's model
                self._chunkers[key] = cls(
                    self.tokenizer, size, overlap, model_path=self.config.model_tokenizer
                )
            else:
                self._chunkers[key] = cls(self.tokenizer, size, overlap)
        return self._chunkers[key]

    def spans(
        self, doc: Document, tokenized: TokenizedText | None = None
    ) -> list[tuple[ChunkSpan, int | None]]:
        """(span, index of its parent span or None); parents come before their children.

        `tokenized` is doc.text as this chunker's tokenizer tokenizes it, when already done.
        """
        if tokenized is None:
            tokenized = self.tokenizer.tokenize(doc.text)
        body = self.config.body_size
        if self.config.parent_chunk_size is None:
            chunker = self.chunker(doc.doc_type, body)
            return [(s, None) for s in self._fit_model(tokenized, chunker, doc.language)]
        out: list[tuple[ChunkSpan, int | None]] = []
        parent_chunker = self.chunker(doc.doc_type, self.config.parent_chunk_size)
        child_chunker = self.chunker(doc.doc_type, body)
        for parent in parent_chunker.chunk_tokenized(tokenized, doc.language):
            parent_index = len(out)
            out.append((parent, None))
            # A child is counted alone, so it is chunked from the parent's text alone.
            sub = self.tokenizer.tokenize(doc.text[parent.start : parent.end])
            for child in self._fit_model(sub, child_chunker, doc.language):
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

    def _fit_model(
        self, doc: TokenizedText, chunker: Chunker, language: str | None
    ) -> list[ChunkSpan]:
        text = doc.text
        spans = chunker.chunk_tokenized(doc, language)
        if self.model_tokenizer is None:
            return spans
        out: list[ChunkSpan] = []
        for span in spans:
            piece = text[span.start : span.end]
            if self.model_tokenizer.count(piece) <= self.model_budget:
                out.append(span)
                continue
            # The embedding model would truncate this chunk: split it in the model's own word
            # pieces (each piece proved by its alone-count), so every piece is read whole.
            for s, e in self._model_pieces(piece):
                sub = piece[s:e]
                out.append(
                    ChunkSpan(
                        span.start + s,
                        span.start + e,
                        self.tokenizer.count(sub),
                        span.section_path,
                        span.strategy,
                    )
                )
        return _drop_nested(out)

    def _model_pieces(self, piece: str) -> list[tuple[int, int]]:
        assert self.model_tokenizer is not None
        model_doc = self.model_tokenizer.tokenize(piece)
        budget = self.model_budget
        while True:
            pieces = [
                trim(piece, s, e) for s, e in recursive_split(model_doc, 0, len(piece), budget)
            ]
            pieces = [(s, e) for s, e in pieces if s < e]
            if all(self.model_tokenizer.count(piece[s:e]) <= self.model_budget for s, e in pieces):
                return pieces
            if budget <= 8:
                raise ValueError("cannot fit a piece into the embedding model's limit")
            budget -= max(1, budget // 16)

    @property
    def model_budget(self) -> int:
        """Word pieces a chunk may have: the model limit less [CLS]/[SEP] and the header room."""
        assert self.config.model_max_tokens is not None
        return self.config.model_max_tokens - 2 - self.config.model_header_reserve

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
        for index, (span, parent) in enumerate(spans):
            is_parent = self.config.parent_chunk_size is not None and parent is None
            chunk_id = stable_hash(
                "chunk",
                doc.doc_id,
                doc.content_hash,
                span.start,
                span.end,
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
                    text=doc.text[span.start : span.end],
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
                )
            )
        return chunks, tokenized.n_tokens


class _ChunkFn(beam.DoFn):
    def __init__(self, config: ChunkingConfig, pricing_tokenizer: str | None = None) -> None:
        self.config = config
        self.pricing_tokenizer = pricing_tokenizer or config.tokenizer
        self.chunked = progress.counter(NAMESPACE, "documents_chunked")
        self.n_chunks = progress.counter(NAMESPACE, "chunks")
        self.failed = progress.counter(NAMESPACE, "documents_rejected_chunk")
        self.no_chunks = progress.counter(NAMESPACE, "documents_without_chunks")
        self.core: DocumentChunker | None = None
        self.pricing: Tokenizer | None = None

    def setup(self) -> None:
        self.core = DocumentChunker(self.config)
        if self.pricing_tokenizer != self.config.tokenizer:
            self.pricing = make_tokenizer(self.pricing_tokenizer, "tiktoken")  # counts only

    def process(self, doc: Document) -> Iterator:
        assert self.core is not None
        try:
            chunks, doc_tokens = self.core.chunk_document_counted(doc)
            if chunks and self.pricing is not None:
                doc_tokens = self.pricing.count(doc.text)
        except Exception as e:  # one document's failure is a reject, never a failed job
            self.failed.inc()
            yield beam.pvalue.TaggedOutput(
                REJECTS, Reject(doc.source, "chunk", "chunk_failed", repr(e)[:500], doc.doc_id)
            )
            return
        if not chunks:
            self.no_chunks.inc()
            yield beam.pvalue.TaggedOutput(
                REJECTS,
                Reject(doc.source, "chunk", "no_chunks", "no non-whitespace text", doc.doc_id),
            )
            return
        self.chunked.inc()
        self.n_chunks.inc(len(chunks))
        strategy = self.config.strategy_for(doc.doc_type)
        yield beam.pvalue.TaggedOutput(DOC_EVENTS, accounting.doc_event(doc, strategy, doc_tokens))
        yield (doc, chunks)


class ChunkDocuments(beam.PTransform):
    """Document -> (Document, [Chunk]) (main), Reject (`rejects`), cost event (`doc_events`).

    A chunked document's event holds its tokens in the pricing tokenizer. Pricing in the
    chunking tokenizer (`pricing_tokenizer` None or the same name) reuses the chunkers'
    tokenization of the document; another tokenizer encodes it once more.
    """

    def __init__(self, config: ChunkingConfig, pricing_tokenizer: str | None = None) -> None:
        super().__init__()
        self.config = config
        self.pricing_tokenizer = pricing_tokenizer

    def expand(self, docs: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        chunk = _ChunkFn(self.config, self.pricing_tokenizer)
        return docs | "Chunk by type" >> beam.ParDo(chunk).with_outputs(
            REJECTS, DOC_EVENTS, main="chunked"
        )
