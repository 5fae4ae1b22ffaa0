"""PDF to Markdown with a page map, through PDFium (pypdfium2; never PyMuPDF, which is AGPL).

PDFium gives each page's lines (its own line breaks), with each line's box, font size and
weight; the outline, page labels and metadata title come from the document.
`transforms.ingest.layout` does the rest. Runs in the extraction child (started by
transforms.ingest.extract) under transforms.ingest.extraction's time and memory cap.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable

from transforms.ingest.layout import (
    Line,
    OutlineEntry,
    PagedError,
    PagedText,
    PageLines,
    assemble,
    column_pieces,
    in_reading_order,
)

MAX_OUTLINE_ENTRIES = 20_000
_LINE = re.compile(r"[^\n\ufffe]+(?:\ufffe|\n|$)|\n")
BOLD_WEIGHT = 600
MIN_CHARS_PER_PAGE = 1.0  # fewer letters per page than this: no text layer (scanned)
GUTTER_EMS = 2.0  # a space wider than this many font sizes may be a gutter between columns
_SPACES = re.compile(r"\s+")
# Fonts of fixed width, by name: PDFium's fixed-pitch flag is set on none of TeX's CMTT10,
# FreeMono or Courier in the PDFs at hand, and on DejaVuSans, which is not. TeX's typewriter
# faces (cmtt and its slanted cmsltt and italic cmitt, ectt/sftt of the EC fonts, lmmono,
# txtt and t1xbtt, pcrr: Courier by its Berry name), and the usual monospaced families.
MONO_SAMPLES = 5
_MONO_FONT = re.compile(
    r"(?i)mono|courier|consol|menlo|monaco|typewriter|sourcecode|firacode|"
    r"(^|\+)(cm|ec|sf|tx|t1x)[a-z]{0,2}tt|(^|\+)pcr[rbo]"
)
# PDFium keeps the objects it parsed for each page until the document is closed (13 MB for
# the 2,000 pages of bench/pdf_memory.py); a fresh handle every so many pages lets them go
REOPEN_PAGES = 200


PdfError = PagedError  # reason: encrypted, corrupt_pdf or no_text_layer


def _import():
    try:
        import pypdfium2 as pdfium
        import pypdfium2.raw as raw
    except ImportError as e:  # pragma: no cover - a dependency of the package
        raise ImportError("PDF input needs pypdfium2: pip install pypdfium2==4.30.0") from e
    return pdfium, raw


def open_pdf(data: bytes):
    """The pypdfium2 document, or PdfError(encrypted | corrupt_pdf)."""
    pdfium, raw = _import()
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        err = raw.FPDF_GetLastError()
        if err == raw.FPDF_ERR_PASSWORD:
            raise PdfError("encrypted", "the PDF is encrypted and needs a password") from None
        raise PdfError("corrupt_pdf", f"PDFium cannot open it: {e}") from None


def page_lines(page, textpage, raw, index: int) -> list[Line]:
    """The lines PDFium finds on one page, top to bottom, with box, size and weight."""
    n = textpage.count_chars()
    if n <= 0:
        return []
    text = textpage.get_text_range(0, n, force_this=True)
    height = page.get_height()
    handle = textpage.raw
    left, right, bottom, top = (ctypes.c_double() for _ in range(4))
    lines: list[Line] = []
    pieces: list[Line] = []  # the lines cut at a gutter-wide space (two columns on one line)
    width = page.get_width()
    mid = width / 2

    # bound once: a 2,000-page PDF makes 80,000 lines, four PDFium calls each and
    # MONO_SAMPLES font lookups
    char_box, font_size, font_weight, font_info = (
        raw.FPDFText_GetCharBox,
        raw.FPDFText_GetFontSize,
        raw.FPDFText_GetFontWeight,
        raw.FPDFText_GetFontInfo,
    )
    refs = (left, right, bottom, top)
    name, flags = ctypes.create_string_buffer(128), ctypes.c_int()
    mono_fonts: dict[bytes, bool] = {}

    def mono(i: int) -> bool:
        font_info(handle, i, name, len(name), ctypes.byref(flags))
        known = mono_fonts.get(name.value)
        if known is None:
            known = mono_fonts[name.value] = bool(_MONO_FONT.search(name.value.decode("latin-1")))
        return known

    def box(i: int) -> tuple[float, float, float, float]:
        char_box(handle, i, *refs)
        return left.value, right.value, bottom.value, top.value

    def monospaced(first: int, last: int) -> bool:
        """Whether four of five characters spread over the line are in a monospaced font: a
        line of code may start with a line number in the text's font ("1 polygon(...)"), a
        line of prose start and end with a name in code."""
        votes = 0
        for k in range(MONO_SAMPLES):
            i = first + (last - first) * k // (MONO_SAMPLES - 1)
            while i < last and text[i].isspace():
                i += 1
            votes += mono(i)
        return votes >= MONO_SAMPLES - 1

    def make(first: int, last: int, body: str, hyphen: bool) -> Line:
        x0, _, y_bottom, y_top = box(first)
        _, x1, bottom1, top1 = box(last)
        y_top, y_bottom = max(y_top, top1), min(y_bottom, bottom1)
        size = font_size(handle, first)
        weight = font_weight(handle, first)
        return Line(
            index,
            body.strip().replace("\x02", "-") + ("-" if hyphen else ""),
            x0,
            height - y_top,
            x1,
            height - y_bottom,
            round(size, 1),
            weight >= BOLD_WEIGHT,
            monospaced(first, last),
        )

    # PDFium ends a line with \r\n, except after a hyphen that ends a line: it marks that
    # hyphen U+FFFE and runs the lines together. Both end a line here, offsets kept.
    for m in _LINE.finditer(text):
        start, piece = m.start(), m.group()
        hyphen = piece.endswith("\ufffe")
        body = piece.rstrip("\r\n\ufffe")
        if not body.strip():
            continue
        first = start + (len(body) - len(body.lstrip()))
        last = start + len(body.rstrip()) - 1
        line = make(first, last, body, hyphen)
        lines.append(line)
        if not (line.x0 < mid < line.x1):
            pieces.append(line)
            continue
        # a line across the middle: two columns' lines at one height run together in
        # PDFium's text; cut it where a space is wider than a gutter
        cut_from = first
        gutter = GUTTER_EMS * max(line.size, 1.0)
        for space in _SPACES.finditer(text, first, last + 1):
            a, b = space.start() - 1, space.end()
            if box(b)[0] - box(a)[1] > gutter:
                pieces.append(make(cut_from, a, text[cut_from : a + 1], False))
                cut_from = b
        if cut_from == first:
            pieces.append(line)
        else:
            pieces.append(make(cut_from, last, text[cut_from : last + 1], hyphen))
    if len(pieces) > len(lines):
        columns = column_pieces(pieces, width)
        if columns is not None:
            return columns
    return in_reading_order(lines, page.get_width())


def outline(pdf) -> list[OutlineEntry]:
    out: list[OutlineEntry] = []
    try:
        for item in pdf.get_toc(max_depth=8):
            out.append(OutlineEntry(item.title or "", item.level + 1, item.page_index))
            if len(out) >= MAX_OUTLINE_ENTRIES:
                break
    except Exception:  # a broken outline: the fonts decide the headings instead
        return []
    return out


def pdf_to_paged_text(data: bytes, on_page_count: Callable[[int], None] | None = None) -> PagedText:
    """Pure core: a PDF's bytes to its Markdown text and page map, or PdfError.
    `on_page_count` is told the page count before any page is read (the extraction child
    gives a long PDF more time: `transforms.ingest.extraction.allow_pages`)."""
    pdfium, raw = _import()
    pdf = open_pdf(data)
    try:
        n_pages = len(pdf)
        if on_page_count is not None:
            on_page_count(n_pages)
        pages: list[PageLines] = []  # compact: a Line is made when one is looked at
        labels: list[str] = []
        letters = 0
        for i in range(n_pages):
            if i and i % REOPEN_PAGES == 0:
                pdf.close()
                pdf = open_pdf(data)
            try:
                page = pdf[i]
            except pdfium.PdfiumError as e:
                raise PdfError("corrupt_pdf", f"page {i + 1} cannot be read: {e}") from None
            textpage = page.get_textpage()
            try:
                lines = page_lines(page, textpage, raw, i)
            finally:
                textpage.close()
                page.close()
            if letters < MIN_CHARS_PER_PAGE * n_pages:  # counted until there are enough
                letters += sum(sum(c.isalpha() for c in ln.text) for ln in lines)
            pages.append(PageLines(lines, i))
            try:
                labels.append(pdf.get_page_label(i) or "")
            except Exception:
                labels.append("")
        if n_pages == 0:
            raise PdfError("corrupt_pdf", "the PDF has no pages")
        if letters < MIN_CHARS_PER_PAGE * n_pages:
            raise PdfError(
                "no_text_layer",
                f"no text layer: {letters} letters on {n_pages} pages (scanned pages? "
                "OCR is not done)",
            )
        title = (pdf.get_metadata_value("Title") or "").strip() or None
        result = assemble(pages, outline(pdf), labels, title)
    finally:
        pdf.close()
    if not result.text.strip():
        raise PdfError("no_text_layer", f"no text left on {n_pages} pages")
    return result
