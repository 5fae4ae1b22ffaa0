"""Count what each chunk will cost and prove the model reads it whole.

Runs after the context stage: counts the embedded text (header + chunk) in the pricing
tokenizer, and in the embedding model's own word pieces; a header that would push the text past
the model's max_seq_length is shortened (the chunk itself already fits, see routing).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.metrics import Metrics

from schemas.records import CONTEXT_JOINER, Chunk
from transforms.chunking.tokens import Tokenizer, count_with_prefix, make_tokenizer
from transforms.common import NAMESPACE
from transforms.context.path import fit_header


@dataclass(frozen=True)
class BudgetConfig:
    pricing_tokenizer: str = "cl100k_base"
    model_tokenizer: str | None = None  # the embedding model: "default" or a folder
    model_max_tokens: int | None = None  # its max_seq_length, [CLS] and [SEP] included
    # The chunker's tokenizer, whose count of each chunk's text is its token_count: when it is
    # the pricing tokenizer, that count is reused. None: unknown, every text is counted whole.
    chunk_tokenizer: str | None = None


class ChunkBudget:
    """Pure core: sets embed_tokens, context_tokens and model_tokens of a chunk."""

    def __init__(self, config: BudgetConfig) -> None:
        self.config = config
        # Counts only, in tiktoken itself (chunk counts come with the chunks).
        self.pricing: Tokenizer = make_tokenizer(config.pricing_tokenizer, "tiktoken")
        self.reuse_counts = config.chunk_tokenizer == config.pricing_tokenizer
        self.model: Tokenizer | None = None
        if config.model_tokenizer and config.model_max_tokens:
            from transforms.models import resolve_model_path

            self.model = make_tokenizer(f"hf:{resolve_model_path(config.model_tokenizer)}")

    def model_count(self, text: str) -> int:
        assert self.model is not None
        return self.model.count(text) + 2  # [CLS] ... [SEP]

    def embed_tokens(self, chunk: Chunk) -> int:
        """The pricing tokenizer's count of chunk.embed_text(), exactly.

        Where token_count is already this tokenizer's count of the text, a chunk without a
        header costs just that, and one with a header is counted without encoding the text
        again when tiktoken provably splits at the join (`count_joined`).
        """
        if not self.reuse_counts:
            return self.pricing.count(chunk.embed_text())
        if not chunk.context:
            return chunk.token_count
        return count_with_prefix(
            self.pricing, chunk.context + CONTEXT_JOINER, chunk.text, chunk.token_count
        )

    def apply(self, chunk: Chunk) -> tuple[Chunk, bool]:
        """(counted chunk, whether its header was shortened for the model)."""
        if chunk.is_parent:
            return chunk, False
        shortened = False
        model_tokens = None
        if self.model is not None:
            limit = self.config.model_max_tokens
            model_tokens = self.model_count(chunk.embed_text())
            if model_tokens > limit and chunk.context:
                # The header is cut in the model's word pieces: [CLS] and [SEP] take two.
                header = fit_header(chunk.context, chunk.text, limit - 2, self.model)
                chunk = dataclasses.replace(chunk, context=header)
                model_tokens = self.model_count(chunk.embed_text())
                shortened = True
        return (
            dataclasses.replace(
                chunk,
                embed_tokens=self.embed_tokens(chunk),
                context_tokens=self.pricing.count(chunk.context) if chunk.context else 0,
                model_tokens=model_tokens,
            ),
            shortened,
        )


class _BudgetFn(beam.DoFn):
    def __init__(self, config: BudgetConfig) -> None:
        self.config = config
        self.shortened = Metrics.counter(NAMESPACE, "headers_shortened_for_model")
        self.over = Metrics.counter(NAMESPACE, "chunks_over_model_limit")
        self.core: ChunkBudget | None = None

    def setup(self) -> None:
        self.core = ChunkBudget(self.config)

    def process(self, chunk: Chunk) -> Iterator[Chunk]:
        assert self.core is not None
        counted, shortened = self.core.apply(chunk)
        if shortened:
            self.shortened.inc()
        limit = self.config.model_max_tokens
        if counted.model_tokens is not None and limit and counted.model_tokens > limit:
            self.over.inc()
        yield counted


class CountChunkTokens(beam.PTransform):
    """Chunk -> Chunk with embed_tokens, context_tokens and model_tokens set."""

    def __init__(self, config: BudgetConfig) -> None:
        super().__init__()
        self.config = config

    def expand(self, chunks: beam.PCollection) -> beam.PCollection:
        return chunks | "Count tokens" >> beam.ParDo(_BudgetFn(self.config))
