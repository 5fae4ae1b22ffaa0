"""Recursive prose chunker: blank line > line > sentence > word > token, packed to a token budget.

The splitting itself is `split.recursive_split` and `split.with_overlap`; the document is encoded
once (plus the first and last words of each finished chunk, to prove the limit: see
`Chunker.finalize`).
"""

from __future__ import annotations

from transforms.chunking.base import Chunker, ChunkSpan
from transforms.chunking.split import recursive_split, with_overlap
from transforms.chunking.tokens import TokenizedText


class RecursiveChunker(Chunker):
    """Prose: paragraphs, then lines, sentences, words and tokens, with token overlap."""

    strategy = "recursive"

    def split(self, doc: TokenizedText, language: str | None = None) -> list[ChunkSpan]:
        return [
            ChunkSpan(s, e, strategy=self.strategy)
            for s, e in self.split_range(doc, 0, len(doc.text))
        ]

    def split_range(self, doc: TokenizedText, start: int, end: int) -> list[tuple[int, int]]:
        """Overlapping chunk ranges of text[start:end] (also the fallback of other strategies)."""
        segments = recursive_split(doc, start, end, self.chunk_size - self.chunk_overlap)
        return with_overlap(doc, segments, self.chunk_overlap)
