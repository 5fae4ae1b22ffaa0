"""The chunker interface: one method, `chunk(text) -> list[ChunkSpan]`, with a hard token maximum.

Every strategy returns spans of the document text (exact character offsets). The base class
owns the guarantees every strategy shares: whitespace-only spans are dropped, span edges are
trimmed of whitespace, and each span's token count as if encoded alone is taken exactly and
the span re-split if it is over the limit.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, replace
from typing import ClassVar

from transforms.chunking.split import fit, trim
from transforms.chunking.tokens import TokenizedText, Tokenizer, count_alone

# The smallest chunk size the splitters work to (a chunker's own argument check). The job's
# flags have their floor in transforms/token_budget.py, which holds every limit of a run.
MIN_CHUNK_SIZE = 8
# A chunk under this fraction of the chunk size is small: a title with its one-line purpose,
# a heading alone, a section's short tail. Structure-aware chunkers join it to a neighbour
# rather than emit it alone (alone, it is retrieved without the text it introduces).
SMALL_CHUNK_FRACTION = 0.25


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    """A chunk as offsets into the document text: `text[start:end]` is the chunk."""

    start: int
    end: int
    token_count: int = 0
    section_path: tuple[str, ...] = ()
    strategy: str = ""


def common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    """The section path two merged chunks share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


@dataclass(frozen=True)
class ModelLimit:
    """The embedding model's own limit: a chunk's text must fit `budget` of its word pieces."""

    tokenizer: Tokenizer  # the model's (a Hugging Face tokenizer)
    budget: int  # max_seq_length less [CLS], [SEP] and the room kept for the header


def drop_nested(spans: list[ChunkSpan]) -> list[ChunkSpan]:
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


class Chunker(abc.ABC):
    """Base of every strategy. Subclasses implement `split` on a tokenized document.

    Every limit is enforced here: the tokenizer's (`finalize`) and, with a `model_limit`, the
    embedding model's word pieces (`fit_model`), so a chunk is never truncated by the model.
    """

    strategy: ClassVar[str] = ""

    def __init__(
        self,
        tokenizer: Tokenizer,
        chunk_size: int,
        chunk_overlap: int = 0,
        model_limit: ModelLimit | None = None,
    ) -> None:
        if chunk_size < MIN_CHUNK_SIZE:
            raise ValueError(
                f"chunk_size must be at least {MIN_CHUNK_SIZE} tokens, got {chunk_size}"
            )
        if chunk_overlap < 0 or chunk_overlap >= chunk_size // 2:
            raise ValueError(
                f"chunk_overlap must be in [0, chunk_size/2) = [0, {chunk_size // 2}), "
                f"got {chunk_overlap}"
            )
        self.tokenizer = tokenizer
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.model_limit = model_limit

    @property
    def small_chunk_tokens(self) -> int:
        """Chunks under this many tokens are joined to a neighbour where the strategy can."""
        return int(self.chunk_size * SMALL_CHUNK_FRACTION)

    @classmethod
    def for_job(
        cls,
        tokenizer: Tokenizer,
        chunk_size: int,
        chunk_overlap: int,
        model_limit: ModelLimit | None,
        model_path: str | None,
    ) -> Chunker:
        """The chunker the job's chunk stage uses; `model_path` is the job's embedding model
        ("default" or a folder; None when it embeds nothing), for strategies that need it."""
        return cls(tokenizer, chunk_size, chunk_overlap, model_limit)

    @abc.abstractmethod
    def split(self, doc: TokenizedText, language: str | None = None) -> list[ChunkSpan]:
        """Spans of `doc.text`, each at most `chunk_size` tokens by the derived count."""

    def chunk(self, text: str, language: str | None = None) -> list[ChunkSpan]:
        """Chunk `text`; every returned span is at most `chunk_size` tokens when encoded alone."""
        if not text or text.isspace():
            return []
        return self.chunk_tokenized(self.tokenizer.tokenize(text), language)

    def chunk_tokenized(self, doc: TokenizedText, language: str | None = None) -> list[ChunkSpan]:
        """`chunk` on a document this chunker's tokenizer has already tokenized."""
        if not doc.text or doc.text.isspace():
            return []
        return self.fit_model(doc, self.finalize(doc, self.split(doc, language)))

    def finalize(self, doc: TokenizedText, spans: list[ChunkSpan]) -> list[ChunkSpan]:
        """Trim, drop empty spans, and prove the limit on each span's tokens when encoded alone.

        The count is exact (`count_alone`: for tiktoken, the document's own tokens between the
        span's edges plus its edges encoded alone), not an estimate from the document's tokens.
        """
        out: list[ChunkSpan] = []
        text, limit, trim_span = doc.text, self.chunk_size, self.trim_span
        count_span = getattr(self.tokenizer, "count_span", None)
        for span in spans:
            start, end = trim_span(text, span.start, span.end)
            if start >= end:
                continue
            if count_span is not None:
                count = count_span(doc, start, end)
            else:
                count = self.tokenizer.count(text[start:end])
            if count <= limit:
                out.append(ChunkSpan(start, end, count, span.section_path, span.strategy))
                continue
            # Rare: the span's alone-encoding differs from its slice of the document's tokens
            # (a cut inside a word). Re-split it with a tighter derived budget until it fits.
            out.extend(self._resplit(doc, span, start, end))
        return self._bound_overlap(doc, out) if self.chunk_overlap else out

    def model_fits(self, text: str) -> bool:
        """Whether the embedding model reads all of `text` (no model limit: it does)."""
        limit = self.model_limit
        return limit is None or limit.tokenizer.count(text) <= limit.budget

    def fit_model(self, doc: TokenizedText, spans: list[ChunkSpan]) -> list[ChunkSpan]:
        """Split each span the embedding model would truncate, in the model's own word pieces
        (each piece proved by its alone-count), so every piece is read whole."""
        limit = self.model_limit
        if limit is None:
            return spans
        model = limit.tokenizer
        out: list[ChunkSpan] = []
        for i, span in enumerate(spans):
            piece = doc.text[span.start : span.end]
            if self.model_fits(piece):
                out.append(span)
                continue
            # the pieces even where the last would be a small tail, unless the next span
            # (overlapping code) holds that tail and it is dropped
            after = spans[i + 1].start - span.start if i + 1 < len(spans) else len(piece)
            pieces = fit(
                model.tokenize(piece),
                0,
                len(piece),
                limit.budget,
                lambda s, e, piece=piece: model.count(piece[s:e]),
                balanced=lambda s, e, after=after: s < after,
            )
            for s, e, _ in pieces:
                count = self.tokenizer.count(piece[s:e])
                out.append(_replace(span, span.start + s, span.start + e, count))
        return drop_nested(out)

    def _bound_overlap(self, doc: TokenizedText, spans: list[ChunkSpan]) -> list[ChunkSpan]:
        """Drop the overlap of a span whose shared text, encoded alone, is over the limit.

        Trimming can change how the shared slice tokenizes (a multi-token character at its
        edge); starting the span where its predecessor ends loses nothing.
        """
        out: list[ChunkSpan] = []
        for span in spans:
            # A span re-split to fit can leave its last piece wholly inside the next span's
            # overlap (which reaches back to where the re-split span began): drop the piece,
            # the next span holds its text, and the spans stay in order.
            while out and span.start <= out[-1].start and span.end >= out[-1].end:
                out.pop()
            prev = out[-1] if out else None
            if prev is not None and span.start < prev.end:
                if span.end <= prev.end:
                    continue  # wholly inside its predecessor: nothing of it would be lost
                if count_alone(self.tokenizer, doc, span.start, prev.end) > self.chunk_overlap:
                    start, end = self.trim_span(doc.text, prev.end, span.end)
                    if start >= end:
                        continue
                    span = _replace(span, start, end, count_alone(self.tokenizer, doc, start, end))
            out.append(span)
        return out

    def trim_span(self, text: str, start: int, end: int) -> tuple[int, int]:
        """Edges to keep; prose drops surrounding whitespace (code keeps indentation)."""
        return trim(text, start, end)

    def _resplit(
        self, doc: TokenizedText, span: ChunkSpan, start: int, end: int
    ) -> list[ChunkSpan]:
        pieces = fit(
            doc,
            start,
            end,
            self.chunk_size,
            lambda s, e: count_alone(self.tokenizer, doc, s, e),
            self.trim_span,
        )
        return [_replace(span, s, e, c) for s, e, c in pieces]


def _replace(span: ChunkSpan, start: int, end: int, count: int) -> ChunkSpan:
    return replace(span, start=start, end=end, token_count=count)
