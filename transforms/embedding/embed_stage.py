"""The embed stage as the job wires it: RunInference when the job embeds, else a pass-through.

Apart from transforms.embedding.embed so that building a job that embeds nothing (and its tests, and
`--help`) never imports Beam's ML stack and torch.
"""

from __future__ import annotations

import apache_beam as beam

from schemas.records import Chunk
from transforms.embedding.models import EmbeddingConfig, EmbedResult, text_digest
from transforms.stat_events import ChunkDeduplicated


def _duplicates(item: tuple[bytes, list[Chunk]]) -> list[ChunkDeduplicated]:
    """One event for each chunk of a text but the one the run embeds (transforms.embedding.embed's
    `_one_per_text` keeps the first by id; the others' tokens are the same)."""
    _, chunks = item
    ordered = sorted(chunks, key=lambda c: c.chunk_id)
    return [ChunkDeduplicated(c.embed_tokens) for c in ordered[1:]]


class Embed(beam.PTransform):
    """Chunk -> EmbedResult: embedded through RunInference, or passed on when `enabled` is off
    (--embedding_model=none, --estimate); a text whose vector `cached` holds is not embedded
    again."""

    def __init__(
        self,
        config: EmbeddingConfig,
        enabled: bool,
        cached: beam.PCollection | None = None,
        count_duplicates: bool = False,
    ) -> None:
        """`count_duplicates` (--estimate with a model): nothing is embedded, but the chunks
        whose embedded text another chunk has are counted as the run counts them (one
        `ChunkDeduplicated` each), so the estimate's model-read tokens are the run's."""
        super().__init__()
        self.config = config
        self.enabled = enabled and config.path is not None
        self.cached = cached  # (text key, CachedVector): transforms/embedding/embedding_cache.py
        self.count_duplicates = count_duplicates and config.path is not None

    def expand(self, chunks: beam.PCollection) -> EmbedResult:
        if not self.enabled:
            if not self.count_duplicates:
                return EmbedResult(chunks, None)
            events = (
                chunks
                | "Key by embedded text" >> beam.Map(lambda c: (text_digest(c.embed_text()), c))
                | "Group identical texts" >> beam.GroupByKey()
                | "Count duplicates" >> beam.FlatMap(_duplicates)
            )
            return EmbedResult(chunks, None, events)
        # Imported here: RunInference brings Beam's ML stack and torch (seconds), which a
        # worker should load only when the job embeds.
        from transforms.embedding.embed import EmbedChunks, SentenceTransformerHandler

        c = self.config
        handler = SentenceTransformerHandler(
            c.model,
            c.dimension,
            device=c.device,
            encode_batch_size=c.batch_size,
            max_batch_size=c.max_batch,
            backend=c.backend,
            onnx_sha256=c.onnx_sha256,
            cache_dir=c.cache_dir,
        )
        return chunks | "With the model" >> EmbedChunks(handler, c.model_id or c.model, self.cached)
