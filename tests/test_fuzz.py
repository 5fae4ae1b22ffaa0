"""Fuzzing: arbitrary Unicode into every chunker, arbitrary bytes into the extractor, and any
file (bytes, text, markup, JSONL, gzip) through the whole read -> extract -> chunk path within
a time budget.

No exception escapes and every chunking guarantee holds: exact offsets, the hard token limit
(a chunk's own encoding), no blank chunk, and all non-whitespace text kept. Sized for CI by
default; `make fuzz` runs many more examples (hypothesis's `fuzz` profile, tests/conftest.py).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.records import RawDocument
from transforms.chunking.code import SUPPORTED_LANGUAGES
from transforms.chunking.routing import STRATEGIES, strategy_class
from transforms.chunking.tokens import make_tokenizer
from transforms.ingest.extraction import ExtractError, extract_document, extract_html
from transforms.token_budget import TokenBudget

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
        doc = extract_document(raw, extract_html)
    except ExtractError as e:
        assert e.reason  # a reject with its reason, never another exception
        return
    assert doc.text.strip()
    doc.text.encode("utf-8")  # what Beam's coder does with it


@given(html=TEXT)
def test_html_extraction_of_any_markup_is_text_or_a_reason(html):
    markup = f"<html><head><title>t</title></head><body><main>{html}</main></body></html>"
    try:
        result = extract_html(markup)
    except ExtractError as e:
        assert e.reason
        return
    assert isinstance(result.text, str)


# --- the read -> extract -> chunk path, whole (issue 22) ---------------------------------------

# Every example must pass through reading, extraction and chunking within this many seconds (the
# chunk stage's time limit is set to it too): a slow input is a finding, as a crash is.
TIME_BUDGET_S = 20.0
MAX_FILE_BYTES = 64 * 1024

_NAMES = ["a.html", "b.md", "c.txt", "d.py", "e.js", "f.rst", "g", "h.c", "i.jsonl", "j.txt.gz"]
_FILE_BYTES = st.one_of(
    st.binary(max_size=3000),
    TEXT.map(lambda t: t.encode("utf-8")),
    TEXT.map(lambda t: f"<html><body><main>{t}</main></body></html>".encode("utf-8", "replace")),
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"id": st.text(max_size=8), "text": TEXT}),
            st.dictionaries(st.sampled_from(["id", "text", "title", "doc_type"]), TEXT),
        ).map(json.dumps)
        | TEXT,
        max_size=5,
    ).map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")),
)
_chunkers: dict[int, object] = {}


def _document_chunker(size: int):
    from transforms.chunking.routing import ChunkingConfig, DocumentChunker

    if size not in _chunkers:
        _chunkers[size] = DocumentChunker(
            ChunkingConfig(
                budget=TokenBudget(chunk_size=size, chunk_overlap=size // 8),
                timeout_s=TIME_BUDGET_S,
            )
        )
    return _chunkers[size]


def _read(path: str, root: str) -> list:
    """What the read stage makes of one file: RawDocuments and Rejects (tags dropped)."""
    import os

    from apache_beam.io import fileio
    from apache_beam.io.filesystem import FileMetadata

    from transforms.ingest.read import _ReadFileFn

    fn = _ReadFileFn(MAX_FILE_BYTES, root)
    readable = fileio.ReadableFile(FileMetadata(path, os.path.getsize(path)))
    return [getattr(out, "value", out) for out in fn.process(readable)]


@given(data=_FILE_BYTES, name=st.sampled_from(_NAMES), size=st.sampled_from([48, 192]))
def test_any_file_is_read_extracted_and_chunked_or_rejected_with_a_reason(data, name, size):
    import gzip
    import os
    import tempfile
    import time

    from schemas.records import Reject
    from transforms.chunking.split import ChunkTimeout, time_limit
    from transforms.chunking.tokens import TokenizerFailed

    started = time.monotonic()
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, name)
        with open(path, "wb") as f:
            f.write(gzip.compress(data) if name.endswith(".gz") else data)
        outcomes = _read(path, root)
    assert outcomes or name.endswith(".jsonl"), "a file neither read nor rejected"
    chunker = _document_chunker(size)
    for raw in outcomes:
        if isinstance(raw, Reject):
            assert raw.reason and raw.stage == "read"
            continue
        try:
            doc = extract_document(raw, extract_html)
        except ExtractError as e:
            assert e.reason  # a reject with its reason, never another exception
            continue
        doc.text.encode("utf-8")  # what Beam's coder does with it
        try:
            with time_limit(TIME_BUDGET_S):
                chunks, tokens = chunker.chunk_document_counted(doc)
        except (ChunkTimeout, TokenizerFailed) as e:
            raise AssertionError(f"{type(e).__name__} on a {len(doc.text)}-character file") from e
        assert tokens >= 0
        check_chunks(
            doc.text, [_span(c) for c in chunks if not c.is_parent], chunker.tokenizer, size
        )
    assert time.monotonic() - started < TIME_BUDGET_S


def _span(chunk):
    from transforms.chunking.base import ChunkSpan

    return ChunkSpan(chunk.start_char, chunk.end_char, chunk.token_count)
