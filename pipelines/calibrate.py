"""How fast the embedding model runs on this machine, to project an --estimate run's embedding time.

`sample_chunk_texts` chunks a few of the run's own documents (as the job would), and
`calibrate` times the configured model on them after a warm-up pass; the projection scales
the measured tokens per second to the report's embedded tokens.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from typing import Any

SAMPLE_CHUNKS = 32
WARMUP_CHUNKS = 4


@dataclass(frozen=True)
class EmbeddingCalibration:
    """One timed pass of the model over `chunks` chunk texts of `tokens` tokens."""

    model: str
    device: str
    torch_threads: int
    machine: str
    batch_size: int
    chunks: int
    tokens: int  # in the pricing tokenizer, as the report's embedded_tokens
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("inf")

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else float("inf")

    def project(self, embedded_tokens: int) -> float:
        """Seconds one worker process like this one takes to embed `embedded_tokens`."""
        return embedded_tokens / self.tokens_per_second


def machine_description() -> str:
    """The CPU model and core count, e.g. 'AMD EPYC 7B13, 2 cores'."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def sample_chunk_texts(config: Any, output: str, n: int = SAMPLE_CHUNKS) -> list[str]:
    """Up to `n` chunk texts of the run's documents, spread over its document types.

    `config` is the run's JobConfig; the documents come from `output/documents/`. The chunks
    are the job's own (same chunker and settings), without their context headers.
    """
    from runs.run_folder import RunFolder
    from schemas.records import Document
    from transforms.chunking.routing import DocumentChunker

    table = RunFolder(output).read_table("documents")
    if table is None or table.num_rows == 0:
        return []
    rows = sorted(table.to_pylist(), key=lambda r: r["doc_id"])  # deterministic, type-mixed
    by_type: dict[str, list[dict]] = {}
    for row in rows:
        by_type.setdefault(row["doc_type"], []).append(row)
    chunker = DocumentChunker(config.chunking)
    per_type = max(1, n // len(by_type))
    texts: list[str] = []
    for docs in by_type.values():
        taken: list[str] = []
        for row in docs:
            doc = Document(
                doc_id=row["doc_id"],
                source=row["source"],
                doc_type=row["doc_type"],
                text=row["text"],
                content_hash=row["content_hash"],
                language=row["language"],
                title=row["title"],
            )
            taken += [c.text for c in chunker.chunk_document(doc) if not c.is_parent]
            if len(taken) >= per_type:
                break
        # every k-th chunk rather than a document's first ones: long and short alike
        step = max(1, len(taken) // per_type)
        texts += taken[::step][:per_type]
    return texts[:n]


def calibrate(config: Any, texts: list[str]) -> EmbeddingCalibration:
    """Load the run's embedding model and time it on `texts` (after a short warm-up)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from transforms.chunking.tokens import make_tokenizer
    from transforms.embedding.embed import pick_device
    from transforms.embedding.models import (
        DEFAULT_MODEL,
        TORCH,
        quiet_model_loading,
        resolve_model_path,
    )
    from transforms.embedding.onnx_model import load_encoder

    quiet_model_loading()
    device = pick_device(config.embedding.device)
    if config.embedding.backend == TORCH:
        model = SentenceTransformer(resolve_model_path(config.embedding.model), device=device)
    else:  # the backend the run would use (its ONNX file is built here if it is missing)
        model = load_encoder(
            config.embedding.model_id or f"{config.embedding.model}|{config.embedding.backend}",
            device,
        )
    batch = config.embedding.batch_size or 32
    model.encode(texts[:WARMUP_CHUNKS], batch_size=batch, show_progress_bar=False)
    started = time.perf_counter()
    model.encode(texts, batch_size=batch, normalize_embeddings=True, show_progress_bar=False)
    seconds = time.perf_counter() - started
    counter = make_tokenizer(config.pricing_tokenizer, "tiktoken")
    name = config.embedding.model
    return EmbeddingCalibration(
        model=("all-MiniLM-L6-v2 (the bundled default)" if name == DEFAULT_MODEL else name)
        + f", {config.embedding.backend} backend",
        device=device,
        torch_threads=torch.get_num_threads(),
        machine=machine_description(),
        batch_size=batch,
        chunks=len(texts),
        tokens=sum(counter.count(t) for t in texts),
        seconds=seconds,
    )


def projection_lines(calibration: EmbeddingCalibration, embedded_tokens: int) -> list[str]:
    """The summary's lines: the projected embedding time and what it assumed."""
    from pipelines.live_progress import duration

    seconds = calibration.project(embedded_tokens)
    c = calibration
    return [
        f"  embedding time: ~{duration(seconds)} projected for {embedded_tokens:,} tokens on one "
        f"worker process like this one",
        f"    assumed: model {c.model} on {c.device} with {c.torch_threads} torch threads, "
        f"batch {c.batch_size}, at the {c.tokens_per_second:,.0f} tokens/s "
        f"({c.chunks_per_second:.1f} chunks/s) measured on {c.chunks} of this corpus's "
        f"chunks on {c.machine}; time scales with tokens; N workers with their own cores "
        "divide it by about N; model loading and start-up not included",
    ]
