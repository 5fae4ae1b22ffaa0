"""Sentence-window chunker: embed each sentence, return the window of sentences around it.

The chunks to embed are a document's sentences (blingfire's, also cut at blank lines and
before a heading, a list item, a fence or a table row), a piece under `MIN_SENTENCE_TOKENS`
joined to a neighbour. Each one's window, its `WINDOW` neighbours on each
side cut to `window_tokens`, is what a search returns: the job writes the windows as parent
chunks (`is_parent`, the child's `parent_id`), and `evaluate` scores "retrieve the sentence,
return its window" as it scores parents.
"""

from __future__ import annotations

import itertools
import re
from typing import ClassVar

import numpy as np

from transforms.chunking.base import Chunker, ChunkSpan
from transforms.chunking.split import (
    LINE,
    PARAGRAPH,
    SENTENCE,
    candidates,
    recursive_split,
    trim,
)
from transforms.chunking.tokens import TokenizedText

WINDOW = 3  # sentences on each side (LlamaIndex's SentenceWindowNodeParser default)
MIN_SENTENCE_TOKENS = 8  # a shorter sentence ("## Synopsis", "}") joins a neighbour
_BLOCK_START = re.compile(r"[ \t]*(?:#{1,6}[ \t]|[-*+][ \t]|\d{1,9}[.)][ \t]|[|>]|```|~~~)")


class SentenceWindowChunker(Chunker):
    """Sentences to embed, each with the window of its neighbours (`windows`) to return."""

    strategy = "sentence_window"
    windowed: ClassVar[bool] = True

    @property
    def window_tokens(self) -> int:
        """The most tokens a window holds (its sentence is never cut from it)."""
        return 3 * self.chunk_size

    def split(self, doc: TokenizedText, language: str | None = None) -> list[ChunkSpan]:
        return [ChunkSpan(s, e, strategy=self.strategy) for s, e in self.sentences(doc)]

    def sentences(self, doc: TokenizedText) -> list[tuple[int, int]]:
        """Sentence ranges tiling the text's non-whitespace, each at most chunk_size tokens."""
        text, n = doc.text, len(doc.text)
        # Lines that start a block (a heading, a list item, a fence, a table row, a quote) are
        # cut at; other line breaks are the wrapping of a paragraph, which sentences cross.
        lines = [c for c in candidates(doc, 0, n, LINE).tolist() if _BLOCK_START.match(text, c)]
        cuts = np.union1d(
            np.union1d(candidates(doc, 0, n, PARAGRAPH), candidates(doc, 0, n, SENTENCE)),
            np.asarray(lines, dtype=np.int64),
        )
        pieces = []
        for s, e in itertools.pairwise([0, *cuts.tolist(), n]):
            s, e = trim(text, s, e)
            if s < e:
                pieces.append((s, e))
        # A short piece joins the one before it on the same block ("```" closing a fence),
        # else the one after it ("## Synopsis" before its paragraph).
        units: list[tuple[int, int]] = []
        pending = -1
        for s, e in pieces:
            start = s if pending < 0 else pending
            pending = -1
            short = doc.count(start, doc.ceil(e)) < MIN_SENTENCE_TOKENS
            if short and units and "\n\n" not in text[units[-1][1] : start]:
                units[-1] = (units[-1][0], e)
            elif short:
                pending = start
            else:
                units.append((start, e))
        if pending >= 0:
            last = pieces[-1][1]
            units[-1:] = [(units[-1][0], last)] if units else [(pending, last)]
        out: list[tuple[int, int]] = []
        for s, e in units:  # a sentence over the budget (a long line of code) is cut
            out.extend(recursive_split(doc, s, e, self.chunk_size, SENTENCE))
        return out

    def windows(self, doc: TokenizedText, spans: list[ChunkSpan]) -> list[tuple[int, int]]:
        """The window of each span: from WINDOW spans before it to WINDOW after, fewer where
        that is over `window_tokens` (never fewer than the span itself)."""
        out = []
        for i, span in enumerate(spans):
            for w in range(WINDOW, -1, -1):
                start = spans[max(0, i - w)].start
                end = spans[min(len(spans) - 1, i + w)].end
                if w == 0 or doc.count(start, doc.ceil(end)) <= self.window_tokens:
                    break
            out.append((min(start, span.start), max(end, span.end)))
        return out
