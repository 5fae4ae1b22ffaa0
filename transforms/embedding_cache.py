"""The embedding cache: vectors reused by (model, exact embedded text), so that a rebuild
embeds only the texts it has not embedded before.

Two sources, both keyed by the sha256 of exactly what the model reads (context and text):
- the previous run's chunk rows (--previous_output) that the run does not copy as they are,
  when that run's model key is this run's: an edited document, or a change of overlap, header or
  strategy, re-embeds only the chunks whose embedded text changed;
- an --embedding_cache folder of Parquet files (local, gs://, s3://), to which each run adds
  the vectors its model made (`embeddings-<run_id>-SSSSS-of-NNNNN.parquet`). Entries are never
  rewritten, so the folder only grows; delete it to start afresh.
The model key names the model and its weights: the ONNX model id carries its file's sha256,
torch's is the model name and a hash of its weight and config files.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.parquetio import ReadAllFromParquet, WriteToParquet

from schemas.columns import EMBEDDING_CACHE, schema
from schemas.records import CONTEXT_JOINER
from transforms.models import TORCH, CachedVector, EmbeddingConfig, text_key

CACHE_SCHEMA = schema(EMBEDDING_CACHE)
# What a model folder's revision is made of: its weights and the files that change its vectors.
_REVISION_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "config.json",
    "sentence_bert_config.json",
    "modules.json",
    "tokenizer.json",
)


def model_revision(path: str) -> str:
    """sha256 over the model folder's weight and config files (those of them it has)."""
    digest = hashlib.sha256()
    for name in _REVISION_FILES:
        file = os.path.join(path, name)
        if not os.path.isfile(file):
            continue
        digest.update(name.encode() + b"\0")
        with open(file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def cache_key(config: EmbeddingConfig) -> str | None:
    """The model key of the cache; None when the job embeds nothing."""
    if config.path is None:
        return None
    name = config.model_id or config.model
    if config.backend == TORCH:
        return f"{name}|torch|sha256:{model_revision(config.path)}"
    return name  # model|backend|settings|sha256:<ONNX file>


def row_text_key(row: dict) -> str:
    """The text key of a chunk row, as `embed.embedded_text_key` gives it for the Chunk."""
    context, text = row.get("context"), row["text"]
    return text_key(f"{context}{CONTEXT_JOINER}{text}" if context else text)


def entries_of_rows(row: dict) -> Iterator[tuple[str, CachedVector]]:
    """A previous run's chunk row -> its cache entry (parents and failed chunks have none)."""
    if row.get("is_parent") or row.get("embedding") is None:
        return
    yield row_text_key(row), CachedVector(tuple(row["embedding"]), row.get("model_tokens"))


def cache_files(folder: str) -> list[str]:
    """The Parquet files of an --embedding_cache folder (none when it does not exist yet)."""
    pattern = FileSystems.join(folder, "*.parquet")
    try:
        return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
    except Exception:
        return []


class _FromFolder(beam.DoFn):
    def __init__(self, model: str) -> None:
        self.model = model

    def process(self, row: dict) -> Iterator[tuple[str, CachedVector]]:
        if row["model"] == self.model:
            yield row["text_sha256"], CachedVector(tuple(row["embedding"]), row["model_tokens"])


class CachedVectors(beam.PTransform):
    """PBegin -> (text key, CachedVector) of this model: the previous run's `rows` (chunk rows,
    or None) and the --embedding_cache `folder` (or None)."""

    def __init__(self, model: str, rows: beam.PCollection | None, folder: str | None) -> None:
        super().__init__()
        self.model = model
        self.rows = rows
        self.folder = folder

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        parts = []
        if self.rows is not None:
            parts.append(self.rows | "Previous vectors" >> beam.FlatMap(entries_of_rows))
        files = cache_files(self.folder) if self.folder else []
        if files:
            parts.append(
                pbegin
                | "Cache files" >> beam.Create(files)
                | "Read cache" >> ReadAllFromParquet()
                | "This model's vectors" >> beam.ParDo(_FromFolder(self.model))
            )
        if not parts:
            return pbegin | "No cached vectors" >> beam.Create([])
        return parts[0] if len(parts) == 1 else tuple(parts) | "All cached" >> beam.Flatten()


def _cache_row(model: str, entry: tuple[str, CachedVector]) -> dict:
    key, cached = entry
    return {
        "model": model,
        "text_sha256": key,
        "embedding": list(cached.embedding),
        "model_tokens": cached.model_tokens,
    }


class WriteCache(beam.PTransform):
    """(text key, CachedVector) the model made -> new files of the --embedding_cache folder."""

    def __init__(self, folder: str, model: str, run_id: str) -> None:
        super().__init__()
        self.folder = folder
        self.model = model
        self.run_id = run_id

    def expand(self, vectors: beam.PCollection) -> beam.PCollection:
        return (
            vectors
            | "Cache rows" >> beam.Map(lambda e: _cache_row(self.model, e))
            | "Write cache"
            >> WriteToParquet(
                FileSystems.join(self.folder, f"embeddings-{self.run_id}"),
                schema=CACHE_SCHEMA,
                codec="zstd",
                file_name_suffix=".parquet",
                record_batch_size=1000,
            )
        )
