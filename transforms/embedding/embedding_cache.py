"""The embedding cache: vectors reused by (model, exact embedded text), so that a rebuild
embeds only the texts it has not embedded before.

Two sources, both keyed by the sha256 of exactly what the model reads (context and text):
- the previous run's chunk rows (--previous_output) that the run does not copy as they are,
  when that run's model key is this run's: an edited document, or a change of overlap, header or
  strategy, re-embeds only the chunks whose embedded text changed;
- an --embedding_cache folder of Parquet files (local, gs://, s3://), to which each run adds
  the vectors its model made (`embeddings-<run_id>-SSSSS-of-NNNNN.parquet`) and the keys of the
  texts whose cached vector it used (`used-<run_id>-SSSSS-of-NNNNN.parquet`). A run rewrites no
  entry, so the folder grows; `corpus-chunker compact-cache` (commands/compact_cache.py) rewrites
  it with one entry per model and text, and drops those no run has made or used for
  --max_age_days.
The model key names the model and its weights: the ONNX model id carries its file's sha256,
torch's is the model name and a hash of its weight and config files.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
from collections.abc import Iterator

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.parquetio import WriteToParquet

from schemas.columns import EMBEDDING_CACHE, EMBEDDING_CACHE_USE, schema
from schemas.records import CONTEXT_JOINER
from transforms.embedding.models import TORCH, CachedVector, EmbeddingConfig, text_key
from transforms.stage_base import Counts

_LOG = logging.getLogger(__name__)
CACHE_SCHEMA = schema(EMBEDDING_CACHE)
USE_SCHEMA = schema(EMBEDDING_CACHE_USE)
# What a cache file must hold to be read: every column but `last_used`, which only compacted
# files have (a run's own files are dated by their modification time).
CACHE_COLUMNS = tuple(n for n in CACHE_SCHEMA.names if n != "last_used")
VECTOR_FILES = "embeddings-"  # the prefix of the files of vectors a run writes
USE_FILES = "used-"  # the prefix of the files of a run's uses (every other file holds vectors)
_TEXT_KEY = re.compile(r"[0-9a-f]{64}")
MAX_MODEL_TOKENS = 1 << 20
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


def checked_vector(
    embedding: object, model_tokens: object, dimension: int | None
) -> CachedVector | None:
    """A cached vector as this run can use it, or None when it is not one: a list of
    `dimension` finite numbers (any length when the dimension is unknown, never none), and a
    token count that is None or a count. The cache holds data, not trust: whatever else a file
    or a previous run holds is skipped, and the text is embedded again."""
    if not isinstance(embedding, list | tuple) or not embedding:
        return None
    if dimension is not None and len(embedding) != dimension:
        return None
    try:
        vector = tuple(float(x) for x in embedding)
    except (TypeError, ValueError):  # None, strings, nested lists
        return None
    if not all(math.isfinite(x) for x in vector):
        return None
    if model_tokens is not None and not (
        isinstance(model_tokens, int)
        and not isinstance(model_tokens, bool)
        and 0 <= model_tokens <= MAX_MODEL_TOKENS
    ):
        return None
    return CachedVector(vector, model_tokens)


def checked_cache_row(row: dict, model: str, dimension: int | None) -> CachedVector | None:
    """The vector of an --embedding_cache row when it is this model's and usable, else None."""
    if row.get("model") != model:
        return None
    if not is_text_key(row.get("text_sha256")):
        return None
    return checked_vector(row.get("embedding"), row.get("model_tokens"), dimension)


def entries_of_rows(
    row: dict, dimension: int | None = None, counts: Counts | None = None
) -> Iterator[tuple[str, CachedVector]]:
    """A previous run's chunk row -> its cache entry (parents and failed chunks have none; a
    vector that is not a usable one, `checked_vector`, is skipped and counted)."""
    if row.get("is_parent") or row.get("embedding") is None:
        return
    cached = checked_vector(row["embedding"], row.get("model_tokens"), dimension)
    if cached is None:
        if counts is not None:
            counts.stat("embedding_cache_entries_invalid")
        return
    yield row_text_key(row), cached


def cache_files(folder: str) -> list[str]:
    """The vector files of an --embedding_cache folder (none when it does not exist yet): its
    Parquet files but the records of use."""
    return [p for p in _parquet_files(folder) if not is_use_file(p)]


def is_use_file(path: str) -> bool:
    """Whether a cache folder's file records a run's uses (`used-*`), not vectors."""
    return path.rstrip("/").rsplit("/", 1)[-1].startswith(USE_FILES)


def _parquet_files(folder: str) -> list[str]:
    pattern = FileSystems.join(folder, "*.parquet")
    try:
        return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
    except Exception:
        return []


def cache_file_rows(
    path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Iterator[dict]:
    """The rows of one cache folder file, with its `required` columns and those of `optional`
    it has. Raises when the file is not Parquet, lacks a required column or breaks while it is
    read: each caller says what a bad file means to it."""
    import pyarrow.parquet as pq

    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        parquet = pq.ParquetFile(f)
        names = parquet.schema_arrow.names
        missing = [c for c in required if c not in names]
        if missing:
            raise ValueError(f"no column {', '.join(missing)}")
        columns = [*required, *(c for c in optional if c in names)]
        for batch in parquet.iter_batches(batch_size=1000, columns=columns):
            yield from batch.to_pylist()


def is_text_key(key: object) -> bool:
    """Whether `key` is a text key as the cache stores it (a sha256 in hex)."""
    return isinstance(key, str) and _TEXT_KEY.fullmatch(key) is not None


def write_cache_files(
    folder: str, prefix: str, schema: pa.Schema, rows_a_batch: int = 1000
) -> beam.PTransform:
    """The write of new `<prefix>-SSSSS-of-NNNNN.parquet` files into a cache folder."""
    return WriteToParquet(
        FileSystems.join(folder, prefix),
        schema=schema,
        codec="zstd",
        file_name_suffix=".parquet",
        record_batch_size=rows_a_batch,
    )


def read_cache_file(
    path: str, model: str, dimension: int | None, counts: Counts | None = None
) -> Iterator[tuple[str, CachedVector]]:
    """(text key, vector) of this model in one --embedding_cache file, checked one by one.

    A file that is not Parquet, lacks a column or breaks while it is read is a warning and
    is skipped from there on (its vectors are made again), never a failed job; a row of this
    model that is not usable (`checked_cache_row`) is skipped and counted.
    """
    try:
        for row in cache_file_rows(path, CACHE_COLUMNS):
            if row.get("model") != model:
                continue  # another model's: not this run's to use
            cached = checked_cache_row(row, model, dimension)
            if cached is None:
                if counts is not None:
                    counts.stat("embedding_cache_entries_invalid")
                continue
            yield row["text_sha256"], cached
    except Exception as e:
        if counts is not None:
            counts.stat("embedding_cache_files_unreadable")
        _LOG.warning(
            "--embedding_cache: skipping %s, which is not a readable cache file (%s: %s); "
            "its texts are embedded again",
            path,
            type(e).__name__,
            str(e)[:200],
        )


class _FromFolder(Counts, beam.DoFn):
    def __init__(self, model: str, dimension: int | None) -> None:
        self.model = model
        self.dimension = dimension

    def process(self, path: str) -> Iterator[tuple[str, CachedVector]]:
        yield from read_cache_file(path, self.model, self.dimension, self)


class _FromRows(Counts, beam.DoFn):
    def __init__(self, dimension: int | None) -> None:
        self.dimension = dimension

    def process(self, row: dict) -> Iterator[tuple[str, CachedVector]]:
        yield from entries_of_rows(row, self.dimension, self)


class CachedVectors(beam.PTransform):
    """PBegin -> (text key, CachedVector) of this model: the previous run's `rows` (chunk rows,
    or None) and the --embedding_cache `folder` (or None), each vector checked to be one of
    `dimension` finite numbers (`checked_vector`): what is not is skipped, counted
    (embedding_cache_entries_invalid, embedding_cache_files_unreadable), and embedded again."""

    def __init__(
        self,
        model: str,
        rows: beam.PCollection | None,
        folder: str | None,
        dimension: int | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.rows = rows
        self.folder = folder
        self.dimension = dimension

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        parts = []
        if self.rows is not None:
            parts.append(self.rows | "Previous vectors" >> beam.ParDo(_FromRows(self.dimension)))
        if self.folder:
            # The folder is matched when the job runs, not when it is built: the launcher of
            # a remote job (or a dry run) reads no data path.
            parts.append(
                pbegin
                | "Cache folder" >> beam.Create([self.folder])
                | "Cache files" >> beam.FlatMap(cache_files)
                | "Spread cache files" >> beam.Reshuffle()
                | "This model's vectors" >> beam.ParDo(_FromFolder(self.model, self.dimension))
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
        "last_used": None,  # the file's own time
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
            >> write_cache_files(self.folder, f"{VECTOR_FILES}{self.run_id}", CACHE_SCHEMA)
        )


class WriteCacheUse(beam.PTransform):
    """Text keys whose cached vector the run used -> `used-<run_id>-*.parquet` in the
    --embedding_cache folder: what `compact-cache` dates an entry's last use by."""

    def __init__(self, folder: str, model: str, run_id: str) -> None:
        super().__init__()
        self.folder = folder
        self.model = model
        self.run_id = run_id

    def expand(self, keys: beam.PCollection) -> beam.PCollection:
        model = self.model
        return (
            keys
            | "Use rows" >> beam.Map(lambda key: {"model": model, "text_sha256": key})
            | "Write uses"
            >> write_cache_files(self.folder, f"{USE_FILES}{self.run_id}", USE_SCHEMA, 10_000)
        )
