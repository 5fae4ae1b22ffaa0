"""Semantic chunker: break where neighbouring sentences stop being about the same thing.

Sentences (blingfire) are embedded with the sentence-transformers model; a breakpoint falls
between two sentences whose cosine distance is above the `percentile` of all neighbour
distances in the document. Groups over the budget are split recursively, so the hard maximum
still holds.
"""

from __future__ import annotations

import itertools

import numpy as np

from transforms.chunking.base import Chunker, ChunkSpan, ModelLimit
from transforms.chunking.split import recursive_split, with_overlap
from transforms.chunking.tokens import TokenizedText, Tokenizer


def breakpoints(vectors: np.ndarray, percentile: float) -> list[int]:
    """Indices i such that a new group starts at sentence i (distance(i-1, i) is high)."""
    if len(vectors) < 3:
        return []
    similarity = np.einsum("ij,ij->i", vectors[:-1], vectors[1:])
    distance = 1.0 - similarity
    threshold = np.percentile(distance, percentile)
    return [i + 1 for i in np.nonzero(distance > threshold)[0].tolist()]


class SemanticChunker(Chunker):
    """Sentence groups split at drops of embedding similarity, under the hard token limit."""

    strategy = "semantic"

    def __init__(
        self,
        tokenizer: Tokenizer,
        chunk_size: int,
        chunk_overlap: int = 0,
        model_path: str | None = None,
        percentile: float = 90.0,
        model_limit: ModelLimit | None = None,
    ) -> None:
        super().__init__(tokenizer, chunk_size, chunk_overlap, model_limit)
        if not 0.0 < percentile < 100.0:
            raise ValueError(f"percentile must be in (0, 100), got {percentile}")
        self.model_path = model_path
        self.percentile = percentile
        self._model = None

    @classmethod
    def for_job(
        cls,
        tokenizer: Tokenizer,
        chunk_size: int,
        chunk_overlap: int,
        model_limit: ModelLimit | None,
        model_path: str | None,
    ) -> SemanticChunker:
        """Sentences are embedded with the job's own model."""
        return cls(tokenizer, chunk_size, chunk_overlap, model_path, model_limit=model_limit)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_model"] = None  # loaded again on the worker, never pickled into the pipeline
        return state

    def embed(self, sentences: list[str]) -> np.ndarray:
        if self._model is None:
            import os

            from transforms.embedding.models import quiet_model_loading, resolve_model_path

            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            quiet_model_loading()

            self._model = SentenceTransformer(
                resolve_model_path(self.model_path or "default"), device="cpu"
            )
        return self._model.encode(
            sentences, batch_size=64, normalize_embeddings=True, show_progress_bar=False
        )

    def split(self, doc: TokenizedText, language: str | None = None) -> list[ChunkSpan]:
        import blingfire

        text = doc.text
        _, offsets = blingfire.text_to_sentences_and_offsets(text)
        if len(offsets) < 3:
            groups = [(0, len(text))]
        else:
            starts = [0] + [doc.floor(s) for s, _ in offsets[1:]]
            cuts = breakpoints(self.embed([text[s:e] for s, e in offsets]), self.percentile)
            edges = sorted({starts[i] for i in cuts} - {0})
            bounds = [0, *edges, len(text)]
            groups = list(itertools.pairwise(bounds))
        segments = []
        for start, end in groups:
            segments += recursive_split(doc, start, end, self.chunk_size - self.chunk_overlap)
        return [
            ChunkSpan(s, e, strategy=self.strategy)
            for s, e in with_overlap(doc, segments, self.chunk_overlap)
        ]
