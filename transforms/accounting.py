"""Cost accounting: token and dollar totals per doc type and strategy, as one global combine.

Every stage emits small stat events; `CostReportFn` folds them into one report, which is
written (JSON and Markdown) after the data, and the run manifest last.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from schemas.records import Chunk, Document, Reject

# Stat events (tuples keep the shuffle small).
INPUT = "input"  # ("input",)
DOC = "doc"  # ("doc", doc_type, strategy, doc_tokens, boilerplate_lines, boilerplate_tokens)
CHUNK = "chunk"  # ("chunk", doc_type, strategy, text_tokens, embed_tokens, header_tokens,
#                    is_parent, truncated, embed_seconds, context_source)
REJECT = "reject"  # ("reject", stage, reason, chunk_level)
LLM = "llm"  # ("llm", prompt_tokens, completion_tokens, requests, cache_hits)
UNCHANGED = "unchanged"  # ("unchanged", doc_type): chunks reused from --previous_output
REUSED = "reused"  # ("reused", embed_tokens) one chunk row copied from --previous_output
REMOVED = "removed"  # ("removed",) a document of the previous run no longer in the input
SKIPPED = "skipped"  # ("skipped", why) a matched file not read: "hidden" or "output_folder"
# ("deduplicated", embed_tokens) a chunk whose embedded text (header and text) another chunk of
# the run has too: the model read it once, and both got that vector
DEDUPLICATED = "deduplicated"


@dataclass(frozen=True)
class Pricing:
    price_per_million_tokens: float = 0.02
    llm_price_in: float = 0.0
    llm_price_out: float = 0.0
    sample_fraction: float = 1.0  # --estimate_sample: the report projects the whole corpus


def doc_event(doc: Document, strategy: str, doc_tokens: int) -> tuple:
    return (
        DOC,
        doc.doc_type,
        strategy,
        doc_tokens,
        doc.boilerplate_lines_removed,
        doc.boilerplate_tokens_removed,
    )


def chunk_event(chunk: Chunk, truncated: bool = False, embed_seconds: float = 0.0) -> tuple:
    return (
        CHUNK,
        chunk.doc_type,
        chunk.strategy,
        chunk.token_count,
        chunk.embed_tokens,
        chunk.context_tokens,
        chunk.is_parent,
        truncated,
        embed_seconds,
        chunk.context_source,
    )


def llm_event(chunk: Chunk) -> tuple | None:
    if chunk.llm_usage is None:
        return None
    return (LLM, *chunk.llm_usage)


def reject_event(reject: Reject) -> tuple:
    return (REJECT, reject.stage, reject.reason, reject.chunk_id is not None)


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
            "documents_removed": 0,
            "chunks_reused": 0,
            "reused_embedded_tokens": 0,
            "chunks_deduplicated": 0,
            "deduplicated_embedded_tokens": 0,
            "boilerplate_lines_removed": 0,
            "boilerplate_tokens_removed": 0,
            "rejects": {},
            "files_skipped": {},
            "chunk_rejects": 0,
            "doc_rejects": 0,
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

    def add_input(self, acc: dict[str, Any], event: tuple | dict[str, Any]) -> dict[str, Any]:
        if isinstance(event, dict):  # the totals of a stream folded where it was made
            return self.merge_accumulators([acc, event])
        kind = event[0]
        if kind == INPUT:
            acc["documents_in"] += 1
        elif kind == UNCHANGED:
            acc["documents_unchanged"] += 1
        elif kind == REUSED:
            acc["chunks_reused"] += 1
            acc["reused_embedded_tokens"] += event[1]
        elif kind == REMOVED:
            acc["documents_removed"] += 1
        elif kind == DEDUPLICATED:
            acc["chunks_deduplicated"] += 1
            acc["deduplicated_embedded_tokens"] += event[1]
        elif kind == SKIPPED:
            acc["files_skipped"][event[1]] = acc["files_skipped"].get(event[1], 0) + 1
        elif kind == DOC:
            for g in (
                acc["by_doc_type"].setdefault(event[1], _group()),
                acc["by_strategy"].setdefault(event[2], _group()),
            ):
                g["documents"] += 1
                g["document_tokens"] += event[3]
            acc["boilerplate_lines_removed"] += event[4]
            acc["boilerplate_tokens_removed"] += event[5]
        elif kind == CHUNK:
            (_, doc_type, strategy, text_t, embed_t, header_t, is_parent, trunc, secs, ctx) = event
            for g in (
                acc["by_doc_type"].setdefault(doc_type, _group()),
                acc["by_strategy"].setdefault(strategy, _group()),
            ):
                if is_parent:
                    g["parent_chunks"] += 1
                    continue
                g["chunks"] += 1
                g["text_tokens"] += text_t
                g["embedded_tokens"] += embed_t
                g["header_tokens"] += header_t
                g["chunks_truncated"] += int(trunc)
                g["embedding_seconds"] += secs
            if ctx and not is_parent:
                acc["context_sources"][ctx] = acc["context_sources"].get(ctx, 0) + 1
        elif kind == REJECT:
            key = f"{event[1]}:{event[2]}"
            acc["rejects"][key] = acc["rejects"].get(key, 0) + 1
            acc["chunk_rejects" if event[3] else "doc_rejects"] += 1
        elif kind == LLM:
            for name, value in zip(
                ("prompt_tokens", "completion_tokens", "requests", "cache_hits"),
                event[1:],
                strict=True,
            ):
                acc["llm"][name] += value
        else:
            raise ValueError(f"unknown stat event {event!r}")
        return acc

    def merge_accumulators(self, accs: Iterable[dict[str, Any]]) -> dict[str, Any]:
        accs = list(accs)
        out = accs[0]
        for acc in accs[1:]:
            for key in (
                "documents_in",
                "documents_unchanged",
                "documents_removed",
                "chunks_reused",
                "reused_embedded_tokens",
                "chunks_deduplicated",
                "deduplicated_embedded_tokens",
                "boilerplate_lines_removed",
                "boilerplate_tokens_removed",
                "chunk_rejects",
                "doc_rejects",
            ):
                out[key] += acc[key]
            for key in ("rejects", "files_skipped", "context_sources", "llm"):
                for k, v in acc[key].items():
                    out[key][k] = out[key].get(k, 0) + v
            for key in ("by_doc_type", "by_strategy"):
                for name, group in acc[key].items():
                    target = out[key].setdefault(name, _group())
                    for k, v in group.items():
                        target[k] += v
        return out

    def extract_output(self, acc: dict[str, Any]) -> dict[str, Any]:
        return acc


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
    report: dict[str, Any] = {
        "mode": mode,
        "documents_in": acc["documents_in"],
        "documents_chunked": documents_chunked,
        "documents_unchanged": acc["documents_unchanged"],
        "documents_rejected": acc["doc_rejects"],
        "documents_removed": acc["documents_removed"],
        "chunks": int(totals["chunks"]),
        "parent_chunks": int(totals["parent_chunks"]),
        "chunks_reused": acc["chunks_reused"],
        "chunks_rejected": acc["chunk_rejects"],
        # Embedded by the vector of an identical embedded text (not read by the model again).
        "chunks_deduplicated": acc["chunks_deduplicated"],
        "deduplicated_embedded_tokens": acc["deduplicated_embedded_tokens"],
        "document_tokens": int(totals["document_tokens"]),
        "boilerplate_lines_removed": acc["boilerplate_lines_removed"],
        "boilerplate_tokens_removed": acc["boilerplate_tokens_removed"],
        "text_tokens": int(totals["text_tokens"]),
        "embedded_tokens": int(totals["embedded_tokens"]),
        "header_tokens": int(totals["header_tokens"]),
        "overlap_inflation": total["overlap_inflation"],
        "chunks_truncated": int(totals["chunks_truncated"]),
        "embedding_seconds": total["embedding_seconds"],
        "price_per_million_tokens": pricing.price_per_million_tokens,
        "cost_usd": total["cost_usd"],
        "cost_per_document_usd": total["cost_usd"] / documents_chunked if documents_chunked else 0,
        # Changing chunk size or overlap means embedding everything again, the chunks reused
        # from a previous run included: this is that bill.
        "rechunk_cost_usd": (totals["embedded_tokens"] + acc["reused_embedded_tokens"])
        * pricing.price_per_million_tokens
        / 1e6,
        "llm_context": llm,
        "total_cost_usd": total["cost_usd"] + llm["cost_usd"],
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
        factor = 1.0 / pricing.sample_fraction
        report["projection"] = {
            "sample_fraction": pricing.sample_fraction,
            "documents": round(report["documents_in"] * factor),
            "chunks": round(report["chunks"] * factor),
            "embedded_tokens": round(report["embedded_tokens"] * factor),
            "cost_usd": report["cost_usd"] * factor,
        }
    return report


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
        f"- document tokens: {report['document_tokens']:,}; embedded tokens: "
        f"{report['embedded_tokens']:,} (headers {report['header_tokens']:,}); overlap inflation "
        f"{report['overlap_inflation']}",
        f"- boilerplate removed: {report['boilerplate_lines_removed']:,} lines, "
        f"{report['boilerplate_tokens_removed']:,} tokens",
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
            f"{p['embedded_tokens']:,} tokens, ${p['cost_usd']:.4f}",
            "",
        ]
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


class _WriteReport(beam.DoFn):
    def __init__(self, output: str, pricing: Pricing, mode: str) -> None:
        self.output = output
        self.pricing = pricing
        self.mode = mode

    def process(self, acc: dict[str, Any], written_files: list[str]) -> Iterator[dict]:
        report = build_report(acc, self.pricing, self.mode)
        report["files_written"] = len(written_files)
        write_text(FileSystems.join(self.output, "cost_report.json"), json.dumps(report, indent=2))
        write_text(FileSystems.join(self.output, "cost_report.md"), report_markdown(report))
        yield report


class _WriteManifest(beam.DoFn):
    def __init__(self, output: str, manifest: dict[str, Any]) -> None:
        self.output = output
        self.manifest = manifest

    def process(self, report: dict[str, Any]) -> Iterator[str]:
        import datetime

        manifest = dict(self.manifest)
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
        write_text(path, json.dumps(manifest, indent=2, sort_keys=True))
        yield path


class Account(beam.PTransform):
    """Stat events -> cost_report.{json,md} after the data files, then run_manifest.json."""

    def __init__(self, output: str, pricing: Pricing, mode: str, manifest: dict[str, Any]) -> None:
        super().__init__()
        self.output = output
        self.pricing = pricing
        self.mode = mode
        self.manifest = manifest

    def expand(self, inputs: tuple[beam.PCollection, beam.PCollection]) -> beam.PCollection:
        events, written = inputs
        totals = events | "Total stats" >> beam.CombineGlobally(CostReportFn())
        written_list = beam.pvalue.AsList(written)
        report = totals | "Write cost report" >> beam.ParDo(
            _WriteReport(self.output, self.pricing, self.mode), written_list
        )
        return report | "Write manifest" >> beam.ParDo(_WriteManifest(self.output, self.manifest))
