"""`corpus-chunker inspect DIR`: what a finished run's chunks look like, in the terminal and as a
page (DIR/report/index.html).

    corpus-chunker inspect out/run1                 # tables here, the page in out/run1/report/
    corpus-chunker inspect out/run1 --show textwrap.py   # one document with its boundaries
    python -m commands.inspect out/run1            # the same
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from apache_beam.io.filesystems import FileSystems

from commands import run_stats
from commands.run_stats import CHUNK_COLUMNS, PAGE_COLUMNS, GroupStats, Limits
from commands.terminal import for_terminal
from runs.run_folder import RunFolder
from transforms.cost_report import CostReport

DOCUMENT_COLUMNS = ["doc_id", "source", "doc_type", "title", "content_hash"]
# The page is bounded whatever the run's size: a sample of the documents, each cut, a few rows
# of each list, every value cut (report_page.LABEL_CHARS, HEADER_CHARS); the rest is counted.
SAMPLES_PER_TYPE = 2
MAX_SAMPLES = 14  # two of each of the seven document types
SAMPLE_TEXT_CHARS = 20_000  # a sample document's text is cut here...
SAMPLE_CHUNKS = 50  # ...or after its 50th chunk, whichever comes first
EXTREMES = 10
REJECTS_SHOWN = 100
REJECT_KINDS_SHOWN = 50  # (stage, reason) rows
# The worst case, every character escaped to 5 bytes (&#34;): a sample is at most 20,000
# characters of text and 50 bars of a 160-character path and a 200-character header, under
# 210 KB; 14 of them under 2.9 MB; the rejects, changes and extremes tables under 0.8 MB. Real
# text escapes little: the samples/ run's page is about 0.1 MB.
PAGE_MAX_BYTES = 4 * 1024 * 1024


@dataclass
class Run:
    """A run's output folder, read back (chunk rows without their embeddings)."""

    output: str
    manifest: dict[str, Any]
    report: CostReport | None
    chunks: list[dict]
    documents: list[dict]  # without their text (see `texts`)
    rejects: list[dict]

    @property
    def settings(self) -> dict[str, Any]:
        return self.manifest.get("config", {})

    @property
    def mode(self) -> str:
        return self.manifest.get("mode", "run")

    @property
    def fingerprint(self) -> str:
        return self.manifest.get("config_fingerprint", "")

    @property
    def started_at(self) -> str:
        return self.manifest.get("started_at", "")

    @property
    def limits(self) -> Limits:
        return Limits.from_settings(self.settings)

    @property
    def price(self) -> float:
        return float(self.report.price_per_million_tokens) if self.report else 0.0

    def texts(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """doc_id -> extracted text, for these documents only."""
        import pyarrow.compute as pc

        wanted = set(doc_ids)
        table = RunFolder(self.output).read_table("documents", ["doc_id", "text"])
        if table is None or not wanted:
            return {}
        table = table.filter(pc.is_in(table["doc_id"], value_set=pc.cast(list(wanted), "string")))
        return dict(zip(table["doc_id"].to_pylist(), table["text"].to_pylist(), strict=True))


def load_run(output: str) -> Run:
    """Read a complete run; ValueError naming the folder when it is not one."""
    folder = RunFolder(output)
    manifest = folder.manifest
    chunks = folder.read_table("chunks", CHUNK_COLUMNS + PAGE_COLUMNS)
    documents = folder.read_table("documents", DOCUMENT_COLUMNS)
    rejects = folder.read_table("rejects")
    return Run(
        output=output,
        manifest=manifest,
        report=folder.cost_report(),
        chunks=chunks.to_pylist() if chunks is not None else [],
        documents=documents.to_pylist() if documents is not None else [],
        rejects=rejects.to_pylist() if rejects is not None else [],
    )


def stats_rows(run: Run) -> list[GroupStats]:
    """The groups and, when there are several, their total last."""
    groups = run_stats.group_stats(run.chunks, run.limits, run.price)
    if len(groups) > 1:
        groups.append(run_stats.total_stats(groups, run.limits, run.price))
    return groups


def run_changes(run: Run) -> tuple[run_stats.Changes | None, str]:
    """What changed since --previous_output (or why that cannot be told)."""
    previous = run.manifest.get("previous_output")
    if not previous:
        return None, ""
    folder = RunFolder(previous, f"The previous run {previous}", "its changes are not shown")
    if not folder.has_manifest():
        return None, f"The previous run {previous} is no longer there (no run_manifest.json)."
    try:
        folder.check()
    except ValueError as e:
        return None, f"{e}."
    prev_chunks = folder.read_table("chunks", ["chunk_id", "doc_id", "is_parent"])
    prev_docs = folder.read_table("documents", DOCUMENT_COLUMNS)
    out = run_stats.changes(
        previous,
        run.documents,
        run.chunks,
        prev_docs.to_pylist() if prev_docs is not None else [],
        prev_chunks.to_pylist() if prev_chunks is not None else [],
    )
    prev_report = folder.cost_report()
    out.cost_usd = run.report.cost_usd if run.report else None
    out.previous_cost_usd = prev_report.cost_usd if prev_report else None
    return out, ""


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; numbers right-aligned. A cell's control
    characters and newlines (a file name's, a document's) are written as escapes."""
    cells = [[str(h) for h in headers]] + [
        [for_terminal(v, keep_lines=False) for v in r] for r in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [
        all(isinstance(r[i], int | float) for r in rows) if rows else False
        for i in range(len(headers))
    ]
    lines = []
    for r in cells:
        lines.append(
            "  ".join(
                c.rjust(w) if numeric[i] else c.ljust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )
    return "\n".join(lines)


def summary_text(
    run: Run, rows: Sequence[GroupStats], changes: run_stats.Changes | None, note: str
) -> str:
    """The terminal summary: the table per type and strategy, rejects, changes."""
    limits = run.limits
    r = run.report
    lines = [
        f"corpus-chunker inspect {run.output}",
        f"  mode {run.mode}, config {run.fingerprint}: --chunk_size {limits.chunk_size} "
        f"(header included; {limits.text_room} tokens for a chunk's text)",
    ]
    if r is not None:
        lines.append(
            f"  {r.documents_in} documents in: {r.documents_chunked} chunked, "
            f"{r.documents_rejected} rejected, {r.documents_unchanged} unchanged; "
            f"{r.chunks} chunks; ${r.cost_usd:.6f}"
        )
    lines.append("")
    table = [
        [
            g.doc_type,
            g.strategy,
            g.documents,
            g.chunks,
            g.p50,
            g.p90,
            g.p99,
            g.max,
            g.at_limit,
            g.fragments,
            "-" if g.heading_only is None else g.heading_only,
            g.covered,
            g.duplicates,
            f"{g.overlapping_pairs}/{g.neighbour_pairs}",
            f"{g.cost_usd:.6f}",
        ]
        for g in rows
    ]
    headers = ["type", "strategy", "docs", "chunks", "p50", "p90", "p99", "max", "at limit"]
    headers += ["fragments", "heading-only", "covered", "dup texts", "overlap", "USD"]
    lines.append(format_table(headers, table) if table else "  no chunks")
    lines += [
        "",
        f"  at limit: >= {limits.at_limit_from} tokens (95% of {limits.text_room}); fragments: "
        f"< {limits.fragment_below:g} tokens (10% of --chunk_size); covered: inside a "
        "neighbour; overlap: neighbour pairs sharing text",
    ]
    counts = run_stats.reject_counts(run.rejects)
    lines += ["", f"rejects: {len(run.rejects)}"]
    if counts:
        lines.append(
            format_table(
                ["stage", "reason", "count", "for example"],
                [list(c) for c in counts],
            )
        )
    if changes is not None:
        lines += [
            "",
            f"changes since {changes.previous_output}: documents "
            f"{len(changes.documents_added)} added, {len(changes.documents_changed)} changed, "
            f"{len(changes.documents_removed)} removed, {changes.documents_unchanged} unchanged; "
            f"chunks {changes.chunks_added} new, {changes.chunks_removed} gone, "
            f"{changes.chunks_kept} kept",
        ]
    elif note:
        lines += ["", note]
    return "\n".join(lines)


def sample_documents(run: Run, per_type: int = SAMPLES_PER_TYPE) -> list[dict]:
    """A few documents of each type, spread over their chunk counts (deterministic)."""
    docs = run_stats.by_document(run.chunks)
    meta = {d["doc_id"]: d for d in run.documents}
    by_type: dict[str, list[str]] = {}
    for doc_id, chunks in docs.items():
        by_type.setdefault(chunks[0]["doc_type"], []).append(doc_id)
    chosen = []
    for doc_type in sorted(by_type):
        ids = sorted(by_type[doc_type], key=lambda i: (len(docs[i]), i))
        several = [i for i in ids if len(docs[i]) > 1] or ids
        step = max(1, len(several) // (per_type + 1))
        picks = several[step - 1 :: step][:per_type] if len(several) > per_type else several
        chosen += picks
    chosen = chosen[:MAX_SAMPLES]
    texts = run.texts(chosen)
    samples = []
    for doc_id in chosen:
        chunks = docs[doc_id]
        text = texts.get(doc_id, "")
        cut_note = ""
        if len(text) > SAMPLE_TEXT_CHARS or len(chunks) > SAMPLE_CHUNKS:
            shown = [c for c in chunks if c["start_char"] < SAMPLE_TEXT_CHARS][:SAMPLE_CHUNKS]
            end = min(max((c["end_char"] for c in shown), default=0), SAMPLE_TEXT_CHARS)
            cut_note = f"the first {len(shown)} chunks shown ({end:,} of {len(text):,} characters)"
            chunks, text = shown, text[:end]
        samples.append(
            {
                "doc_id": doc_id,
                "source": chunks[0]["source"],
                "doc_type": chunks[0]["doc_type"],
                "strategy": chunks[0]["strategy"],
                "title": (meta.get(doc_id) or {}).get("title"),
                "chunks": len(docs[doc_id]),
                "text": text,
                "doc_chunks": chunks,
                "cut_note": cut_note,
            }
        )
    return samples


def extremes(run: Run) -> list[tuple[str, list[dict]]]:
    chunks = [c for c in run.chunks if not c.get("is_parent")]
    ordered = sorted(chunks, key=lambda c: (c["token_count"], c["chunk_id"]))
    return [
        (f"The {min(EXTREMES, len(ordered))} largest", ordered[::-1][:EXTREMES]),
        (f"The {min(EXTREMES, len(ordered))} smallest", ordered[:EXTREMES]),
    ]


def write_page(run: Run, rows: Sequence[GroupStats], changes: Any, note: str) -> str:
    """Write DIR/report/index.html and chunk_sizes.png; returns the page's path."""
    from commands.report_page import boundary_markup, histogram_png, render_page

    samples = sample_documents(run)
    for s in samples:
        pieces = run_stats.segments(len(s["text"]), s["doc_chunks"])
        s["markup"] = boundary_markup(s["text"], s["doc_chunks"], pieces)
    token_counts: dict[str, list[int]] = {}
    for c in run.chunks:
        if not c.get("is_parent"):
            token_counts.setdefault(c["doc_type"], []).append(int(c["token_count"]))
    reject_kinds = run_stats.reject_counts(run.rejects)
    html = render_page(
        run=run,
        report=run.report,
        limits=run.limits,
        rows=rows,
        extremes=extremes(run),
        reject_counts=reject_kinds[:REJECT_KINDS_SHOWN],
        reject_kinds_left_out=max(0, len(reject_kinds) - REJECT_KINDS_SHOWN),
        rejects=run.rejects[:REJECTS_SHOWN],
        rejects_left_out=max(0, len(run.rejects) - REJECTS_SHOWN),
        changes=changes,
        changes_note=note,
        samples=samples,
    )
    folder = FileSystems.join(run.output, "report")
    for name, data in (
        ("chunk_sizes.png", histogram_png(token_counts, run.limits)),
        ("index.html", html.encode("utf-8")),
    ):
        with FileSystems.create(FileSystems.join(folder, name)) as f:
            f.write(data)
    return FileSystems.join(folder, "index.html")


def find_document(run: Run, key: str) -> dict:
    """The document whose doc_id or source is `key`, or whose source ends with it (unique)."""
    exact = [d for d in run.documents if key in (d["doc_id"], d["source"])]
    if exact:
        return exact[0]
    ending = [d for d in run.documents if d["source"].endswith(key)]
    if len(ending) == 1:
        return ending[0]
    if not ending:
        raise ValueError(f"--show {key!r}: no document of {run.output} has that id or source")
    names = ", ".join(sorted(d["source"] for d in ending)[:10])
    raise ValueError(f"--show {key!r} matches {len(ending)} documents ({names}); give more of it")


def page_range(chunk: dict) -> str:
    """ "p. 3", "pp. 3-4", with the document's own label: "p. 5 (iii)"."""
    first, last = chunk["page_start"], chunk.get("page_end") or chunk["page_start"]
    where = f"p. {first}" if first == last else f"pp. {first}-{last}"
    label = chunk.get("page_label")
    return f"{where} ({label})" if label and label != str(first) else where


def show_document(run: Run, key: str, stream: TextIO) -> None:
    """Print one document with a line where each chunk starts; overlap highlighted."""
    doc = find_document(run, key)
    chunks = run_stats.by_document(run.chunks).get(doc["doc_id"], [])
    text = run.texts([doc["doc_id"]]).get(doc["doc_id"], "")
    tty = bool(getattr(stream, "isatty", lambda: False)())
    on, off, dim = ("\033[7m", "\033[0m", "\033[2m") if tty else ("«", "»", "")
    rule = "\033[1;34m" if tty else ""
    # the document's text, names and headers are the corpus's: their control characters are
    # written as escapes, and only this function's own highlighting reaches the terminal
    source, doc_type = for_terminal(doc["source"], False), for_terminal(doc["doc_type"], False)
    stream.write(
        f"{source} ({doc_type}, doc_id {for_terminal(doc['doc_id'], False)}): {len(chunks)} "
        f"chunks; {on}marked{off} text is overlap (in two chunks)\n"
    )
    for seg in run_stats.segments(len(text), chunks):
        if seg.starts_chunk is not None:
            for c in chunks[seg.starts_chunk :]:
                if c["start_char"] != seg.start:
                    break
                path = " > ".join(c["section_path"] or []) or "(no section)"
                line = f"── chunk {c['chunk_index']} · {c['token_count']} tokens · {path}"
                if c.get("page_start") is not None:
                    line += " · " + page_range(c)
                if c.get("context"):
                    line += f" · header: {c['context']!r}"
                line = for_terminal(line, keep_lines=False)
                stream.write(
                    ("\n" if seg.start else "") + rule + line + (off if tty else "") + "\n"
                )
        piece = for_terminal(text[seg.start : seg.end])
        if not seg.chunks:
            stream.write(f"{dim}{piece}{off if tty else ''}")
        elif len(seg.chunks) > 1:
            stream.write(f"{on}{piece}{off}")
        else:
            stream.write(piece)
    stream.write("\n")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="corpus-chunker inspect",
        description="Summarise a finished run (per document type and strategy: chunk sizes, "
        "fragments, heading-only and duplicate chunks, overlap, rejects, cost) and write "
        "DIR/report/index.html, a static page with a histogram of chunk sizes and sample "
        "documents with their chunk boundaries marked.",
    )
    p.add_argument("output", metavar="DIR", help="Output folder of a complete run.")
    p.add_argument(
        "--show",
        metavar="DOC_ID_OR_SOURCE",
        help="Print this document with its chunk boundaries instead (a doc_id, a source, or "
        "the end of a source such as textwrap.py).",
    )
    p.add_argument(
        "--no_page",
        action="store_true",
        help="Print the summary only; do not write DIR/report/ (default: write it).",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        run = load_run(args.output)
        if args.show:
            show_document(run, args.show, sys.stdout)
            return 0
        rows = stats_rows(run)
        changes, note = run_changes(run)
        print(for_terminal(summary_text(run, rows, changes, note)))
        if not args.no_page:
            print(f"\npage: {write_page(run, rows, changes, note)}")
    except ValueError as e:
        print(f"corpus-chunker inspect: error: {for_terminal(e)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
