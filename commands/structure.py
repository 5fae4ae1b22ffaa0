"""`corpus-chunker structure PAGES...`: the structural invariant over HTML pages, a table of
violations per generator (transforms/ingest/structure_check.py, docs/structure.md).

    corpus-chunker structure .cache/zoo/pages --by_folder [--show 3] [--json_out F]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

from transforms.ingest.structure_check import KINDS, Violation, check_page, count, generator_of

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


def check_file(path: str) -> tuple[str, list[Violation]]:
    """(generator, violations) of one page, extracted as the job extracts it."""
    import trafilatura

    from schemas.records import RawDocument
    from transforms.ingest.extraction import cut_whitespace_runs, decode
    from transforms.ingest.html import html_to_markdown

    with open(path, "rb") as f:
        data = f.read()
    html = decode(RawDocument(source=path, doc_id=path, data=data))
    tree = trafilatura.load_html(html)
    if tree is None:
        return "unknown", [Violation("lost", "not parseable as HTML")]
    extraction = html_to_markdown(html, path)
    # the job cuts whitespace runs once, in the extracted text (extract.extract_document)
    text = cut_whitespace_runs(extraction.text)
    return generator_of(tree), check_page(tree, text, extraction.title)


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
    args = parser.parse_args(argv)
    rows: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(KINDS, 0))
    pages: dict[str, int] = defaultdict(int)
    examples: dict[tuple[str, str], list[str]] = defaultdict(list)
    report = []
    for path, group in html_files(args.paths, args.by_folder):
        detected, violations = check_file(path)
        group = group or detected
        pages[group] += 1
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
    for (group, kind), shown in sorted(examples.items()):
        print(f"\n{group} {kind}:")
        for line in shown:
            print("  " + line)
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
