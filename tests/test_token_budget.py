"""TokenBudget: every token limit of a run in one place, and the header fitted to it once, in
the chunk tokenizer and the model's word pieces; the count stage only counts."""

import dataclasses

import pytest

from schemas.records import Document, content_hash
from transforms.budget import ChunkBudget
from transforms.chunking.routing import ChunkingConfig, DocumentChunker
from transforms.chunking.tokens import make_tokenizer
from transforms.context import ContextConfig, HeaderFitter, path_header
from transforms.context.stage import path_contexts
from transforms.stage_base import Counts
from transforms.token_budget import (
    DEFAULT_CHUNK_SIZE,
    MIN_TEXT_TOKENS,
    TokenBudget,
    header_reserve,
)

TEXT = "\n\n".join(
    f"Step {i} of the installation copies the files, checks them and writes the settings file."
    for i in range(30)
)
# A small model limit, so that a path header of 32 tokens cannot always fit it: 64 word pieces,
# of which 46 are for a chunk's text (less [CLS], [SEP] and 16 for the header).
SMALL_MODEL = TokenBudget(
    chunk_size=96,
    chunk_overlap=8,
    header_reserve=header_reserve("path", 32, 64),
    model_tokenizer="default",
    model_max_tokens=64,
)


def test_one_default_and_one_floor():
    assert TokenBudget().chunk_size == DEFAULT_CHUNK_SIZE == 192
    assert ChunkingConfig().budget == TokenBudget()
    # the floor is the text's room after the header: the same for every caller
    TokenBudget(chunk_size=MIN_TEXT_TOKENS)
    with pytest.raises(ValueError, match=f"--chunk_size={MIN_TEXT_TOKENS - 1}"):
        TokenBudget(chunk_size=MIN_TEXT_TOKENS - 1)
    with pytest.raises(ValueError, match="--chunk_size=40 leaves 6 tokens"):
        TokenBudget(chunk_size=40, header_reserve=34)
    with pytest.raises(ValueError, match=r"--chunk_overlap=79 must be in \[0, 79\)"):
        TokenBudget(chunk_size=192, chunk_overlap=79, header_reserve=34)
    with pytest.raises(ValueError, match="--chunk_overlap=-1"):
        TokenBudget(chunk_overlap=-1)
    with pytest.raises(ValueError, match="--embedding_model='default' reads 20 word pieces"):
        TokenBudget(header_reserve=34, model_tokenizer="default", model_max_tokens=20)
    with pytest.raises(ValueError, match="come together"):
        TokenBudget(model_tokenizer="default")


def test_the_flags_default_overlap_and_the_models_header_room():
    budget = TokenBudget.from_flags(192, None, "cl100k_base", 34, "default", 256)
    assert (budget.body_size, budget.chunk_overlap) == (158, 32)
    assert (budget.model_header_reserve, budget.model_text_tokens) == (16, 256 - 2 - 16)
    assert TokenBudget.from_flags(80, None, "cl100k_base", 34).chunk_overlap == (80 - 34) // 4
    assert TokenBudget.from_flags(80, 0, "cl100k_base", 34).chunk_overlap == 0
    small = TokenBudget.from_flags(64, None, "cl100k_base", header_reserve("path", 4, 64))
    assert small.model_header_reserve == 12 and small.model_text_tokens is None


def _chunks(budget: TokenBudget):
    document = Document("d1", "docs/guide/install.md", "text", TEXT, content_hash(TEXT))
    # a title of more word pieces than tokens of cl100k_base
    title = "Widgetctl Frobnicator Reconfiguration Handbook: Multitenant Autoscaler Quirks"
    document = dataclasses.replace(document, title=title)
    return DocumentChunker(ChunkingConfig(budget=budget)).chunk_document(document)


def test_the_header_is_fitted_once_for_both_tokenizers():
    """The context stage fits each header to the chunk size and to the model's limit; it was
    cut for the model afterwards, in the count stage."""
    cl100k = make_tokenizer("cl100k_base", "tiktoken")
    model = SMALL_MODEL.model()
    fitter = HeaderFitter(SMALL_MODEL, cl100k, model)
    config = ContextConfig(mode="path", max_header_tokens=32)
    chunks = _chunks(SMALL_MODEL)
    assert len(chunks) > 5
    out = list(path_contexts(chunks, config, fitter, Counts()))
    shortened = 0
    for chunk, got in zip(chunks, out, strict=True):
        assert got.context and got.context_source == "path"
        assert cl100k.count(got.embed_text()) <= SMALL_MODEL.chunk_size
        assert got.model_tokens == model.count(got.embed_text()) + 2 <= 64
        # the whole path when it fits both tokenizers; else a shorter one that keeps its start
        whole = path_header(chunk)
        fits = (
            cl100k.count(whole) <= 32
            and cl100k.count(f"{whole}\n\n{chunk.text}") <= 96
            and model.count(f"{whole}\n\n{chunk.text}") + 2 <= 64
        )
        if fits:
            assert got.context == whole
        else:
            shortened += 1
            assert got.context != whole and got.context.startswith("install.md > ")
    assert 0 < shortened < len(chunks)


def test_the_count_stage_only_counts():
    cl100k = make_tokenizer("cl100k_base", "tiktoken")
    model = SMALL_MODEL.model()
    counter = ChunkBudget(SMALL_MODEL, "cl100k_base")
    long_header = " > ".join(f"Section {i}" for i in range(40))
    for chunk in _chunks(SMALL_MODEL):
        for context in (None, "Guide", long_header):
            given = dataclasses.replace(chunk, context=context)
            counted = counter.apply(given)
            assert counted.context == context  # never cut here, even past the model's limit
            assert counted.model_tokens == model.count(given.embed_text()) + 2
            assert counted.embed_tokens == cl100k.count(given.embed_text())
        # the context stage's count of the model's word pieces is taken as it is
        fitted = dataclasses.replace(chunk, context="Guide", model_tokens=7)
        assert counter.apply(fitted).model_tokens == 7
