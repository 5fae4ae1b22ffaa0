"""A large document is split in windows (tokens, cut points, sentences) with the results of the
whole: memory bounded by the window, not the document (bench/memory.py has the figures)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from transforms.chunking import split
from transforms.chunking.recursive import RecursiveChunker
from transforms.chunking.tokens import TiktokenTokenizer, get_tiktoken_encoding


def _text(seed: int, n_words: int) -> str:
    rng = random.Random(seed)
    words = ["river", "stone", "Markt", "über", "日本", "a", "42", "x.", "Mr.", "end."]
    seps = [" ", " ", " ", "  ", "\t", "\n", "\n\n", " \n ", ".\n\n", "   \n\n  "]
    return "".join(rng.choice(words) + rng.choice(seps) for _ in range(n_words))


@pytest.fixture(scope="module")
def tokenizer() -> TiktokenTokenizer:
    return TiktokenTokenizer("cl100k_base")


@pytest.mark.parametrize("seed", range(4))
def test_tokens_encoded_in_slices_are_the_tokens_of_the_whole(tokenizer, seed, monkeypatch):
    text = _text(seed, 3000)
    monkeypatch.setattr(TiktokenTokenizer, "SLICE_CHARS", 97)
    assert len(tokenizer.slices(text)) > 50
    expected = get_tiktoken_encoding("cl100k_base").encode_ordinary(text)
    assert tokenizer._token_array(text).tolist() == expected


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("level", [split.PARAGRAPH, split.LINE, split.WORD])
def test_cut_points_found_in_windows_are_those_of_the_whole(tokenizer, seed, level, monkeypatch):
    text = _text(seed, 3000)
    doc = tokenizer.tokenize(text)
    start, end = 5, len(text) - 3
    whole = split.candidates(doc, start, end, level)
    monkeypatch.setattr(split, "CANDIDATE_WINDOW", 50)
    windowed = split.candidates(doc, start, end, level)
    assert len(whole) > 10
    np.testing.assert_array_equal(windowed, whole)


def test_chunks_of_a_large_document_are_those_found_without_windows(tokenizer, monkeypatch):
    text = _text(7, 6000)
    chunker = RecursiveChunker(tokenizer, chunk_size=64, chunk_overlap=8)
    whole = chunker.chunk(text)
    monkeypatch.setattr(split, "CANDIDATE_WINDOW", 200)
    monkeypatch.setattr(TiktokenTokenizer, "SLICE_CHARS", 300)
    assert chunker.chunk(text) == whole


def test_sentence_starts_in_windows_are_sorted_and_inside(monkeypatch):
    text = " ".join(f"Sentence number {i} ends here." for i in range(400))
    whole = split.sentence_starts(text, 0, len(text))
    monkeypatch.setattr(split, "SENTENCE_WINDOW", 500)
    windowed = split.sentence_starts(text, 0, len(text))
    assert windowed == sorted(set(windowed)) and all(0 < s < len(text) for s in windowed)
    # these sentences are short and plain: every window finds the same starts
    assert windowed == whole
