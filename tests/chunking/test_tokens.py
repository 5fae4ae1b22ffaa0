"""Token offsets derived from one encoding must agree with tiktoken itself."""

import functools
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.chunking.tokens import (
    TiktokenTokenizer,
    get_tiktoken_encoding,
    make_tokenizer,
    seed_tiktoken_cache,
)


def test_offline_encoding_matches_reference_ids(cl100k):
    assert get_tiktoken_encoding("cl100k_base").encode("hello world") == [15339, 1917]
    assert cl100k.count("hello world") == 2


def test_seed_writes_files_named_as_tiktoken_expects(tmp_path):
    folder = seed_tiktoken_cache(str(tmp_path))
    names = sorted(os.listdir(folder))
    # sha1 of the official download URLs
    assert "9b5ad71b2ce5302211f9c61530b329a4922fc6a4" in names  # cl100k_base
    assert len(names) == 2


def test_unknown_encoding_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown tiktoken encoding 'p50k'"):
        get_tiktoken_encoding("p50k")


def test_boundaries_ascii(cl100k):
    text = "The quick brown fox jumps over the lazy dog."
    doc = cl100k.tokenize(text)
    assert doc.boundaries[0] == 0 and doc.boundaries[-1] == len(text)
    assert doc.n_tokens == cl100k.count(text)
    # every prefix at a boundary has exactly the derived number of tokens
    for b, t in zip(doc.boundaries, doc.token_index, strict=True):
        assert cl100k.count(text[:b]) == t


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=0, max_size=300))
def test_boundaries_unicode(text):
    tok = TiktokenTokenizer("cl100k_base")
    doc = tok.tokenize(text)
    assert doc.n_tokens == tok.count(text)
    assert np.all(np.diff(doc.boundaries) > 0) or len(text) == 0
    assert doc.boundaries[0] == 0 and doc.boundaries[-1] == len(text)
    # Boundaries are character positions: slicing there never splits a code point, and the
    # token counts of the two sides add up to at least the whole (BPE merges never cross).
    for b in doc.boundaries[1:-1]:
        assert doc.count(0, int(b)) + doc.count(int(b), len(text)) == doc.n_tokens


def test_o200k_and_tokenizer_factory():
    tok = make_tokenizer("o200k_base")
    assert tok.name == "o200k_base"
    assert tok.tokenize("héllo wörld, 日本語").n_tokens == tok.count("héllo wörld, 日本語")


ALPHABET = st.sampled_from(
    [
        "a",
        "Z",
        "7",
        "\n",
        " ",
        "\t",
        "\r",
        "/",
        "'",
        "\xa0",
        "\u2028",
        "\u0301",
        "語",
        "🙂",
        ".",
        "s",
        "  ",
        "\n\n",
        "word",
        " the",
        "'ll",
        "123456",
    ]
)


@functools.cache
def tokenizer(name: str) -> TiktokenTokenizer:
    return TiktokenTokenizer(name)  # its byte-length table takes a while to build


@settings(max_examples=150, deadline=None)
@given(st.lists(ALPHABET, max_size=80).map("".join), st.data())
def test_count_span_equals_encoding_alone(text, data):
    for name in ("cl100k_base", "o200k_base"):
        tok = tokenizer(name)
        doc = tok.tokenize(text)
        a = data.draw(st.integers(0, len(text)))
        b = data.draw(st.integers(a, len(text)))
        assert tok.count_span(doc, a, b) == tok.count(text[a:b])


# Prefixes as the budget stage builds them (a header, then "\n\n") and arbitrary ones.
PREFIXES = st.one_of(
    st.lists(ALPHABET, max_size=20).map("".join).map(lambda h: h + "\n\n"),
    st.lists(ALPHABET, max_size=20).map("".join),
    st.text(max_size=40),
)
JOINED_TEXTS = st.one_of(st.lists(ALPHABET, max_size=60).map("".join), st.text(max_size=80))


@settings(max_examples=300, deadline=None)
@given(PREFIXES, JOINED_TEXTS)
def test_count_joined_equals_encoding_the_join(prefix, text):
    for name in ("cl100k_base", "o200k_base"):
        tok = tokenizer(name)
        assert tok.count_joined(prefix, text, tok.count(text)) == tok.count(prefix + text)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_count_joined_derives_at_a_header_join(name):
    tok = tokenizer(name)
    prefix = "Guide > Install…\n\n"
    for text in ("Run the installer.", "    return x", "'s own", "# Title", "\tindented"):
        # The join is a piece break, so only the header is encoded ...
        assert tok._breaks.match(prefix + text, len(prefix) - 1)
        assert tok.count_joined(prefix, text, tok.count(text)) == tok.count(prefix + text)
    # ... and where it is not, the whole is encoded (o200k runs "\n/" into one piece).
    for text in ("\n\nnext", "   ", "/usr/bin"):
        assert tok.count_joined(prefix, text, tok.count(text)) == tok.count(prefix + text)
