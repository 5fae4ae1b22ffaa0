"""`corpus-chunker structure PAGES...`: the structural invariant over HTML pages, a table of
violations per generator (transforms/ingest/structure_check.py, docs/structure.md).

    corpus-chunker structure .cache/zoo/pages --by_folder [--show 3] [--json_out F] [--dropped]

`--dropped` adds a table of the page text the documents do not hold (`dropped_blocks`): not
violations, a listing to read (`--show N`: the N longest such blocks of each generator).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

from transforms.ingest.extraction import ExtractError
from transforms.ingest.structure_check import (
    KINDS,
    Violation,
    check_page,
    count,
    dropped_blocks,
    generator_of,
)

_HTML = (".html", ".htm", ".xhtml")


def html_files(paths: list[str], by_folder: bool) -> list[tuple[str, str | None]]:
    """(file, group) of every HTML file under `paths`; with `by_folder` the group is the first
    folder under the path given (the zoo's generator folders), else None (detected)."""
    out = []
    for path in paths:
        if os.path.isfile(path):
            out.append((path, None))
            continue
        if not os.path.isdir(path):
            raise SystemExit(f"corpus-chunker structure: no such file or folder: {path}")
        for folder, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(_HTML):
                    full = os.path.join(folder, name)
                    rel = os.path.relpath(full, path).split(os.sep)
                    out.append((full, rel[0] if by_folder and len(rel) > 1 else None))
    return out


def check_file(path: str, dropped: bool = False) -> tuple[str, list[Violation], int, list[str]]:
    """(generator, violations, characters of its text blocks, the blocks its text does not
    hold) of one page, extracted as the job extracts it; the last two only with `dropped`."""
    import trafilatura

    from schemas.records import RawDocument
    from transforms.ingest.extraction import cut_whitespace_runs, decode, extracted_html
    from transforms.ingest.html import html_to_markdown

    with open(path, "rb") as f:
        data = f.read()
    html = decode(RawDocument(source=path, doc_id=path, data=data))
    tree = trafilatura.load_html(html)
    if tree is None:
        return "unknown", [Violation("lost", "not parseable as HTML")], 0, []
    extraction = extracted_html(html, lambda page: html_to_markdown(page, path))
    # the job cuts whitespace runs once, in the extracted text (extract.extract_document)
    text = cut_whitespace_runs(extraction.text)
    chars, lost = dropped_blocks(tree, text) if dropped else (0, [])
    return generator_of(tree), check_page(tree, text, extraction.title), chars, lost


def dropped_table(chars: dict[str, int], lost: dict[str, list[tuple[str, str]]]) -> str:
    """Per generator: its pages' text-block characters, those the documents do not hold."""
    lines = ["| generator | text chars | dropped chars | dropped blocks | dropped % |"]
    lines.append("| --- | --- | --- | --- | --- |")
    for group in [*sorted(chars), "all"]:
        total = sum(chars.values()) if group == "all" else chars[group]
        pairs = [pb for g in lost for pb in lost[g]] if group == "all" else lost[group]
        blocks = [block for _, block in pairs]
        gone = sum(map(len, blocks))
        share = 100 * gone / total if total else 0.0
        lines.append(f"| {group} | {total:,} | {gone:,} | {len(blocks)} | {share:.2f} |")
    return "\n".join(lines)


def table(rows: dict[str, dict[str, int]], pages: dict[str, int]) -> str:
    head = ["generator", "pages", *KINDS]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    total = dict.fromkeys(KINDS, 0)
    for group in sorted(rows):
        lines.append(
            f"| {group} | {pages[group]} | " + " | ".join(str(rows[group][k]) for k in KINDS) + " |"
        )
        for k in KINDS:
            total[k] += rows[group][k]
    lines.append(
        f"| all | {sum(pages.values())} | " + " | ".join(str(total[k]) for k in KINDS) + " |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="corpus-chunker structure", description=__doc__.splitlines()[0]
    )
    parser.add_argument("paths", nargs="+", help="HTML files or folders of them")
    parser.add_argument(
        "--by_folder", action="store_true", help="group by the first folder under each path"
    )
    parser.add_argument("--show", type=int, default=0, help="print N violations of each kind")
    parser.add_argument("--json_out", help="write every page's violations to this JSON file")
    parser.add_argument(
        "--dropped",
        action="store_true",
        help="also list the page text the documents do not hold, per generator",
    )
    args = parser.parse_args(argv)
    chars: dict[str, int] = defaultdict(int)
    lost: dict[str, list[tuple[str, str]]] = defaultdict(list)
    rows: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(KINDS, 0))
    pages: dict[str, int] = defaultdict(int)
    examples: dict[tuple[str, str], list[str]] = defaultdict(list)
    report = []
    rejected = []
    for path, group in html_files(args.paths, args.by_folder):
        try:
            detected, violations, page_chars, page_lost = check_file(path, args.dropped)
        except ExtractError as e:  # the job rejects it too: no text to check
            rejected.append(f"{path}: {e.reason}: {e}")
            continue
        group = group or detected
        pages[group] += 1
        chars[group] += page_chars
        lost[group].extend((path, block) for block in page_lost)
        for kind, n in count(violations).items():
            rows[group][kind] += n
        for v in violations:
            if len(examples[group, v.kind]) < args.show:
                examples[group, v.kind].append(f"{path}: {v.detail}")
        report.append(
            {
                "file": path,
                "generator": group,
                "violations": [{"kind": v.kind, "detail": v.detail} for v in violations],
            }
        )
    print(table(rows, pages))
    if rejected:
        print(f"\n{len(rejected)} pages the job rejects, not checked:")
        for line in rejected:
            print("  " + line)
    for (group, kind), shown in sorted(examples.items()):
        print(f"\n{group} {kind}:")
        for line in shown:
            print("  " + line)
    if args.dropped:
        print("\nPage text the documents do not hold (not violations: see --help):\n")
        print(dropped_table(chars, lost))
        for group in sorted(lost):
            longest = sorted(lost[group], key=lambda pb: -len(pb[1]))[: args.show]
            if longest:
                print(f"\n{group} dropped:")
                for path, block in longest:
                    print(f"  {path}: ({len(block)}) {block[:160]}")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
