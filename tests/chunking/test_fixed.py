"""The fixed sliding window, checked against the textbook worked example."""

import itertools

from transforms.chunking.fixed import FixedChunker, window_token_ranges
from transforms.chunking.tokens import TiktokenTokenizer

TOK = TiktokenTokenizer("cl100k_base")
# " word" is one cl100k token, so this document has exactly 26,666 tokens.
DOC = " word" * 26_666


def test_document_has_the_worked_example_size():
    assert TOK.count(DOC) == 26_666


def test_worked_example_with_15_percent_overlap():
    chunks = FixedChunker(TOK, 512, 76).chunk(DOC)
    assert len(chunks) == 61
    assert sum(c.token_count for c in chunks) == 31_226
    assert chunks[-1].token_count == 26_666 - 60 * 436
    assert all(TOK.count(DOC[c.start : c.end]) == c.token_count <= 512 for c in chunks)


def test_textbook_loop_would_add_a_redundant_window():
    textbook = list(range(0, 26_666, 436))  # while start < n: start += stride
    assert len(textbook) == 62
    assert sum(min(s + 512, 26_666) - s for s in textbook) == 31_296
    ours = window_token_ranges(26_666, 512, 76)
    assert len(ours) == 61 and ours[-1][1] == 26_666


def test_worked_example_without_overlap():
    chunks = FixedChunker(TOK, 512, 0).chunk(DOC)
    assert len(chunks) == 53
    assert sum(c.token_count for c in chunks) == 26_666
    assert all(a.end == b.start for a, b in itertools.pairwise(chunks))


def test_windows_cover_unicode_text_within_the_limit():
    text = "日本語のテキストと emoji 🙂🙂 mixed with English words. " * 200
    chunks = FixedChunker(TOK, 50, 10).chunk(text)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    assert all(TOK.count(text[c.start : c.end]) <= 50 for c in chunks)
