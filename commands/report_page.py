"""The inspection page of a run: DIR/report/index.html and DIR/report/chunk_sizes.png.

A static page (no script, no server, nothing fetched): the statistics table, a histogram of
chunk tokens per document type with the limits marked, the largest and smallest chunks, the
rejects, what changed since the previous run, and sample documents with their chunk
boundaries marked in the text.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from commands.run_stats import GroupStats, Limits, Segment
from transforms.cost_report import CostReport

TEMPLATE = "templates/report.html"  # Jinja2, beside this module (package data)
# What one value may take on the page: a source, title, type, reason or section path, and a
# chunk's context header (the tables hold them whole; a path of six 40 KB headings, repeated
# over every chunk of a sample, made most of a 9.6 MB page).
LABEL_CHARS = 160
HEADER_CHARS = 200
CHANGES_SHOWN = 100  # documents of each list of changes (added, changed, removed)

DEFINITIONS = (
    "At limit: text of at least {at} tokens (95% of the {room} a chunk's text may have once "
    "the header's room is taken). Fragments: under {frag:g} tokens (10% of --chunk_size). "
    "Heading-only: Markdown and HTML chunks that hold nothing but headings. Covered by a "
    "neighbour: the chunk's whole range lies inside the previous or next chunk's. Duplicate "
    "texts: chunks whose exact text another chunk of the run also has. Overlapping "
    "neighbours: consecutive chunks of a document that share text. USD: embedding the chunks "
    "at the run's price (reused chunks included)."
)


def definitions(limits: Limits) -> str:
    return DEFINITIONS.format(
        at=limits.at_limit_from, room=limits.text_room, frag=limits.fragment_below
    )


def cut(value: object, limit: int = LABEL_CHARS) -> str:
    """`value` as text of at most `limit` characters, an ellipsis marking a cut."""
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def boundary_markup(text: str, doc_chunks: Sequence[dict], pieces: Sequence[Segment]) -> Markup:
    """The document's text as HTML: a bar where each chunk starts, colours for chunk, overlap
    and text in no chunk."""
    out = []
    for seg in pieces:
        if seg.starts_chunk is not None:
            for i in range(seg.starts_chunk, len(doc_chunks)):
                c = doc_chunks[i]
                if c["start_char"] != seg.start:
                    break
                path = cut(" › ".join(c["section_path"] or [])) or "(no section)"
                head = f"chunk {c['chunk_index']} · {c['token_count']} tokens · {path}"
                header = (
                    Markup('<span class="hdr">header: {}</span>').format(
                        cut(c["context"], HEADER_CHARS)
                    )
                    if c.get("context")
                    else ""
                )
                out.append(
                    Markup('<span class="cut" data-chunk="{}">{}{}</span>').format(
                        c["chunk_index"], head, header
                    )
                )
        if not seg.chunks:
            cls = "gap"
        elif len(seg.chunks) > 1:
            cls = "ov"
        else:
            cls = f"c{seg.chunks[0] % 2}"
        out.append(Markup('<span class="{}">{}</span>').format(cls, text[seg.start : seg.end]))
    return Markup("").join(out)


def histogram_png(token_counts: dict[str, list[int]], limits: Limits, width_px: int = 760) -> bytes:
    """One histogram of chunk tokens per document type, the text room and the limit marked."""
    import matplotlib

    matplotlib.use("Agg")  # no display; the page is a file
    import matplotlib.pyplot as plt

    types = sorted(token_counts) or ["(no chunks)"]
    dpi = 80
    fig, axes = plt.subplots(
        len(types), 1, figsize=(width_px / dpi, 1.7 * len(types) + 0.6), dpi=dpi, squeeze=False
    )
    step = max(1, limits.chunk_size // 48)
    bins = list(range(0, limits.chunk_size + step + 1, step))
    for ax, doc_type in zip(axes[:, 0], types, strict=True):
        values = token_counts.get(doc_type, [])
        ax.hist(values, bins=bins, color="#4c78a8")
        ax.axvline(limits.text_room, color="#e45756", linestyle="--", linewidth=1.2)
        if limits.text_room != limits.chunk_size:
            ax.axvline(limits.chunk_size, color="#e45756", linewidth=1.5)
        ax.set_xlim(0, limits.chunk_size + step)
        ax.set_ylabel("chunks")
        ax.set_title(f"{doc_type}: {len(values)} chunks", fontsize=10, loc="left")
    axes[-1, 0].set_xlabel(
        f"tokens of the chunk's text (dashed: the {limits.text_room} a text may have; "
        f"solid: --chunk_size {limits.chunk_size}, header included)"
    )
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def render_page(
    *,
    run: Any,
    report: CostReport | None,
    limits: Limits,
    rows: Sequence[GroupStats],
    extremes: Sequence[tuple[str, Sequence[dict]]],
    reject_counts: Sequence[tuple[str, str, int, str]],
    rejects: Sequence[dict],
    rejects_left_out: int,
    reject_kinds_left_out: int,
    changes: Any,
    changes_note: str,
    samples: Sequence[dict],
    image_width: int = 760,
) -> str:
    """The page's HTML (Jinja2, every value escaped)."""
    from importlib.resources import files

    from jinja2 import Environment

    env = Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["label"] = cut  # every value from the tables goes through it
    template = files("commands").joinpath(TEMPLATE).read_text(encoding="utf-8")
    return env.from_string(template).render(
        run=run,
        report=report,
        limits=limits,
        rows=rows,
        definitions=definitions(limits),
        extremes=extremes,
        reject_counts=reject_counts,
        rejects=rejects,
        rejects_left_out=rejects_left_out,
        reject_kinds_left_out=reject_kinds_left_out,
        changes_shown=CHANGES_SHOWN,
        changes=changes,
        changes_note=changes_note,
        samples=samples,
        image_width=image_width,
    )
