"""When a retrieved chunk counts as relevant to an answer passage: word 4-shingle overlap.

A pure core that `commands.evaluate` uses and the tests drive directly. The rule does not
depend on how the corpus was chunked, so runs of any chunk size are judged alike:

- Both texts are reduced to words: Markdown backslash escapes are undone (`\\_\\_init\\_\\_`
  reads `__init__`), case is folded, and a word is a maximal run of letters, digits and
  underscores (`\\w+`). Whitespace, punctuation and markup that extraction may add or drop
  (`**`, backticks, `#`, list bullets, table pipes) are ignored.
- A *shingle* is a run of 4 consecutive words; each text has a set of them.
- A chunk is relevant to an answer when at least half of the chunk's shingles lie in the
  answer (a small chunk inside a long answer) or at least half of the answer's shingles lie
  in the chunk (a chunk that holds most of the answer).
- A text of fewer than 4 words has no shingle: then the shorter text's word sequence must
  occur, contiguously, in the longer one's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SHINGLE = 4
THRESHOLD = 0.5

_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")  # CommonMark: a backslash before ASCII punctuation
_WORD = re.compile(r"\w+")


def words(text: str) -> tuple[str, ...]:
    """The words of `text` that relevance compares: unescaped, case-folded `\\w+` runs."""
    return tuple(_WORD.findall(_ESCAPE.sub(r"\1", text).casefold()))


@dataclass(frozen=True)
class Passage:
    """A text reduced once to what relevance compares (a chunk or an answer)."""

    words: tuple[str, ...]
    shingles: frozenset[tuple[str, ...]]

    @classmethod
    def of(cls, text: str) -> Passage:
        w = words(text)
        return cls(w, frozenset(w[i : i + SHINGLE] for i in range(len(w) - SHINGLE + 1)))

    @property
    def joined(self) -> str:
        return " " + " ".join(self.words) + " "


def _contains(longer: Passage, shorter: Passage) -> bool:
    return bool(shorter.words) and shorter.joined in longer.joined


def relevant(chunk: Passage, answer: Passage) -> bool:
    """Whether `chunk` is relevant to `answer` (see the module docstring for the rule)."""
    if not chunk.words or not answer.words:
        return False
    if len(chunk.words) < SHINGLE or len(answer.words) < SHINGLE:
        if len(chunk.words) <= len(answer.words):
            return _contains(answer, chunk)
        return _contains(chunk, answer)
    shared = len(chunk.shingles & answer.shingles)
    return shared >= THRESHOLD * len(chunk.shingles) or shared >= THRESHOLD * len(answer.shingles)


def is_relevant(chunk_text: str, answer_text: str) -> bool:
    """`relevant` on raw texts: the chunk's and the answer's text as written."""
    return relevant(Passage.of(chunk_text), Passage.of(answer_text))


def source_matches(chunk_source: str, answer_source: str) -> bool:
    """Whether a chunk's `source` (absolute path or URI) is the document an answer names.

    An answer names its document by a path relative to the corpus root
    (`postgresql/html/sql-vacuum.html`); it matches a chunk source equal to it or ending in
    `/` + it, so the same question file works wherever the corpus was unpacked.
    """
    chunk_source = chunk_source.replace("\\", "/")
    answer_source = answer_source.replace("\\", "/").removeprefix("./")
    return chunk_source == answer_source or chunk_source.endswith("/" + answer_source)
