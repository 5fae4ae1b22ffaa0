"""PDF text against the same manual's HTML: word 4-shingle recall and precision, heading
recall, and pages per second beside pypdf and pdfminer.six, in one run.

    python bench/pdf_text.py NAME=PDF=HTML_DIR [NAME=PDF=HTML_DIR ...]

HTML_DIR's pages are read through the job's own HTML extractor (trafilatura), its index.html
(the title and the contents) left aside. Words are runs of letters, lower-cased, so page
numbers and footnote marks do not count. "naive" is PDFium's text page by page, with the
contents and index pages that transforms.ingest.layout finds dropped and line-end hyphens joined;
"ours" is transforms.ingest.pdf. Headings: the HTML's h1-h4, found when a Markdown heading of ours
spells the same letters (numbers aside). A peer that is not installed (pypdf and pdfminer.six
come with the bench extra) reads "not installed" in the speed table.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import sys
import time

import lxml.html

from transforms.ingest.html import html_to_markdown
from transforms.ingest.layout import Line, contents_pages, index_pages
from transforms.ingest.pdf import pdf_to_paged_text

_WORD = re.compile(r"[^\W\d_]+")
_HEADING = re.compile(r"^#{1,6} (.*)$", re.MULTILINE)


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def shingles(text: str, n: int = 4) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}


def recall_precision(got: str, want: str) -> tuple[float, float]:
    g, w = shingles(got), shingles(want)
    both = len(g & w)
    return both / max(1, len(w)), both / max(1, len(g))


def html_text_and_headings(folder: str) -> tuple[str, list[str]]:
    texts, heads = [], []
    for path in sorted(glob.glob(os.path.join(folder, "*.html"))):
        if os.path.basename(path) == "index.html":
            continue
        with open(path, "rb") as f:
            raw = f.read().decode("utf-8", "replace")
        texts.append(html_to_markdown(raw).text)
        tree = lxml.html.fromstring(raw)
        heads += [" ".join(h.text_content().split()) for h in tree.xpath("//h1|//h2|//h3|//h4")]
    return "\n".join(texts), heads


def naive(data: bytes) -> str:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(data)
    pages = []
    for i in range(len(pdf)):
        tp = pdf[i].get_textpage()
        pages.append(tp.get_text_range(0, tp.count_chars(), force_this=True))
    as_lines = [
        [Line(i, t, 0, 0, 0, 0) for t in text.replace("\r", "").split("\n")]
        for i, text in enumerate(pages)
    ]
    drop = contents_pages(as_lines) | index_pages(as_lines)
    text = "\n".join(p for i, p in enumerate(pages) if i not in drop).replace("\r", "")
    text = text.replace("\ufffe", "-\n")
    return re.sub(r"([A-Za-z])-\n([a-z])", r"\1\2", text)


def _key(text: str) -> str:
    return "".join(words(text))


def heading_recall(ours: str, html_heads: list[str]) -> tuple[float, int]:
    have = {_key(h) for h in _HEADING.findall(ours)}
    # the HTML's own contents and index headings aside, as their pages are
    want = [_key(h) for h in html_heads if _key(h) and _key(h) not in ("contents", "index")]
    found = sum(1 for h in want if h in have)
    return found / max(1, len(want)), len(want)


def _pypdf(data: bytes) -> None:
    import io

    import pypdf

    [p.extract_text() for p in pypdf.PdfReader(io.BytesIO(data)).pages]


def _pdfminer(data: bytes) -> None:
    import io

    from pdfminer.high_level import extract_text

    extract_text(io.BytesIO(data))


# name, the module it needs (None: ours), the extraction
EXTRACTORS = (
    ("ours", None, pdf_to_paged_text),
    ("pypdf", "pypdf", _pypdf),
    ("pdfminer.six", "pdfminer", _pdfminer),
)


def speed(data: bytes, pages: int) -> dict[str, float | None]:
    """Pages per second of each extractor; None for a peer that is not installed."""
    out: dict[str, float | None] = {}
    for name, module, fn in EXTRACTORS:
        if module is not None and importlib.util.find_spec(module) is None:
            out[name] = None
            continue
        start = time.perf_counter()
        fn(data)
        out[name] = pages / (time.perf_counter() - start)
    return out


def _rate(value: float | None) -> str:
    return "not installed" if value is None else f"{value:.1f}"


def main(argv: list[str]) -> None:
    import pypdfium2 as pdfium

    if not argv or any(arg.count("=") != 2 for arg in argv):
        raise SystemExit(f"usage: python bench/pdf_text.py NAME=PDF=HTML_DIR ... (got {argv})")

    print("| pair | pages | naive R | naive P | ours R | ours P | headings (of HTML h1-h4) |")
    print("|---|---|---|---|---|---|---|")
    speeds = []
    for arg in argv:
        name, pdf_path, html_dir = arg.split("=")
        with open(pdf_path, "rb") as f:
            data = f.read()
        n_pages = len(pdfium.PdfDocument(data))
        html, heads = html_text_and_headings(html_dir)
        ours = pdf_to_paged_text(data).text
        nr, np_ = recall_precision(naive(data), html)
        r, p = recall_precision(ours, html)
        hr, hn = heading_recall(ours, heads)
        cells = f"{nr:.3f} | {np_:.3f} | {r:.3f} | {p:.3f} | {hr:.3f} ({hn})"
        print(f"| {name} | {n_pages} | {cells} |")
        speeds.append((name, n_pages, speed(data, n_pages)))
    print("\n| pair | ours pages/s | pypdf pages/s | pdfminer.six pages/s | ours / pypdf |")
    print("|---|---|---|---|---|")
    for name, _, s in speeds:
        versus = "" if s["pypdf"] is None else f"{s['ours'] / s['pypdf']:.1f}x"
        print(
            f"| {name} | {_rate(s['ours'])} | {_rate(s['pypdf'])} | {_rate(s['pdfminer.six'])} "
            f"| {versus} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
