"""What a finished run's chunks look like: per type and strategy statistics, boundaries, changes.

Pure functions over rows (dicts as read back from the Parquet tables), used by
`corpus-chunker inspect` for its terminal tables and its HTML page.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FRAGMENT_FRACTION = 0.10  # a chunk under 10% of --chunk_size is a fragment
AT_LIMIT_FRACTION = 0.95  # a chunk of at least 95% of its text room is at the limit
HEADING_TYPES = frozenset({"markdown", "html"})  # whose text is Markdown (HTML is extracted so)
CHUNK_COLUMNS = [
    "chunk_id",
    "doc_id",
    "source",
    "doc_type",
    "strategy",
    "chunk_index",
    "text",
    "context",
    "start_char",
    "end_char",
    "token_count",
    "embed_tokens",
    "section_path",
    "is_parent",
]
PAGE_COLUMNS = ["page_start", "page_end", "page_label"]


@dataclass(frozen=True)
class Limits:
    """The run's limits: `chunk_size` (header included) and the room a chunk's text has."""

    chunk_size: int
    text_room: int

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> Limits:
        return cls(int(settings["chunk_size"]), int(settings["chunk_text_room"]))

    @property
    def fragment_below(self) -> float:
        return FRAGMENT_FRACTION * self.chunk_size

    @property
    def at_limit_from(self) -> int:
        return math.ceil(AT_LIMIT_FRACTION * self.text_room)


@functools.lru_cache(maxsize=1)
def _markdown():  # -> markdown_it.MarkdownIt
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").disable("inline")


def is_heading_only(text: str) -> bool:
    """Whether the Markdown `text` is nothing but headings (ATX or setext), one or more."""
    blocks = [t for t in _markdown().parse(text) if t.level == 0 and t.nesting >= 0]
    return bool(blocks) and all(t.type == "heading_open" for t in blocks)


def percentile(values: Sequence[int], q: float) -> int:
    """The q-th percentile as an observed value (the inverted CDF), 0 for no values."""
    if not values:
        return 0
    return int(np.percentile(np.asarray(values), q, method="inverted_cdf"))


@dataclass
class GroupStats:
    """The chunks of one (document type, strategy)."""

    doc_type: str
    strategy: str
    documents: int = 0
    chunks: int = 0
    p50: int = 0
    p90: int = 0
    p99: int = 0
    max: int = 0
    at_limit: int = 0
    fragments: int = 0
    heading_only: int | None = 0  # None: not Markdown text, not counted
    covered: int = 0  # wholly inside a neighbour
    overlapping_pairs: int = 0  # neighbours sharing text
    neighbour_pairs: int = 0
    duplicates: int = 0  # chunks whose text another chunk of the run also has
    embed_tokens: int = 0
    cost_usd: float = 0.0
    token_counts: list[int] = field(default_factory=list, repr=False)


def by_document(chunks: Iterable[dict]) -> dict[str, list[dict]]:
    """doc_id -> its (non-parent) chunks in text order."""
    out: dict[str, list[dict]] = {}
    for c in chunks:
        if not c.get("is_parent"):
            out.setdefault(c["doc_id"], []).append(c)
    for doc_chunks in out.values():
        doc_chunks.sort(key=lambda c: (c["start_char"], c["end_char"]))
    return out


def covered_ids(doc_chunks: Sequence[dict]) -> set[str]:
    """Chunks whose whole range lies inside their previous or next chunk's range."""
    out = set()
    for i, c in enumerate(doc_chunks):
        for j in (i - 1, i + 1):
            if 0 <= j < len(doc_chunks):
                n = doc_chunks[j]
                if n["start_char"] <= c["start_char"] and c["end_char"] <= n["end_char"]:
                    out.add(c["chunk_id"])
    return out


def group_stats(
    chunks: Sequence[dict], limits: Limits, price_per_million: float
) -> list[GroupStats]:
    """Statistics per (doc_type, strategy), parents left out, sorted by type and strategy."""
    texts = Counter(c["text"] for c in chunks if not c.get("is_parent"))
    docs = by_document(chunks)
    covered: set[str] = set()
    groups: dict[tuple[str, str], GroupStats] = {}
    doc_sets: dict[tuple[str, str], set[str]] = {}
    for doc_chunks in docs.values():
        covered |= covered_ids(doc_chunks)
        key = (doc_chunks[0]["doc_type"], doc_chunks[0]["strategy"])
        g = groups.setdefault(key, GroupStats(*key))
        for a, b in itertools.pairwise(doc_chunks):
            g.neighbour_pairs += 1
            g.overlapping_pairs += int(b["start_char"] < a["end_char"])
    for doc_chunks in docs.values():
        for c in doc_chunks:
            key = (c["doc_type"], c["strategy"])
            g = groups.setdefault(key, GroupStats(*key))
            doc_sets.setdefault(key, set()).add(c["doc_id"])
            n = int(c["token_count"])
            g.chunks += 1
            g.token_counts.append(n)
            g.at_limit += int(n >= limits.at_limit_from)
            g.fragments += int(n < limits.fragment_below)
            g.covered += int(c["chunk_id"] in covered)
            g.duplicates += int(texts[c["text"]] > 1)
            g.embed_tokens += int(c["embed_tokens"] or 0)
            if c["doc_type"] in HEADING_TYPES:
                g.heading_only = (g.heading_only or 0) + int(is_heading_only(c["text"]))
    for key, g in groups.items():
        if key[0] not in HEADING_TYPES:
            g.heading_only = None
        g.documents = len(doc_sets.get(key, ()))
        g.p50, g.p90, g.p99 = (percentile(g.token_counts, q) for q in (50, 90, 99))
        g.max = max(g.token_counts, default=0)
        g.cost_usd = g.embed_tokens * price_per_million / 1e6
    return [groups[k] for k in sorted(groups)]


def total_stats(groups: Sequence[GroupStats], limits: Limits, price: float) -> GroupStats:
    """The groups together, as one row (its percentiles over every chunk)."""
    t = GroupStats("all", "all")
    t.heading_only = None
    for g in groups:
        for name in (
            "documents",
            "chunks",
            "at_limit",
            "fragments",
            "covered",
            "overlapping_pairs",
            "neighbour_pairs",
            "duplicates",
            "embed_tokens",
        ):
            setattr(t, name, getattr(t, name) + getattr(g, name))
        if g.heading_only is not None:
            t.heading_only = (t.heading_only or 0) + g.heading_only
        t.token_counts += g.token_counts
    t.p50, t.p90, t.p99 = (percentile(t.token_counts, q) for q in (50, 90, 99))
    t.max = max(t.token_counts, default=0)
    t.cost_usd = t.embed_tokens * price / 1e6
    return t


def reject_counts(rejects: Sequence[dict]) -> list[tuple[str, str, int, str]]:
    """(stage, reason, count, an example source) per stage and reason, most frequent first."""
    counts: Counter = Counter((r["stage"], r["reason"]) for r in rejects)
    example = {}
    for r in rejects:
        example.setdefault((r["stage"], r["reason"]), r["source"])
    return [(s, why, n, example[(s, why)]) for (s, why), n in counts.most_common()]


@dataclass(frozen=True)
class Segment:
    """A piece of a document's text and the chunks (their indexes) that hold it."""

    start: int
    end: int
    chunks: tuple[int, ...]
    starts_chunk: int | None = None  # the chunk (index) that begins at `start`, if any


def segments(text_length: int, doc_chunks: Sequence[dict]) -> list[Segment]:
    """The document cut at every chunk boundary; each piece with the chunks covering it.

    Text in no chunk (whitespace between chunks, text a chunker trimmed) has `chunks == ()`;
    text in two chunks is overlap. `doc_chunks` in text order, as `by_document` gives them.
    """
    points = {0, text_length}
    for c in doc_chunks:
        points.update((c["start_char"], c["end_char"]))
    cuts = sorted(p for p in points if 0 <= p <= text_length)
    order = sorted(range(len(doc_chunks)), key=lambda i: doc_chunks[i]["start_char"])
    starts: dict[int, int] = {}
    for i in order:
        starts.setdefault(doc_chunks[i]["start_char"], i)
    out = []
    active: list[int] = []  # chunks begun and not yet ended: a sweep, not a scan per piece
    nxt = 0
    for a, b in itertools.pairwise(cuts):
        while nxt < len(order) and doc_chunks[order[nxt]]["start_char"] <= a:
            active.append(order[nxt])
            nxt += 1
        active = [i for i in active if doc_chunks[i]["end_char"] > a]
        holding = tuple(sorted(i for i in active if b <= doc_chunks[i]["end_char"]))
        out.append(Segment(a, b, holding, starts.get(a)))
    return out


@dataclass
class Changes:
    """What changed between a run and the --previous_output it reused from."""

    previous_output: str
    documents_added: list[dict] = field(default_factory=list)
    documents_removed: list[dict] = field(default_factory=list)
    documents_changed: list[dict] = field(default_factory=list)
    documents_unchanged: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_kept: int = 0
    cost_usd: float | None = None  # this run's embedding cost
    previous_cost_usd: float | None = None


def changes(
    previous_output: str,
    documents: Sequence[dict],
    chunks: Sequence[dict],
    previous_documents: Sequence[dict],
    previous_chunks: Sequence[dict],
) -> Changes:
    """Documents added, removed and changed (by doc_id and content_hash), and chunk ids."""
    now = {d["doc_id"]: d for d in documents}
    before = {d["doc_id"]: d for d in previous_documents}
    chunk_counts = Counter(c["doc_id"] for c in chunks if not c.get("is_parent"))
    before_counts = Counter(c["doc_id"] for c in previous_chunks if not c.get("is_parent"))

    def entry(d: dict) -> dict:
        return {
            "source": d["source"],
            "doc_type": d["doc_type"],
            "chunks_before": before_counts.get(d["doc_id"], 0),
            "chunks_now": chunk_counts.get(d["doc_id"], 0),
        }

    out = Changes(previous_output)
    for doc_id, d in sorted(now.items(), key=lambda kv: kv[1]["source"]):
        if doc_id not in before:
            out.documents_added.append(entry(d))
        elif before[doc_id]["content_hash"] != d["content_hash"]:
            out.documents_changed.append(entry(d))
        else:
            out.documents_unchanged += 1
    for doc_id, d in sorted(before.items(), key=lambda kv: kv[1]["source"]):
        if doc_id not in now:
            out.documents_removed.append(entry(d))
    ids_now = {c["chunk_id"] for c in chunks}
    ids_before = {c["chunk_id"] for c in previous_chunks}
    out.chunks_added = len(ids_now - ids_before)
    out.chunks_removed = len(ids_before - ids_now)
    out.chunks_kept = len(ids_now & ids_before)
    return out
