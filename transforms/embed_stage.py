"""The embed stage as the job wires it: RunInference when the job embeds, else a pass-through.

Apart from transforms.embed so that building a job that embeds nothing (and its tests, and
`--help`) never imports Beam's ML stack and torch.
"""

from __future__ import annotations

import apache_beam as beam

from transforms.models import EmbeddingConfig, EmbedResult


class Embed(beam.PTransform):
    """Chunk -> EmbedResult: embedded through RunInference, or passed on when `enabled` is off
    (--embedding_model=none, --estimate); a text whose vector `cached` holds is not embedded
    again."""

    def __init__(
        self, config: EmbeddingConfig, enabled: bool, cached: beam.PCollection | None = None
    ) -> None:
        super().__init__()
        self.config = config
        self.enabled = enabled and config.path is not None
        self.cached = cached  # (text key, CachedVector): transforms/embedding_cache.py

    def expand(self, chunks: beam.PCollection) -> EmbedResult:
        if not self.enabled:
            return EmbedResult(chunks, None)
        # Imported here: RunInference brings Beam's ML stack and torch (seconds), which a
        # worker should load only when the job embeds.
        from transforms.embed import EmbedChunks, SentenceTransformerHandler

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
