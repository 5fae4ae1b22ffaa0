"""Fuzzing: arbitrary Unicode into every chunker and arbitrary bytes into the extractor.

No exception escapes and every chunking guarantee holds: exact offsets, the hard token limit
(a chunk's own encoding), no blank chunk, and all non-whitespace text kept. Sized for CI by
default; `make fuzz` runs many more examples (hypothesis's `fuzz` profile, tests/conftest.py).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.records import RawDocument
from transforms.chunking.code import SUPPORTED_LANGUAGES
from transforms.chunking.routing import STRATEGIES, strategy_class
from transforms.chunking.tokens import make_tokenizer
from transforms.extract import ExtractError, _html_to_markdown, extract_document

# Strategies that need no model (the semantic one embeds sentences: its limits are tested with
# the model in tests/chunking/test_semantic.py).
CHUNKERS = sorted(name for name in STRATEGIES if name != "semantic")

# Text with what breaks tokenizers and parsers: structure characters, whitespace runs, marks,
# emoji, surrogate-free arbitrary code points.
_PIECES = st.sampled_from(
    ["\n", "\n\n", "  ", "\t", "#", "# ", "```", "|", "- ", "1. ", "<", ">", "(", ")", "{", "}",
     "def ", "class ", ":", ";", "'", '"', "\\", "*", "_", "`", "\u00a0", "\u2028", "e\u0301",
     "🙂", "👍🏽", "語", "ع", "x" * 40, " " * 30, "7" * 20]
)  # fmt: skip
TEXT = st.lists(
    st.one_of(_PIECES, st.text(st.characters(exclude_categories=("Cs",)), max_size=30)),
    max_size=60,
).map("".join)


@pytest.fixture(scope="module")
def cl100k():
    return make_tokenizer("cl100k_base")


def check_chunks(text: str, spans: list, tokenizer, size: int) -> None:
    covered = bytearray(len(text))
    for span in spans:
        assert 0 <= span.start < span.end <= len(text)
        piece = text[span.start : span.end]
        assert piece.strip(), "a blank chunk"
        assert tokenizer.count(piece) == span.token_count <= size
        covered[span.start : span.end] = b"\1" * (span.end - span.start)
    missing = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missing, f"text lost at {missing[:5]}"


@pytest.mark.parametrize("strategy", CHUNKERS)
@given(text=TEXT, size=st.integers(8, 200), data=st.data())
def test_every_chunker_keeps_its_guarantees_on_any_text(cl100k, strategy, text, size, data):
    overlap = data.draw(st.integers(0, max(0, size // 2 - 1)), label="overlap")
    language = data.draw(st.sampled_from([None, *SUPPORTED_LANGUAGES]), label="language")
    chunker = strategy_class(strategy)(cl100k, size, overlap)
    check_chunks(text, chunker.chunk(text, language), cl100k, size)


@given(
    data=st.binary(max_size=2000) | TEXT.map(lambda t: t.encode("utf-8")),
    name=st.sampled_from(["a.html", "b.md", "c.txt", "d.py", "e.js", "f.rst", "g", "h.c"]),
)
def test_the_extractor_gives_a_document_or_a_reason(data, name):
    raw = RawDocument(source=f"/corpus/{name}", doc_id="d", data=data)
    try:
        doc = extract_document(raw, _html_to_markdown)
    except ExtractError as e:
        assert e.reason  # a reject with its reason, never another exception
        return
    assert doc.text.strip()
    doc.text.encode("utf-8")  # what Beam's coder does with it


@given(html=TEXT)
def test_html_extraction_of_any_markup_is_text_or_a_reason(html):
    markup = f"<html><head><title>t</title></head><body><main>{html}</main></body></html>"
    try:
        result = _html_to_markdown(markup)
    except ExtractError as e:
        assert e.reason
        return
    assert isinstance(result.text, str)
