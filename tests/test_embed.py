"""The embedding stage: the handler on the real bundled model, EmbedChunks in a TestPipeline,
and the model-folder checks that run without torch."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that

from pipelines.options import config_from_options
from schemas.records import Chunk, Reject, stable_hash
from transforms.common import NAMESPACE
from transforms.embedding.embed import (
    EmbedChunks,
    SentenceTransformerHandler,
    length_sorted_batches,
    read_model_info,
    resolve_model_path,
)
from transforms.embedding.models import EmbeddingConfig

REPO = Path(__file__).resolve().parents[1]
DIMENSION = 384
FAIL_MARK = "EMBED_FAILS_HERE"
# Prose, code and a one-word text: different lengths in word pieces, so one batch pads.
TEXTS = [
    "Retrieval-augmented generation looks passages up before it answers.",
    "def add(a, b):\n    return a + b\n\n\nclass Point:\n    x: int\n    y: int\n",
    "Beam",
    "The chunker splits a document at headings, then paragraphs, then sentences, and never "
    "cuts a code block that would fit in one chunk; neighbouring chunks share 32 tokens.",
    "SELECT name FROM users WHERE id IN (SELECT user_id FROM orders WHERE total > 100);",
]
LONG_TEXT = " ".join(f"word{i}" for i in range(300))  # well over 256 word pieces


def make_chunk(text: str, index: int = 0) -> Chunk:
    return Chunk(
        chunk_id=stable_hash("test chunk", index, text),
        doc_id="doc",
        source="test.md",
        doc_type="markdown",
        language=None,
        chunk_index=index,
        text=text,
        start_char=0,
        end_char=len(text),
        token_count=len(text.split()),
        section_path=(),
        strategy="recursive",
        config_fingerprint="test",
    )


# --- without the model ----------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 2, 3, 10])
def test_length_sorted_batches_cover_every_index_longest_first(batch_size: int) -> None:
    lengths = [5, 250, 17, 17, 90, 3, 256, 40]
    runs = length_sorted_batches(lengths, batch_size)
    flat = [i for run in runs for i in run]
    assert sorted(flat) == list(range(len(lengths)))
    assert all(1 <= len(run) <= batch_size for run in runs)
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)


def test_length_sorted_batches_of_nothing() -> None:
    assert length_sorted_batches([], 4) == []


@pytest.mark.parametrize("sizes", [(0, 256), (32, 0), (-1, 8)])
def test_embedding_config_refuses_batch_sizes_below_one(sizes: tuple[int, int]) -> None:
    # Validated once, in the config the flags become; the handler trusts it.
    with pytest.raises(ValueError, match="--embedding_batch_size and --embedding_max_batch"):
        EmbeddingConfig("none", None, None, None, "cpu", *sizes)


def test_handler_asks_beam_for_full_batches() -> None:
    kwargs = SentenceTransformerHandler("unused", DIMENSION, "cpu", 16, 64).batch_elements_kwargs()
    assert kwargs["min_batch_size"] == kwargs["max_batch_size"] == 64


def test_read_model_info_needs_neither_torch_nor_sentence_transformers() -> None:
    # Beam's RunInference module imports torch when it can, so torch is made unimportable here:
    # reading the model folder must work, and must not try to load the model.
    script = textwrap.dedent(
        """
        import importlib.abc, sys

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "sentence_transformers", "transformers"):
                    raise ImportError(name + " is blocked in this test")

        sys.meta_path.insert(0, Block())
        from transforms.embedding.embed import read_model_info, resolve_model_path

        info = read_model_info(resolve_model_path("default"))
        print(info.dimension, info.max_seq_length)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["384", "256"]


def test_read_model_info_of_the_bundled_model() -> None:
    info = read_model_info(resolve_model_path("default"))
    assert (info.dimension, info.max_seq_length) == (DIMENSION, 256)


def test_embedding_model_flag_naming_a_file_is_refused(tmp_path) -> None:
    not_a_folder = tmp_path / "model.safetensors"
    not_a_folder.write_bytes(b"not a model folder")
    options = PipelineOptions(
        [
            f"--input={tmp_path}/*.md",
            f"--output={tmp_path}/out",
            f"--embedding_model={not_a_folder}",
        ]
    )
    with pytest.raises(ValueError, match="--embedding_model=") as raised:
        config_from_options(options)
    assert str(not_a_folder) in str(raised.value)


# --- the real model -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_path() -> str:
    return resolve_model_path("default")


@pytest.fixture(scope="module")
def handler(model_path: str) -> SentenceTransformerHandler:
    return SentenceTransformerHandler(
        model_path, DIMENSION, device="cpu", encode_batch_size=2, max_batch_size=8
    )


@pytest.fixture(scope="module")
def model(handler: SentenceTransformerHandler) -> Any:
    return handler.load_model()


def embed(handler: SentenceTransformerHandler, model: Any, texts: Sequence[str]) -> np.ndarray:
    chunks = [make_chunk(t, i) for i, t in enumerate(texts)]
    results = list(handler.run_inference(chunks, model))
    assert [r.example for r in results] == chunks  # in the order given, whatever the sort
    return np.stack([r.inference[0] for r in results])


@pytest.mark.slow
def test_handler_loads_offline_and_gives_normalised_float32_vectors(
    handler: SentenceTransformerHandler, model: Any, monkeypatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    vectors = embed(handler, model, TEXTS)
    assert vectors.shape == (len(TEXTS), DIMENSION)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_a_second_run_in_the_process_reuses_the_loaded_model(
    handler: SentenceTransformerHandler, model: Any, model_path: str
) -> None:
    # A new pipeline gets new handlers; the model they name is loaded once per process.
    again = SentenceTransformerHandler(
        model_path, DIMENSION, device="cpu", encode_batch_size=2, max_batch_size=8
    )
    assert again.load_model() is model
    int8 = SentenceTransformerHandler(model_path, DIMENSION, device="cpu", backend="onnx-int8")
    other = int8.load_model()
    assert other is not model and type(other).__name__ == "OnnxSentenceEncoder"
    assert handler.load_model() is model  # the two used last are kept


@pytest.mark.slow
def test_identical_text_gives_identical_vectors(
    handler: SentenceTransformerHandler, model: Any
) -> None:
    first = embed(handler, model, [TEXTS[0], TEXTS[1]])
    again = embed(handler, model, [TEXTS[0], TEXTS[1]])
    assert np.array_equal(first, again)  # deterministic, bit for bit
    same_pass = embed(handler, model, [TEXTS[0], TEXTS[0]])
    assert np.array_equal(same_pass[0], same_pass[1])
    # In passes padded differently, float sums round differently: equal to ~1e-7, not bitwise.
    other_passes = embed(handler, model, [TEXTS[0], TEXTS[1], TEXTS[0]])
    np.testing.assert_allclose(other_passes[0], other_passes[2], atol=1e-6, rtol=0)


@pytest.mark.slow
def test_mixed_lengths_in_one_batch_match_one_by_one(
    handler: SentenceTransformerHandler, model: Any
) -> None:
    texts = [*TEXTS, LONG_TEXT]
    together = embed(handler, model, texts)
    alone = np.concatenate([embed(handler, model, [t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5, rtol=0)
    # ...and the same as the model's own encode, so the length sort put each vector back.
    direct = model.encode(texts, batch_size=len(texts), normalize_embeddings=True)
    np.testing.assert_allclose(together, direct, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_model_tokens_are_the_models_own_count(
    handler: SentenceTransformerHandler, model: Any
) -> None:
    chunks = [make_chunk(t, i) for i, t in enumerate([TEXTS[2], LONG_TEXT])]
    results = list(handler.run_inference(chunks, model))
    counts = [len(model.tokenizer(t)["input_ids"]) for t in (TEXTS[2], LONG_TEXT)]
    assert [r.inference[1] for r in results] == counts
    assert counts[0] == 3 and counts[1] > 256  # [CLS] beam [SEP]; the long one is cut
    assert all(r.inference[2] > 0 for r in results)


# --- EmbedChunks in a pipeline --------------------------------------------------------------


class FailingHandler(SentenceTransformerHandler):
    """Fails every batch that holds a chunk with FAIL_MARK (a real exception, as a model's)."""

    def run_inference(
        self,
        batch: Sequence[Chunk],
        model: Any,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterator[Any]:
        if any(FAIL_MARK in chunk.text for chunk in batch):
            raise RuntimeError(f"cannot embed a chunk with {FAIL_MARK}")
        return super().run_inference(batch, model, inference_args)


def counters_of(result: Any) -> dict[str, int]:
    found = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    totals: dict[str, int] = {}
    for counter in found["counters"]:
        name = counter.key.metric.name
        totals[name] = totals.get(name, 0) + counter.committed
    return totals


def run_embed(handler: SentenceTransformerHandler, chunks: list[Chunk], check_good, check_bad):
    p = TestPipeline(options=PipelineOptions(["--runner=FnApiRunner"]))
    result = p | beam.Create(chunks) | EmbedChunks(handler, "default")
    good, bad = result.chunks, result.rejects
    assert_that(good, check_good, label="good")
    assert_that(bad, check_bad, label="bad")
    result = p.run()
    result.wait_until_finish()
    return counters_of(result)


@pytest.mark.slow
def test_embed_chunks_sends_a_failed_batch_to_rejects(model_path: str) -> None:
    texts = [TEXTS[0], f"{FAIL_MARK} {TEXTS[1]}", TEXTS[3]]
    chunks = [make_chunk(t, i) for i, t in enumerate(texts)]
    failing_id = chunks[1].chunk_id
    # One chunk a batch, so the failed batch is exactly the marked chunk.
    handler = FailingHandler(model_path, DIMENSION, "cpu", encode_batch_size=2, max_batch_size=1)

    def check_good(out: list[Chunk]) -> None:
        assert sorted(c.chunk_id for c in out) == sorted(
            c.chunk_id for c in chunks if c.chunk_id != failing_id
        )
        assert all(len(c.embedding) == DIMENSION and c.embedding_model == "default" for c in out)

    def check_bad(out: list[Reject]) -> None:
        assert [(r.chunk_id, r.doc_id, r.stage, r.reason) for r in out] == [
            (failing_id, "doc", "embed", "embedding_failed")
        ]
        assert FAIL_MARK in out[0].error

    counters = run_embed(handler, chunks, check_good, check_bad)
    assert counters["chunks_embedded"] == 2
    assert counters["chunks_rejected_embed"] == 1


@pytest.mark.slow
def test_embed_chunks_attaches_vectors_and_counts_truncation(
    handler: SentenceTransformerHandler, model: Any
) -> None:
    texts = [*TEXTS, LONG_TEXT]
    chunks = [make_chunk(t, i) for i, t in enumerate(texts)]
    expected = dict(
        zip(
            [c.chunk_id for c in chunks],
            model.encode(texts, batch_size=len(texts), normalize_embeddings=True),
            strict=True,
        )
    )
    long_id = chunks[-1].chunk_id

    def check_good(out: list[Chunk]) -> None:
        assert len(out) == len(chunks)
        for chunk in out:
            assert isinstance(chunk.embedding, tuple) and len(chunk.embedding) == DIMENSION
            np.testing.assert_allclose(chunk.embedding, expected[chunk.chunk_id], atol=1e-5)
            assert chunk.embedding_model == "default"
            assert chunk.embed_seconds > 0
            assert (chunk.model_tokens > 256) == (chunk.chunk_id == long_id)

    def check_bad(out: list[Reject]) -> None:
        assert out == []

    counters = run_embed(handler, chunks, check_good, check_bad)
    assert counters["chunks_truncated"] == 1
    assert counters["chunks_embedded"] == len(chunks)


# --- identical embedded texts, embedded once --------------------------------------------------

SEEN_BY_MODEL: list[str] = []  # FnApiRunner runs in this process: the handler copies share it


class CountingHandler(SentenceTransformerHandler):
    def run_inference(
        self,
        batch: Sequence[Chunk],
        model: Any,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterator[Any]:
        SEEN_BY_MODEL.extend(chunk.embed_text() for chunk in batch)
        return super().run_inference(batch, model, inference_args)


@pytest.mark.slow
def test_identical_embedded_texts_are_embedded_once_and_counted(model_path: str) -> None:
    from transforms.embedding.embed_setup import prepare_model
    from transforms.stat_events import ChunkDeduplicated

    licence = "Licensed under the Apache License, Version 2.0 (the 'License');"
    texts = [licence, TEXTS[0], licence, TEXTS[1], licence]
    chunks = [make_chunk(t, i) for i, t in enumerate(texts)]
    # Same text under another header is another embedded text: embedded on its own.
    chunks.append(dataclasses.replace(make_chunk(licence, 9), context="LICENSE", embed_tokens=7))
    chunks[2] = dataclasses.replace(chunks[2], embed_tokens=11)
    chunks[4] = dataclasses.replace(chunks[4], embed_tokens=11)
    prepared = prepare_model("default", model_path, "onnx-int8", None)
    handler = CountingHandler(
        model_path, DIMENSION, "cpu", backend="onnx-int8", onnx_sha256=prepared.onnx_sha256
    )
    SEEN_BY_MODEL.clear()

    p = TestPipeline(options=PipelineOptions(["--runner=FnApiRunner"]))
    result = p | beam.Create(chunks) | EmbedChunks(handler, prepared.model_id)
    good, bad, duplicates = result.chunks, result.rejects, result.events

    def check_good(out: list[Chunk]) -> None:
        assert sorted(c.chunk_id for c in out) == sorted(c.chunk_id for c in chunks)
        by_text: dict[str, set] = {}
        for c in out:
            assert c.embedding_model == prepared.model_id and len(c.embedding) == DIMENSION
            by_text.setdefault(c.embed_text(), set()).add(c.embedding)
        assert all(len(vectors) == 1 for vectors in by_text.values())
        assert len(by_text) == 4
        assert sum(c.embed_seconds > 0 for c in out) == 4  # model time on one chunk a text

    def check_duplicates(out: list[tuple]) -> None:
        assert sorted(out) == [ChunkDeduplicated(11)] * 2

    def check_bad(out: list[Reject]) -> None:
        assert out == []

    assert_that(good, check_good, label="good")
    assert_that(bad, check_bad, label="bad")
    assert_that(duplicates, check_duplicates, label="duplicates")
    result = p.run()
    result.wait_until_finish()
    assert sorted(SEEN_BY_MODEL) == sorted({c.embed_text() for c in chunks})
    counters = counters_of(result)
    assert counters["chunks_deduplicated"] == 2
    assert counters["chunks_embedded"] == len(chunks)


def test_deduplicated_chunks_are_in_the_cost_report() -> None:
    from transforms.cost_combine import CostReportFn
    from transforms.cost_report import Pricing, build_report
    from transforms.stat_events import ChunkDeduplicated, DocumentIn

    fn = CostReportFn()
    acc = fn.create_accumulator()
    for event in [ChunkDeduplicated(11), ChunkDeduplicated(4)]:
        acc = fn.add_input(acc, event)
    merged = fn.merge_accumulators([acc, fn.add_input(fn.create_accumulator(), DocumentIn())])
    report = build_report(merged, Pricing(), "run")
    assert (report.chunks_deduplicated, report.deduplicated_embedded_tokens) == (2, 15)
    assert "2 chunks took the vector of another chunk" in report.markdown()


# --- the join with the embedding cache carries only what it can use (issue 23) ---------------


def test_only_cached_vectors_of_the_runs_texts_are_joined_as_float32_bytes() -> None:
    from apache_beam.coders import FastPrimitivesCoder
    from apache_beam.transforms.window import GlobalWindow

    from transforms.embedding.embed import (
        WANTED_PREFIX,
        _UsableCached,
        embedded_text_digest,
        vector_bytes,
        vector_of,
    )
    from transforms.embedding.models import CachedVector, text_key

    chunk = make_chunk(TEXTS[0])
    digest = embedded_text_digest(chunk)
    assert digest.hex() == text_key(chunk.embed_text())
    vector = tuple(np.random.default_rng(0).standard_normal(DIMENSION).astype("float32").tolist())
    wanted = [digest[:WANTED_PREFIX]] * 2  # the side input: one prefix a chunk to embed
    usable = _UsableCached()
    usable.setup()

    def use(entry: tuple) -> list:
        return list(usable.process(entry, wanted, window=GlobalWindow()))

    # a text of this run: its vector, exactly, as 4 bytes a number
    ((key, (data, tokens)),) = use((digest.hex(), CachedVector(vector, 7)))
    assert (key, tokens, vector_of(data)) == (digest, 7, vector)
    coder = FastPrimitivesCoder()
    assert len(coder.encode((key, (data, tokens)))) < len(coder.encode((digest.hex(), vector))) / 2
    # a text the run does not embed (a removed document's, an edit's old text): not shuffled
    assert use((text_key("a removed document's text"), CachedVector(vector, 7))) == []
    # a number no float32 holds is no vector the output can take: embedded again
    assert vector_bytes([1e300, 0.0]) is None
    assert use((digest.hex(), CachedVector((1e300,) * 2, 1))) == []


def test_the_prefixes_of_the_texts_to_embed_are_held_sorted_and_bounded() -> None:
    from transforms.embedding.embed import WANTED_PREFIX, is_wanted, wanted_prefixes
    from transforms.embedding.models import text_digest

    digests = [text_digest(f"text {i}") for i in range(1000)]
    prefixes = [d[:WANTED_PREFIX] for d in digests]
    held = wanted_prefixes(prefixes * 2)
    assert held is not None and len(held) == 1000 and held.nbytes == 8000
    assert all(is_wanted(d, held) for d in digests)
    assert not any(is_wanted(text_digest(f"other {i}"), held) for i in range(1000))
    assert not is_wanted(digests[0], wanted_prefixes([]))
    # more than a worker should hold: nothing is filtered, and the rest is not read
    read = []
    assert wanted_prefixes((read.append(p) or p for p in prefixes), most=10) is None
    assert len(read) <= 1 << 20
    assert is_wanted(digests[0], None)
