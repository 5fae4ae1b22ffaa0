"""Four properties of a finished run's Markdown chunks, per folder (docs/structure.md):

    python -m eval.chunk_structure RUN [RUN ...]

- heading at the end: a chunk whose last line is a heading of blocks after it, or of the
  sections below it when its own holds nothing else (its content begins the next chunk);
- lead-in at the end: a chunk whose last block is a paragraph ending with a colon
  (`Block.lead_in`: "For example:", "The members are:") followed by a block of its section
  or by a definition below it, which begins the next chunk;
- term at the end: a chunk that ends inside a definition's term lines, its description
  beginning the next chunk (a term alone says nothing);
- piece without its term: a chunk that starts inside a definition (`Section.definition`)
  while no entry of its `section_path` names that definition's term.

The folder is the one under the run's input root: the first path component after the
longest common prefix of the run's document sources (`.cache/zoo/pages/<generator>/...`).
Only documents chunked by the `markdown` strategy count.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from transforms.chunking.markdown import Section, markdown_sections

__all__ = ["ChunkStructure", "chunk_structure", "heads_what_follows", "introduces", "main"]


@dataclass
class ChunkStructure:
    chunks: int = 0
    heading_at_end: int = 0
    piece_without_term: int = 0
    lead_in_at_end: int = 0
    term_at_end: int = 0

    def add(self, other: ChunkStructure) -> None:
        """Count `other`'s chunks in with these."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def cell(self) -> str:
        """The counts as a table cell, in `main`'s column order."""
        return (
            f"{self.chunks} / {self.heading_at_end} / {self.piece_without_term} / "
            f"{self.lead_in_at_end} / {self.term_at_end}"
        )


def heads_what_follows(text: str, sections: list[Section] | None = None) -> set[int]:
    """Offsets of the headings that head what follows them: a heading with blocks of its
    own after it, or one whose section holds nothing else before a section below it
    (`sections`: `text`'s, when the caller has them)."""
    sections = markdown_sections(text) if sections is None else sections
    own = {s.blocks[0].start for s in sections if s.blocks[0].heading and len(s.blocks) > 1}
    return own | {
        a.blocks[0].start
        for a, b in itertools.pairwise(sections)
        if len(a.blocks) == 1
        and a.blocks[0].heading
        and len(b.path) > len(a.path)
        and b.path[: len(a.path)] == a.path
    }


def introduces(text: str, sections: list[Section] | None = None) -> set[int]:
    """End offsets of the lead-in paragraphs followed by a block of their section, or by a
    definition below it (Sphinx's "uses the following configuration values:" before them)."""
    sections = markdown_sections(text) if sections is None else sections
    out = set()
    for i, section in enumerate(sections):
        for j, block in enumerate(section.blocks):
            if not block.lead_in:
                continue
            if j + 1 < len(section.blocks):
                out.add(block.end)
            elif i + 1 < len(sections):
                after = sections[i + 1]
                if after.definition is not None and after.path[:-1] == section.path:
                    out.add(block.end)
    return out


def chunk_structure(text: str, chunks: Iterable[tuple[int, int, Sequence[str]]]) -> ChunkStructure:
    """Count one document's chunks, each (start, end, section_path) into `text`."""
    sections = markdown_sections(text)  # parsed once for the three counts below
    heads = heads_what_follows(text, sections)
    leads = introduces(text, sections)
    definitions = [s for s in sections if s.definition is not None]
    terms = []  # every definition's [start, body), nested ones too
    todo = [s.definition for s in definitions if s.definition is not None]
    while todo:
        d = todo.pop()
        if d.body < d.end:
            terms.append((d.start, d.body))
        todo.extend(d.parts)
    out = ChunkStructure()
    for start, end, path in chunks:
        out.chunks += 1
        piece = text[start:end].rstrip()
        if start + piece.rfind("\n") + 1 in heads:
            out.heading_at_end += 1
        if start + len(piece) in leads:
            out.lead_in_at_end += 1
        if any(t < start + len(piece) <= body for t, body in terms):
            out.term_at_end += 1
        for s in definitions:
            d = s.definition
            if d is not None and d.start < start < d.end:
                if not any(s.path[-1] in entry for entry in path):
                    out.piece_without_term += 1
                break
    return out


def _by_folder(run: str) -> dict[str, ChunkStructure]:
    import pyarrow.parquet as pq

    docs = {
        r["doc_id"]: r
        for r in pq.read_table(
            os.path.join(run, "documents"), columns=["doc_id", "source", "text"]
        ).to_pylist()
    }
    chunks: dict[str, list[tuple[int, int, Sequence[str]]]] = defaultdict(list)
    markdown: set[str] = set()
    columns = ["doc_id", "start_char", "end_char", "section_path", "strategy", "is_parent"]
    for r in pq.read_table(os.path.join(run, "chunks"), columns=columns).to_pylist():
        if r["is_parent"]:
            continue
        chunks[r["doc_id"]].append((r["start_char"], r["end_char"], r["section_path"] or []))
        if r["strategy"] == "markdown":
            markdown.add(r["doc_id"])
    root = os.path.commonpath([d["source"] for d in docs.values()]) if docs else ""
    out: dict[str, ChunkStructure] = defaultdict(ChunkStructure)
    for doc_id in sorted(markdown):
        doc = docs[doc_id]
        folder = os.path.relpath(doc["source"], root).split(os.sep)[0]
        out[folder].add(chunk_structure(doc["text"], sorted(chunks[doc_id])))
    return dict(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m eval.chunk_structure", description=__doc__)
    parser.add_argument("runs", nargs="+", metavar="RUN", help="output folders of finished runs")
    args = parser.parse_args(argv)
    tables = {run: _by_folder(run) for run in args.runs}
    folders = sorted({f for t in tables.values() for f in t})
    head = " | ".join(
        f"{os.path.basename(os.path.normpath(r))}: chunks / heading at end / piece without term"
        " / lead-in at end / term at end"
        for r in args.runs
    )
    print(f"| folder | {head} |")
    print("|---" * (1 + len(args.runs)) + "|")
    totals = {run: ChunkStructure() for run in args.runs}
    for folder in folders:
        cells = []
        for run, table in tables.items():
            c = table.get(folder, ChunkStructure())
            totals[run].add(c)
            cells.append(c.cell())
        print(f"| {folder} | " + " | ".join(cells) + " |")
    cells = [t.cell() for t in totals.values()]
    print("| all | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
