"""The typed cost report: what `build_report` makes of the combined totals, what the job writes
as cost_report.json and .md, and what the summary, `inspect` and `evaluate` read back."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from apache_beam.io.filesystems import FileSystems

from schemas.columns import CHANGE_KINDS, KEPT
from transforms.cost_combine import change_totals, group_totals

REPORT_JSON = "cost_report.json"
REPORT_MARKDOWN = "cost_report.md"


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


# Each report dataclass may say which of its fields hold other report dataclasses
# (`NESTED`: name -> (type, whether an object of them by name)) and which are left out of the
# JSON when None (`OMIT_NONE`).


def _plain(value: Any) -> Any:
    """A report value as JSON holds it: dataclasses as objects of their fields in order, less
    the optional ones that are None."""
    if dataclasses.is_dataclass(value):
        omit = getattr(value, "OMIT_NONE", ())
        return {
            f.name: _plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not (f.name in omit and getattr(value, f.name) is None)
        }
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _typed(cls: type, data: Any, where: str) -> Any:
    """`cls` from its JSON object; ValueError naming `where` and the key that is missing or
    not a field."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}")
    values = {}
    nested_fields = getattr(cls, "NESTED", {})
    for name in fields:
        if name not in data:
            if name in getattr(cls, "OMIT_NONE", ()):
                values[name] = None
                continue
            raise ValueError(f"{where}: missing key {name!r}")
        nested, mapping = nested_fields.get(name, (None, False))
        value = data[name]
        if nested is not None and value is not None:
            if mapping:
                value = {k: _typed(nested, v, f"{where}.{name}.{k}") for k, v in value.items()}
            else:
                value = _typed(nested, value, f"{where}.{name}")
        values[name] = value
    return cls(**values)


@dataclass(frozen=True)
class GroupCost:
    """The totals of one doc type or strategy."""

    documents: int
    chunks: int
    parent_chunks: int
    document_tokens: int
    text_tokens: int
    embedded_tokens: int
    header_tokens: int
    chunks_truncated: int
    embedding_seconds: float
    overlap_inflation: float | None  # embedded / document tokens; None without documents
    cost_usd: float


@dataclass(frozen=True)
class LLMCost:
    """The LLM context lines' calls and their price."""

    prompt_tokens: int
    completion_tokens: int
    requests: int
    cache_hits: int
    fallbacks: int  # chunks whose LLM reply failed: the path header instead
    cost_usd: float


@dataclass(frozen=True)
class ChangeTotals:
    """The documents of one change kind (schemas.columns.CHANGE_KINDS) and their chunks."""

    documents: int
    chunks_added: int
    chunks_removed: int
    chunks_updated: int


@dataclass(frozen=True)
class Projection:
    """An --estimate_sample run's projection of the whole corpus."""

    OMIT_NONE: ClassVar[frozenset[str]] = frozenset(
        {"files_matched", "files_sampled", "bytes_matched", "bytes_sampled"}
    )

    sample_fraction: float
    method: str
    # the ratio estimators' inputs; None (and not in the JSON) for the "1/sample" fallback
    files_matched: int | None = None
    files_sampled: int | None = None
    bytes_matched: int | None = None
    bytes_sampled: int | None = None
    documents: int = 0
    chunks: int = 0
    embedded_tokens: int = 0
    cost_usd: float = 0.0
    # per key (documents, chunks, embedded_tokens, cost_usd): [low, high]; None with fewer
    # than two files sampled
    interval_95: dict[str, list[float]] | None = None

    def text(self) -> str:
        """'$X (95% interval $A–$B)', or '$X' when there is no interval."""
        text = f"${self.cost_usd:.4f}"
        if self.interval_95:
            low, high = self.interval_95["cost_usd"]
            text += f" (95% interval ${low:.4f}–${high:.4f})"
        return text


@dataclass(frozen=True)
class CostReport:
    """cost_report.json: counts, tokens, dollars, rejects, per doc type and strategy.

    The fields are in the order the file holds them; `to_json` and `from_json` round-trip it
    byte for byte (docs/output.md describes each)."""

    NESTED: ClassVar[dict[str, tuple[type, bool]]] = {
        "llm_context": (LLMCost, False),
        "changes": (ChangeTotals, True),
        "by_doc_type": (GroupCost, True),
        "by_strategy": (GroupCost, True),
        "projection": (Projection, False),
    }
    OMIT_NONE: ClassVar[frozenset[str]] = frozenset({"projection"})

    mode: str  # "run" or "estimate"
    documents_in: int
    documents_chunked: int
    documents_unchanged: int
    documents_rejected: int
    documents_removed: int
    chunks: int
    parent_chunks: int
    chunks_reused: int
    reused_embedded_tokens: int
    chunks_rejected: int
    # embedded by the vector of an identical embedded text (not read by the model again)
    chunks_deduplicated: int
    deduplicated_embedded_tokens: int
    # embedded by a vector from the embedding cache (the previous run's, --embedding_cache)
    chunks_cached: int
    cached_embedded_tokens: int
    document_tokens: int
    boilerplate_lines_removed: int
    boilerplate_tokens_removed: int
    # PDF pages whose text was left out: tables of contents and back-of-book indexes
    contents_pages_removed: int
    index_pages_removed: int
    text_tokens: int
    embedded_tokens: int
    model_read_tokens: int  # the new chunks' tokens less the cached and deduplicated ones
    reused_tokens: int  # not read again: unchanged documents', cached and deduplicated texts
    header_tokens: int
    overlap_inflation: float | None
    chunks_truncated: int
    embedding_seconds: float
    price_per_million_tokens: float
    cost_usd: float
    saved_usd: float
    cost_per_document_usd: float
    # changing chunk size or overlap means embedding everything again, the chunks reused from
    # a previous run included: this is that bill
    rechunk_cost_usd: float
    llm_context: LLMCost
    total_cost_usd: float
    changes: dict[str, ChangeTotals]
    context_sources: dict[str, int]
    rejects: dict[str, int]  # "stage:reason" -> count
    # matched by --input but not read, by rule: not documents, so not in documents_in
    files_skipped: dict[str, int]
    by_doc_type: dict[str, GroupCost]
    by_strategy: dict[str, GroupCost]
    balanced: bool  # documents_in == chunked + rejected + unchanged
    projection: Projection | None = None
    previous_output: str | None = None
    files_written: int = 0

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    def to_json(self) -> str:
        """cost_report.json's text."""
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: Any) -> CostReport:
        """The report of a JSON object; ValueError naming a missing or unknown key."""
        return _typed(cls, data, "cost_report.json")

    @classmethod
    def from_json(cls, text: str | bytes) -> CostReport:
        return cls.from_dict(json.loads(text))

    @classmethod
    def read(cls, output: str) -> CostReport | None:
        """The report of the run in `output`; None when it has none."""
        path = FileSystems.join(output, REPORT_JSON)
        if not FileSystems.exists(path):
            return None
        with FileSystems.open(path) as f:
            return cls.from_json(f.read().decode("utf-8"))

    def reject_lines(self, prefix: str) -> list[str]:
        """'rejected at read: invalid_json 1, missing_text 1' per stage."""
        by_stage: dict[str, list[str]] = {}
        for key, n in sorted(self.rejects.items()):
            stage, _, reason = key.partition(":")
            by_stage.setdefault(stage, []).append(f"{reason} {n}")
        return [
            f"{prefix}rejected at {stage}: {', '.join(reasons)}"
            for stage, reasons in by_stage.items()
        ]

    def change_lines(self, prefix: str) -> list[str]:
        """'since --previous_output: 2 added (+9 chunks), ...'; none for a run that had no
        previous output (every document added)."""
        if not self.previous_output:
            return []
        parts = []
        blank = ChangeTotals(**change_totals())
        for kind in CHANGE_KINDS:
            c = self.changes.get(kind, blank)
            if kind == KEPT and not c.documents:
                continue  # rare: said only when it happened
            delta = []
            if c.chunks_added:
                delta.append(f"+{c.chunks_added:,}")
            if c.chunks_removed:
                delta.append(f"-{c.chunks_removed:,}")
            note = "/".join(delta) + " chunks" if delta else ""
            if c.chunks_updated:
                note += (", " if note else "") + f"{c.chunks_updated:,} updated in place"
            if kind == KEPT:
                note = "rejected this time; the previous run's text and chunks carried over"
            note = f" ({note})" if note else ""
            parts.append(f"{c.documents:,} {kind}{note}")
        return [f"{prefix}since --previous_output: " + ", ".join(parts)]

    def markdown(self) -> str:
        """cost_report.md's text."""
        r = self
        lines = [
            f"# Cost report ({r.mode})",
            "",
            f"- documents in: {r.documents_in} = chunked {r.documents_chunked}"
            f" + rejected {r.documents_rejected} + unchanged {r.documents_unchanged}",
            f"- chunks: {r.chunks} new, {r.chunks_reused} reused from the previous "
            f"run (parents {r.parent_chunks}, "
            f"rejected {r.chunks_rejected}, truncated by the model "
            f"{r.chunks_truncated})",
            f"- identical embedded texts: {r.chunks_deduplicated} chunks took the vector of "
            f"another chunk with the same header and text ({r.deduplicated_embedded_tokens:,} "
            "tokens the model did not read again)",
            *r.change_lines("- "),
            f"- embedding: the model read {r.model_read_tokens:,} tokens; "
            f"{r.reused_tokens:,} reused (unchanged documents "
            f"{r.reused_embedded_tokens:,}, embedding cache "
            f"{r.cached_embedded_tokens:,} in {r.chunks_cached} chunks, identical "
            f"texts {r.deduplicated_embedded_tokens:,}), saving ${r.saved_usd:.6f}",
            f"- document tokens: {r.document_tokens:,}; embedded tokens: "
            f"{r.embedded_tokens:,} (headers {r.header_tokens:,}); overlap inflation "
            f"{r.overlap_inflation}",
            f"- boilerplate removed: {r.boilerplate_lines_removed:,} lines, "
            f"{r.boilerplate_tokens_removed:,} tokens",
            f"- PDF pages left out: {r.contents_pages_removed:,} of contents, "
            f"{r.index_pages_removed:,} of back-of-book index",
            "- files matched but not read: "
            + (
                ", ".join(f"{n} {why}" for why, n in r.files_skipped.items())
                if r.files_skipped
                else "none"
            ),
            f"- embedding cost: ${r.cost_usd:.6f} at ${r.price_per_million_tokens} "
            f"per million tokens; re-chunking the corpus costs the same again",
            f"- LLM context: {r.llm_context.prompt_tokens:,} prompt + "
            f"{r.llm_context.completion_tokens:,} completion tokens, "
            f"${r.llm_context.cost_usd:.6f}",
            f"- total: ${r.total_cost_usd:.6f}",
            "",
        ]
        p = r.projection
        if p is not None:
            lines += [
                f"Projected for the whole corpus (sample {p.sample_fraction}): "
                f"{p.documents:,} documents, {p.chunks:,} chunks, "
                f"{p.embedded_tokens:,} tokens, {p.text()}",
                "",
            ]
            if p.files_matched:
                lines += [
                    f"From {p.files_sampled:,} of {p.files_matched:,} files "
                    f"({p.bytes_sampled:,} of {p.bytes_matched:,} bytes): documents per "
                    "file matched, chunks and tokens per byte matched (ratio estimators).",
                    "",
                ]
            if p.interval_95:
                lines += ["| projected | estimate | 95% interval |", "|---|---:|---:|"]
                for key in ("documents", "chunks", "embedded_tokens"):
                    low, high = p.interval_95[key]
                    lines.append(f"| {key} | {getattr(p, key):,} | {low:,}–{high:,} |")
                lines.append("")
        for title, groups in (("doc type", r.by_doc_type), ("strategy", r.by_strategy)):
            lines += [
                f"| {title} | docs | chunks | doc tokens | embedded | headers | inflation | "
                "truncated | embed s | USD |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for name, g in groups.items():
                lines.append(
                    f"| {name} | {int(g.documents)} | {int(g.chunks)} | "
                    f"{int(g.document_tokens):,} | {int(g.embedded_tokens):,} | "
                    f"{int(g.header_tokens):,} | {g.overlap_inflation} | "
                    f"{int(g.chunks_truncated)} | {g.embedding_seconds} | {g.cost_usd:.6f} |"
                )
            lines.append("")
        if r.rejects:
            lines += ["| rejected at stage:reason | count |", "|---|---:|"]
            lines += [f"| {k} | {v} |" for k, v in r.rejects.items()]
            lines.append("")
        return "\n".join(lines)


def report_of(
    mode: str = "run", price_per_million_tokens: float = 0.02, **values: Any
) -> CostReport:
    """A report whose counts are all zero but `values`: for a run folder made outside the job
    (the evaluation's baselines, eval/langchain_run.py and eval/header_ablation.py), which
    `evaluate` and `inspect` read as they read the job's."""
    from transforms.cost_combine import CostReportFn

    empty = CostReportFn().create_accumulator()
    report = build_report(empty, Pricing(price_per_million_tokens), mode)
    return dataclasses.replace(report, **values)


def _finish_group(g: dict[str, float], pricing: Pricing) -> GroupCost:
    return GroupCost(
        **{**g, "embedding_seconds": round(g["embedding_seconds"], 3)},
        overlap_inflation=(
            round(g["embedded_tokens"] / g["document_tokens"], 4) if g["document_tokens"] else None
        ),
        cost_usd=g["embedded_tokens"] * pricing.price_per_million_tokens / 1e6,
    )


def build_report(acc: dict[str, Any], pricing: Pricing, mode: str) -> CostReport:
    """The cost report from the combined totals (cost_combine.CostReportFn): counts, tokens,
    inflation and dollars."""
    totals = group_totals()
    for g in acc["by_doc_type"].values():
        for k, v in g.items():
            totals[k] += v
    total = _finish_group(totals, pricing)
    documents_chunked = int(totals["documents"])
    llm_tokens = acc["llm"]
    llm = LLMCost(
        prompt_tokens=llm_tokens["prompt_tokens"],
        completion_tokens=llm_tokens["completion_tokens"],
        requests=llm_tokens["requests"],
        cache_hits=llm_tokens["cache_hits"],
        fallbacks=acc["context_sources"].get("path_fallback", 0),
        cost_usd=(
            llm_tokens["prompt_tokens"] * pricing.llm_price_in
            + llm_tokens["completion_tokens"] * pricing.llm_price_out
        )
        / 1e6,
    )
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
    documents_rejected = acc["doc_rejects"]
    documents_unchanged = acc["documents_unchanged"]
    report = CostReport(
        mode=mode,
        documents_in=acc["documents_in"],
        documents_chunked=documents_chunked,
        documents_unchanged=documents_unchanged,
        documents_rejected=documents_rejected,
        documents_removed=acc["changes"].get("removed", {}).get("documents", 0),
        chunks=int(totals["chunks"]),
        parent_chunks=int(totals["parent_chunks"]),
        chunks_reused=acc["chunks_reused"],
        reused_embedded_tokens=acc["reused_embedded_tokens"],
        chunks_rejected=acc["chunk_rejects"],
        chunks_deduplicated=acc["chunks_deduplicated"],
        deduplicated_embedded_tokens=acc["deduplicated_embedded_tokens"],
        chunks_cached=acc["chunks_cached"],
        cached_embedded_tokens=acc["cached_embedded_tokens"],
        document_tokens=int(totals["document_tokens"]),
        boilerplate_lines_removed=acc["boilerplate_lines_removed"],
        boilerplate_tokens_removed=acc["boilerplate_tokens_removed"],
        contents_pages_removed=acc["contents_pages_removed"],
        index_pages_removed=acc["index_pages_removed"],
        text_tokens=int(totals["text_tokens"]),
        embedded_tokens=int(totals["embedded_tokens"]),
        model_read_tokens=model_read,
        reused_tokens=reused,
        header_tokens=int(totals["header_tokens"]),
        overlap_inflation=total.overlap_inflation,
        chunks_truncated=int(totals["chunks_truncated"]),
        embedding_seconds=total.embedding_seconds,
        price_per_million_tokens=pricing.price_per_million_tokens,
        cost_usd=cost,
        saved_usd=reused * pricing.price_per_million_tokens / 1e6,
        cost_per_document_usd=cost / documents_chunked if documents_chunked else 0,
        rechunk_cost_usd=(totals["embedded_tokens"] + acc["reused_embedded_tokens"])
        * pricing.price_per_million_tokens
        / 1e6,
        llm_context=llm,
        total_cost_usd=cost + llm.cost_usd,
        changes={k: ChangeTotals(**acc["changes"][k]) for k in CHANGE_KINDS if k in acc["changes"]},
        context_sources=dict(sorted(acc["context_sources"].items())),
        rejects=dict(sorted(acc["rejects"].items())),
        files_skipped=dict(sorted(acc["files_skipped"].items())),
        by_doc_type={k: _finish_group(v, pricing) for k, v in sorted(acc["by_doc_type"].items())},
        by_strategy={k: _finish_group(v, pricing) for k, v in sorted(acc["by_strategy"].items())},
        balanced=acc["documents_in"]
        == documents_chunked + documents_rejected + documents_unchanged,
    )
    if pricing.sample_fraction < 1.0:
        report = dataclasses.replace(report, projection=project_sample(acc, report, pricing))
    return report


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


def project_sample(acc: dict[str, Any], report: CostReport, pricing: Pricing) -> Projection:
    """The whole corpus projected from an --estimate_sample run, with 95% intervals.

    Documents are projected from the files matched (documents per file; a file is one
    document unless it is JSONL), chunks and embedded tokens (and so dollars) from the bytes
    matched (tokens per byte): each a ratio estimator over the sampled files, its interval
    the estimate +- 1.96 standard errors from the files' spread around the ratio, and never
    below what the sample itself holds. Without file sizes (no file matched, or none
    sampled) it falls back to 1/--estimate_sample, with no interval.
    """
    fraction = pricing.sample_fraction
    files = acc["sampled_files"]
    matched_files, matched_bytes = acc["matched_files"], acc["matched_bytes"]
    sampled = [files[name] for name in sorted(files)]
    sampled_bytes = sum(v[0] for v in sampled)
    observed = {
        "documents": report.documents_in,
        "chunks": report.chunks,
        "embedded_tokens": report.embedded_tokens,
    }
    if not matched_files or not sampled:
        factor = 1.0 / fraction
        return Projection(
            sample_fraction=fraction,
            method="1/sample",
            **{k: round(v * factor) for k, v in observed.items()},
            cost_usd=report.cost_usd * factor,
            interval_95=None,
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
    projected: dict[str, int] = {}
    interval: dict[str, list[float]] | None = {}
    for key, (value, se) in estimates.items():
        projected[key] = round(value)
        if math.isnan(se):
            interval = None
        elif interval is not None:
            interval[key] = [round(max(observed[key], value - Z_95 * se)), round(value + Z_95 * se)]
    price = pricing.price_per_million_tokens / 1e6
    if interval is not None:
        interval["cost_usd"] = [t * price for t in interval["embedded_tokens"]]
    return Projection(
        sample_fraction=fraction,
        method="ratio to files (documents) and to bytes (chunks, tokens, dollars)",
        files_matched=matched_files,
        files_sampled=len(sampled),
        bytes_matched=matched_bytes,
        bytes_sampled=sampled_bytes,
        **projected,
        cost_usd=projected["embedded_tokens"] * price,
        interval_95=interval,  # None: fewer than two files sampled
    )
