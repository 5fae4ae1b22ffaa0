"""Count what each chunk will cost and what the embedding model will read of it.

Runs after the context stage, which has fitted every header to the run's `TokenBudget` in both
tokenizers: this stage only counts the embedded text (header + chunk) in the pricing tokenizer,
and in the model's own word pieces where the context stage has not counted them already.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import apache_beam as beam

from schemas.records import CONTEXT_JOINER, Chunk
from transforms.chunking.tokens import Tokenizer, count_with_prefix, make_tokenizer
from transforms.stage_base import Counts
from transforms.token_budget import MODEL_SPECIAL_TOKENS, TokenBudget


class ChunkBudget:
    """Pure core: sets embed_tokens, context_tokens and model_tokens of a chunk."""

    def __init__(self, budget: TokenBudget, pricing_tokenizer: str = "cl100k_base") -> None:
        self.budget = budget
        self.pricing_tokenizer = pricing_tokenizer
        # Counts only, in tiktoken itself (chunk counts come with the chunks).
        self.pricing: Tokenizer = make_tokenizer(pricing_tokenizer, "tiktoken")
        # A chunk's token_count is the chunk tokenizer's count of its text: reused when it is
        # the pricing tokenizer.
        self.reuse_counts = budget.tokenizer == pricing_tokenizer
        self.model: Tokenizer | None = budget.model()

    def model_count(self, text: str) -> int:
        assert self.model is not None
        return self.model.count(text) + MODEL_SPECIAL_TOKENS

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

    def apply(self, chunk: Chunk) -> Chunk:
        """The chunk with its counts; the model's count is the context stage's when it made
        one (it fitted the header with it), else taken here."""
        if chunk.is_parent:
            return chunk
        model_tokens = chunk.model_tokens
        if self.model is not None and model_tokens is None:
            model_tokens = self.model_count(chunk.embed_text())
        return dataclasses.replace(
            chunk,
            embed_tokens=self.embed_tokens(chunk),
            context_tokens=self.pricing.count(chunk.context) if chunk.context else 0,
            model_tokens=model_tokens if self.model is not None else None,
        )


class _BudgetFn(Counts, beam.DoFn):
    def __init__(self, budget: TokenBudget, pricing_tokenizer: str) -> None:
        self.budget = budget
        self.pricing_tokenizer = pricing_tokenizer
        self.core: ChunkBudget | None = None

    def setup(self) -> None:
        self.core = ChunkBudget(self.budget, self.pricing_tokenizer)

    def process(self, chunk: Chunk) -> Iterator[Chunk]:
        assert self.core is not None
        counted = self.core.apply(chunk)
        limit = self.budget.model_max_tokens
        if counted.model_tokens is not None and limit and counted.model_tokens > limit:
            self.stat("chunks_over_model_limit")
        yield counted


class CountChunkTokens(beam.PTransform):
    """Chunk -> Chunk with embed_tokens, context_tokens and model_tokens set."""

    def __init__(self, budget: TokenBudget, pricing_tokenizer: str = "cl100k_base") -> None:
        super().__init__()
        self.budget = budget
        self.pricing_tokenizer = pricing_tokenizer

    def expand(self, chunks: beam.PCollection) -> beam.PCollection:
        return chunks | "Count tokens" >> beam.ParDo(_BudgetFn(self.budget, self.pricing_tokenizer))
