"""Fixed-size sliding window over tokens (stride = size - overlap): the classic baseline.

Unlike the textbook `while start < n` loop, it stops once a window reaches the end of the
document, so no last window lies wholly inside the one before it.
"""

from __future__ import annotations

from dataclasses import replace

from transforms.chunking.base import Chunker, ChunkSpan
from transforms.chunking.tokens import TokenizedText


def window_token_ranges(n_tokens: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Token ranges [start, end) of the sliding windows over a document of n_tokens."""
    if n_tokens <= 0:
        return []
    stride = size - overlap
    out = []
    start = 0
    while True:
        end = min(start + size, n_tokens)
        out.append((start, end))
        if end >= n_tokens:
            return out
        start += stride


class FixedChunker(Chunker):
    """Windows of exactly `chunk_size` tokens (the last one shorter), `chunk_overlap` apart."""

    strategy = "fixed"

    def split(self, doc: TokenizedText, language: str | None = None) -> list[ChunkSpan]:
        spans = []
        for t0, t1 in window_token_ranges(doc.n_tokens, self.chunk_size, self.chunk_overlap):
            start, end = doc.boundary_at_token(t0), doc.boundary_at_token(t1)
            if end > start:
                spans.append(ChunkSpan(start, end, doc.count(start, end), strategy=self.strategy))
        return spans

    def finalize(self, doc: TokenizedText, spans: list[ChunkSpan]) -> list[ChunkSpan]:
        # A window is a window: keep its edges (no whitespace trimming), but still prove the
        # limit, re-splitting the rare window whose alone-encoding is longer than its slice.
        out = []
        for span in spans:
            if doc.text[span.start : span.end].isspace():
                continue  # a window of whitespace alone (blank lines) is no chunk
            count = self.tokenizer.count(doc.text[span.start : span.end])
            if count <= self.chunk_size:
                out.append(replace(span, token_count=count))
            else:
                out.extend(self._resplit(doc, span, span.start, span.end))
        return out
