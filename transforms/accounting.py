"""Cost accounting: token and dollar totals per doc type and strategy, as one global combine.

Every stage emits small stat events; `CostReportFn` folds them into one report, which is
written (JSON and Markdown) after the data, and the run manifest last.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from schemas.columns import CHANGE_KINDS, KEPT
from schemas.records import Chunk, Document, Reject

# Stat events: small typed records (tuples underneath, so the shuffle stays small), one type
# per thing that happened; `CostReportFn` dispatches on the type.


class DocumentIn(NamedTuple):
    """One input document (a file or a JSONL record), read or rejected at the read stage.

    `file`: the file it came from, given only on an --estimate_sample run (the projection
    counts each sampled file's documents)."""

    file: str = ""


class FileMatched(NamedTuple):
    """On an --estimate_sample run: a file the inputs matched that the job would read, with
    its size on disk and whether the sample reads it."""

    file: str
    size: int
    sampled: bool


class FileChunk(NamedTuple):
    """On an --estimate_sample run: one embedded chunk of a file the sample read."""

    file: str
    embed_tokens: int


class DocumentChunked(NamedTuple):
    doc_type: str
    strategy: str
    doc_tokens: int  # in the pricing tokenizer
    boilerplate_lines: int
    boilerplate_tokens: int
    contents_pages: int = 0  # a PDF's contents pages left out of its text
    index_pages: int = 0  # and its back-of-book index pages


class ChunkMade(NamedTuple):
    doc_type: str
    strategy: str
    text_tokens: int
    embed_tokens: int
    header_tokens: int
    is_parent: bool
    truncated: bool  # longer than the model reads
    embed_seconds: float
    context_source: str | None


class Rejected(NamedTuple):
    stage: str
    reason: str
    chunk_level: bool  # one chunk of a document (embedding), not a whole document


class LLMUsage(NamedTuple):
    prompt_tokens: int
    completion_tokens: int
    requests: int
    cache_hits: int


class DocumentUnchanged(NamedTuple):
    """A document whose chunks are reused from --previous_output."""

    doc_type: str


class ChunkReused(NamedTuple):
    """One chunk row copied from --previous_output."""

    embed_tokens: int


class DocumentChange(NamedTuple):
    """One row of changes/: what became of a document since --previous_output."""

    change: str  # schemas.columns.CHANGE_KINDS
    chunks_added: int
    chunks_removed: int
    chunks_updated: int = 0


class EmbeddingReused(NamedTuple):
    """A chunk whose vector came from the embedding cache (an earlier run's vector of exactly
    the same embedded text, by the same model), so the model did not read it."""

    embed_tokens: int


class ChunkDeduplicated(NamedTuple):
    """A chunk whose embedded text (header and text) another chunk of the run has too: the
    model read it once, and both got that vector."""

    embed_tokens: int


class FileSkipped(NamedTuple):
    """A matched file not read, by rule."""

    why: str  # "hidden" or "output_folder"


@dataclass(frozen=True)
class Pricing:
    price_per_million_tokens: float = 0.02
    llm_price_in: float = 0.0
    llm_price_out: float = 0.0
    sample_fraction: float = 1.0  # --estimate_sample: the report projects the whole corpus

    def __post_init__(self) -> None:
        # The LLM prices are checked with the rest of the LLM flags (ContextConfig).
        if self.price_per_million_tokens < 0:
            raise ValueError(
                f"--price_per_million_tokens must be >= 0, got {self.price_per_million_tokens}"
            )


def doc_event(doc: Document, strategy: str, doc_tokens: int) -> DocumentChunked:
    return DocumentChunked(
        doc.doc_type,
        strategy,
        doc_tokens,
        doc.boilerplate_lines_removed,
        doc.boilerplate_tokens_removed,
        doc.contents_pages_removed,
        doc.index_pages_removed,
    )


def file_of(source: str) -> str:
    """The file a document or chunk came from: its source less a JSONL record's "#L<line>"."""
    path, sep, line = source.rpartition("#L")
    return path if sep and line.isdigit() else source


def chunk_events(
    chunk: Chunk, max_seq_length: int | None, per_file: bool = False
) -> Iterator[ChunkMade | LLMUsage | FileChunk]:
    """What one written chunk costs: its tokens, and the LLM call of its context line;
    `per_file` (an --estimate_sample run): also its tokens against its file."""
    truncated = bool(max_seq_length and (chunk.model_tokens or 0) > max_seq_length)
    yield ChunkMade(
        chunk.doc_type,
        chunk.strategy,
        chunk.token_count,
        chunk.embed_tokens,
        chunk.context_tokens,
        chunk.is_parent,
        truncated,
        chunk.embed_seconds,
        chunk.context_source,
    )
    if chunk.llm_usage is not None:
        yield LLMUsage(*chunk.llm_usage)
    if per_file and not chunk.is_parent:
        yield FileChunk(file_of(chunk.source), chunk.embed_tokens)


def reject_event(reject: Reject) -> Rejected:
    return Rejected(reject.stage, reject.reason, reject.chunk_id is not None)


def _group() -> dict[str, float]:
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
                    blank = _change_totals() if key == "changes" else _group()
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
        acc["by_doc_type"].setdefault(doc_type, _group()),
        acc["by_strategy"].setdefault(strategy, _group()),
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


def _change_totals() -> dict[str, int]:
    return {"documents": 0, "chunks_added": 0, "chunks_removed": 0, "chunks_updated": 0}


def _add_change(acc: dict[str, Any], event: DocumentChange) -> None:
    totals = acc["changes"].setdefault(event.change, _change_totals())
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


def _finish_group(g: dict[str, float], pricing: Pricing) -> dict[str, Any]:
    out = dict(g)
    out["overlap_inflation"] = (
        round(g["embedded_tokens"] / g["document_tokens"], 4) if g["document_tokens"] else None
    )
    out["cost_usd"] = g["embedded_tokens"] * pricing.price_per_million_tokens / 1e6
    out["embedding_seconds"] = round(g["embedding_seconds"], 3)
    return out


def build_report(acc: dict[str, Any], pricing: Pricing, mode: str) -> dict[str, Any]:
    """The cost report from the combined totals: counts, tokens, inflation and dollars."""
    totals = _group()
    for g in acc["by_doc_type"].values():
        for k, v in g.items():
            totals[k] += v
    total = _finish_group(totals, pricing)
    documents_chunked = int(totals["documents"])
    llm = dict(acc["llm"])
    llm["fallbacks"] = acc["context_sources"].get("path_fallback", 0)
    llm["cost_usd"] = (
        llm["prompt_tokens"] * pricing.llm_price_in
        + llm["completion_tokens"] * pricing.llm_price_out
    ) / 1e6
    model_read = int(totals["embedded_tokens"]) - (
        acc["cached_embedded_tokens"] + acc["deduplicated_embedded_tokens"]
    )
    reused = (
        acc["reused_embedded_tokens"]
        + acc["cached_embedded_tokens"]
        + acc["deduplicated_embedded_tokens"]
    )
    # The embedding bill: what the model read (an --estimate, which embeds nothing, prices
    # every token it would embed).
    cost = model_read * pricing.price_per_million_tokens / 1e6
    report: dict[str, Any] = {
        "mode": mode,
        "documents_in": acc["documents_in"],
        "documents_chunked": documents_chunked,
        "documents_unchanged": acc["documents_unchanged"],
        "documents_rejected": acc["doc_rejects"],
        "documents_removed": acc["changes"].get("removed", {}).get("documents", 0),
        "chunks": int(totals["chunks"]),
        "parent_chunks": int(totals["parent_chunks"]),
        "chunks_reused": acc["chunks_reused"],
        "reused_embedded_tokens": acc["reused_embedded_tokens"],
        "chunks_rejected": acc["chunk_rejects"],
        # Embedded by the vector of an identical embedded text (not read by the model again).
        "chunks_deduplicated": acc["chunks_deduplicated"],
        "deduplicated_embedded_tokens": acc["deduplicated_embedded_tokens"],
        # Embedded by a vector from the embedding cache (the previous run's, --embedding_cache).
        "chunks_cached": acc["chunks_cached"],
        "cached_embedded_tokens": acc["cached_embedded_tokens"],
        "document_tokens": int(totals["document_tokens"]),
        "boilerplate_lines_removed": acc["boilerplate_lines_removed"],
        "boilerplate_tokens_removed": acc["boilerplate_tokens_removed"],
        # PDF pages whose text was left out: tables of contents and back-of-book indexes
        "contents_pages_removed": acc["contents_pages_removed"],
        "index_pages_removed": acc["index_pages_removed"],
        "text_tokens": int(totals["text_tokens"]),
        "embedded_tokens": int(totals["embedded_tokens"]),
        # What the model read: the new chunks' tokens less the cached and deduplicated ones.
        "model_read_tokens": model_read,
        # Not read again: chunks of unchanged documents, cached and deduplicated texts.
        "reused_tokens": reused,
        "header_tokens": int(totals["header_tokens"]),
        "overlap_inflation": total["overlap_inflation"],
        "chunks_truncated": int(totals["chunks_truncated"]),
        "embedding_seconds": total["embedding_seconds"],
        "price_per_million_tokens": pricing.price_per_million_tokens,
        "cost_usd": cost,
        "saved_usd": reused * pricing.price_per_million_tokens / 1e6,
        "cost_per_document_usd": cost / documents_chunked if documents_chunked else 0,
        # Changing chunk size or overlap means embedding everything again, the chunks reused
        # from a previous run included: this is that bill.
        "rechunk_cost_usd": (totals["embedded_tokens"] + acc["reused_embedded_tokens"])
        * pricing.price_per_million_tokens
        / 1e6,
        "llm_context": llm,
        "total_cost_usd": cost + llm["cost_usd"],
        "changes": {k: acc["changes"][k] for k in CHANGE_KINDS if k in acc["changes"]},
        "context_sources": dict(sorted(acc["context_sources"].items())),
        "rejects": dict(sorted(acc["rejects"].items())),
        # matched by --input but not read, by rule: not documents, so not in documents_in
        "files_skipped": dict(sorted(acc["files_skipped"].items())),
        "by_doc_type": {
            k: _finish_group(v, pricing) for k, v in sorted(acc["by_doc_type"].items())
        },
        "by_strategy": {
            k: _finish_group(v, pricing) for k, v in sorted(acc["by_strategy"].items())
        },
    }
    report["balanced"] = (
        report["documents_in"]
        == report["documents_chunked"]
        + report["documents_rejected"]
        + report["documents_unchanged"]
    )
    if pricing.sample_fraction < 1.0:
        report["projection"] = project_sample(acc, report, pricing)
    return report


def change_lines(report: dict[str, Any], prefix: str) -> list[str]:
    """'since --previous_output: 2 added (+9 chunks), ...', from the report's `changes`; none
    for a run that had no previous output (every document added)."""
    changes = report.get("changes") or {}
    if not report.get("previous_output"):
        return []
    parts = []
    for kind in CHANGE_KINDS:
        c = changes.get(kind, _change_totals())
        if kind == KEPT and not c["documents"]:
            continue  # rare: said only when it happened
        delta = []
        if c["chunks_added"]:
            delta.append(f"+{c['chunks_added']:,}")
        if c["chunks_removed"]:
            delta.append(f"-{c['chunks_removed']:,}")
        note = "/".join(delta) + " chunks" if delta else ""
        if c.get("chunks_updated"):
            note += (", " if note else "") + f"{c['chunks_updated']:,} updated in place"
        if kind == KEPT:
            note = "rejected this time; the previous run's text and chunks carried over"
        note = f" ({note})" if note else ""
        parts.append(f"{c['documents']:,} {kind}{note}")
    return [f"{prefix}since --previous_output: " + ", ".join(parts)]


Z_95 = 1.959964  # the normal quantile of a two-sided 95% interval


def _ratio_total(
    ys: Sequence[float], xs: Sequence[float], x_total: float, files: int
) -> tuple[float, float]:
    """(estimate, standard error) of a population total of y from a sample of `files` files,
    by the ratio estimator against the auxiliary x, whose population total is `x_total`:
    Y = X * sum(y) / sum(x), Var = N^2 (1 - n/N) / n * s_e^2 with e = y - R x (Cochran,
    Sampling Techniques, 6.9)."""
    n = len(ys)
    r = sum(ys) / sum(xs)
    if n < 2:
        return r * x_total, math.nan
    s2 = sum((y - r * x) ** 2 for y, x in zip(ys, xs, strict=True)) / (n - 1)
    fpc = max(0.0, 1.0 - n / files) if files else 0.0
    return r * x_total, files * math.sqrt(fpc * s2 / n)


def project_sample(acc: dict[str, Any], report: dict[str, Any], pricing: Pricing) -> dict[str, Any]:
    """The whole corpus projected from an --estimate_sample run, with 95% intervals.

    Documents are projected from the files matched (documents per file; a file is one
    document unless it is JSONL), chunks and embedded tokens (and so dollars) from the bytes
    matched (tokens per byte): each a ratio estimator over the sampled files, its interval
    the estimate +- 1.96 standard errors from the files' spread around the ratio, and never
    below what the sample itself holds. Without file sizes (events from an older stage) it
    falls back to 1/--estimate_sample, with no interval.
    """
    fraction = pricing.sample_fraction
    files = acc.get("sampled_files", {})
    matched_files, matched_bytes = acc.get("matched_files", 0), acc.get("matched_bytes", 0)
    sampled = [files[name] for name in sorted(files)]
    sampled_bytes = sum(v[0] for v in sampled)
    out: dict[str, Any] = {"sample_fraction": fraction}
    observed = {
        "documents": report["documents_in"],
        "chunks": report["chunks"],
        "embedded_tokens": report["embedded_tokens"],
    }
    if not matched_files or not sampled:
        factor = 1.0 / fraction
        out["method"] = "1/sample"
        out.update({k: round(v * factor) for k, v in observed.items()})
        out["cost_usd"] = report["cost_usd"] * factor
        out["interval_95"] = None
        return out
    out.update(
        method="ratio to files (documents) and to bytes (chunks, tokens, dollars)",
        files_matched=matched_files,
        files_sampled=len(sampled),
        bytes_matched=matched_bytes,
        bytes_sampled=sampled_bytes,
    )
    ones = [1] * len(sampled)
    estimates = {
        "documents": _ratio_total([v[1] for v in sampled], ones, matched_files, matched_files)
    }
    for key, i in (("chunks", 2), ("embedded_tokens", 3)):
        ys = [v[i] for v in sampled]
        if sampled_bytes:
            estimates[key] = _ratio_total(ys, [v[0] for v in sampled], matched_bytes, matched_files)
        else:  # only empty files sampled: per file instead
            estimates[key] = _ratio_total(ys, ones, matched_files, matched_files)
    interval: dict[str, list[float]] | None = {}
    for key, (value, se) in estimates.items():
        out[key] = round(value)
        if math.isnan(se):
            interval = None
        elif interval is not None:
            interval[key] = [round(max(observed[key], value - Z_95 * se)), round(value + Z_95 * se)]
    price = pricing.price_per_million_tokens / 1e6
    out["cost_usd"] = out["embedded_tokens"] * price
    if interval is not None:
        interval["cost_usd"] = [t * price for t in interval["embedded_tokens"]]
    out["interval_95"] = interval  # None: fewer than two files sampled
    return out


def projection_text(p: dict[str, Any]) -> str:
    """'$X (95% interval $A–$B)', or '$X' when there is no interval."""
    text = f"${p['cost_usd']:.4f}"
    if p.get("interval_95"):
        low, high = p["interval_95"]["cost_usd"]
        text += f" (95% interval ${low:.4f}–${high:.4f})"
    return text


def report_markdown(report: dict[str, Any]) -> str:
    """A readable cost_report.md."""
    lines = [
        f"# Cost report ({report['mode']})",
        "",
        f"- documents in: {report['documents_in']} = chunked {report['documents_chunked']}"
        f" + rejected {report['documents_rejected']} + unchanged {report['documents_unchanged']}",
        f"- chunks: {report['chunks']} new, {report['chunks_reused']} reused from the previous "
        f"run (parents {report['parent_chunks']}, "
        f"rejected {report['chunks_rejected']}, truncated by the model "
        f"{report['chunks_truncated']})",
        f"- identical embedded texts: {report['chunks_deduplicated']} chunks took the vector of "
        f"another chunk with the same header and text ({report['deduplicated_embedded_tokens']:,} "
        "tokens the model did not read again)",
        *change_lines(report, "- "),
        f"- embedding: the model read {report['model_read_tokens']:,} tokens; "
        f"{report['reused_tokens']:,} reused (unchanged documents "
        f"{report['reused_embedded_tokens']:,}, embedding cache "
        f"{report['cached_embedded_tokens']:,} in {report['chunks_cached']} chunks, identical "
        f"texts {report['deduplicated_embedded_tokens']:,}), saving ${report['saved_usd']:.6f}",
        f"- document tokens: {report['document_tokens']:,}; embedded tokens: "
        f"{report['embedded_tokens']:,} (headers {report['header_tokens']:,}); overlap inflation "
        f"{report['overlap_inflation']}",
        f"- boilerplate removed: {report['boilerplate_lines_removed']:,} lines, "
        f"{report['boilerplate_tokens_removed']:,} tokens",
        f"- PDF pages left out: {report.get('contents_pages_removed', 0):,} of contents, "
        f"{report.get('index_pages_removed', 0):,} of back-of-book index",
        "- files matched but not read: "
        + (
            ", ".join(f"{n} {why}" for why, n in report["files_skipped"].items())
            if report.get("files_skipped")
            else "none"
        ),
        f"- embedding cost: ${report['cost_usd']:.6f} at ${report['price_per_million_tokens']} "
        f"per million tokens; re-chunking the corpus costs the same again",
        f"- LLM context: {report['llm_context']['prompt_tokens']:,} prompt + "
        f"{report['llm_context']['completion_tokens']:,} completion tokens, "
        f"${report['llm_context']['cost_usd']:.6f}",
        f"- total: ${report['total_cost_usd']:.6f}",
        "",
    ]
    if "projection" in report:
        p = report["projection"]
        lines += [
            f"Projected for the whole corpus (sample {p['sample_fraction']}): "
            f"{p['documents']:,} documents, {p['chunks']:,} chunks, "
            f"{p['embedded_tokens']:,} tokens, {projection_text(p)}",
            "",
        ]
        if p.get("files_matched"):
            lines += [
                f"From {p['files_sampled']:,} of {p['files_matched']:,} files "
                f"({p['bytes_sampled']:,} of {p['bytes_matched']:,} bytes): documents per "
                "file matched, chunks and tokens per byte matched (ratio estimators).",
                "",
            ]
        if p.get("interval_95"):
            lines += ["| projected | estimate | 95% interval |", "|---|---:|---:|"]
            for key in ("documents", "chunks", "embedded_tokens"):
                low, high = p["interval_95"][key]
                lines.append(f"| {key} | {p[key]:,} | {low:,}–{high:,} |")
            lines.append("")
    for title, key in (("doc type", "by_doc_type"), ("strategy", "by_strategy")):
        lines += [
            f"| {title} | docs | chunks | doc tokens | embedded | headers | inflation | "
            "truncated | embed s | USD |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, g in report[key].items():
            lines.append(
                f"| {name} | {int(g['documents'])} | {int(g['chunks'])} | "
                f"{int(g['document_tokens']):,} | {int(g['embedded_tokens']):,} | "
                f"{int(g['header_tokens']):,} | {g['overlap_inflation']} | "
                f"{int(g['chunks_truncated'])} | {g['embedding_seconds']} | {g['cost_usd']:.6f} |"
            )
        lines.append("")
    if report["rejects"]:
        lines += ["| rejected at stage:reason | count |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in report["rejects"].items()]
        lines.append("")
    return "\n".join(lines)


def write_text(path: str, text: str) -> None:
    with FileSystems.create(path) as f:
        f.write(text.encode("utf-8"))


def write_text_atomically(path: str, text: str) -> None:
    """Write `path` so that a reader sees the old file, no file, or the whole new one: the text
    goes to a temporary name beside it, then is renamed over it."""
    tmp = f"{path}.tmp-{os.getpid()}-{time.time_ns()}"
    write_text(tmp, text)
    if "://" not in path:
        os.replace(tmp, path)  # atomic on a local filesystem, over an existing file too
        return
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([tmp], [path])  # an object store shows the object whole, or not


def file_inventory(output: str, paths: Iterable[str]) -> dict[str, dict[str, Any]]:
    """{path relative to `output`: {bytes, sha256}} of each file, read back as written."""
    inventory = {}
    root = output.rstrip("/") + "/"
    for path in sorted(set(paths)):
        digest, size = hashlib.sha256(), 0
        with FileSystems.open(path) as f:
            while block := f.read(1 << 20):
                digest.update(block)
                size += len(block)
        name = path[len(root) :] if path.startswith(root) else path
        inventory[name] = {"bytes": size, "sha256": digest.hexdigest()}
    return inventory


class _WriteReport(beam.DoFn):
    def __init__(
        self, output: str, pricing: Pricing, mode: str, previous_output: str | None = None
    ) -> None:
        self.output = output
        self.pricing = pricing
        self.mode = mode
        self.previous_output = previous_output

    def process(self, acc: dict[str, Any], written_files: list[str]) -> Iterator[dict]:
        report = build_report(acc, self.pricing, self.mode)
        report["previous_output"] = self.previous_output
        report["files_written"] = len(written_files)
        write_text(FileSystems.join(self.output, "cost_report.json"), json.dumps(report, indent=2))
        write_text(FileSystems.join(self.output, "cost_report.md"), report_markdown(report))
        yield report


class _WriteManifest(beam.DoFn):
    def __init__(self, output: str, manifest: dict[str, Any]) -> None:
        self.output = output
        self.manifest = manifest

    def process(self, report: dict[str, Any], written_files: list[str]) -> Iterator[str]:
        manifest = dict(self.manifest)
        # Every file of the run with its size and hash: a later run reuses exactly these, and
        # checks them first (transforms/incremental.py).
        reports = [FileSystems.join(self.output, n) for n in ("cost_report.json", "cost_report.md")]
        manifest["files"] = file_inventory(self.output, [*written_files, *reports])
        manifest["finished_at"] = datetime.datetime.now(datetime.UTC).isoformat()
        manifest["counts"] = {
            k: report[k]
            for k in (
                "documents_in",
                "documents_chunked",
                "documents_rejected",
                "documents_unchanged",
                "chunks",
                "chunks_rejected",
                "embedded_tokens",
                "cost_usd",
            )
        }
        path = FileSystems.join(self.output, "run_manifest.json")
        write_text_atomically(path, json.dumps(manifest, indent=2, sort_keys=True))
        yield path


def run_manifest(
    run_id: str,
    settings: dict[str, Any],
    inputs: Sequence[str],
    output: str,
    estimate: bool,
    previous_output: str | None,
    earlier_runs: Sequence[str] = (),
    previous_run_id: str | None = None,
) -> dict[str, Any]:
    """What run_manifest.json says of the run before it ends (the counts are added last).

    `run_id` names this run (a vector store records the run it holds, so that `load` can tell
    whether changes/ applies to it); `previous_run_id` is the run_id of --previous_output.
    """
    return {
        "run_id": run_id,
        "previous_run_id": previous_run_id,
        "config": settings,
        "config_fingerprint": settings["config_fingerprint"],
        "inputs": list(inputs),
        "earlier_runs_not_read": list(earlier_runs),  # run folders the inputs matched
        "output": output,
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "mode": "estimate" if estimate else "run",
        "previous_output": previous_output,
    }


class AccountInputs(NamedTuple):
    events: beam.PCollection  # the stages' stat events
    chunks: beam.PCollection  # Chunk: every chunk the run writes (parents included)
    rejects: beam.PCollection  # Reject: every reject of the run
    written: beam.PCollection  # str: the data files written


class Account(beam.PTransform):
    """AccountInputs -> cost_report.{json,md} after the data files, then run_manifest.json.

    Each written chunk and each reject is one event; the chunks' events are folded where the
    chunks are made (the combine is lifted into that stage), so only their totals join the
    other events.
    """

    def __init__(
        self,
        output: str,
        pricing: Pricing,
        manifest: dict[str, Any],
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__()
        self.output = output
        self.pricing = pricing
        self.manifest = manifest
        self.max_seq_length = max_seq_length

    def expand(self, inputs: AccountInputs) -> beam.PCollection:
        chunk_totals = (
            inputs.chunks
            | "Chunk events"
            >> beam.FlatMap(chunk_events, self.max_seq_length, self.pricing.sample_fraction < 1.0)
            | "Chunk totals" >> beam.CombineGlobally(CostReportFn())
        )
        events = (
            inputs.events,
            chunk_totals,
            inputs.rejects | "Reject events" >> beam.Map(reject_event),
        ) | "All events" >> beam.Flatten()
        totals = events | "Total stats" >> beam.CombineGlobally(CostReportFn())
        written_list = beam.pvalue.AsList(inputs.written)
        mode = self.manifest["mode"]
        report = totals | "Write cost report" >> beam.ParDo(
            _WriteReport(self.output, self.pricing, mode, self.manifest.get("previous_output")),
            written_list,
        )
        return report | "Write manifest" >> beam.ParDo(
            _WriteManifest(self.output, self.manifest), written_list
        )
