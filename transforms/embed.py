"""Embed chunks with sentence-transformers through Beam's RunInference.

The ModelHandler implements only `load_model` and `run_inference`; Beam does the batching,
model sharing and metrics. Beam hands the model full batches of `max_batch_size` chunks, and
each is cut into forward passes of chunks of similar length in the model's own word pieces, so
little of a pass is padding. Failed batches go to the dead-letter output with their chunk ids.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import ModelHandler, PredictionResult, RunInference

from schemas.records import Chunk, Reject
from transforms import progress
from transforms.common import NAMESPACE
from transforms.models import (  # noqa: F401 - re-exported: callers import them from here
    DEFAULT_MODEL,
    EmbedResult,
    ModelInfo,
    quiet_model_loading,
    read_model_info,
    resolve_model_path,
)


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indexes of `lengths`, longest first, cut into runs of `batch_size`: one run a pass.

    A forward pass pads every text to its longest, so neighbours in length waste least.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def pick_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class SentenceTransformerHandler(ModelHandler[Chunk, Any, Any]):
    """Chunks in, normalised float32 vectors out; the model is loaded once per worker."""

    def __init__(
        self,
        model_path: str,
        dimension: int,
        device: str = "auto",
        encode_batch_size: int = 32,
        max_batch_size: int = 256,
    ) -> None:
        # Full batches only (a bundle's last one aside). Beam's batch-size estimator aims at a
        # 5% fixed cost per batch; a CPU forward pass has almost none, so it kept batches at 1
        # to 20 chunks (3 on average over 1,000 real chunks), too few to sort by length.
        super().__init__(min_batch_size=max_batch_size, max_batch_size=max_batch_size)
        self.model_path = model_path
        self.dimension = dimension
        self.device = device
        self.encode_batch_size = encode_batch_size
        self._truncated = Metrics.counter(NAMESPACE, "chunks_truncated")

    def load_model(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        quiet_model_loading()
        # Resolved on the worker: the bundled model lies where this environment installed it.
        path = resolve_model_path(self.model_path)
        model = SentenceTransformer(path, device=pick_device(self.device))
        actual = model.get_embedding_dimension()
        if actual != self.dimension:
            raise ValueError(
                f"model at {self.model_path} gives {actual}-dim vectors, expected {self.dimension}"
            )
        return model

    def run_inference(
        self,
        batch: Sequence[Chunk],
        model: Any,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterator[PredictionResult]:
        texts = [chunk.embed_text() for chunk in batch]
        # The model's own count, specials included: what it would cut past max_seq_length.
        lengths = [len(ids) for ids in model.tokenizer(texts, add_special_tokens=True)["input_ids"]]
        limit = model.max_seq_length
        truncated = sum(1 for n in lengths if n > limit)
        if truncated:
            self._truncated.inc(truncated)
        vectors: list[Any] = [None] * len(batch)
        seconds = [0.0] * len(batch)
        # encode() sorts a call by characters, a poor proxy for word pieces (2 to 5 characters a
        # piece on real chunks, code and prose alike): 27-33% of each pass was padding. So each
        # encode() call here is one pass over chunks of similar length in word pieces.
        for part in length_sorted_batches([min(n, limit) for n in lengths], self.encode_batch_size):
            started = time.perf_counter()
            out = model.encode(
                [texts[i] for i in part],
                batch_size=len(part),
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ).astype("float32")
            share = (time.perf_counter() - started) / len(part)
            for i, vector in zip(part, out, strict=True):
                vectors[i] = vector
                seconds[i] = share
        return [
            PredictionResult(c, (v, n, s))
            for c, v, n, s in zip(batch, vectors, lengths, seconds, strict=True)
        ]

    def get_metrics_namespace(self) -> str:
        return "corpus_chunker_embed"


class _AttachEmbedding(beam.DoFn):
    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.embedded = progress.counter(NAMESPACE, "chunks_embedded")

    def process(self, result: PredictionResult) -> Iterator[Chunk]:
        self.embedded.inc()
        vector, model_tokens, seconds = result.inference
        yield dataclasses.replace(
            result.example,
            embedding=tuple(vector.tolist()),
            embedding_model=self.model_name,
            model_tokens=model_tokens,
            embed_seconds=seconds,
        )


class _FailedBatchToRejects(beam.DoFn):
    def __init__(self) -> None:
        self.failed = progress.counter(NAMESPACE, "chunks_rejected_embed")

    def process(self, failed: tuple[Any, Exception]) -> Iterator[Reject]:
        batch, error = failed
        for chunk in batch:
            self.failed.inc()
            yield Reject.of_error(
                chunk.source, "embed", "embedding_failed", error, chunk.doc_id, chunk.chunk_id
            )


class EmbedChunks(beam.PTransform):
    """Chunk -> Chunk with `embedding` (main) and Reject for chunks whose batch failed."""

    def __init__(self, handler: SentenceTransformerHandler, model_name: str) -> None:
        super().__init__()
        self.handler = handler
        self.model_name = model_name

    def expand(self, chunks: beam.PCollection) -> EmbedResult:
        embedded, dead = (
            chunks | "Run model" >> RunInference(self.handler).with_exception_handling()
        )
        good = embedded | "Attach embeddings" >> beam.ParDo(_AttachEmbedding(self.model_name))
        bad = dead.failed_inferences | "Failed batches" >> beam.ParDo(_FailedBatchToRejects())
        return EmbedResult(good, bad)
