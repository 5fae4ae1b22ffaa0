"""Embed chunks with sentence-transformers through Beam's RunInference.

The ModelHandler implements only `load_model` and `run_inference`; Beam does the batching,
model sharing and metrics. Beam hands the model full batches of `max_batch_size` chunks, and
each is cut into forward passes of chunks of similar length in the model's own word pieces, so
little of a pass is padding. Failed batches go to the dead-letter output with their chunk ids.
The model runs on torch (sentence-transformers) or on ONNX Runtime, float32 or int8
(transforms/embedding/onnx_model.py). Chunks whose embedded text is the same are embedded once per
run: they are grouped by a hash of that text and the vector is copied to each.

What the grouping shuffles is kept to what it uses: the key is the text's raw sha256 (32 bytes,
not 64 hex digits), and on a run with cached vectors only those of this run's texts travel (up
to `WANTED_MAX` texts embedded), each as float32 bytes (1,536 bytes for 384 dimensions, where
Beam's coder writes a tuple of Python floats at 9 bytes a number).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.ml.inference.base import (
    KeyedModelHandler,
    ModelHandler,
    PredictionResult,
    RunInference,
)

from schemas.records import Chunk
from transforms.common import REJECTS
from transforms.embedding.models import (  # noqa: F401 - re-exported: callers import them from here
    DEFAULT_MODEL,
    ONNX_INT8,
    CachedVector,
    EmbedResult,
    ModelInfo,
    quiet_model_loading,
    read_model_info,
    resolve_model_path,
    text_digest,
    text_key,
)
from transforms.stage_base import Counts, Stage
from transforms.stat_events import ChunkDeduplicated, EmbeddingReused

# Forward pass and Beam batch when the flags leave them out: a GPU wants larger ones (its
# passes cost little more for more rows), a CPU pass of 32 pads least for its speed.
CPU_BATCH, CPU_MAX_BATCH = 32, 256
GPU_BATCH, GPU_MAX_BATCH = 128, 1024


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indexes of `lengths`, longest first, cut into runs of `batch_size`: one run a pass.

    A forward pass pads every text to its longest, so neighbours in length waste least.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def pick_device(device: str) -> str:
    """`auto` -> cuda where torch sees a GPU, else cpu; `cuda` without one raises."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "--embedding_device=cuda: torch sees no CUDA GPU on this worker "
            "(torch.cuda.is_available() is False)"
        )
    return device


# Models loaded in this process, by what makes them: a process that runs the job again (a
# scheduler or a notebook that calls run() each night, the tests) reuses the loaded model
# instead of reading and building it once more (about 1 s of CPU for the ONNX session, 1.5 s
# for torch). Beam's shared handle shares a model only within one pipeline. The two models
# used last are kept; a key names the exact file (its sha256), so a rebuilt model is loaded anew.
_LOADED: OrderedDict[tuple, Any] = OrderedDict()
_LOADED_LOCK = threading.Lock()
_LOADED_KEEP = 2


def _loaded(key: tuple, load: Any) -> Any:
    """The model of `key`, loaded by `load()` only the first time this process needs it."""
    with _LOADED_LOCK:
        if key in _LOADED:
            _LOADED.move_to_end(key)
            return _LOADED[key]
        model = load()
        _LOADED[key] = model
        while len(_LOADED) > _LOADED_KEEP:
            _LOADED.popitem(last=False)
        return model


def _on_gpu(model: Any) -> bool:
    on_gpu = getattr(model, "on_gpu", None)  # OnnxSentenceEncoder
    if on_gpu is not None:
        return bool(on_gpu)
    return getattr(getattr(model, "device", None), "type", "cpu") == "cuda"


class SentenceTransformerHandler(Counts, ModelHandler[Chunk, Any, Any]):
    """Chunks in, normalised float32 vectors out; the model is loaded once per worker."""

    def __init__(
        self,
        model_path: str,
        dimension: int,
        device: str = "auto",
        encode_batch_size: int | None = None,
        max_batch_size: int | None = None,
        *,
        backend: str = "torch",
        onnx_sha256: str | None = None,
        cache_dir: str | None = None,
    ) -> None:
        from transforms.embedding.onnx_model import BACKENDS, TORCH

        if backend not in BACKENDS:
            raise ValueError(f"embedding backend must be one of {BACKENDS}, got {backend!r}")
        if max_batch_size is None:
            max_batch_size = GPU_MAX_BATCH if device == "cuda" else CPU_MAX_BATCH
        if (encode_batch_size is not None and encode_batch_size < 1) or max_batch_size < 1:
            raise ValueError(
                f"embedding batch sizes must be positive, got encode_batch_size="
                f"{encode_batch_size}, max_batch_size={max_batch_size}"
            )
        # Full batches only (a bundle's last one aside). Beam's batch-size estimator aims at a
        # 5% fixed cost per batch; a CPU forward pass has almost none, so it kept batches at 1
        # to 20 chunks (3 on average over 1,000 real chunks), too few to sort by length.
        super().__init__(min_batch_size=max_batch_size, max_batch_size=max_batch_size)
        self.model_path = model_path
        self.dimension = dimension
        self.device = device
        self.encode_batch_size = encode_batch_size  # None: by the device the model is on
        self.backend = backend
        self.onnx_sha256 = onnx_sha256 if backend != TORCH else None
        self.cache_dir = cache_dir

    def load_model(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from transforms.embedding.onnx_model import TORCH, OnnxSentenceEncoder, ensure_onnx_model

        # Resolved on the worker: the bundled model lies where this environment installed it.
        path = resolve_model_path(self.model_path)
        if self.backend == TORCH:
            from sentence_transformers import SentenceTransformer

            quiet_model_loading()  # the ONNX backends never import transformers

            device = pick_device(self.device)
            model = _loaded((TORCH, path, device), lambda: SentenceTransformer(path, device=device))
        else:
            # Built here only when this worker's cache lacks it; the hash check keeps a worker
            # from mixing in vectors of another build.
            onnx = ensure_onnx_model(
                path, self.model_path, self.backend, self.cache_dir, self.onnx_sha256
            )
            model = _loaded(
                (self.backend, path, onnx.path, onnx.sha256, self.device),
                lambda: OnnxSentenceEncoder(
                    path,
                    onnx.path,
                    self.device,
                    one_text_a_pass=self.backend == ONNX_INT8,
                    sha256=onnx.sha256,
                ),
            )
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
            self.stat("chunks_truncated", truncated)
        vectors: list[Any] = [None] * len(batch)
        seconds = [0.0] * len(batch)
        # encode() sorts a call by characters, a poor proxy for word pieces (2 to 5 characters a
        # piece on real chunks, code and prose alike): 27-33% of each pass was padding. So each
        # encode() call here is one pass over chunks of similar length in word pieces.
        # Decided here, not in load_model: Beam shares one model among handler copies, and
        # only the first of them loads it.
        pass_size = self.encode_batch_size or (GPU_BATCH if _on_gpu(model) else CPU_BATCH)
        # onnx-int8: the encoder gives each text its own pass (OnnxSentenceEncoder), whatever
        # the size of the call: dynamic int8 scales a pass's activations by the pass's range,
        # so a text's vector moved (by up to 0.03 a component) with the texts beside it.
        for part in length_sorted_batches([min(n, limit) for n in lengths], pass_size):
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


def embedded_text_key(chunk: Chunk) -> str:
    return text_key(chunk.embed_text())


def embedded_text_digest(chunk: Chunk) -> bytes:
    """What chunks of identical embedded texts are grouped by: `embedded_text_key` as bytes."""
    return text_digest(chunk.embed_text())


# Of a text's digest, what the side input of the run's texts holds: a cached vector whose key
# starts so is shuffled to the join (whose key is the whole digest), any other is dropped where
# it is read. 8 bytes: a vector of another text passes by chance once in 2**64 / texts.
WANTED_PREFIX = 8
# The most texts a worker holds the prefixes of (as a sorted uint64 array: 256 MB): a run that
# embeds more (a first build with --embedding_cache, a night that changes most of the corpus)
# joins every cached vector, as compact, rather than hold that side input on every worker.
WANTED_MAX = 1 << 25
_PREFIX_DTYPE = ">u8"
VECTOR_DTYPE = "<f4"  # a vector in the join: its float32 bytes, little-endian


def vector_bytes(embedding: Sequence[float]) -> bytes | None:
    """A vector as the join carries it (`VECTOR_DTYPE`); None when a number does not fit in a
    float32 (the output's type), which a cache file of float64 numbers could hold."""
    vector = np.asarray(embedding, dtype=np.float64)
    if np.any(np.abs(vector) > np.finfo(np.float32).max):
        return None
    return vector.astype(VECTOR_DTYPE).tobytes()


def vector_of(data: bytes) -> tuple[float, ...]:
    """The inverse of `vector_bytes`: the numbers as a Chunk's `embedding` holds them."""
    return tuple(np.frombuffer(data, dtype=VECTOR_DTYPE).tolist())


def _one_per_text(item: tuple[str, Any]) -> tuple[tuple[Chunk, ...], Chunk]:
    """(the others, the one to embed) of chunks sharing an embedded text; the first by id."""
    _, chunks = item
    ordered = sorted(chunks, key=lambda c: c.chunk_id)
    return tuple(ordered[1:]), ordered[0]


def _embedded(
    chunk: Chunk,
    model_name: str,
    embedding: tuple[float, ...],
    model_tokens: int | None,
    seconds: float = 0.0,
) -> Chunk:
    """The chunk with its vector; `seconds`: its share of model time (none for a vector it
    took from another chunk or from the cache)."""
    return dataclasses.replace(
        chunk,
        embedding=embedding,
        embedding_model=model_name,
        model_tokens=model_tokens,
        embed_seconds=seconds,
    )


class _AttachEmbedding(Counts, beam.DoFn):
    """The vector of one embedded text onto its chunk and every chunk with the same text."""

    DUPLICATES = "duplicates"

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name

    def process(self, keyed: tuple[tuple[Chunk, ...], PredictionResult]) -> Iterator[Any]:
        others, result = keyed
        vector, model_tokens, seconds = result.inference
        embedding = tuple(vector.tolist())
        self.stat("chunks_embedded", 1 + len(others))
        yield _embedded(result.example, self.model_name, embedding, model_tokens, seconds)
        for chunk in others:
            self.stat("chunks_deduplicated")
            # No model time of its own: the text was embedded once, for the chunk above.
            yield _embedded(chunk, self.model_name, embedding, model_tokens)
            yield beam.pvalue.TaggedOutput(self.DUPLICATES, ChunkDeduplicated(chunk.embed_tokens))


class _FailedBatchToRejects(Stage):
    """A batch the model failed on -> one reject of each of its chunks (and their duplicates),
    counted as chunks_rejected_embed."""

    STAGE = "embed"
    REJECTED_STAT = "chunks_rejected_embed"

    def process_one(self, failed: tuple[Any, Exception]) -> Iterator[beam.pvalue.TaggedOutput]:
        batch, error = failed
        for others, chunk in batch:
            for one in (chunk, *others):
                yield self.reject(one.source, "embedding_failed", error, one.doc_id, one.chunk_id)


def wanted_prefixes(prefixes: Iterable[bytes], most: int = WANTED_MAX) -> np.ndarray | None:
    """The distinct `WANTED_PREFIX`-byte prefixes, sorted, as uint64 (8 bytes each in memory,
    where a set of bytes takes about 100); None when there are more than `most`: nothing is
    filtered then. The iterable is read no further than that."""
    it = iter(prefixes)
    parts, n = [], 0
    for batch in iter(lambda: list(itertools.islice(it, 1 << 20)), []):
        n += len(batch)
        if n > most:
            return None
        parts.append(np.frombuffer(b"".join(batch), dtype=_PREFIX_DTYPE))
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=_PREFIX_DTYPE)


def is_wanted(digest: bytes, wanted: np.ndarray | None) -> bool:
    """Whether `digest`'s prefix is among `wanted` (`wanted_prefixes`; None: any is)."""
    if wanted is None:
        return True
    prefix = np.frombuffer(digest[:WANTED_PREFIX], dtype=_PREFIX_DTYPE)[0]
    i = int(np.searchsorted(wanted, prefix))
    return i < len(wanted) and wanted[i] == prefix


class _UsableCached(Counts, beam.DoFn):
    """(text key, CachedVector) -> (text digest, (vector bytes, model tokens)) when the run
    embeds a text of that key (`wanted`: the `WANTED_PREFIX`-byte prefixes of the run's
    digests), else nothing: the vectors of the removed and the edited texts are dropped where
    they are read. The prefixes are read once a window by each instance (`wanted_prefixes`);
    past `WANTED_MAX` of them every vector is kept."""

    def setup(self) -> None:
        self._wanted: dict[Any, np.ndarray | None] = {}

    def process(
        self,
        entry: tuple[str, CachedVector],
        wanted: Iterable[bytes],
        window: Any = beam.DoFn.WindowParam,
    ) -> Iterator[tuple[bytes, tuple[bytes, int | None]]]:
        if window not in self._wanted:
            self._wanted[window] = wanted_prefixes(wanted)
        key, cached = entry
        digest = bytes.fromhex(key)
        if not is_wanted(digest, self._wanted[window]):
            return
        data = vector_bytes(cached.embedding)
        if data is None:  # embedded again, as any other vector the run cannot use
            self.stat("embedding_cache_entries_invalid")
            return
        yield digest, (data, cached.model_tokens)


class _UseCache(Counts, beam.DoFn):
    """(text digest, {chunks, cached}) -> the chunks with the cached vector (`hits`), or, with
    none cached, (the others, the one to embed) for the model, as `_one_per_text` gives."""

    HITS = "hits"
    EVENTS = "events"
    USED = "used"  # the text key, once per text served from the cache

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name

    def process(self, item: tuple[bytes, dict[str, Any]]) -> Iterator[Any]:
        digest, grouped = item
        chunks = list(grouped["chunks"])
        if not chunks:  # a cached text this run does not embed
            return
        cached = next(iter(grouped["cached"]), None)
        if cached is None:
            yield _one_per_text((digest, chunks))
            return
        yield beam.pvalue.TaggedOutput(self.USED, digest.hex())
        data, model_tokens = cached
        embedding = vector_of(data)
        for chunk in chunks:
            self.stat("chunks_embedded")
            self.stat("chunks_cached")
            yield beam.pvalue.TaggedOutput(
                self.HITS,
                _embedded(chunk, self.model_name, embedding, model_tokens),
            )
            yield beam.pvalue.TaggedOutput(self.EVENTS, EmbeddingReused(chunk.embed_tokens))


def _cache_entry(keyed: tuple[tuple[Chunk, ...], PredictionResult]) -> tuple[str, CachedVector]:
    """What the model gave for one distinct text, as the embedding cache keeps it."""
    _, result = keyed
    vector, model_tokens, _ = result.inference
    return embedded_text_key(result.example), CachedVector(tuple(vector.tolist()), model_tokens)


class EmbedChunks(beam.PTransform):
    """Chunk -> Chunk with `embedding`, Reject for chunks whose batch failed, and one
    `stat_events.ChunkDeduplicated` event for each chunk whose embedded text another chunk of the
    run was embedded for (its vector is that chunk's).

    Grouping by the embedded text is a shuffle: the model reads each distinct text once.
    `cached`: (text key, CachedVector) of the embedding cache, by this model: a text found there
    is not embedded again (`stat_events.EmbeddingReused`); the result's `new_vectors` are the
    (text key, CachedVector) the model made, for the cache to keep. Only the cached vectors of
    this run's texts join the chunks (picked by a side input of their digests, as large as
    what the run embeds), as float32 bytes.
    """

    def __init__(
        self,
        handler: SentenceTransformerHandler,
        model_name: str,
        cached: beam.PCollection | None = None,
    ) -> None:
        super().__init__()
        self.handler = handler
        self.model_name = model_name
        self.cached = cached

    def expand(self, chunks: beam.PCollection) -> EmbedResult:
        keyed = chunks | "Key by embedded text" >> beam.Map(lambda c: (embedded_text_digest(c), c))
        hits = cache_events = used = None
        if self.cached is None:
            distinct = (
                keyed
                | "Group identical texts" >> beam.GroupByKey()
                | "One chunk a text" >> beam.Map(_one_per_text)
            )
        else:
            wanted = keyed | "Texts to embed" >> beam.Map(lambda kv: kv[0][:WANTED_PREFIX])
            usable = self.cached | "Cached vectors of these texts" >> beam.ParDo(
                _UsableCached(), beam.pvalue.AsIter(wanted)
            )
            looked_up = (
                {"chunks": keyed, "cached": usable}
                | "Group identical texts with the cache" >> beam.CoGroupByKey()
                | "Use cached vectors"
                >> beam.ParDo(_UseCache(self.model_name)).with_outputs(
                    _UseCache.HITS, _UseCache.EVENTS, _UseCache.USED, main="misses"
                )
            )
            distinct = looked_up.misses
            hits, cache_events = looked_up[_UseCache.HITS], looked_up[_UseCache.EVENTS]
            used = looked_up[_UseCache.USED]
        embedded, dead = (
            distinct
            | "Run model" >> RunInference(KeyedModelHandler(self.handler)).with_exception_handling()
        )
        attached = embedded | "Attach embeddings" >> beam.ParDo(
            _AttachEmbedding(self.model_name)
        ).with_outputs(_AttachEmbedding.DUPLICATES, main="chunks")
        bad = (
            dead.failed_inferences
            | "Failed batches" >> beam.ParDo(_FailedBatchToRejects()).with_outputs(REJECTS)
        )[REJECTS]
        new_vectors = embedded | "New vectors" >> beam.Map(_cache_entry)
        out_chunks = attached.chunks
        events = attached[_AttachEmbedding.DUPLICATES]
        if hits is not None:
            out_chunks = (out_chunks, hits) | "Embedded and cached" >> beam.Flatten()
            events = (events, cache_events) | "Embedding events" >> beam.Flatten()
        return EmbedResult(out_chunks, bad, events, new_vectors, used)
