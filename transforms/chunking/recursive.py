"""Recursive prose chunker: blank line > line > sentence > word > token, packed to a token budget.

Cut points are token boundaries of the document's own tokenization, so every count is a
difference of two indices; the document is encoded once (plus once per finished chunk, to prove
the limit). Sentence boundaries come from blingfire's sentence splitter.
"""

from __future__ import annotations

import itertools
import re

import numpy as np

from transforms.chunking.base import Chunker, ChunkSpan
from transforms.chunking.tokens import TokenizedText

_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_NEWLINE = re.compile(r"\n")
_SPACE = re.compile(r"\s+")

PARAGRAPH, LINE, SENTENCE, WORD, TOKEN = range(5)
LEVEL_NAMES = ("paragraph", "line", "sentence", "word", "token")


def sentence_starts(text: str, start: int, end: int) -> list[int]:
    """Offsets (into `text`) where a sentence starts inside text[start:end], the first excluded."""
    try:
        import blingfire
    except ImportError as e:  # pragma: no cover - install problem
        raise ImportError("sentence splitting needs `pip install blingfire`") from e
    piece = text[start:end]
    if not piece.strip():
        return []
    _, offsets = blingfire.text_to_sentences_and_offsets(piece)
    return [start + s for s, _ in offsets[1:]]


def _candidates(doc: TokenizedText, start: int, end: int, level: int) -> np.ndarray:
    """Token-boundary cut points strictly inside (start, end) for one separator level."""
    text = doc.text
    if level == PARAGRAPH:
        raw = [m.end() for m in _BLANK_LINE.finditer(text, start, end)]
    elif level == LINE:
        raw = [m.end() for m in _NEWLINE.finditer(text, start, end)]
    elif level == SENTENCE:
        raw = sentence_starts(text, start, end)
    else:  # WORD: cut before a whitespace run, where tiktoken's " word" tokens begin
        raw = [m.start() for m in _SPACE.finditer(text, start, end)]
    if not raw:
        return np.empty(0, dtype=np.int64)
    pos = np.asarray(raw, dtype=np.int64)
    idx = np.maximum(np.searchsorted(doc.boundaries, pos, side="right") - 1, 0)
    snapped = doc.boundaries[idx]
    # A separator inside a token (cl100k has ".\n\n" as one token) is moved to the token
    # boundary on whichever side only skips whitespace, so no cut lands before a "." or a word.
    for i in np.nonzero(snapped != pos)[0]:
        p, lo = int(pos[i]), int(snapped[i])
        if not text[lo:p].isspace():
            hi = doc.ceil(p)
            if text[p:hi].isspace() or hi == p:
                snapped[i] = hi
    snapped = np.unique(snapped)
    return snapped[(snapped > start) & (snapped < end)]


def _token_windows(doc: TokenizedText, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    out = []
    first = doc.tokens_before(start)
    last = doc.tokens_before(end)
    pos = start
    for t in range(first + limit, last, limit):
        cut = doc.boundary_at_token(t)
        if doc.count(pos, cut) > limit:  # a character spanning several tokens
            cut = doc.floor(cut - 1)
        if cut > pos:
            out.append((pos, cut))
            pos = cut
    out.append((pos, end))
    return out


def recursive_split(
    doc: TokenizedText, start: int, end: int, limit: int, level: int = PARAGRAPH
) -> list[tuple[int, int]]:
    """Non-overlapping segments tiling [start, end), each at most `limit` tokens (derived count).

    At each level the text is cut at that level's separators and the pieces are packed
    greedily up to `limit`; a piece that alone is over `limit` is split at the next level.
    """
    if doc.count(start, end) <= limit:
        return [(start, end)]
    if level >= TOKEN:
        return _token_windows(doc, start, end, limit)
    cuts = _candidates(doc, start, end, level)
    if len(cuts) == 0:
        return recursive_split(doc, start, end, limit, level + 1)
    points = np.concatenate(([start], cuts, [end]))
    idx = np.searchsorted(doc.boundaries, points, side="right") - 1
    tokens = doc.token_index[np.maximum(idx, 0)]
    out: list[tuple[int, int]] = []
    i, n = 0, len(points) - 1
    while i < n:
        j = int(np.searchsorted(tokens, tokens[i] + limit, side="right")) - 1
        j = min(j, n)
        if j <= i:
            out.extend(recursive_split(doc, int(points[i]), int(points[i + 1]), limit, level + 1))
            i += 1
        else:
            out.append((int(points[i]), int(points[j])))
            i = j
    return out


def overlap_start(doc: TokenizedText, prev_start: int, start: int, overlap: int) -> int:
    """Where a chunk starting at `start` begins once it takes up to `overlap` tokens before it.

    The window is snapped forward to the first sentence start inside it, else the first word
    start, so overlap never begins mid-word when it can be helped.
    """
    if overlap <= 0 or start <= prev_start:
        return start
    window = max(doc.boundary_at_token(doc.tokens_before(start) - overlap), prev_start)
    while window < start and doc.count(window, start) > overlap:
        window = doc.ceil(window + 1)  # a character of several tokens straddled the window
    if window >= start:
        return start
    # Snap down to the token that holds the boundary (tiktoken's " word" tokens start at the
    # space), never below the window, so the overlap stays within `overlap` tokens.
    for s in sentence_starts(doc.text, window, start):
        snapped = doc.floor(s)
        if window < snapped < start:
            return snapped
    text = doc.text
    if window > 0 and not text[window - 1].isspace() and not text[window].isspace():
        m = _SPACE.search(text, window, start)
        if m and m.end() < start:
            snapped = doc.floor(m.start())
            if window < snapped < start:
                return snapped
    return window


def with_overlap(
    doc: TokenizedText, segments: list[tuple[int, int]], overlap: int
) -> list[tuple[int, int]]:
    """Extend each segment (but the first) back into its predecessor by up to `overlap` tokens."""
    if overlap <= 0 or len(segments) < 2:
        return segments
    out = [segments[0]]
    for (prev_start, _), (start, end) in itertools.pairwise(segments):
        out.append((overlap_start(doc, prev_start, start, overlap), end))
    return out


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
