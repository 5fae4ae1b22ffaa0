"""The run's totals: `CostReportFn` folds the stages' stat events (transforms/stat_events.py)
into one accumulator, which `cost_report.build_report` turns into the typed report."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import apache_beam as beam

from transforms.stat_events import (
    ChunkDeduplicated,
    ChunkMade,
    ChunkReused,
    DocumentChange,
    DocumentChunked,
    DocumentIn,
    DocumentUnchanged,
    EmbeddingReused,
    FileChunk,
    FileMatched,
    FileSkipped,
    LLMUsage,
    Rejected,
)


def group_totals() -> dict[str, float]:
    return {
        "documents": 0,
        "chunks": 0,
        "parent_chunks": 0,
        "document_tokens": 0,
        "text_tokens": 0,
        "embedded_tokens": 0,
        "header_tokens": 0,
        "chunks_truncated": 0,
        "embedding_seconds": 0.0,
    }


class CostReportFn(beam.CombineFn):
    """Folds stat events into totals; `extract_output` returns the raw accumulator."""

    def create_accumulator(self) -> dict[str, Any]:
        return {
            "documents_in": 0,
            "documents_unchanged": 0,
            "changes": {},
            "chunks_reused": 0,
            "reused_embedded_tokens": 0,
            "chunks_deduplicated": 0,
            "deduplicated_embedded_tokens": 0,
            "chunks_cached": 0,
            "cached_embedded_tokens": 0,
            "boilerplate_lines_removed": 0,
            "boilerplate_tokens_removed": 0,
            "contents_pages_removed": 0,
            "index_pages_removed": 0,
            "rejects": {},
            "files_skipped": {},
            "chunk_rejects": 0,
            "doc_rejects": 0,
            # --estimate_sample: every matched file's bytes, and per sampled file
            # [bytes, documents, chunks, embedded tokens] (the projection's ratio estimator)
            "matched_files": 0,
            "matched_bytes": 0,
            "sampled_files": {},
            "by_doc_type": {},
            "by_strategy": {},
            "context_sources": {},
            "llm": {
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "requests": 0,
                "cache_hits": 0,
                "fallbacks": 0,
            },
        }

    def add_input(self, acc: dict[str, Any], event: NamedTuple | dict[str, Any]) -> dict[str, Any]:
        if isinstance(event, dict):  # the totals of a stream folded where it was made
            return self.merge_accumulators([acc, event])
        add = _ADD.get(type(event))
        if add is None:
            raise ValueError(f"unknown stat event {event!r}")
        add(acc, event)
        return acc

    def merge_accumulators(self, accs: Iterable[dict[str, Any]]) -> dict[str, Any]:
        accs = list(accs)
        out = accs[0]
        for acc in accs[1:]:
            for key in (
                "documents_in",
                "documents_unchanged",
                "chunks_reused",
                "reused_embedded_tokens",
                "chunks_deduplicated",
                "deduplicated_embedded_tokens",
                "chunks_cached",
                "cached_embedded_tokens",
                "boilerplate_lines_removed",
                "boilerplate_tokens_removed",
                "contents_pages_removed",
                "index_pages_removed",
                "chunk_rejects",
                "doc_rejects",
                "matched_files",
                "matched_bytes",
            ):
                out[key] += acc[key]
            for name, values in acc["sampled_files"].items():
                target = out["sampled_files"].setdefault(name, [0, 0, 0, 0])
                for i, v in enumerate(values):
                    target[i] += v
            for key in ("rejects", "files_skipped", "context_sources", "llm"):
                for k, v in acc[key].items():
                    out[key][k] = out[key].get(k, 0) + v
            for key in ("by_doc_type", "by_strategy", "changes"):
                for name, group in acc[key].items():
                    blank = change_totals() if key == "changes" else group_totals()
                    target = out[key].setdefault(name, blank)
                    for k, v in group.items():
                        target[k] += v
        return out

    def extract_output(self, acc: dict[str, Any]) -> dict[str, Any]:
        return acc


def _count(acc: dict[str, Any], key: str, name: str) -> None:
    acc[key][name] = acc[key].get(name, 0) + 1


def _groups(acc: dict[str, Any], doc_type: str, strategy: str) -> tuple[dict, dict]:
    return (
        acc["by_doc_type"].setdefault(doc_type, group_totals()),
        acc["by_strategy"].setdefault(strategy, group_totals()),
    )


def _add_input(acc: dict[str, Any], event: DocumentIn) -> None:
    acc["documents_in"] += 1
    if event.file:
        _sampled_file(acc, event.file)[1] += 1


def _sampled_file(acc: dict[str, Any], file: str) -> list[int]:
    return acc["sampled_files"].setdefault(file, [0, 0, 0, 0])


def _add_matched(acc: dict[str, Any], event: FileMatched) -> None:
    acc["matched_files"] += 1
    acc["matched_bytes"] += event.size
    if event.sampled:
        _sampled_file(acc, event.file)[0] += event.size


def _add_file_chunk(acc: dict[str, Any], event: FileChunk) -> None:
    values = _sampled_file(acc, event.file)
    values[2] += 1
    values[3] += event.embed_tokens


def _add_unchanged(acc: dict[str, Any], _: DocumentUnchanged) -> None:
    acc["documents_unchanged"] += 1


def _add_reused(acc: dict[str, Any], event: ChunkReused) -> None:
    acc["chunks_reused"] += 1
    acc["reused_embedded_tokens"] += event.embed_tokens


def change_totals() -> dict[str, int]:
    return {"documents": 0, "chunks_added": 0, "chunks_removed": 0, "chunks_updated": 0}


def _add_change(acc: dict[str, Any], event: DocumentChange) -> None:
    totals = acc["changes"].setdefault(event.change, change_totals())
    totals["documents"] += 1
    totals["chunks_added"] += event.chunks_added
    totals["chunks_removed"] += event.chunks_removed
    totals["chunks_updated"] += event.chunks_updated


def _add_cached(acc: dict[str, Any], event: EmbeddingReused) -> None:
    acc["chunks_cached"] += 1
    acc["cached_embedded_tokens"] += event.embed_tokens


def _add_deduplicated(acc: dict[str, Any], event: ChunkDeduplicated) -> None:
    acc["chunks_deduplicated"] += 1
    acc["deduplicated_embedded_tokens"] += event.embed_tokens


def _add_skipped(acc: dict[str, Any], event: FileSkipped) -> None:
    _count(acc, "files_skipped", event.why)


def _add_chunked(acc: dict[str, Any], event: DocumentChunked) -> None:
    for g in _groups(acc, event.doc_type, event.strategy):
        g["documents"] += 1
        g["document_tokens"] += event.doc_tokens
    acc["boilerplate_lines_removed"] += event.boilerplate_lines
    acc["boilerplate_tokens_removed"] += event.boilerplate_tokens
    acc["contents_pages_removed"] += event.contents_pages
    acc["index_pages_removed"] += event.index_pages


def _add_chunk(acc: dict[str, Any], event: ChunkMade) -> None:
    for g in _groups(acc, event.doc_type, event.strategy):
        if event.is_parent:
            g["parent_chunks"] += 1
            continue
        g["chunks"] += 1
        g["text_tokens"] += event.text_tokens
        g["embedded_tokens"] += event.embed_tokens
        g["header_tokens"] += event.header_tokens
        g["chunks_truncated"] += int(event.truncated)
        g["embedding_seconds"] += event.embed_seconds
    if event.context_source and not event.is_parent:
        _count(acc, "context_sources", event.context_source)


def _add_reject(acc: dict[str, Any], event: Rejected) -> None:
    _count(acc, "rejects", f"{event.stage}:{event.reason}")
    acc["chunk_rejects" if event.chunk_level else "doc_rejects"] += 1


def _add_llm(acc: dict[str, Any], event: LLMUsage) -> None:
    for name, value in event._asdict().items():
        acc["llm"][name] += value


_ADD: dict[type, Callable[[dict[str, Any], Any], None]] = {
    DocumentIn: _add_input,
    FileMatched: _add_matched,
    FileChunk: _add_file_chunk,
    DocumentUnchanged: _add_unchanged,
    ChunkReused: _add_reused,
    DocumentChange: _add_change,
    EmbeddingReused: _add_cached,
    ChunkDeduplicated: _add_deduplicated,
    FileSkipped: _add_skipped,
    DocumentChunked: _add_chunked,
    ChunkMade: _add_chunk,
    Rejected: _add_reject,
    LLMUsage: _add_llm,
}
